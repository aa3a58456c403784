// Shared by the chat-page tests: headless Chromium through puppeteer-core (never a downloaded
// browser), a watch on what the page logs and fetches, and small bounded-wait helpers.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

// ctest's SKIP_RETURN_CODE for these tests (tests/web/CMakeLists.txt).
export const SKIP = 77;

export function skip(reason) {
  console.log(`SKIPPED: ${reason}`);
  process.exit(SKIP);
}

export function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

// FLINT_CHROMIUM, else the first of Debian's and the usual names on PATH.
export function findChromium() {
  if (process.env.FLINT_CHROMIUM) return process.env.FLINT_CHROMIUM;
  if (fs.existsSync("/usr/bin/chromium")) return "/usr/bin/chromium";
  for (const name of ["chromium", "chromium-browser", "google-chrome"]) {
    try {
      return execFileSync("which", [name], { encoding: "utf8" }).trim();
    } catch {
      // not on PATH
    }
  }
  return null;
}

// puppeteer-core from the npm fixtures folder (FLINT_NPM_DIR: a node_modules directory), or a
// skip when it or Chromium is missing: the test needs both and neither is part of the build.
export async function launchBrowser(npmDir) {
  let puppeteer;
  try {
    puppeteer = createRequire(path.resolve(npmDir, "..", "noop.js"))("puppeteer-core");
  } catch (e) {
    if (e.code !== "MODULE_NOT_FOUND") throw e;
    skip(`puppeteer-core not installed in ${npmDir} (run scripts/setup.sh)`);
  }
  const executablePath = findChromium();
  if (!executablePath) skip("chromium not installed (apt-get install chromium)");
  return puppeteer.launch({
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--headless=new", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update"],
  });
}

// Records the page's console errors, uncaught exceptions, failed loads and every request that
// leaves `origin` (the page must fetch nothing from elsewhere).
export function watchPage(page, origin) {
  const seen = { errors: [], external: [], requests: [] };
  page.on("console", (m) => {
    if (m.type() === "error") seen.errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => seen.errors.push(`page error: ${e.message}`));
  page.on("request", (r) => {
    const url = r.url();
    seen.requests.push(r);
    if (!url.startsWith(origin + "/") && !url.startsWith("data:")) seen.external.push(url);
  });
  return seen;
}

// The requests a test expects to fail (a 4xx it provoked) are logged by Chromium as console
// errors "Failed to load resource: ... 4xx"; `allowed` lists regexps of those.
export function checkClean(seen, allowed = []) {
  const errors = seen.errors.filter((e) => !allowed.some((re) => re.test(e)));
  if (errors.length) fail(`the page logged errors:\n  ${errors.join("\n  ")}`);
  if (seen.external.length) fail(`the page made external requests:\n  ${seen.external.join("\n  ")}`);
}

// Polls `probe` (async, returns a truthy value when done) every 50 ms for up to `ms`.
export async function until(what, ms, probe) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) fail(`timed out after ${ms / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Sets a settings field the way a user does (the page saves settings on "change").
export async function setField(page, selector, value) {
  await page.$eval(
    selector,
    (el, v) => {
      el.value = v;
      el.dispatchEvent(new Event("change", { bubbles: true }));
    },
    value,
  );
}

// Types a message and presses Enter (the page sends on Enter).
export async function sendMessage(page, text) {
  await page.focus("#prompt");
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
}

// The text of the last assistant bubble: {content, reasoning, tools, meta}.
export async function lastReply(page) {
  return page.evaluate(() => {
    const all = document.querySelectorAll("#messages .assistant");
    const last = all[all.length - 1];
    if (!last) return null;
    const text = (s) => last.querySelector(s)?.textContent ?? "";
    return { content: text(".content"), reasoning: text(".reasoning"), tools: text(".tool-calls"),
             meta: text(".meta"), count: all.length };
  });
}

export const text = (page, selector) => page.$eval(selector, (el) => el.textContent);
