// `flint serve` driven by the official `openai` npm package (pinned in tests/npm/package.json):
// models, chat completions (plain, streamed, tool calls both ways, reasoning on and off),
// completions, Responses (skipped while /v1/responses is not routed), and the errors as the
// SDK reports them (400 with the param, 404, 401, 413, 429, a prompt above --max-model-len).
// The tiny model has random weights: outputs are compared with each other (greedy), and the
// reasoning and tool-call paths run on replayed tokens (flint_debug_replay).
//
// usage: node openai_sdk.test.mjs FLINT_BINARY NPM_DIR CHECKPOINT_DIR
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  MAX_MODEL_LEN, MODEL, WEATHER_SCHEMA, dsmlCall, importSdk, metric, post, postDeclaredSize, renderedPrompt,
  replayIds, routed, setup, startServer, stopServer, until,
} from "./serve.mjs";

const { flint, npmDir, ckpt } = setup(150);
const { default: OpenAI } = await importSdk(npmDir, "openai");
const server = await startServer(flint, ckpt);
const client = new OpenAI({ baseURL: server.baseURL, apiKey: "unused", maxRetries: 0 });
const USER = [{ role: "user", content: "What is the weather like in Paris?" }];
const OFF = { chat_template_kwargs: { thinking: false } };
const ON = { chat_template_kwargs: { thinking: true } };
const TOOLS = [{ type: "function",
                 function: { name: "get_weather", description: "Weather of a city", parameters: WEATHER_SCHEMA } }];
const chat = (fields) => client.chat.completions.create({ model: MODEL, messages: USER, temperature: 0, ...fields });

// Reads a chat stream: joined deltas, tool-call fragments by index, finish reasons, usage.
async function readChatStream(stream) {
  const out = { content: "", reasoning: "", calls: [], finish: null, usage: null, chunks: 0 };
  for await (const chunk of stream) {
    out.chunks += 1;
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      const d = choice.delta ?? {};
      out.content += d.content ?? "";
      out.reasoning += d.reasoning_content ?? "";
      for (const call of d.tool_calls ?? []) {
        const c = (out.calls[call.index] ??= { id: null, name: null, arguments: "", deltas: 0 });
        if (call.id) c.id = call.id;
        if (call.function?.name) c.name = call.function.name;
        c.arguments += call.function?.arguments ?? "";
        c.deltas += 1;
      }
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

test("models.list names the served model", async () => {
  const ids = [];
  for await (const model of client.models.list()) ids.push(model.id);
  assert.deepEqual(ids, [MODEL]);
});

test("chat: greedy, max_tokens 8 -> length, usage with cached_tokens; the stream matches", async () => {
  // Longer than a KV block (256 tokens), so that the second run hits the prefix cache.
  const messages = [{ role: "user", content: "Tell me a story about the sea. ".repeat(50) }];
  const first = await chat({ ...OFF, messages, max_tokens: 8 });
  assert.equal(first.object, "chat.completion");
  assert.equal(first.choices.length, 1);
  assert.equal(first.choices[0].finish_reason, "length");
  assert.equal(typeof first.choices[0].message.content, "string");
  assert.ok(first.choices[0].message.content.length > 0);
  const u = first.usage;
  assert.equal(u.completion_tokens, 8);
  assert.ok(u.prompt_tokens > 256, `prompt_tokens ${u.prompt_tokens}`);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.equal(typeof u.prompt_tokens_details?.cached_tokens, "number");

  const second = await chat({ ...OFF, messages, max_tokens: 8 });
  assert.equal(second.choices[0].message.content, first.choices[0].message.content);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= 256,
            `cached_tokens ${second.usage.prompt_tokens_details.cached_tokens} on a repeated prompt`);

  const streamed = await readChatStream(await chat({
    ...OFF, messages, max_tokens: 8, stream: true, stream_options: { include_usage: true } }));
  assert.equal(streamed.content, first.choices[0].message.content);
  assert.equal(streamed.finish, "length");
  assert.equal(streamed.usage?.completion_tokens, 8);
  assert.equal(streamed.usage?.prompt_tokens, u.prompt_tokens);
});

test("chat: a replayed DSML call becomes tool_calls; the result goes back into the prompt", async () => {
  const replay = await replayIds(server, dsmlCall(true));
  const r = await chat({ ...ON, tools: TOOLS, max_tokens: 100, flint_debug_replay: replay });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.reasoning_content, "Reasoning text");
  assert.ok(!choice.message.content, `content ${JSON.stringify(choice.message.content)}`);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, "function");
  assert.ok(call.id);
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });

  const messages = [...USER, choice.message,
                    { role: "tool", tool_call_id: call.id, content: "22 degrees and sunny" }];
  const next = await chat({ ...ON, tools: TOOLS, messages, max_tokens: 4 });
  assert.equal(next.choices[0].finish_reason, "length");
  assert.ok(next.usage.prompt_tokens > r.usage.prompt_tokens);
  const prompt = await renderedPrompt(server, { messages, tools: TOOLS, ...ON });
  assert.equal(prompt.count, next.usage.prompt_tokens);
  assert.match(prompt.text, /<tool_result>22 degrees and sunny<\/tool_result>/);
  assert.match(prompt.text, /<｜DSML｜invoke name="get_weather">/);
});

