// The chat page against a scripted OpenAI server in Node, so that what a tiny random model
// cannot be made to produce on purpose is checked too: reasoning_content and tool_calls
// deltas, events split across TCP writes, keep-alive comments, JSON error bodies (before and in
// the stream), Stop reaching the server, the request bodies (settings, API key, the whole
// conversation with reasoning_content and tool_calls), model text shown as text, settings kept
// across a reload. Needs no flint binary: the page is read from src/server/chat_page.cpp.
//
// usage: node chat_page_mock_test.mjs CHAT_PAGE_CPP NPM_DIR
// Exit 0 pass, 1 fail, 77 skipped (no Chromium or puppeteer-core).
import fs from "node:fs";
import http from "node:http";
import {
  checkClean, fail, lastReply, launchBrowser, sendMessage, setField, text, until, watchPage,
} from "./browser.mjs";

const [cppPath, npmDir] = process.argv.slice(2);
if (!npmDir) {
  console.error("usage: node chat_page_mock_test.mjs CHAT_PAGE_CPP NPM_DIR");
  process.exit(2);
}

function pageFromSource(file) {
  const source = fs.readFileSync(file, "utf8");
  const begin = source.indexOf('R"html(');
  const end = source.indexOf(')html"', begin);
  if (begin < 0 || end < 0) fail(`no R"html( ... )html" literal in ${file}`);
  return source.slice(begin + 7, end);
}

const html = pageFromSource(cppPath);
const XSS = "Hello <img src=x onerror=window.__xss=1> & <b>bye</b>";
const received = [];  // {headers, body} of each POST /v1/chat/completions
let slowClosed = false;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const chunk = (delta, extra = {}) =>
  JSON.stringify({ id: "chatcmpl-mock", object: "chat.completion.chunk", created: 1,
                   model: "mock-model", choices: [{ index: 0, delta, finish_reason: null, ...extra }] });
const usage = (completion) =>
  JSON.stringify({ id: "chatcmpl-mock", object: "chat.completion.chunk", created: 1,
                   model: "mock-model", choices: [],
                   usage: { prompt_tokens: 12, completion_tokens: completion,
                            total_tokens: 12 + completion,
                            prompt_tokens_details: { cached_tokens: 4 } } });

async function stream(req, res, body) {
  const last = body.messages[body.messages.length - 1].content;
  if (last === "fail") {
    res.writeHead(400, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: { message: "temperature: must be at most 2", type:
                                      "invalid_request_error", param: "temperature", code: null } }));
    return;
  }
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const send = async (data) => { res.write(`data: ${data}\n\n`); await sleep(20); };
  await send(chunk({ role: "assistant", content: "" }));
  if (last === "slow") {
    req.socket.on("close", () => { slowClosed = true; });
    for (let i = 0; !res.destroyed && i < 600; ++i) await send(chunk({ content: `w${i} ` }));
    return;
  }
  if (last === "midway") {
    await send(chunk({ content: "partial" }));
    await send(JSON.stringify({ error: { message: "engine failed: out of memory", type: "server_error" } }));
    res.end("data: [DONE]\n\n");
    return;
  }
  res.write(": keep-alive\n\n");
  await send(chunk({ reasoning_content: "Let me think " }));
  await send(chunk({ reasoning_content: "<i>hard</i>." }));
  // One event split over two writes, then "data:" without the space, then CRLF line ends.
  const split = `data: ${chunk({ content: XSS.slice(0, 9) })}\n\n`;
  res.write(split.slice(0, 20));
  await sleep(30);
  res.write(split.slice(20));
  res.write(`data:${chunk({ content: XSS.slice(9, 30) })}\n\n`);
  res.write(`data: ${chunk({ content: XSS.slice(30) })}\r\n\r\n`);
  await sleep(20);
  await send(chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function",
                                    function: { name: "get_weather", arguments: "" } }] }));
  await send(chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"city\": " } }] }));
  await send(chunk({ tool_calls: [{ index: 0, function: { arguments: "\"Paris\"}" } }] }));
  await send(chunk({}, { finish_reason: "tool_calls" }));
  await send(usage(9));
  res.end("data: [DONE]\n\n");
}

const server = http.createServer(async (req, res) => {
  if (req.method === "GET" && (req.url === "/" || req.url === "/index.html")) {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    res.end(html);
  } else if (req.method === "GET" && req.url === "/v1/models") {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ object: "list", data: [{ id: "mock-model", object: "model" }] }));
  } else if (req.method === "POST" && req.url === "/v1/chat/completions") {
    let raw = "";
    for await (const part of req) raw += part;
    const body = JSON.parse(raw);
    received.push({ headers: req.headers, body });
    await stream(req, res, body);
  } else {
    res.writeHead(404, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: { message: `no route for ${req.method} ${req.url}` } }));
  }
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const origin = `http://127.0.0.1:${server.address().port}`;

function expect(what, actual, expected) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) fail(`${what}: got ${a}, expected ${e}`);
}

