#!/usr/bin/python3
"""Compares flint's DSpark drafts with the independent numpy reference (dspark_reference.py).

Runs `flint generate CHECKPOINT --token-ids ... --temperature 0 --ignore-eos --max-tokens G
--speculative-config.method dspark --speculative-config.num_speculative_tokens N --print-drafts
--quant-simulation MODE` for a few prompts (one longer than the sliding window), parses the
JSON lines it prints, and for every draft line recomputes the drafts and confidences from the
final token sequence's first P tokens and the anchor (the target's features are computed once
per sequence, float64, prefill; the target is causal so a prefix is what flint had).

  /usr/bin/python3 compare_drafts.py --flint build/flint CHECKPOINT [--quant-simulation
      off|official|both] [--n 1,3,5] [--max-tokens 24] [--prompt-lengths 6,40,150] [--seed 7]
      [--skip-if-missing] [--verbose]
  /usr/bin/python3 compare_drafts.py --self-test CHECKPOINT [--quant-simulation ...]
      (no flint: the reference's own consistency, and the judge run on the reference in float32)

Per draft line (context P, anchor, drafts d_0.., confidences c_0.., accepted a) it checks:
  * the anchor is the sequence's token at P; 1 <= len(drafts) <= N; one confidence per draft;
  * drafts: the reference's z_k is evaluated on flint's own chain (prev_{k+1} = flint's d_k), so
    one disagreement does not spread; d_k must be z_k's argmax, or within TIE of it (then it is
    counted as a near-tie, not a failure);
  * |c_k - reference c_k| <= CONF, and their mean <= CONF_MEAN;
  * greedy verification: drafts[:a] are the next tokens, drafts[a] is not (where known), the
    next line of the prompt has context P + a + 1;
and per sample, that each generated token is the reference target's argmax (within TIE).
The block is the drafts' count long (llama.cpp's rule, spec:1202-1209), also for lines the
engine trimmed (--trimmed-block requested: N tokens instead).

Tolerances (see README.md; re-measured by --self-test, candidate = the reference in float32):
  off       float32 vs float64: |dconf| <= 1e-6, top-2 gaps of z unaffected. CONF 1e-4, TIE 1e-3.
  official  an FP8 rounding that flips between float32 and float64 moves a confidence by up to
            0.054 (flint) / 0.021 (float32 reference), mean 0.0014 / 0.0039: CONF 0.1,
            CONF_MEAN 0.01 (a systematic error of 0.02 in every confidence fails),
            TIE 0.05; drafts otherwise equal.
Exit codes: 0 within tolerance, 1 not, 77 (ctest SKIP_RETURN_CODE) when the checkpoint is
missing (with --skip-if-missing).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dspark_reference as dref  # noqa: E402
from compare_logits import SKIP, pseudo_random_ids  # noqa: E402
from dsv4_numerics import Ctx  # noqa: E402

TOL = {"off": dict(conf=1e-4, conf_mean=1e-5, tie=1e-3),
       "official": dict(conf=0.1, conf_mean=0.01, tie=0.05)}


# ----------------------------------------------------------------------------------------
# Running flint
# ----------------------------------------------------------------------------------------


def run_flint(flint, checkpoint, prompts, n, max_tokens, sim):
    cmd = [flint, "generate", checkpoint]
    for p in prompts:
        cmd += ["--token-ids", ",".join(map(str, p))]
    cmd += ["--temperature", "0", "--ignore-eos", "--max-tokens", str(max_tokens),
            "--speculative-config.method", "dspark",
            "--speculative-config.num_speculative_tokens", str(n),
            "--print-drafts", "--quant-simulation", sim,
            # the paged cache keeps exactly what the model computed (under `official` the model
            # itself rounds the KV rows to FP8, as the reference does)
            "--kv-cache-dtype", "float32"]
    t = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"flint failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-4000:]}")
        sys.exit(1)
    lines, samples = [], {}
    for raw in proc.stdout.splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            print(f"flint: not a JSON line on stdout: {raw[:200]!r}")
            sys.exit(1)
        if "tokens" in obj:
            samples[(obj["prompt"], obj.get("sample", 0))] = obj["tokens"]
        else:
            lines.append(obj)
    print(f"flint generate n={n} {sim}: {len(lines)} draft lines, {time.time() - t:.1f}s")
    return lines, samples


# ----------------------------------------------------------------------------------------
# The judge
# ----------------------------------------------------------------------------------------


class Stats:
    def __init__(self, label):
        self.label = label
        self.lines = self.positions = self.ties = self.mismatch = 0
        self.dconf = []
        self.gen = self.gen_ties = self.gen_mismatch = 0
        self.problems = []

    def add_problem(self, text):
        if len(self.problems) < 12:
            self.problems.append(text)
        elif len(self.problems) == 12:
            self.problems.append("...")

    def summary(self, tol):
        d = np.abs(np.array(self.dconf)) if self.dconf else np.zeros(1)
        over = int(np.sum(d > tol["conf"]))
        s = (f"{self.label}: {self.lines} lines, {self.positions} drafts; draft mismatches "
             f"{self.mismatch}, near-ties {self.ties}; |dconf| max {d.max():.3g} mean "
             f"{d.mean():.3g}, {over} over {tol['conf']:g}; generated tokens {self.gen}: "
             f"mismatches {self.gen_mismatch}, near-ties {self.gen_ties}")
        bad = []
        if self.mismatch:
            bad.append(f"{self.mismatch} drafts differ beyond the near-tie margin")
        if self.gen_mismatch:
            bad.append(f"{self.gen_mismatch} generated tokens are not the target's argmax")
        if over:
            bad.append(f"{over} of {len(d)} confidences differ by more than {tol['conf']:g}")
        if d.mean() > tol["conf_mean"]:
            bad.append(f"the confidences differ by {d.mean():.3g} on average, more than "
                       f"{tol['conf_mean']:g}")
        bad += [p for p in self.problems if p.startswith("FORMAT")]
        return s, bad


def judge_line(dsp, seq, line, n, ctx, tol, st, trimmed_block="drafts", verbose=False):
    """One draft line against the reference; updates st."""
    tokens = seq.ids
    P, anchor = int(line["context"]), int(line["anchor"])
    drafts, conf = [int(x) for x in line["drafts"]], [float(x) for x in line["confidence"]]
    tag = f"prompt {line.get('prompt')} P={P}"
    if not 1 <= P < len(tokens) or tokens[P] != anchor:
        st.add_problem(f"FORMAT {tag}: anchor {anchor} is not token {P} of the sequence")
        return
    if not 1 <= len(drafts) <= n or len(conf) != len(drafts):
        st.add_problem(f"FORMAT {tag}: {len(drafts)} drafts, {len(conf)} confidences, n={n}")
        return
    m = len(drafts) if trimmed_block == "drafts" else n
    out = dsp.draft(P, anchor, m, seq.rows, ctx, forced=drafts)
    st.lines += 1
    for k, d in enumerate(drafts):
        st.positions += 1
        st.dconf.append(conf[k] - out["confidence"][k])
        if d != out["drafts"][k]:
            gap = out["forced_gap"][k]
            if gap <= tol["tie"]:
                st.ties += 1
            else:
                st.mismatch += 1
                st.add_problem(f"{tag} k={k}: flint {d}, reference {out['drafts'][k]} "
                               f"(z gap {gap:.3g})")
    if verbose:
        print(f"  {tag} anchor {anchor}: flint {drafts} {np.round(conf, 6).tolist()}; reference "
              f"{out['drafts'][:len(drafts)]} {np.round(out['confidence'][:len(drafts)], 6).tolist()}")
    # greedy verification: accepted = the length of the prefix matching the next tokens
    a = int(line.get("accepted", -1))
    nxt = tokens[P + 1:P + 1 + len(drafts)]
    if not 0 <= a <= len(drafts) or drafts[:a] != nxt[:a] or \
            (a < len(drafts) and a < len(nxt) and drafts[a] == nxt[a]):
        st.add_problem(f"FORMAT {tag}: accepted {a} but drafts {drafts}, next tokens {nxt}")


def judge_sequence(dsp, seq, prompt_len, lines, n, ctx, tol, st, trimmed_block, verbose):
    for line in lines:
        judge_line(dsp, seq, line, n, ctx, tol, st, trimmed_block, verbose)
    # consecutive lines of a sample: the next context is P + accepted + 1
    for a, b in zip(lines[:-1], lines[1:]):
        if int(b["context"]) != int(a["context"]) + int(a.get("accepted", 0)) + 1:
            st.add_problem(f"FORMAT prompt {a.get('prompt')}: line at P={a['context']} accepted "
                           f"{a.get('accepted')}, next line at P={b['context']}")
    # lossless greedy decoding: generated token t is the target's argmax at t - 1
    tokens = seq.ids
    if len(tokens) > prompt_len:
        logits = dsp.model.logits(seq.hidden[prompt_len - 1:len(tokens) - 1], np.float64)
        for j, row in enumerate(logits):
            t = tokens[prompt_len + j]
            st.gen += 1
            best = int(np.argmax(row))
            if best != t:
                if row[best] - row[t] <= tol["tie"]:
                    st.gen_ties += 1
                else:
                    st.gen_mismatch += 1
                    st.add_problem(f"position {prompt_len + j}: generated {t}, target argmax "
                                   f"{best} (gap {row[best] - row[t]:.3g})")


def default_prompts(args, vocab):
    lengths = [int(x) for x in args.prompt_lengths.split(",")]
    return [[0] + pseudo_random_ids(L - 1, args.seed + i, vocab) for i, L in enumerate(lengths)]


def compare_flint(args, dsp, ns, sims):
    vocab = dsp.cfg.vocab_size
    prompts = default_prompts(args, vocab)
    all_bad = []
    for sim in sims:
        ctx = Ctx(np.float64, sim == "official")
        cache = {}
        for n in ns:
            lines, samples = run_flint(args.flint, args.checkpoint, prompts, n, args.max_tokens,
                                       sim)
            st = Stats(f"{sim} n={n}")
            t = time.process_time()
            for i, prompt in enumerate(prompts):
                tokens = samples.get((i, 0))
                if tokens is None or tokens[:len(prompt)] != prompt:
                    st.add_problem(f"FORMAT prompt {i}: no tokens line, or it does not start "
                                   f"with the prompt")
                    continue
                key = tuple(tokens)
                if key not in cache:
                    cache[key] = dref.Sequence(dsp, tokens, ctx)
                mine = [x for x in lines if x.get("prompt") == i and x.get("sample", 0) == 0]
                judge_sequence(dsp, cache[key], len(prompt), mine, n, ctx, TOL[sim], st,
                               args.trimmed_block, args.verbose)
            s, bad = st.summary(TOL[sim])
            print(s + f" (reference {time.process_time() - t:.1f}s cpu)")
            for p in st.problems:
                print("   " + p)
            all_bad += [f"{sim} n={n}: {b}" for b in bad]
    return all_bad


# ----------------------------------------------------------------------------------------
# Self-test: the reference against itself
# ----------------------------------------------------------------------------------------


def dense_block_attention(dsp):
    """An independent formulation of the block's attention (every context row 0..P-1 as a key,
    masked by position, softmax with the sink as an extra column): must equal block_attention."""
    from dsv4_numerics import rms_norm

    def attn(self, stage, x, P, rows, ctx):
        cfg, a = self.cfg, stage["attn"]
        n, rd = len(x), cfg.rope_head_dim
        pos = P + np.arange(n)
        qr = rms_norm(a["wq_a"](x, ctx), a["q_norm"], cfg.norm_eps)
        q = a["wq_b"](qr, ctx).reshape(n, cfg.n_heads, cfg.head_dim)
        q = rms_norm(q, None, cfg.norm_eps)
        q[..., -rd:] = a["rope"].apply(q[..., -rd:], pos)
        keys = np.concatenate([rows[:P], self.stage_kv(stage, x, pos, ctx)])
        kpos = np.concatenate([np.arange(P), pos])
        is_ctx = np.arange(len(keys)) < P
        ok = ~is_ctx[None, :] | (pos[:, None] - kpos[None, :] < cfg.window)
        s = np.einsum("nhd,kd->nhk", q, keys) * cfg.head_dim ** -0.5
        s = np.where(ok[:, None, :], s, -np.inf)
        s = np.concatenate([s, np.broadcast_to(a["sink"][None, :, None], (n, cfg.n_heads, 1))], -1)
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        o = np.einsum("nhk,kd->nhd", p[..., :-1], keys)
        o[..., -rd:] = a["rope"].apply(o[..., -rd:], pos, inverse=True)
        g = cfg.o_groups
        o = np.einsum("ngd,grd->ngr", o.reshape(n, g, -1), a["wo_a"].w.reshape(g, cfg.o_lora_rank, -1))
        return a["wo_b"](o.reshape(n, -1), ctx)
    return attn


def self_test(args, ns, sims):
    bad = []
    d64 = dref.DSpark(args.checkpoint, np.float64)
    d32 = dref.DSpark(args.checkpoint, np.float32)
    vocab, win = d64.cfg.vocab_size, d64.cfg.window
    L = max(int(x) for x in args.prompt_lengths.split(",")) + args.max_tokens
    ids = [0] + pseudo_random_ids(L - 1, args.seed, vocab)
    contexts = sorted({1, 2, 7, win - 2, win - 1, win, win + 1, win + 2, L - 2} & set(range(1, L)))
    for sim in sims:
        official = sim == "official"
        c64, c32 = Ctx(np.float64, official), Ctx(np.float32, official)
        t = time.process_time()
        seq = dref.Sequence(d64, ids, c64)
        # 1. the target's features and context rows: prefill == token by token == chunks of 37
        for mode, kw in (("incremental", dict(prefill_len=5)), ("chunked", dict(chunk=37))):
            other = dref.Sequence(d64, ids, Ctx(np.float64, official), mode, **kw)
            df = max(float(np.max(np.abs(a - b))) for a, b in zip(seq.rows, other.rows))
            df = max(df, float(np.max(np.abs(seq.feats - other.feats))))
            lim = 1e-12 if not official else 1e-9
            print(f"self-test {sim}: features and context rows, prefill vs {mode}: max diff "
                  f"{df:.3g}")
            if df > lim:
                bad.append(f"{sim}: prefill vs {mode} context rows differ by {df:.3g}")
        # 2. block attention == the dense formulation; 3. the window: a context row just out of
        # every query's window changes nothing, the oldest one in it changes the drafts
        orig = dref.DSpark.block_attention
        for P in contexts:
            n = max(ns)
            a = d64.draft(P, ids[P], n, seq.rows, c64)
            dref.DSpark.block_attention = dense_block_attention(d64)
            try:
                b = d64.draft(P, ids[P], n, seq.rows, c64)
            finally:
                dref.DSpark.block_attention = orig
            diff = float(np.max(np.abs(a["U"] - b["U"])))
            if a["drafts"] != b["drafts"] or diff > 1e-9:
                bad.append(f"{sim} P={P}: dense attention differs (U max diff {diff:.3g})")
            if P - win >= 0:
                for c, must_change in ((P - win, False), (P - win + 1, True)):
                    rows = [r.copy() for r in seq.rows]
                    for r in rows:
                        r[c] *= -3.0
                    e = d64.draft(P, ids[P], n, rows, c64)
                    changed = float(np.max(np.abs(e["U"] - a["U"]))) > 1e-9
                    if changed != must_change:
                        bad.append(f"{sim} P={P}: changing context row {c} "
                                   f"{'did not change' if must_change else 'changed'} the drafts")
        print(f"self-test {sim}: block attention == dense formulation, window edges at "
              f"{[P for P in contexts if P >= win]} ({time.process_time() - t:.1f}s cpu)")
        # 4. the judge on the reference in float32 (target fed in chunks of 37, as an engine
        # would): measures the float32 noise behind the tolerances
        s32 = dref.Sequence(d32, ids, c32, "chunked", chunk=37)
        for n in ns:
            st = Stats(f"self-test {sim} n={n} (candidate: float32 reference)")
            lines = []
            for P in contexts:
                o = d32.draft(P, ids[P], n, s32.rows, c32)
                a = 0
                while a < n and P + 1 + a < len(ids) and o["drafts"][a] == ids[P + 1 + a]:
                    a += 1
                lines.append(dict(prompt=0, context=P, anchor=ids[P], drafts=o["drafts"],
                                  confidence=o["confidence"], accepted=a))
            for line in lines:
                judge_line(d64, seq, line, n, c64, TOL[sim], st)
            s, b = st.summary(TOL[sim])
            print(s)
            for p in st.problems:
                print("   " + p)
            bad += [f"{st.label}: {x}" for x in b]
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="a DSpark checkpoint (flint make-tiny --preset tiny-dspark)")
    who = ap.add_mutually_exclusive_group(required=True)
    who.add_argument("--flint", help="path of the flint executable")
    who.add_argument("--self-test", action="store_true", help="no flint: reference consistency")
    ap.add_argument("--quant-simulation", choices=["off", "official", "both"], default="off")
    ap.add_argument("--n", default="1,3,5", help="num_speculative_tokens values")
    ap.add_argument("--max-tokens", type=int, default=24, help="tokens generated per prompt")
    ap.add_argument("--prompt-lengths", default="6,40,150",
                    help="prompt lengths (pseudo-random ids after a BOS 0)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--trimmed-block", choices=["drafts", "requested"], default="drafts",
                    help="block length for lines with fewer drafts than asked")
    ap.add_argument("--skip-if-missing", action="store_true",
                    help="exit 77 (ctest skip) when CHECKPOINT has no config.json")
    ap.add_argument("--verbose", action="store_true", help="print every line")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.checkpoint, "config.json")):
        print(f"{args.checkpoint}: no config.json (checkpoint not made?)")
        return SKIP if args.skip_if_missing else 1
    ns = [int(x) for x in args.n.split(",")]
    sims = ["off", "official"] if args.quant_simulation == "both" else [args.quant_simulation]
    t = time.time()
    if args.self_test:
        bad = self_test(args, ns, sims)
    else:
        dsp = dref.DSpark(args.checkpoint, np.float64)
        if max(ns) > dsp.ds.block_size:
            ap.error(f"--n above the block size {dsp.ds.block_size}")
        bad = compare_flint(args, dsp, ns, sims)
    print(f"total {time.time() - t:.1f}s")
    if bad:
        print("FAIL: " + "; ".join(bad))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
