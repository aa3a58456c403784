#!/usr/bin/python3
"""`flint perplexity` against the numpy reference: the same windows scored by
dsv4_reference.py (float64) give the same mean negative log-likelihood.

Token ids go to flint as a raw i32 file (--format i32); two windows of 150 tokens (each
crosses the 128-token window and a ratio-128 block boundary at 128), plus --windows 3 spread
as a training program's held-out evaluation. With --quant-simulation off the two differ by
float32 noise only (the logits agree to ~1e-6, tests/reference/README.md): 1e-5 nats.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4_reference as ref  # noqa: E402

SKIP = 77


def reference_nll(model, ids, starts, context, official):
    total = 0.0
    for s in starts:
        window = ids[s:s + context + 1]
        hidden, _ = ref.run(model, window[:-1], ref.Ctx(np.float64, official), "prefill")
        logits = model.logits(hidden, np.float64)
        m = logits.max(axis=1, keepdims=True)
        logp = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
        total += -logp[np.arange(context), np.asarray(window[1:])].sum()
    return total / (len(starts) * context)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--flint", required=True)
    ap.add_argument("--skip-if-missing", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.checkpoint, "config.json")):
        print(f"{args.checkpoint}: no config.json (checkpoint not made?)")
        return SKIP if args.skip_if_missing else 1
    model = ref.Model(args.checkpoint, np.float64)
    vocab = model.cfg.vocab_size
    rng = np.random.default_rng(5)
    ids = [int(x) for x in rng.integers(0, vocab, 340)]
    context = 150
    bad = []
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "tokens.i32")
        np.asarray(ids, dtype="<i4").tofile(path)
        for windows, starts in ((0, [0, 150]), (3, [0, 63, 126])):
            for sim in ("off", "official"):
                out = subprocess.run(
                    [args.flint, "perplexity", args.checkpoint, path, "--format", "i32",
                     "--context", str(context), "--windows", str(windows), "--json",
                     "--quant-simulation", sim], capture_output=True, text=True, check=True)
                got = json.loads(out.stdout)
                want = reference_nll(model, ids, starts, context, sim == "official")
                diff = abs(got["mean_nll"] - want)
                # official: the roundings may flip near a boundary (the reference's mean-logit
                # bound 0.025 is far looser than what a window's mean NLL shows).
                tol = 1e-5 if sim == "off" else 5e-3
                print(f"windows {windows or 'all'} {sim}: flint {got['mean_nll']:.7f} "
                      f"reference {want:.7f} diff {diff:.2e} (limit {tol:g}), "
                      f"{got['windows']} windows, perplexity {got['perplexity']:.2f}")
                if got["windows"] != len(starts) or diff > tol:
                    bad.append(f"windows {windows} {sim}")
    if bad:
        print("FAIL: " + ", ".join(bad))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