test("chat: a streamed tool call (thinking off) arrives in argument fragments, no markup", async () => {
  const replay = await replayIds(server, dsmlCall(false, "San Francisco"));
  const s = await readChatStream(await chat({
    ...OFF, tools: TOOLS, max_tokens: 100, stream: true, flint_debug_replay: replay }));
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.calls.length, 1);
  assert.ok(s.calls[0].id);
  assert.equal(s.calls[0].name, "get_weather");
  assert.deepEqual(JSON.parse(s.calls[0].arguments), { city: "San Francisco" });
  assert.ok(s.calls[0].deltas > 2, `${s.calls[0].deltas} tool-call deltas`);
  for (const text of [s.content, s.reasoning]) {
    assert.ok(!/DSML|<\/?think>/.test(text), `markup in ${JSON.stringify(text)}`);
  }
});

test("chat: reasoning on splits reasoning_content from content, streamed too; off has none", async () => {
  const replay = await replayIds(server, "Thinking...</think>Answer.");
  const whole = (await chat({ ...ON, max_tokens: 50, flint_debug_replay: replay })).choices[0];
  assert.equal(whole.finish_reason, "stop");
  assert.equal(whole.message.reasoning_content, "Thinking...");
  assert.equal(whole.message.content, "Answer.");
  const s = await readChatStream(await chat({ ...ON, max_tokens: 50, stream: true, flint_debug_replay: replay }));
  assert.equal(s.reasoning, "Thinking...");
  assert.equal(s.content, "Answer.");
  assert.equal(s.finish, "stop");

  const off = (await chat({ ...OFF, max_tokens: 50,
                            flint_debug_replay: await replayIds(server, "Answer.") })).choices[0];
  assert.equal(off.message.content, "Answer.");
  assert.ok(!off.message.reasoning_content, `reasoning_content ${off.message.reasoning_content}`);
  // Chat mode: the prompt closes the thinking block; thinking mode opens it.
  assert.match((await renderedPrompt(server, { messages: USER, ...OFF })).text, /<｜Assistant｜><\/think>$/);
  assert.match((await renderedPrompt(server, { messages: USER, ...ON })).text, /<｜Assistant｜><think>$/);
});

test("completions: text prompt, whole and streamed", async () => {
  const fields = { model: MODEL, prompt: "The capital of France is", max_tokens: 8, temperature: 0 };
  const whole = await client.completions.create(fields);
  assert.equal(whole.object, "text_completion");
  assert.equal(whole.choices[0].finish_reason, "length");
  assert.equal(whole.usage.completion_tokens, 8);
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of await client.completions.create({
    ...fields, stream: true, stream_options: { include_usage: true } })) {
    for (const c of chunk.choices) {
      text += c.text;
      finish = c.finish_reason ?? finish;
    }
    usage = chunk.usage ?? usage;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, "length");
  assert.equal(usage?.completion_tokens, 8);
});

const responsesRouted = await routed(server, "/v1/responses");
const SKIP_RESPONSES = "POST /v1/responses answers 404: the Responses endpoint is not routed yet";

test("responses: plain and streamed", async (t) => {
  if (!responsesRouted) return t.skip(SKIP_RESPONSES);
  const replay = await replayIds(server, "Thinking...</think>Answer.");
  const fields = { model: MODEL, input: "Say something.", max_output_tokens: 50, temperature: 0 };
  const r = await client.responses.create({ ...fields, flint_debug_replay: replay });
  assert.equal(r.object, "response");
  assert.equal(r.status, "completed");
  assert.equal(r.output_text, "Answer.");
  assert.deepEqual(r.output.map((item) => item.type), ["reasoning", "message"]);
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);

  const types = [];
  let text = "";
  let done = null;
  for await (const event of await client.responses.create({ ...fields, stream: true, flint_debug_replay: replay })) {
    types.push(event.type);
    if (event.type === "response.output_text.delta") text += event.delta;
    if (event.type === "response.completed") done = event.response;
  }
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  assert.equal(text, "Answer.");
  assert.equal(done.status, "completed");
  assert.equal(done.output.find((item) => item.type === "message").content[0].text, "Answer.");
});

