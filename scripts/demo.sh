#!/usr/bin/env bash
# Builds flint and runs its main job on a demo checkpoint made by `flint make-tiny`:
# inspect the checkpoint, then generate a continuation of a prompt.
# The demo checkpoint holds RANDOM WEIGHTS: it exercises the whole engine (loader, tokenizer,
# DeepSeek-V4 forward pass, sampling), but the generated text is meaningless.
# Run scripts/setup.sh first on a new machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target flint
DEMO=build/demo-tiny
if [ ! -f "$DEMO/config.json" ]; then
  ./build/flint make-tiny "$DEMO" --preset tiny --seed 1
fi
banner() { printf '\n==== %s ====\n' "$*"; }
banner "DEMO CHECKPOINT WITH RANDOM WEIGHTS: output text is meaningless"
banner "flint inspect $DEMO"
./build/flint inspect "$DEMO"
banner "flint generate $DEMO --prompt ... (two prompts in one batch; random weights: gibberish expected)"
./build/flint generate "$DEMO" --prompt "The capital of France is" "Once upon a time" -n 24 \
  --temperature 0
