#include "server/chat_page.h"

namespace flint::server {

namespace {

// The page. Plain HTML, CSS and JavaScript with no build step; edit it here and rebuild.
// Rules it keeps (tests/web/ checks them in headless Chromium):
// - Model output and error messages go into the DOM as text (textContent / append(string)),
//   never as HTML.
// - Nothing is loaded from another origin (the CSP below forbids it; the favicon is inline so
//   that the browser does not even ask for /favicon.ico).
// - URLs are relative ("v1/models"), so the page also works behind a proxy under a prefix.
constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'">
<title>flint chat</title>
<link rel="icon" href="data:,">
<style>
:root { color-scheme: light dark; --muted: #6b7280; --border: #d1d5db; --user: #dbeafe;
  --assistant: #f3f4f6; --accent: #2563eb; --danger: #b91c1c; }
@media (prefers-color-scheme: dark) {
  :root { --muted: #9ca3af; --border: #374151; --user: #1e3a5f; --assistant: #1f2937;
    --accent: #60a5fa; --danger: #f87171; }
}
* { box-sizing: border-box; }
body { margin: 0; height: 100vh; display: flex; flex-direction: column;
  font: 15px/1.5 system-ui, sans-serif; }
header { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: baseline;
  padding: .5rem 1rem; border-bottom: 1px solid var(--border); }
h1 { font-size: 1.1rem; margin: 0; }
#model { color: var(--muted); font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
#settings { flex-basis: 100%; }
#settings summary { cursor: pointer; color: var(--muted); }
.fields { display: grid; grid-template-columns: repeat(auto-fit, minmax(10rem, 1fr));
  gap: .5rem 1rem; padding: .5rem 0; }
.fields label { display: flex; flex-direction: column; font-size: .85rem; color: var(--muted); }
.fields .wide { grid-column: 1 / -1; }
input, select, textarea, button { font: inherit; }
main { flex: 1; overflow-y: auto; padding: 1rem; }
#messages { max-width: 52rem; margin: 0 auto; display: flex; flex-direction: column; gap: .75rem; }
.message { padding: .5rem .75rem; border-radius: .5rem; max-width: 100%; }
.user { background: var(--user); align-self: flex-end; white-space: pre-wrap;
  overflow-wrap: anywhere; }
.assistant { background: var(--assistant); }
.content, .reasoning { white-space: pre-wrap; overflow-wrap: anywhere; }
.content:empty { display: none; }
.reasoning { color: var(--muted); font-size: .9rem; }
.thinking summary, .meta { color: var(--muted); font-size: .85rem; }
.tool-call { font-family: ui-monospace, monospace; white-space: pre-wrap; overflow-wrap: anywhere;
  border-left: 3px solid var(--accent); padding-left: .5rem; margin: .25rem 0; }
.meta:empty { display: none; }
.failed { color: var(--danger); }
footer { border-top: 1px solid var(--border); padding: .5rem 1rem; }
#composer { max-width: 52rem; margin: 0 auto; display: flex; gap: .5rem; align-items: flex-end; }
#prompt { flex: 1; resize: vertical; min-height: 2.75rem; max-height: 40vh; padding: .4rem; }
#error { color: var(--danger); max-width: 52rem; margin: 0 auto; white-space: pre-wrap; }
#error:empty, #stats:empty { display: none; }
#stats { color: var(--muted); font-size: .85rem; max-width: 52rem; margin: 0 auto;
  font-variant-numeric: tabular-nums; }
</style>
</head>
<body>
<header>
  <h1>flint</h1>
  <span id="model">connecting…</span>
  <details id="settings">
    <summary>Settings</summary>
    <div class="fields">
      <label class="wide">System prompt
        <textarea id="system" rows="2" placeholder="(none)"></textarea></label>
      <label>Temperature
        <input id="temperature" type="number" min="0" max="2" step="0.1" placeholder="server default"></label>
      <label>top_p
        <input id="top-p" type="number" min="0" max="1" step="0.05" placeholder="server default"></label>
      <label>max_tokens
        <input id="max-tokens" type="number" min="1" step="1" placeholder="server default"></label>
      <label>Thinking
        <select id="thinking">
          <option value="">server default</option>
          <option value="on">on</option>
          <option value="off">off</option>
        </select></label>
      <label>API key
        <input id="api-key" type="password" autocomplete="off" placeholder="(none)"></label>
    </div>
  </details>
</header>
<main>
  <div id="messages" role="log" aria-label="Conversation"></div>
</main>
<footer>
  <div id="error" role="alert"></div>
  <div id="stats"></div>
  <form id="composer">
    <textarea id="prompt" rows="2" aria-label="Message" placeholder="Message (Enter to send, Shift+Enter for a new line)"></textarea>
    <button id="send" type="submit">Send</button>
    <button id="stop" type="button" disabled>Stop</button>
    <button id="new-chat" type="button">New chat</button>
  </form>
</footer>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const SETTINGS = ["system", "temperature", "top-p", "max-tokens", "thinking"];
const STORE = "flint-chat.";
const conversation = [];  // the conversation as sent: {role, content, reasoning_content?, tool_calls?}
let model = null;         // from GET /v1/models
let controller = null;    // the AbortController of the request in flight

function loadSettings() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORE + "settings") || "{}");
    for (const id of SETTINGS) if (typeof saved[id] === "string") $(id).value = saved[id];
    $("api-key").value = localStorage.getItem(STORE + "api-key") || "";
  } catch (e) { /* storage disabled or corrupt: start from the defaults */ }
}
function saveSettings() {
  try {
    const saved = {};
    for (const id of SETTINGS) saved[id] = $(id).value;
    localStorage.setItem(STORE + "settings", JSON.stringify(saved));
    const key = $("api-key").value.trim();
    if (key) localStorage.setItem(STORE + "api-key", key);
    else localStorage.removeItem(STORE + "api-key");
  } catch (e) { /* storage disabled: settings last for this page only */ }
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}
function showError(message) { $("error").textContent = message; }