test("responses: function call, then function_call_output with previous_response_id", async (t) => {
  if (!responsesRouted) return t.skip(SKIP_RESPONSES);
  const tools = [{ type: "function", name: "get_weather", description: "Weather of a city", parameters: WEATHER_SCHEMA }];
  const first = await client.responses.create({
    model: MODEL, input: "What is the weather like in Paris?", tools, max_output_tokens: 100, temperature: 0,
    flint_debug_replay: await replayIds(server, dsmlCall(true)) });
  assert.equal(first.status, "completed");
  const call = first.output.find((item) => item.type === "function_call");
  assert.ok(call, `no function_call in ${JSON.stringify(first.output)}`);
  assert.equal(call.name, "get_weather");
  assert.deepEqual(JSON.parse(call.arguments), { city: "Paris" });
  assert.ok(call.call_id);

  const second = await client.responses.create({
    model: MODEL, previous_response_id: first.id, tools, max_output_tokens: 50, temperature: 0,
    input: [{ type: "function_call_output", call_id: call.call_id, output: "22 degrees and sunny" }],
    flint_debug_replay: await replayIds(server, "It is 22 degrees.</think>It is sunny.") });
  assert.equal(second.status, "completed");
  assert.equal(second.previous_response_id, first.id);
  assert.equal(second.output_text, "It is sunny.");
  // The earlier turn, the call and its output are in the second prompt.
  assert.ok(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens,
            `input_tokens ${second.usage.input_tokens} after ${JSON.stringify(first.usage)}`);
});

test("errors: 400 malformed JSON and bad field, 404 model, 400 above --max-model-len, 413", async () => {
  const malformed = await post(server, "/v1/chat/completions", '{"model": "tiny", "messages": [');
  assert.equal(malformed.status, 400);
  assert.equal(malformed.body.error?.type, "invalid_request_error");

  const bad = await chat({ messages: USER, temperature: "hot" }).catch((e) => e);
  assert.ok(bad instanceof OpenAI.BadRequestError, String(bad));
  assert.equal(bad.status, 400);
  assert.equal(bad.param, "temperature");

  const missing = await client.chat.completions.create({ model: "no-such-model", messages: USER }).catch((e) => e);
  assert.ok(missing instanceof OpenAI.NotFoundError, String(missing));
  assert.match(missing.message, /no-such-model/);

  const messages = [{ role: "user", content: "hello ".repeat(MAX_MODEL_LEN + 50) }];
  const tokens = (await renderedPrompt(server, { messages, ...OFF })).count;
  const long = await chat({ ...OFF, messages, max_tokens: 8 }).catch((e) => e);
  assert.ok(long instanceof OpenAI.BadRequestError, String(long));
  assert.ok(long.message.includes(String(tokens)) && long.message.includes(String(MAX_MODEL_LEN)),
            `"${long.message}" should state ${tokens} and ${MAX_MODEL_LEN}`);

  const huge = await postDeclaredSize(server, "/v1/chat/completions", 40 << 20);
  assert.equal(huge.status, 413);
  assert.equal(huge.body.error?.type, "invalid_request_error");
  // The server still answers.
  assert.equal((await chat({ ...OFF, max_tokens: 1 })).choices.length, 1);
});

test("errors: 401 for a wrong API key", async () => {
  const keyed = await startServer(flint, ckpt, ["--api-key", "sk-right"]);
  try {
    const wrong = new OpenAI({ baseURL: keyed.baseURL, apiKey: "sk-wrong", maxRetries: 0 });
    const e = await wrong.models.list().catch((err) => err);
    assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
    const right = new OpenAI({ baseURL: keyed.baseURL, apiKey: "sk-right", maxRetries: 0 });
    assert.equal((await right.models.list()).data[0].id, MODEL);
  } finally {
    await stopServer(keyed);
  }
});

test("errors: 429 once --max-waiting-requests wait (SDK retries off)", async () => {
  const busy = await startServer(flint, ckpt, ["--max-num-seqs", "1", "--max-waiting-requests", "1"]);
  const c = new OpenAI({ baseURL: busy.baseURL, apiKey: "unused", maxRetries: 0 });
  const long = { model: MODEL, messages: USER, ...OFF, max_tokens: 600, ignore_eos: true, stream: true };
  const aborts = [new AbortController(), new AbortController()];
  const drained = [];
  try {
    // One running, one waiting for its seat, then one too many.
    const hold = (abort) => c.chat.completions.create(long, { signal: abort.signal })
      .then(async (s) => { for await (const _ of s); }).catch(() => {});
    drained.push(hold(aborts[0]));
    await until("a running request", 10000, async () => (await metric(busy, "flint:num_requests_running")) === 1);
    drained.push(hold(aborts[1]));
    await until("a waiting request", 10000, async () => (await metric(busy, "flint:num_requests_waiting")) === 1);
    const e = await c.chat.completions.create({ ...long, stream: false, max_tokens: 4 }).catch((err) => err);
    assert.ok(e instanceof OpenAI.RateLimitError, String(e));
    assert.equal(e.status, 429);
  } finally {
    // Hanging up aborts both requests in the server at once.
    for (const a of aborts) a.abort();
    await Promise.all(drained);
    await until("the server to abort the requests of the clients that hung up", 10000, async () =>
      (await metric(busy, "flint:num_requests_running")) === 0 &&
      (await metric(busy, "flint:num_requests_waiting")) === 0);
    await stopServer(busy);
  }
});

test("SIGTERM stops the server with exit status 0", async () => {
  await stopServer(server);
});
