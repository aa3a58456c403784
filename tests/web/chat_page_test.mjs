// The chat page served by `flint serve` itself, driven in headless Chromium: a make-tiny
// checkpoint (random weights: the reply is gibberish, the test checks that it streams, not
// what it says), the page loaded from GET /, the API key typed into the page, two greedy turns
// of 16 tokens (the second sends the first reply back), a long turn stopped with Stop (the
// server must abort it), no console errors and no request leaving the server, then SIGTERM
// and a clean exit.
//
// usage: node chat_page_test.mjs FLINT_BINARY NPM_DIR WORK_DIR
// Exit 0 pass, 1 fail, 77 skipped (no Chromium or puppeteer-core).
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {
  checkClean, fail, lastReply, launchBrowser, sendMessage, setField, text, until, watchPage,
} from "./browser.mjs";

const [flint, npmDir, workDir] = process.argv.slice(2);
if (!workDir) {
  console.error("usage: node chat_page_test.mjs FLINT_BINARY NPM_DIR WORK_DIR");
  process.exit(2);
}
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
const API_KEY = "sk-flint-web-test";
const MODEL_NAME = "tiny-chat";

// The browser first: without it there is nothing to test, and a skip should be quick.
const browser = await launchBrowser(npmDir);

const ckpt = path.join(workDir, "tiny");
fs.rmSync(ckpt, { recursive: true, force: true });
fs.mkdirSync(workDir, { recursive: true });
execFileSync(flint, ["make-tiny", ckpt, "--preset", "tiny", "--seed", "7"], { stdio: "pipe" });

// The server picks a free port (--port 0) and logs it ("listening on 127.0.0.1:PORT").
const server = spawn(flint, ["serve", ckpt, "--host", "127.0.0.1", "--port", "0",
                             "--served-model-name", MODEL_NAME, "--api-key", API_KEY,
                             "--max-model-len", "4096", "--kv-cache-memory-bytes", "64M",
                             "--disable-log-stats"],
                     { stdio: ["ignore", "pipe", "pipe"] });
let log = "";
server.stdout.on("data", (d) => { log += d; });
server.stderr.on("data", (d) => { log += d; });
let exited = null;
const exit = new Promise((resolve) => server.on("exit", (code, signal) => {
  exited = { code, signal };
  resolve(exited);
}));
// However the test ends early (a failed check, a timeout, an exception), the server goes too
// and its log is shown.
process.on("exit", (code) => {
  if (exited === null) server.kill("SIGKILL");
  if (code !== 0) console.error(`--- flint serve output ---\n${log}`);
});
const checkAlive = (when) => {
  if (exited) fail(`flint serve exited ${when} (${JSON.stringify(exited)})`);
};

let origin;
await until("flint serve to print its port", 60000, async () => {
  checkAlive("before listening");
  const m = /127\.0\.0\.1:([1-9][0-9]*)/.exec(log);
  return m && (origin = `http://127.0.0.1:${m[1]}`);
});
// /health answers 503 while the model loads, 200 once it serves.
await until("GET /health to answer 200", 120000, async () => {
  checkAlive("while loading");
  try {
    return (await fetch(origin + "/health")).status === 200;
  } catch {
    return false;
  }
});
console.log(`flint serve ready at ${origin} (${elapsed()})`);

async function metric(name) {
  const body = await (await fetch(origin + "/metrics",
                                  { headers: { Authorization: `Bearer ${API_KEY}` } })).text();
  const m = new RegExp(`^${name}(\\{[^}]*\\})? ([0-9.e+-]+)$`, "m").exec(body);
  return m ? Number(m[2]) : null;
}

try {
  const page = await browser.newPage();
  const seen = watchPage(page, origin);
  const posts = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith("/v1/chat/completions")) {
      posts.push(JSON.parse(r.postData()));
    }
  });

  // GET / needs no key; the API does: the page says so until the key is typed in.
  const response = await page.goto(origin + "/", { waitUntil: "load" });
  if (response.status() !== 200) fail(`GET / answered ${response.status()}`);
  await until("the page to report the missing key", 10000,
              async () => /API key/.test(await text(page, "#model")));
  await setField(page, "#api-key", API_KEY);
  await until("the model name", 10000, async () => (await text(page, "#model")) === MODEL_NAME);

  await setField(page, "#temperature", "0");
  await setField(page, "#max-tokens", "16");
  await setField(page, "#thinking", "off");

  for (const [turn, prompt] of [[1, "Hello, who are you?"], [2, "Tell me more."]]) {
    await sendMessage(page, prompt);
    await until(`reply ${turn} to finish`, 60000, async () => {
      const reply = await lastReply(page);
      return reply?.count === turn && /finish: |failed: /.test(reply.meta);
    });
    const reply = await lastReply(page);
    if (reply.meta.startsWith("failed: ")) fail(`reply ${turn} ${reply.meta}`);
    if (!(reply.content + reply.reasoning + reply.tools).length) {
      fail(`reply ${turn} is empty (${reply.meta})`);
    }
    const stats = await text(page, "#stats");
    const m = /^([0-9]+) tokens in [0-9.]+ s · ([0-9.]+) tokens\/s/.exec(stats);
    if (!m || Number(m[1]) < 1) fail(`#stats after reply ${turn}: "${stats}"`);
    console.log(`reply ${turn}: ${JSON.stringify(reply.content.slice(0, 60))}… (${stats})`);
  }
  // The second request carried the first reply, as the page showed it.
  const first = posts[0];
  const second = posts[1].messages;
  const shown = await page.$$eval("#messages .assistant .content", (els) => els[0].textContent);
  if (second.length !== 3 || second[1].role !== "assistant" || second[1].content !== shown ||
      first.max_tokens !== 16 || first.temperature !== 0 || first.model !== MODEL_NAME ||
      first.chat_template_kwargs?.thinking !== false || !first.stream_options?.include_usage) {
    fail(`unexpected requests: ${JSON.stringify(posts)}`);
  }

  // Stop during a long reply: the page shows "stopped" and the server aborts the request.
  await setField(page, "#max-tokens", "3000");
  await sendMessage(page, "Write a very long story.");
  await until("the long reply to stream", 60000,
              async () => (await lastReply(page))?.count === 3 &&
                          /tokens\/s/.test(await text(page, "#stats")));
  await page.click("#stop");
  const stopped = await until("the page to show the stop", 10000, async () => {
    const meta = (await lastReply(page)).meta;
    return /^stopped|finish: /.test(meta) && meta;
  });
  if (!stopped.startsWith("stopped")) fail(`the long reply ended before Stop (${stopped})`);
  // The page dropped the connection; the server must abort the request, not run it to 3000.
  if ((await metric("flint:num_requests_running")) === null) {
    fail("no flint:num_requests_running in GET /metrics");
  }
  await until("flint:num_requests_running to fall to 0 (the server aborting the request)", 10000,
              async () => (await metric("flint:num_requests_running")) === 0);

  checkClean(seen, [/Failed to load resource: the server responded with a status of 401/]);
  console.log(`PASS: chat page served by flint (${elapsed()})`);
} finally {
  await browser.close();
  if (exited === null) {
    server.kill("SIGTERM");
    const timer = setTimeout(() => server.kill("SIGKILL"), 30000);
    const { code, signal } = await exit;
    clearTimeout(timer);
    if (code !== 0) fail(`flint serve exited with ${code ?? signal} after SIGTERM`);
  }
}
