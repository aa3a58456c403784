#!/usr/bin/python3
"""flint on the trained demo model (models/, made by tools/train) against the training program's
own numbers, which tools/train/export.py wrote next to the weights (golden/): Debian's python3
and numpy only, no torch.

  check_trained_model.py --flint FLINT --model DIR [--logits] [--perplexity] [--dspark-golden]
      [--speculative METHOD:K,K,...] [--min-accepted A]

--logits         `flint logits` on golden/ids_K.json vs golden/logits_K.npy (the torch eval
                 forward, float32, official roundings): the forward-pass tests' bound (mean
                 abs <= 0.025, same argmax >= 93%; tests/reference/README.md), and a tighter
                 same-argmax floor (99%) since a trained model has clear winners.
--perplexity     `flint perplexity` on golden/heldout.i32 (held-out ids) vs
                 golden/perplexity.json: mean NLL within 0.5% (official roundings may flip).
--dspark-golden  the first draft line of `flint generate --print-drafts` after each golden
                 prompt vs golden/dspark_K.json (anchor, block-size drafts; a draft may differ
                 only where the torch margin is below 0.01, confidences within 0.02).
--speculative    greedy decoding of held-out prompts with METHOD and each K must give plain
                 decoding's ids, and accept at least --min-accepted drafts per verification
                 step on average (a trained head; random heads accept almost nothing).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tools", "train"))
from speculation_table import generate  # noqa: E402  (flint generate, greedy, batched)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p.stdout


def golden_prompts(model):
    g = os.path.join(model, "golden")
    k = 0
    while os.path.exists(os.path.join(g, f"ids_{k}.json")):
        with open(os.path.join(g, f"ids_{k}.json")) as f:
            yield k, json.load(f)["ids"]
        k += 1


def check_logits(flint, model):
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, ids in golden_prompts(model):
            out = os.path.join(tmp, "l.npy")
            run([flint, "logits", model, "--token-ids", ",".join(map(str, ids)), "--output", out,
                 "--quant-simulation", "official", "--log-level", "warning"])
            got = np.load(out).astype(np.float64)
            want = np.load(os.path.join(model, "golden", f"logits_{k}.npy")).astype(np.float64)
            d = np.abs(got - want)
            same = float(np.mean(got.argmax(1) == want.argmax(1)))
            print(f"logits prompt {k} ({len(ids)} tokens): max abs {d.max():.3g}, mean abs "
                  f"{d.mean():.3g}, same argmax {100 * same:.1f}%")
            if d.mean() > 0.025 or same < 0.99:
                bad.append(f"logits prompt {k}")
    return bad


def check_perplexity(flint, model):
    with open(os.path.join(model, "golden", "perplexity.json")) as f:
        want = json.load(f)
    out = run([flint, "perplexity", model, os.path.join(model, "golden", want["file"]),
               "--format", "i32", "--context", str(want["context"]), "--windows",
               str(want["windows"]), "--json", "--quant-simulation", "official",
               "--log-level", "warning"])
    got = json.loads(out)
    rel = abs(got["mean_nll"] - want["mean_nll"]) / want["mean_nll"]
    print(f"perplexity: flint {got['perplexity']:.3f} (mean NLL {got['mean_nll']:.5f}), training "
          f"program {want['perplexity']:.3f} ({want['mean_nll']:.5f}): {100 * rel:.3f}% apart")
    return ["perplexity"] if rel > 0.005 or got["windows"] != want["windows"] else []


def check_dspark_golden(flint, model):
    bad = []
    for k, ids in golden_prompts(model):
        with open(os.path.join(model, "golden", f"dspark_{k}.json")) as f:
            want = json.load(f)
        n = len(want["drafts"])
        _, lines = generate(flint, model, [ids], 2 * n + 2, 0,
                            {"method": "dspark", "num_speculative_tokens": n})
        first = lines[0]
        ok = first["context"] == want["context"] and first["anchor"] == want["anchor"]
        for j, (a, b) in enumerate(zip(first["drafts"], want["drafts"])):
            if a != b:
                ok = ok and want["margin"][j] < 0.01
                break           # later drafts follow a different token
            ok = ok and abs(first["confidence"][j] - want["confidence"][j]) <= 0.02
        print(f"DSpark prompt {k}: flint anchor {first['anchor']} drafts {first['drafts']}, "
              f"training program anchor {want['anchor']} drafts {want['drafts']}: "
              f"{'same' if ok else 'DIFFERENT'}")
        if not ok or len(first["drafts"]) != n:
            bad.append(f"DSpark golden prompt {k}")
    return bad


def check_speculative(flint, model, spec, floor):
    method, _, ks = spec.partition(":")
    heldout = np.fromfile(os.path.join(model, "golden", "heldout.i32"), dtype="<i4")
    prompts = [[0] + heldout[s:s + 47].tolist() for s in (0, 4000, 8000, 12000)]
    plain, _ = generate(flint, model, prompts, 40, 0, None)
    bad = []
    for k in (int(x) for x in ks.split(",")):
        out, lines = generate(flint, model, prompts, 40, 0,
                              {"method": method, "num_speculative_tokens": k})
        proposed = sum(len(d["drafts"]) for d in lines)
        accepted = sum(d["accepted"] for d in lines)
        rate = accepted / max(1, proposed)
        print(f"{method} k={k}: lossless {out == plain}, {accepted} of {proposed} drafts accepted "
              f"({100 * rate:.1f}%), {accepted / max(1, len(lines)):.2f} per step")
        if out != plain:
            bad.append(f"{method} k={k} differs from plain decoding")
        per_step = accepted / max(1, len(lines))
        if per_step < floor:
            bad.append(f"{method} k={k} accepted {per_step:.2f} drafts per step < {floor}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flint", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--logits", action="store_true")
    ap.add_argument("--perplexity", action="store_true")
    ap.add_argument("--dspark-golden", action="store_true")
    ap.add_argument("--speculative", action="append", default=[], metavar="METHOD:K,K")
    ap.add_argument("--min-accepted", type=float, default=0.25)
    args = ap.parse_args()
    bad = []
    if args.logits:
        bad += check_logits(args.flint, args.model)
    if args.perplexity:
        bad += check_perplexity(args.flint, args.model)
    if args.dspark_golden:
        bad += check_dspark_golden(args.flint, args.model)
    for spec in args.speculative:
        bad += check_speculative(args.flint, args.model, spec, args.min_accepted)
    if bad:
        print("FAIL: " + "; ".join(bad))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