// The message of an OpenAI error body {"error": {"message"}}, else the status and text.
async function errorMessage(response) {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text);
    if (body && body.error && body.error.message) return String(body.error.message);
  } catch (e) { /* not JSON */ }
  return "HTTP " + response.status + (text ? ": " + text.slice(0, 300) : "");
}

let modelRetry = null;
async function loadModel() {
  clearTimeout(modelRetry);
  try {
    const response = await fetch("v1/models", { headers: headers() });
    if (!response.ok) {
      const message = await errorMessage(response);
      $("model").textContent = "(" + message + ")";
      // 503 while the model loads: ask again until it is ready.
      if (response.status === 503) modelRetry = setTimeout(loadModel, 2000);
      return;
    }
    const body = await response.json();
    model = body.data && body.data.length ? String(body.data[0].id) : null;
    $("model").textContent = model || "(no model)";
  } catch (e) {
    $("model").textContent = "(server unreachable)";
    modelRetry = setTimeout(loadModel, 5000);
  }
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text) node.textContent = text;
  return node;
}
function nearBottom() {
  const main = document.querySelector("main");
  return main.scrollHeight - main.scrollTop - main.clientHeight < 80;
}
function scrollDown(follow) {
  if (follow) { const main = document.querySelector("main"); main.scrollTop = main.scrollHeight; }
}

function addUserBubble(text) {
  const node = element("div", "message user", text);
  $("messages").append(node);
  scrollDown(true);
  return node;
}
function addAssistantBubble() {
  const node = element("div", "message assistant");
  const thinking = element("details", "thinking");
  thinking.hidden = true;
  thinking.append(element("summary", "", "Thinking"), element("div", "reasoning"));
  const view = {
    node, thinking,
    reasoning: thinking.lastChild,
    content: element("div", "content"),
    tools: element("div", "tool-calls"),
    meta: element("div", "meta"),
    calls: [],
  };
  node.append(thinking, view.content, view.tools, view.meta);
  $("messages").append(node);
  scrollDown(true);
  return view;
}

