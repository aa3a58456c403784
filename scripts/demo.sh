#!/usr/bin/env bash
# Builds flint and runs its main job on the demo model in models/: inspect it, generate
# continuations of two prompts with DSpark speculative decoding, then start the
# OpenAI-compatible server with the `vllm serve` flags from the README and send it a chat
# request. The model (models/dsv4-mini-0731, its card: models/dsv4-mini/README.md) is a
# 14 M-parameter DeepSeek-V4 trained here on public-domain English with a DSpark draft: it
# writes English in the manner of its corpus (Austen, the King James Bible, State of the Union
# addresses), not answers; it follows no instructions.
# Run scripts/setup.sh first on a new machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target flint
DEMO=models/dsv4-mini-0731  # the DeepSeek-V4-Flash-0731 layout: DSpark draft stages included
banner() { printf '\n==== %s ====\n' "$*"; }
banner "flint inspect $DEMO"
./build/flint inspect "$DEMO"
banner "flint generate $DEMO --prompt ... (two prompts in one batch, DSpark drafting 5 tokens)"
./build/flint generate "$DEMO" --prompt "It is a truth universally acknowledged, that" \
  "In the beginning God created the heaven and the earth." -n 48 --temperature 0 \
  --repetition-penalty 1.1 \
  --speculative-config.method dspark --speculative-config.num_speculative_tokens 5

PORT=${FLINT_DEMO_PORT:-8000}
banner "flint serve $DEMO --port $PORT ... (the vLLM command line; Ctrl-C stops it)"
./build/flint serve "$DEMO" --host 127.0.0.1 --port "$PORT" --served-model-name demo \
  --kv-cache-dtype fp8 --block-size 256 --enable-prefix-caching --enable-chunked-prefill \
  --enable-auto-tool-choice --tool-call-parser deepseek_v4 --reasoning-parser deepseek_v4 \
  --speculative-config.method dspark --speculative-config.num_speculative_tokens 5 \
  --max-model-len 4096 --kv-cache-memory-bytes 256M \
  --default-chat-template-kwargs '{"thinking": false}' &  # it never learned to close a <think>
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do  # the model loads in a second or two; /health is 503 until then
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then echo "flint serve exited" >&2; exit 1; fi
  sleep 0.2
done
banner "POST /v1/chat/completions (a small base model: English, not an answer)"
curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "model": "demo", "max_tokens": 48, "temperature": 0.7, "top_p": 0.9, "seed": 1,
  "messages": [{"role": "user", "content": "Tell me about Mr. Darcy and Elizabeth."}]}'
echo
banner "the chat page: http://127.0.0.1:$PORT/ (press Enter to stop the server)"
if [ -t 0 ]; then read -r _; fi
kill -TERM "$SERVER"
wait "$SERVER"
trap - EXIT
