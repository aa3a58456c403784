// `flint serve` driven by the official `@anthropic-ai/sdk` npm package (pinned in
// tests/npm/package.json): Messages whole and streamed (event order), thinking, tool_use and
// tool_result both ways, system prompt, stop_sequences, count_tokens, and errors in
// Anthropic's shape (400, 401, 404). Skipped while /v1/messages is not routed. The tiny model
// has random weights: the reasoning and tool paths run on replayed tokens (flint_debug_replay).
//
// usage: node anthropic_sdk.test.mjs FLINT_BINARY NPM_DIR CHECKPOINT_DIR
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  MODEL, WEATHER_SCHEMA, dsmlCall, importSdk, post, replayIds, routed, setup, startServer, stopServer,
} from "./serve.mjs";

const { flint, npmDir, ckpt } = setup(150);
const { default: Anthropic } = await importSdk(npmDir, "@anthropic-ai/sdk");
const server = await startServer(flint, ckpt);
const client = new Anthropic({ baseURL: server.origin, apiKey: "unused", maxRetries: 0 });
const USER = [{ role: "user", content: "What is the weather like in Paris?" }];
const THINKING = { thinking: { type: "enabled", budget_tokens: 1024 } };
const NO_THINKING = { thinking: { type: "disabled" } };
const TOOLS = [{ name: "get_weather", description: "Weather of a city", input_schema: WEATHER_SCHEMA }];
const create = (fields) => client.messages.create({ model: MODEL, max_tokens: 8, messages: USER, temperature: 0, ...fields });

const available = await routed(server, "/v1/messages");
const SKIP = "POST /v1/messages answers 404: the Messages endpoint is not routed yet";

// Reads a raw event stream: event types in order, text / thinking / partial JSON per block.
async function readEvents(stream) {
  const out = { types: [], blocks: [], stop: null, usage: null, message: null };
  for await (const event of stream) {
    out.types.push(event.type);
    if (event.type === "message_start") out.message = event.message;
    if (event.type === "content_block_start") {
      out.blocks[event.index] = { ...event.content_block, text: "", thinking: "", json: "" };
    }
    if (event.type === "content_block_delta") {
      const b = out.blocks[event.index];
      const d = event.delta;
      if (d.type === "text_delta") b.text += d.text;
      if (d.type === "thinking_delta") b.thinking += d.thinking;
      if (d.type === "input_json_delta") b.json += d.partial_json;
    }
    if (event.type === "message_delta") {
      out.stop = event.delta.stop_reason;
      out.usage = event.usage;
    }
  }
  return out;
}

// message_start, then per block start → deltas → stop, then message_delta, message_stop
// (pings may come anywhere).
function assertEventOrder(types) {
  const t = types.filter((type) => type !== "ping");
  assert.equal(t[0], "message_start");
  assert.deepEqual(t.slice(-2), ["message_delta", "message_stop"]);
  let open = false;
  for (const type of t.slice(1, -2)) {
    const want = { content_block_start: false, content_block_delta: true, content_block_stop: true }[type];
    assert.equal(open, want, `${type} out of place in ${t}`);
    if (type !== "content_block_delta") open = !open;
  }
  assert.ok(!open && t.includes("content_block_start"), `${t}`);
}

test("messages: plain text, stop_reason max_tokens, usage; the stream matches", async (t) => {
  if (!available) return t.skip(SKIP);
  const whole = await create(NO_THINKING);
  assert.equal(whole.type, "message");
  assert.equal(whole.role, "assistant");
  assert.equal(whole.model, MODEL);
  assert.equal(whole.stop_reason, "max_tokens");
  assert.equal(whole.content.length, 1);
  assert.equal(whole.content[0].type, "text");
  assert.ok(whole.content[0].text.length > 0);
  assert.ok(whole.usage.input_tokens > 0);
  assert.equal(whole.usage.output_tokens, 8);

  const s = await readEvents(await create({ ...NO_THINKING, stream: true }));
  assertEventOrder(s.types);
  assert.equal(s.blocks.length, 1);
  assert.equal(s.blocks[0].text, whole.content[0].text);
  assert.equal(s.stop, "max_tokens");
  assert.equal(s.usage.output_tokens, 8);
  assert.equal(s.message.usage.input_tokens, whole.usage.input_tokens);

  // The SDK's own stream helper assembles the same message.
  const helper = client.messages.stream({ model: MODEL, max_tokens: 8, messages: USER, temperature: 0, ...NO_THINKING });
  let text = "";
  helper.on("text", (delta) => { text += delta; });
  const final = await helper.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, "max_tokens");
});

test("messages: thinking comes as a thinking block, then a text block; streamed too", async (t) => {
  if (!available) return t.skip(SKIP);
  const replay = await replayIds(server, "Thinking...</think>Answer.");
  const whole = await create({ ...THINKING, max_tokens: 50, flint_debug_replay: replay });
  assert.equal(whole.stop_reason, "end_turn");
  assert.deepEqual(whole.content.map((b) => b.type), ["thinking", "text"]);
  assert.equal(whole.content[0].thinking, "Thinking...");
  assert.equal(typeof whole.content[0].signature, "string");
  assert.equal(whole.content[1].text, "Answer.");

  const s = await readEvents(await create({ ...THINKING, max_tokens: 50, stream: true, flint_debug_replay: replay }));
  assertEventOrder(s.types);
  assert.deepEqual(s.blocks.map((b) => [b.type, b.thinking || b.text]), [["thinking", "Thinking..."], ["text", "Answer."]]);
  assert.equal(s.stop, "end_turn");
});