const started = Date.now();
const browser = await launchBrowser(npmDir);
try {
  const page = await browser.newPage();
  const seen = watchPage(page, origin);
  await page.goto(origin + "/", { waitUntil: "load" });
  await until("the model name", 10000, async () => (await text(page, "#model")) === "mock-model");

  await setField(page, "#api-key", "sk-test");
  await setField(page, "#temperature", "0");
  await setField(page, "#max-tokens", "16");
  await setField(page, "#thinking", "on");
  await setField(page, "#system", "Be brief.");

  // Turn 1: reasoning, content with markup, a tool call, usage.
  await sendMessage(page, "Hi");
  await until("the first reply to finish", 10000,
              async () => (await lastReply(page))?.meta.includes("finish: tool_calls"));
  const first = await lastReply(page);
  expect("content shown as text", first.content, XSS);
  expect("reasoning", first.reasoning, "Let me think <i>hard</i>.");
  expect("tool call", first.tools, 'tool call get_weather({"city": "Paris"})');
  const injected = await page.evaluate(() => ({
    elements: document.querySelectorAll("#messages img, #messages b, #messages i").length,
    xss: window.__xss ?? null,
    thinkingShown: !document.querySelector(".assistant details.thinking").hidden,
    thinkingOpen: document.querySelector(".assistant details.thinking").open,
  }));
  expect("model output as text", injected, { elements: 0, xss: null, thinkingShown: true,
                                              thinkingOpen: false });
  const stats = await text(page, "#stats");
  if (!/9 tokens in [0-9.]+ s · [0-9.]+ tokens\/s · prompt 12 tokens \(4 cached\)/.test(stats)) {
    fail(`#stats: ${stats}`);
  }
  expect("Authorization", received[0].headers.authorization, "Bearer sk-test");
  const b = received[0].body;
  expect("request 1", { model: b.model, stream: b.stream, stream_options: b.stream_options,
                        temperature: b.temperature, max_tokens: b.max_tokens, top_p: b.top_p,
                        kwargs: b.chat_template_kwargs, messages: b.messages },
         { model: "mock-model", stream: true, stream_options: { include_usage: true },
           temperature: 0, max_tokens: 16, kwargs: { thinking: true },
           messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }] });

  // Turn 2: the whole conversation goes back, the reply with its reasoning and tool call.
  await sendMessage(page, "And tomorrow?");
  await until("the second reply", 10000, async () => received.length === 2 &&
              (await lastReply(page))?.meta.includes("finish:"));
  expect("request 2 messages", received[1].body.messages.slice(1), [
    { role: "user", content: "Hi" },
    { role: "assistant", content: XSS, reasoning_content: "Let me think <i>hard</i>.",
      tool_calls: [{ id: "call_1", type: "function",
                     function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] },
    { role: "user", content: "And tomorrow?" },
  ]);

  // A JSON error body before the stream: its message shown, the turn taken back.
  await sendMessage(page, "fail");
  await until("the error", 10000, async () => (await text(page, "#error")).length > 0);
  expect("error", await text(page, "#error"), "temperature: must be at most 2");
  expect("bubbles after a refused turn", (await lastReply(page)).count, 2);
  expect("prompt given back", await page.$eval("#prompt", (el) => el.value), "fail");
  await page.$eval("#prompt", (el) => { el.value = ""; });

  // An error event inside the stream: shown, the partial reply kept.
  await sendMessage(page, "midway");
  await until("the stream error", 10000,
              async () => (await lastReply(page)).meta.startsWith("failed: engine failed"));
  expect("error in stream", await text(page, "#error"), "engine failed: out of memory");
  expect("partial reply", (await lastReply(page)).content, "partial");

  // Stop: live tokens/s while streaming, then the fetch is aborted and the server sees it.
  await sendMessage(page, "slow");
  await until("live tokens/s", 10000, async () => /tokens\/s/.test(await text(page, "#stats")) &&
              (await lastReply(page)).content.startsWith("w0 w1 w2"));
  if (await page.$eval("#send", (el) => !el.disabled)) fail("#send enabled while streaming");
  await page.click("#stop");
  await until("the stopped reply", 5000, async () => (await lastReply(page)).meta.startsWith("stopped"));
  await until("the server to see the client go", 5000, async () => slowClosed);
  if (await page.$eval("#send", (el) => el.disabled)) fail("#send disabled after Stop");
  expect("error after Stop", await text(page, "#error"), "");

  // Settings and the API key survive a reload.
  await page.reload({ waitUntil: "load" });
  const kept = await page.evaluate(() => ["api-key", "temperature", "max-tokens", "thinking", "system"]
    .map((id) => document.getElementById(id).value));
  expect("settings after reload", kept, ["sk-test", "0", "16", "on", "Be brief."]);

  checkClean(seen, [/Failed to load resource: the server responded with a status of 400/]);
  console.log(`PASS: chat page against the mock server (${((Date.now() - started) / 1000).toFixed(1)} s)`);
} finally {
  await browser.close();
  server.close();
  server.closeAllConnections();
}
