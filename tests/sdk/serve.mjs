// Shared by the client-library tests: command-line arguments, the official SDKs from the npm
// fixtures, `flint serve` on a make-tiny checkpoint (started, waited for, stopped with SIGTERM
// and checked to exit 0), a time budget for the whole file, and the request helpers the tests
// use to drive the random-weight model through the reasoning and tool-call parsers
// (flint_debug_replay).
//
// usage of every test file: node NAME.test.mjs FLINT_BINARY NPM_DIR CHECKPOINT_DIR
// (the checkpoint is written with `flint make-tiny` when the folder has no config.json).
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const servers = [];
const started = Date.now();
export const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

// The arguments, a time budget (on expiry the file fails with every server's log) and, on a
// failing exit, each server's output; servers still running are killed.
export function setup(budgetSeconds) {
  const [flint, npmDir, ckpt] = process.argv.slice(2);
  if (!ckpt) {
    console.error(`usage: node ${path.basename(process.argv[1])} FLINT_BINARY NPM_DIR CHECKPOINT_DIR`);
    process.exit(2);
  }
  setTimeout(() => {
    console.error(`FAIL: the tests took longer than ${budgetSeconds} s`);
    process.exit(1);
  }, budgetSeconds * 1000).unref();
  process.on("exit", (code) => {
    const failed = code !== 0 || (process.exitCode ?? 0) !== 0;
    for (const server of servers) {
      if (server.exited === null) server.child.kill("SIGKILL");
      if (failed) console.error(`--- flint serve ${server.args.join(" ")} ---\n${server.log}`);
    }
    console.log(`total ${elapsed()}`);
  });
  if (!fs.existsSync(path.join(ckpt, "config.json"))) {
    fs.mkdirSync(path.dirname(path.resolve(ckpt)), { recursive: true });
    execFileSync(flint, ["make-tiny", ckpt, "--preset", "tiny", "--seed", "7"], { stdio: "pipe" });
  }
  return { flint, npmDir, ckpt };
}

// The ESM entry of an installed package (NPM_DIR is a node_modules folder).
export async function importSdk(npmDir, name) {
  const entry = path.resolve(npmDir, name, "index.mjs");
  if (!fs.existsSync(entry)) {
    throw new Error(`${entry} is missing: run scripts/setup.sh (tests/npm/package.json pins ${name})`);
  }
  return import(pathToFileURL(entry).href);
}

// Polls `check` (async, truthy = done) every 50 ms for at most `ms`.
export async function until(what, ms, check) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export const MODEL = "tiny";
export const MAX_MODEL_LEN = 1024;

// `flint serve` on any free port (it logs the port), the parsers and debug replay on; `extra`
// flags go last. Resolves once GET /health answers 200.
export async function startServer(flint, ckpt, extra = []) {
  const args = ["serve", ckpt, "--host", "127.0.0.1", "--port", "0", "--served-model-name", MODEL,
                "--enable-auto-tool-choice", "--tool-call-parser", "deepseek_v4",
                "--reasoning-parser", "deepseek_v4", "--enable-debug-replay",
                "--max-model-len", String(MAX_MODEL_LEN), "--kv-cache-memory-bytes", "64M",
                "--disable-log-stats", ...extra];
  const child = spawn(flint, args, { stdio: ["ignore", "pipe", "pipe"] });
  const server = { child, args, log: "", exited: null, origin: null };
  servers.push(server);
  child.stdout.on("data", (d) => { server.log += d; });
  child.stderr.on("data", (d) => { server.log += d; });
  server.exit = new Promise((resolve) => child.on("exit", (code, signal) => {
    server.exited = { code, signal };
    resolve(server.exited);
  }));
  const alive = (when) => {
    if (server.exited) throw new Error(`flint serve exited ${when}: ${JSON.stringify(server.exited)}`);
  };
  await until("flint serve to log its port", 30000, async () => {
    alive("before listening");
    const m = /listening on 127\.0\.0\.1:([1-9][0-9]*)/.exec(server.log);
    return m && (server.origin = `http://127.0.0.1:${m[1]}`);
  });
  // 503 while the model loads, 200 once it serves.
  await until("GET /health to answer 200", 60000, async () => {
    alive("while loading");
    try {
      return (await fetch(server.origin + "/health")).status === 200;
    } catch {
      return false;
    }
  });
  server.baseURL = server.origin + "/v1";
  return server;
}

