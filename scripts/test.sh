#!/usr/bin/env bash
# Builds flint and runs every test: the GoogleTest suites, the Python reference and
# golden comparisons, the command-line tests, and each fuzz target for a bounded time
# (a second build with clang and libFuzzer). Run scripts/setup.sh first on a new machine.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900

# libFuzzer needs clang; the fuzz build compiles only what the fuzz targets link.
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DFLINT_FUZZ_ONLY=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$JOBS"
ctest --test-dir build-fuzz --output-on-failure -j "$JOBS"