function number(id, integer) {
  const text = $(id).value.trim();
  if (text === "") return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw new Error($(id).closest("label").firstChild.textContent.trim() + ": not a number");
  }
  return value;
}
function buildRequest() {
  const messages = [];
  const system = $("system").value;
  if (system.trim()) messages.push({ role: "system", content: system });
  messages.push(...conversation);
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  if (model) body.model = model;
  const sampling = { temperature: number("temperature"), top_p: number("top-p"),
                     max_tokens: number("max-tokens", true) };
  for (const [key, value] of Object.entries(sampling)) if (value !== undefined) body[key] = value;
  const thinking = $("thinking").value;
  if (thinking) body.chat_template_kwargs = { thinking: thinking === "on" };
  return body;
}

// Server-sent events: "data:" lines up to a blank line make one event; lines starting with
// ":" are comments (the server's keep-alives); "data: [DONE]" ends the stream.
async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).replace(/\r$/, "");
      buffer = buffer.slice(end + 1);
      if (line === "") {
        if (!data.length) continue;
        const event = data.join("\n");
        data = [];
        if (event === "[DONE]") return;
        onData(event);
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }  // ":" comments and event:/id:/retry: fields carry nothing this page needs
    }
    if (done) throw new Error("the stream ended before [DONE]");
  }
}

function rate(tokens, seconds) {
  return seconds > 0 ? (tokens / seconds).toFixed(1) + " tokens/s" : "";
}
function showLiveStats(stats) {
  if (!stats.first) { $("stats").textContent = "waiting for the first token…"; return; }
  const seconds = (performance.now() - stats.first) / 1000;
  // Each chunk carries about one token; the exact count comes with the usage at the end.
  const live = rate(stats.chunks - 1, seconds);
  $("stats").textContent = stats.chunks + " chunks" + (live ? " · " + live : "");
}
function showFinalStats(stats, view) {
  const end = performance.now();
  const parts = [];
  const usage = stats.usage;
  if (usage) {
    const seconds = (end - (stats.first || stats.start)) / 1000;
    const tokens = stats.first ? usage.completion_tokens - 1 : usage.completion_tokens;
    parts.push(usage.completion_tokens + " tokens in " + ((end - stats.start) / 1000).toFixed(2) + " s");
    const r = rate(Math.max(tokens, 0), seconds);
    if (r) parts.push(r);
    const cached = usage.prompt_tokens_details && usage.prompt_tokens_details.cached_tokens;
    parts.push("prompt " + usage.prompt_tokens + " tokens" + (cached ? " (" + cached + " cached)" : ""));
  } else if (stats.chunks) {  // stopped or failed: no usage came, count the chunks
    parts.push(stats.chunks + " chunks");
    const r = rate(stats.chunks - 1, (end - stats.first) / 1000);
    if (r) parts.push(r);
  }
  if (stats.first) parts.push("first token after " + ((stats.first - stats.start) / 1000).toFixed(2) + " s");
  if (stats.finish) parts.push("finish: " + stats.finish);
  $("stats").textContent = parts.join(" · ");
  view.meta.textContent = parts.join(" · ");
}

