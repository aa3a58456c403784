#!/usr/bin/env bash
# Builds flint and runs its main job on a demo checkpoint made by `flint make-tiny`.
# The demo checkpoint holds RANDOM WEIGHTS: it exercises the whole engine, but its output
# is meaningless text. Run scripts/setup.sh first on a new machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target flint
DEMO=build/demo-tiny
if [ ! -f "$DEMO/config.json" ]; then
  ./build/flint make-tiny "$DEMO" --preset tiny --seed 1
fi
./build/flint inspect "$DEMO"