// SIGTERM (unless `signal` sent it already), then exit status 0 within `seconds`.
export async function stopServer(server, seconds = 30) {
  if (server.exited === null && !server.signalled) server.child.kill("SIGTERM");
  let timer;
  const timeout = new Promise((resolve) => { timer = setTimeout(resolve, seconds * 1000, "timeout"); });
  const result = await Promise.race([server.exit, timeout]);
  clearTimeout(timer);
  if (result === "timeout") throw new Error(`flint serve still running ${seconds} s after SIGTERM`);
  if (result.code !== 0) throw new Error(`flint serve exited with ${JSON.stringify(result)}, expected code 0`);
}

// Sends SIGTERM once: a second one makes flint exit at once, with status 1.
export function signal(server) {
  server.signalled = true;
  server.child.kill("SIGTERM");
}

// A raw JSON request: { status, body } (body parsed when it is JSON).
export async function request(server, method, route, body, headers = {}) {
  const init = { method, headers: { "content-type": "application/json", ...headers } };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const response = await fetch(server.origin + route, init);
  const text = await response.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body: parsed };
}

export const post = (server, route, body, headers) => request(server, "POST", route, body, headers);

// The answer to a POST that declares a body of `bytes` bytes but sends only its headers: a
// server refusing the size answers before reading the body. (A client that writes a whole
// oversized body may see the connection reset instead of the answer, depending on timing.)
export function postDeclaredSize(server, route, bytes) {
  const url = new URL(server.origin + route);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST",
                               headers: { "content-type": "application/json", "content-length": bytes } });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (d) => { text += d; });
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode, body: JSON.parse(text) });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.flushHeaders();
  });
}

// Token ids of `text` as the model would write it, ending with the end-of-sentence token, for
// "flint_debug_replay".
export async function replayIds(server, text) {
  const ids = async (prompt) => {
    const r = await post(server, "/tokenize", { prompt, add_special_tokens: false });
    if (r.status !== 200) throw new Error(`POST /tokenize: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.tokens;
  };
  const eos = await ids("<｜end▁of▁sentence｜>");
  if (eos.length !== 1) throw new Error(`the end-of-sentence token is ${JSON.stringify(eos)}`);
  return [...(await ids(text)), ...eos];
}

// The prompt /tokenize renders for chat `fields` (messages, tools, chat_template_kwargs), as text.
export async function renderedPrompt(server, fields) {
  const t = await post(server, "/tokenize", fields);
  if (t.status !== 200) throw new Error(`POST /tokenize: ${t.status} ${JSON.stringify(t.body)}`);
  const d = await post(server, "/detokenize", { tokens: t.body.tokens });
  if (d.status !== 200) throw new Error(`POST /detokenize: ${d.status} ${JSON.stringify(d.body)}`);
  return { count: t.body.count, text: d.body.prompt };
}

// Whether an endpoint is routed yet (written concurrently): anything but 404 for an empty body.
export async function routed(server, route) {
  return (await post(server, route, {})).status !== 404;
}

// Value of a Prometheus series in GET /metrics (the first sample), or null.
export async function metric(server, name, headers = {}) {
  const text = await (await fetch(server.origin + "/metrics", { headers })).text();
  const m = new RegExp(`^${name}(\\{[^}]*\\})? ([0-9.e+-]+)$`, "m").exec(text);
  return m ? Number(m[2]) : null;
}

// What the model writes for a get_weather call, after its reasoning when `thinking`.
export function dsmlCall(thinking, city = "Paris") {
  const call = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n" +
               `<｜DSML｜parameter name="city" string="true">${city}</｜DSML｜parameter>\n` +
               "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  return thinking ? `Reasoning text</think>\n\n${call}` : call;
}

export const WEATHER_SCHEMA = {
  type: "object",
  properties: { city: { type: "string", description: "the city" } },
  required: ["city"],
};