// One chat.completion.chunk: appends its deltas to the reply and to the bubble.
function applyChunk(text, reply, view, stats) {
  const chunk = JSON.parse(text);
  if (chunk.error) throw new Error(chunk.error.message || "the server reported an error");
  if (chunk.usage) stats.usage = chunk.usage;
  const choice = chunk.choices && chunk.choices[0];
  if (!choice) return;
  if (choice.finish_reason) stats.finish = choice.finish_reason;
  const delta = choice.delta || {};
  const follow = nearBottom();
  let got = false;
  if (delta.reasoning_content) {
    reply.reasoning_content += delta.reasoning_content;
    view.reasoning.append(delta.reasoning_content);
    view.thinking.hidden = false;
    got = true;
  }
  if (delta.content) {
    reply.content += delta.content;
    view.content.append(delta.content);
    got = true;
  }
  for (const call of delta.tool_calls || []) {
    const i = call.index || 0;
    if (!reply.tool_calls[i]) {
      reply.tool_calls[i] = { id: "", type: "function", function: { name: "", arguments: "" } };
      const node = element("div", "tool-call");
      view.calls[i] = node;
      view.tools.append(node);
    }
    const saved = reply.tool_calls[i];
    if (call.id) saved.id = call.id;
    if (call.function && call.function.name) saved.function.name += call.function.name;
    if (call.function && call.function.arguments) saved.function.arguments += call.function.arguments;
    view.calls[i].textContent = "tool call " + saved.function.name + "(" + saved.function.arguments + ")";
    got = true;
  }
  if (got) {
    stats.chunks++;
    if (!stats.first) stats.first = performance.now();
  }
  showLiveStats(stats);
  scrollDown(follow);
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("new-chat").disabled = busy;
  $("stop").disabled = !busy;
}

async function send() {
  const text = $("prompt").value;
  if (!text.trim() || controller) return;
  showError("");
  let body;
  conversation.push({ role: "user", content: text });
  try {
    body = buildRequest();
  } catch (e) {
    conversation.pop();
    showError(e.message);
    return;
  }
  saveSettings();
  const userBubble = addUserBubble(text);
  $("prompt").value = "";
  const view = addAssistantBubble();
  const reply = { role: "assistant", content: "", reasoning_content: "", tool_calls: [] };
  const stats = { start: performance.now(), first: 0, chunks: 0, usage: null, finish: null };
  controller = new AbortController();
  setBusy(true);
  showLiveStats(stats);
  try {
    const response = await fetch("v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    await readEvents(response, (data) => applyChunk(data, reply, view, stats));
    showFinalStats(stats, view);
  } catch (e) {
    const stopped = e.name === "AbortError";
    if (!stopped) {
      controller.abort();  // a bad chunk or an error event: drop the rest of the stream
      showError(e.message);
    }
    showFinalStats(stats, view);
    view.meta.textContent = (stopped ? "stopped" : "failed: " + e.message) +
                            (view.meta.textContent ? " · " + view.meta.textContent : "");
    view.meta.classList.toggle("failed", !stopped);
  } finally {
    controller = null;
    setBusy(false);
  }
  if (reply.content || reply.reasoning_content || reply.tool_calls.length) {
    // The reply goes back with the next turn, reasoning included (the server's chat template
    // decides what of it the model sees).
    const message = { role: "assistant", content: reply.content };
    if (reply.reasoning_content) message.reasoning_content = reply.reasoning_content;
    const calls = reply.tool_calls.filter(Boolean);
    if (calls.length) message.tool_calls = calls;
    conversation.push(message);
  } else {
    // Nothing came back: take the turn back so that the next one does not send two user
    // messages in a row, and give the text back to edit and resend.
    conversation.pop();
    userBubble.remove();
    view.node.remove();
    if (!$("prompt").value) $("prompt").value = text;
  }
  $("prompt").focus();
}

$("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("new-chat").addEventListener("click", () => {
  conversation.length = 0;
  $("messages").replaceChildren();
  $("stats").textContent = "";
  showError("");
  $("prompt").focus();
});
for (const id of SETTINGS) $(id).addEventListener("change", saveSettings);
$("api-key").addEventListener("change", () => { saveSettings(); loadModel(); });
loadSettings();
loadModel();
$("prompt").focus();
</script>
</body>
</html>
)html";

}  // namespace

std::string_view chat_page_html() { return kPage; }

const Headers& chat_page_headers() {
  static const Headers headers = {
      // The meta tag in the page says the same; only a header can forbid framing.
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'"},
      {"Cache-Control", "no-cache"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
  };
  return headers;
}

void handle_chat_page(Responder& responder) {
  responder.respond(200, kChatPageContentType, std::string(chat_page_html()),
                    chat_page_headers());
}

}  // namespace flint::server