test("messages: a replayed DSML call becomes tool_use; tool_result goes back", async (t) => {
  if (!available) return t.skip(SKIP);
  const replay = await replayIds(server, dsmlCall(true));
  const first = await create({ ...THINKING, tools: TOOLS, max_tokens: 100, flint_debug_replay: replay });
  assert.equal(first.stop_reason, "tool_use");
  assert.deepEqual(first.content.map((b) => b.type), ["thinking", "tool_use"]);
  const use = first.content[1];
  assert.match(use.id, /^toolu_/);
  assert.equal(use.name, "get_weather");
  assert.deepEqual(use.input, { city: "Paris" });

  const messages = [...USER, { role: "assistant", content: first.content },
                    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "22 degrees and sunny" }] }];
  const next = await create({ ...THINKING, tools: TOOLS, messages, max_tokens: 4 });
  assert.equal(next.stop_reason, "max_tokens");
  const counted = await client.messages.countTokens({ model: MODEL, tools: TOOLS, messages, ...THINKING });
  assert.equal(counted.input_tokens, next.usage.input_tokens + (next.usage.cache_read_input_tokens ?? 0));
  const withoutResult = await client.messages.countTokens({ model: MODEL, tools: TOOLS, messages: messages.slice(0, 2), ...THINKING });
  assert.ok(counted.input_tokens > withoutResult.input_tokens);

  // Streamed, thinking off: the input arrives as input_json_delta fragments, no markup anywhere.
  const s = await readEvents(await create({
    ...NO_THINKING, tools: TOOLS, max_tokens: 100, stream: true,
    flint_debug_replay: await replayIds(server, dsmlCall(false, "San Francisco")) }));
  assertEventOrder(s.types);
  assert.equal(s.stop, "tool_use");
  const block = s.blocks.find((b) => b.type === "tool_use");
  assert.ok(block, `no tool_use block in ${JSON.stringify(s.blocks)}`);
  assert.equal(block.name, "get_weather");
  assert.deepEqual(JSON.parse(block.json), { city: "San Francisco" });
  for (const b of s.blocks) assert.ok(!/DSML|<\/?think>/.test(b.text + b.thinking), JSON.stringify(b));
});

test("messages: system prompt and stop_sequences", async (t) => {
  if (!available) return t.skip(SKIP);
  const plain = await create(NO_THINKING);
  const withSystem = await create({ ...NO_THINKING, system: "You are a weather assistant. Answer briefly." });
  assert.ok(withSystem.usage.input_tokens > plain.usage.input_tokens);
  const blocks = await create({ ...NO_THINKING, system: [{ type: "text", text: "You are a weather assistant. Answer briefly." }] });
  assert.equal(blocks.usage.input_tokens, withSystem.usage.input_tokens);

  const replay = await replayIds(server, "Sunny all day. END of forecast.");
  const stopped = await create({ ...NO_THINKING, max_tokens: 50, stop_sequences: ["END"], flint_debug_replay: replay });
  assert.equal(stopped.stop_reason, "stop_sequence");
  assert.equal(stopped.stop_sequence, "END");
  assert.equal(stopped.content[0].text, "Sunny all day. ");
  const ended = await create({ ...NO_THINKING, max_tokens: 50, flint_debug_replay: replay });
  assert.equal(ended.stop_reason, "end_turn");
  assert.equal(ended.stop_sequence, null);
});

test("errors: Anthropic's shape for 400, 404 and 401", async (t) => {
  if (!available) return t.skip(SKIP);
  // Streaming so that the SDK does not compute a time-out from the missing max_tokens.
  const missing = await client.messages.create({ model: MODEL, messages: USER, stream: true }).catch((e) => e);
  assert.ok(missing instanceof Anthropic.BadRequestError, String(missing));
  assert.equal(missing.error?.type, "error");
  assert.equal(missing.error?.error?.type, "invalid_request_error");
  assert.match(missing.error.error.message, /max_tokens/);

  const raw = await post(server, "/v1/messages", "{not json");
  assert.equal(raw.status, 400);
  assert.equal(raw.body.type, "error");
  assert.equal(raw.body.error?.type, "invalid_request_error");

  const unknown = await create({ model: "no-such-model" }).catch((e) => e);
  assert.ok(unknown instanceof Anthropic.NotFoundError, String(unknown));
  assert.equal(unknown.error?.error?.type, "not_found_error");

  const keyed = await startServer(flint, ckpt, ["--api-key", "sk-right"]);
  try {
    const wrong = new Anthropic({ baseURL: keyed.origin, apiKey: "sk-wrong", maxRetries: 0 });
    const e = await wrong.messages.create({ model: MODEL, max_tokens: 1, messages: USER }).catch((err) => err);
    assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
    assert.equal(e.error?.type, "error");
    assert.equal(e.error?.error?.type, "authentication_error");
    const right = new Anthropic({ baseURL: keyed.origin, apiKey: "sk-right", maxRetries: 0 });
    const ok = await right.messages.create({ model: MODEL, max_tokens: 1, messages: USER, ...NO_THINKING });
    assert.equal(ok.usage.output_tokens, 1);
  } finally {
    await stopServer(keyed);
  }
});

test("SIGTERM stops the server with exit status 0", async () => {
  await stopServer(server);
});
