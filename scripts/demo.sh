#!/usr/bin/env bash
# Builds flint and runs its main job on a demo checkpoint made by `flint make-tiny`: inspect
# the checkpoint, generate a continuation of a prompt, then start the OpenAI-compatible server
# with the `vllm serve` flags from the README and send it a chat request.
# The demo checkpoint holds RANDOM WEIGHTS: it exercises the whole engine (loader, tokenizer,
# DeepSeek-V4 forward pass, sampling), but the generated text is meaningless.
# Run scripts/setup.sh first on a new machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target flint
DEMO=build/demo-tiny-dspark  # the DeepSeek-V4-Flash-0731 layout: DSpark draft stages included
if [ ! -f "$DEMO/config.json" ]; then
  ./build/flint make-tiny "$DEMO" --preset tiny-dspark --seed 1
fi
banner() { printf '\n==== %s ====\n' "$*"; }
banner "DEMO CHECKPOINT WITH RANDOM WEIGHTS: output text is meaningless"
banner "flint inspect $DEMO"
./build/flint inspect "$DEMO"
banner "flint generate $DEMO --prompt ... (two prompts in one batch; random weights: gibberish expected)"
./build/flint generate "$DEMO" --prompt "The capital of France is" "Once upon a time" -n 24 \
  --temperature 0 --speculative-config.method dspark --speculative-config.num_speculative_tokens 5

PORT=${FLINT_DEMO_PORT:-8000}
banner "flint serve $DEMO --port $PORT ... (the vLLM command line; Ctrl-C stops it)"
./build/flint serve "$DEMO" --host 127.0.0.1 --port "$PORT" --served-model-name demo \
  --kv-cache-dtype fp8 --block-size 256 --enable-prefix-caching --enable-chunked-prefill \
  --enable-auto-tool-choice --tool-call-parser deepseek_v4 --reasoning-parser deepseek_v4 \
  --speculative-config.method dspark --speculative-config.num_speculative_tokens 5 \
  --max-model-len 4096 --kv-cache-memory-bytes 256M &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do  # the model loads in a second or two; /health is 503 until then
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then echo "flint serve exited" >&2; exit 1; fi
  sleep 0.2
done
banner "POST /v1/chat/completions (random weights: gibberish expected)"
curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "model": "demo", "max_tokens": 24, "temperature": 0,
  "messages": [{"role": "user", "content": "What is the capital of France?"}]}'
echo
banner "the chat page: http://127.0.0.1:$PORT/ (press Enter to stop the server)"
if [ -t 0 ]; then read -r _; fi
kill -TERM "$SERVER"
wait "$SERVER"
trap - EXIT
