// SIGTERM while a stream is in flight: the stream still completes (finish_reason length, its
// usage, data: [DONE]), new generations get 503 meanwhile, and `flint serve` exits 0 within
// --shutdown-timeout. With a shutdown time-out shorter than the stream, the stream is aborted
// but still ends properly, and the exit is 0 as well.
//
// usage: node shutdown.test.mjs FLINT_BINARY NPM_DIR CHECKPOINT_DIR
import assert from "node:assert/strict";
import { test } from "node:test";
import { MODEL, elapsed, post, setup, signal, startServer, stopServer } from "./serve.mjs";

const { flint, ckpt } = setup(120);

// A streamed chat request read by hand (to see the end of the stream as sent): resolves to an
// object whose `first` promise settles with the first content delta and `done` with the parsed
// chunks, whether the stream ended with [DONE], and the finish reason.
async function openStream(server, maxTokens) {
  const response = await fetch(server.baseURL + "/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Tell me a long story." }],
                           max_tokens: maxTokens, ignore_eos: true, temperature: 0, stream: true,
                           stream_options: { include_usage: true }, chat_template_kwargs: { thinking: false } }),
  });
  assert.equal(response.status, 200);
  let firstDelta;
  const first = new Promise((resolve) => { firstDelta = resolve; });
  const done = (async () => {
    const out = { chunks: [], done: false, finish: null, usage: null, tail: "" };
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const bytes of response.body) {
      buffer += decoder.decode(bytes, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!event.startsWith("data: ")) continue;  // keep-alive comments
        const data = event.slice(6);
        if (data === "[DONE]") {
          out.done = true;
          continue;
        }
        const chunk = JSON.parse(data);
        out.chunks.push(chunk);
        if (chunk.usage) out.usage = chunk.usage;
        for (const choice of chunk.choices) {
          if (choice.delta?.content) firstDelta();
          if (choice.finish_reason) out.finish = choice.finish_reason;
        }
      }
    }
    out.tail = buffer;
    firstDelta();
    return out;
  })();
  return { first, done };
}

test("a stream in flight finishes after SIGTERM; new requests get 503; exit 0", async () => {
  const server = await startServer(flint, ckpt, ["--shutdown-timeout", "30"]);
  const stream = await openStream(server, 100);
  await stream.first;
  const signalled = Date.now();
  signal(server);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const late = await post(server, "/v1/chat/completions",
                          { model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 })
    .catch((e) => ({ status: `no answer (${e.cause?.code ?? e.message})` }));
  assert.equal(late.status, 503, "a generation requested while draining");

  const out = await stream.done;
  assert.equal(out.finish, "length");
  assert.equal(out.usage?.completion_tokens, 100);
  assert.ok(out.done, `the stream ended without data: [DONE] (left: ${JSON.stringify(out.tail)})`);
  await stopServer(server, 30 - (Date.now() - signalled) / 1000 + 2);
});

test("past --shutdown-timeout the stream is aborted, still ends properly; exit 0", async () => {
  const server = await startServer(flint, ckpt, ["--shutdown-timeout", "1"]);
  const stream = await openStream(server, 900);
  await stream.first;
  const signalled = Date.now();
  signal(server);
  const out = await stream.done;
  assert.equal(out.finish, "abort");
  assert.ok(out.usage && out.usage.completion_tokens < 900, JSON.stringify(out.usage));
  assert.ok(out.done, `the stream ended without data: [DONE] (left: ${JSON.stringify(out.tail)})`);
  await stopServer(server, 10);
  assert.ok(Date.now() - signalled < 10000);
});
