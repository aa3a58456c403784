#!/usr/bin/python3
"""Compares `flint logits` with model.py's eval forward on an exported checkpoint.

  /usr/bin/python3 tools/train/compare_flint.py MODEL_DIR --flint build/flint [--n 300]
      [--seeds 1,2] [--text-file val.txt] [--dtypes float32,float64] [--quant official|off]
      [--mtp N] [--dspark N]

Sequences: pseudo-random token ids (seeded) and, with --text-file, held-out text tokenized by
data.py; each longer than the 128-token window so compression and the indexer act. Prints per
sequence and dtype the max / mean absolute difference, the max relative difference
(|a - b| / max|b| per position), and the share of positions with the same argmax. Tolerances of
tests/reference/README.md (official): mean <= 0.025 and same argmax >= 93% for a correct engine;
(off): max <= 1e-3, mean <= 1e-5, argmax >= 99%.
--mtp N (a model with mtp.0, train_mtp.py): per sequence, N greedy tokens with and without
`--speculative-config '{"method":"mtp","num_speculative_tokens":1}'` must be the same ids, and
each draft flint verified should be the torch MTP layer's argmax at its position (up to
near-ties under official roundings); prints the acceptance.
--dspark N (a model with DSpark stages, train_dspark.py): the same with
`--speculative-config '{"method":"dspark","num_speculative_tokens":B}'` (B: the block size); each
draft line's drafts should be the torch draft's (export.eval_dspark_drafts from the same anchor).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export as E  # noqa: E402


def flint_logits(flint, model_dir, ids, quant, threads):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "l.npy")
        cmd = ["nice", "-n", "19", flint, "logits", model_dir, "--token-ids", ",".join(map(str, ids)),
               "--output", out, "--quant-simulation", quant, "--log-level", "warning",
               "--threads", str(threads)]
        subprocess.run(cmd, check=True)
        return np.load(out)


def flint_generate(flint, model_dir, ids, n, threads, spec):
    """spec: None or a --speculative-config JSON object."""
    cmd = ["nice", "-n", "19", flint, "generate", model_dir, "--token-ids", ",".join(map(str, ids)),
           "-n", str(n), "--log-level", "warning", "--threads", str(threads)]
    if spec:
        cmd += ["--print-drafts", "--speculative-config", json.dumps(spec)]
    else:
        cmd += ["--print-ids"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    if not spec:
        return [int(t) for t in out.split(",") if t.strip()], None
    drafts, tokens = [], None
    for line in out.splitlines():
        j = json.loads(line)
        if "drafts" in j:
            drafts.append(j)
        elif "tokens" in j:
            tokens = j["tokens"]
    return tokens[len(ids):], drafts


def check_mtp(flint, model_dir, model, ids, n, threads):
    """Greedy MTP-1 speculation in flint against the torch MTP layer: lossless (same ids as
    without speculation), and every draft flint verified is the torch MTP argmax at its
    position (anchor at position `context`: the MTP row context - 1)."""
    plain, _ = flint_generate(flint, model_dir, ids, n, threads, None)
    spec, drafts = flint_generate(flint, model_dir, ids, n, threads,
                                  {"method": "mtp", "num_speculative_tokens": 1})
    seq = ids + spec
    pred = E.eval_mtp_logits(model, seq).argmax(1)
    same = sum(int(d["drafts"][0] == pred[d["context"] - 1]) for d in drafts)
    acc = sum(d["accepted"] for d in drafts)
    return dict(lossless=plain == spec, drafts=len(drafts), accepted=acc,
                same_draft=same / max(1, len(drafts)))


def check_dspark(flint, model_dir, model, ids, n, threads, tie=1e-2):
    """Greedy DSpark speculation (block-size drafts) in flint against the torch draft: lossless,
    and each draft line's drafts equal the torch drafts from the same context and anchor
    (a difference where the torch margin is below `tie` counts as a near-tie)."""
    k = model.cfg.dspark_block_size
    plain, _ = flint_generate(flint, model_dir, ids, n, threads, None)
    spec, lines = flint_generate(flint, model_dir, ids, n, threads,
                                 {"method": "dspark", "num_speculative_tokens": k})
    seq = ids + spec
    same = ties = total = 0
    for d in lines:
        P = d["context"]
        ref = E.eval_dspark_drafts(model, seq[:P], anchor=seq[P], n=len(d["drafts"]))
        for j, t in enumerate(d["drafts"]):
            total += 1
            if t == ref["drafts"][j]:
                same += 1
            elif ref["margin"][j] < tie:
                ties += 1
            else:
                break           # later drafts follow a different prefix
    return dict(lossless=plain == spec, lines=len(lines), drafts=total, same=same, ties=ties,
                accepted=sum(d["accepted"] for d in lines))


def stats(a, b):
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    rel = d.max(axis=1) / np.maximum(np.abs(b).max(axis=1), 1e-30)
    return dict(max=float(d.max()), mean=float(d.mean()), rel=float(rel.max()),
                argmax=float(np.mean(a.argmax(1) == b.argmax(1))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--flint", required=True)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--text-file")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--quant", default="official", choices=["official", "off"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mtp", type=int, default=0, metavar="N",
                    help="also check MTP speculation (model with mtp.0): generate N tokens greedily "
                         "from each sequence with and without it")
    ap.add_argument("--dspark", type=int, default=0, metavar="N",
                    help="also check DSpark speculation (model with DSpark stages): N tokens")
    args = ap.parse_args()
    model = E.read_back(args.model_dir)
    model.quant.acts = args.quant == "official"
    vocab = model.cfg.vocab_size
    seqs = []
    for s in (int(x) for x in args.seeds.split(",") if x):
        rng = np.random.default_rng(s)
        seqs.append((f"random seed {s}", [0] + rng.integers(3, vocab - 64, args.n - 1).tolist()))
    if args.text_file:
        import data as D
        tok = D.Tokenizer(D.load_merges(args.model_dir))
        ids = tok.encode(open(args.text_file, encoding="utf-8").read()[:20000])
        for k in range(2):
            seqs.append((f"text part {k}", [0] + ids[k * args.n:(k + 1) * args.n - 1]))
    results = []
    for name, ids in seqs:
        fl = flint_logits(args.flint, args.model_dir, ids, args.quant, args.threads)
        for dt in args.dtypes.split(","):
            ref = E.eval_logits(model, ids, getattr(torch, dt))
            st = stats(fl, ref)
            results.append(dict(seq=name, dtype=dt, n=len(ids), **st))
            print(f"{name:16s} n={len(ids)} torch {dt}: max abs {st['max']:.3g}, mean abs "
                  f"{st['mean']:.3g}, max rel {st['rel']:.3g}, same argmax {100 * st['argmax']:.1f}%",
                  flush=True)
        if "float32" in args.dtypes and "float64" in args.dtypes:
            a = E.eval_logits(model, ids, torch.float32)
            b = E.eval_logits(model, ids, torch.float64)
            st = stats(a, b)
            print(f"{name:16s} torch float32 vs float64: max abs {st['max']:.3g}, mean abs "
                  f"{st['mean']:.3g}, same argmax {100 * st['argmax']:.1f}%", flush=True)
        if args.mtp:
            r = check_mtp(args.flint, args.model_dir, model, ids, args.mtp, args.threads)
            results.append(dict(seq=name, mtp=r))
            print(f"{name:16s} MTP-1 greedy, {args.mtp} tokens: lossless {r['lossless']}, "
                  f"{r['accepted']} of {r['drafts']} drafts accepted, flint drafts = torch MTP "
                  f"argmax {100 * r['same_draft']:.1f}%", flush=True)
        if args.dspark:
            r = check_dspark(args.flint, args.model_dir, model, ids, args.dspark, args.threads)
            results.append(dict(seq=name, dspark=r))
            print(f"{name:16s} DSpark greedy, {args.dspark} tokens: lossless {r['lossless']}, "
                  f"{r['accepted']} accepted in {r['lines']} steps, flint drafts = torch drafts "
                  f"{r['same']} of {r['drafts']} compared ({r['ties']} near-ties)", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
