#!/usr/bin/python3
"""Teacher-forced, layer-by-layer comparison of an engine's dump with the reference.

For each layer L the reference runs block L (prefill, fresh state) on the CANDIDATE's own input
streams `L{L}.streams_in` and compares its output with the candidate's next streams
(`L{L+1}.streams_in`, or `final_streams` after the last layer); the head is checked from the
candidate's `final_streams`. Each layer is then judged on its own, without the differences of
earlier layers: with --quant-simulation official this is far tighter than comparing logits,
where one FP8 rounding that flips between float32 and float64 spreads through all later layers
and positions (see compare_logits.py).

Dump contract (npz, float32 or float64, positions in sequence order, all tokens of the run):
  L{L}.streams_in  [n, hc_mult, hidden] for L = 0 .. num_hidden_layers-1  (input of layer L)
  final_streams    [n, hc_mult, hidden]                                   (after the last layer)
  logits           [n, vocab]                                             (optional)
dsv4_reference.py --dump writes these keys (and more).

  /usr/bin/python3 compare_layers.py CHECKPOINT --dump FLINT_DUMP.npz --token-ids ...
      [--quant-simulation official|off]
  /usr/bin/python3 compare_layers.py CHECKPOINT --flint build/flint [--incremental] [--seeds 7,8]
      (runs `flint logits ... --dump D.npz`; exit 77 while `flint logits --help` has no --dump)
  /usr/bin/python3 compare_layers.py CHECKPOINT --self-test [--n-tokens 320 --seeds 7,8]
      (candidate = the reference in float32)

Tolerance. The relative difference of a position is max |ref - cand| / max |ref| over its
streams. off (and the head in both modes): every position <= 1e-4 (float32 engines measure
~3e-7). official: a float32 engine still flips an FP8 rounding now and then, and inside the
layer that flip spreads to later positions through attention and the next roundings, so the
statistic is the fraction of positions over 1e-3 in a layer. Measured float32-vs-float64 in 32
layer checks (8 checkpoint/sequence pairs): 0-3%, except 32% and 52% where a flip hit one of the
first positions; leaving out one group of roundings gives 63-100% in every affected layer. So:
with one sequence a layer fails over 60%; with several (--seeds) the smallest fraction over the
sequences must stay <= 20% (an early flip rarely hits the same layer in every sequence).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4_reference as ref  # noqa: E402
from compare_logits import SKIP, flint_has_command, pseudo_random_ids  # noqa: E402

REL_OFF = 1e-4
REL_OFFICIAL = 1e-3
FRACTION_ONE_SEQUENCE = 0.60
FRACTION_SEVERAL = 0.20


def rel_per_position(r, c):
    r = r.reshape(len(r), -1)
    c = c.reshape(len(c), -1).astype(np.float64)
    return np.abs(r - c).max(axis=1) / np.maximum(np.abs(r).max(axis=1), 1e-30)


def describe(name, rel, limit):
    over = np.nonzero(rel > limit)[0]
    print(f"{name:>8}: rel diff median {np.median(rel):.2g}, 99% {np.quantile(rel, 0.99):.2g}, "
          f"max {rel.max():.2g} (position {int(rel.argmax())}); {len(over)} positions over "
          f"{limit:g}" + (f", first {over[:6].tolist()}" if len(over) else ""))
    return len(over) / len(rel)


def candidate_streams(args, model, ids, official):
    """The candidate's dump as a dict of arrays (see the dump contract above)."""
    if args.self_test:
        m32 = ref.Model(args.checkpoint, np.float32)
        ctx = ref.Ctx(np.float32, official, dump=True)
        hidden, _ = ref.run(m32, ids, ctx)
        cand = {k: np.concatenate(v) for k, v in ctx.dump.items()
                if k.endswith("streams_in") or k == "final_streams"}
        cand["logits"] = m32.logits(hidden)
        return cand
    if args.dump:
        return dict(np.load(args.dump))
    work = tempfile.mkdtemp(prefix="flint_layers_")
    try:
        dump = os.path.join(work, "dump.npz")
        cmd = [args.flint, "logits", args.checkpoint, "--token-ids", ",".join(map(str, ids)),
               "--output", os.path.join(work, "logits.npy"), "--dump", dump,
               "--quant-simulation", args.quant_simulation]
        if args.incremental:
            cmd.append("--incremental")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"flint failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        cand = dict(np.load(dump))
        if "logits" not in cand:
            cand["logits"] = np.load(os.path.join(work, "logits.npy"))
        return cand
    finally:
        shutil.rmtree(work, ignore_errors=True)


def layer_fractions(model, cand, ids, official):
    """Teacher-forced check of every layer and the head; returns ({layer: fraction of positions
    over the official limit}, [names that broke a hard limit])."""
    cfg = model.cfg
    fractions, broken = {}, []
    for layer in range(cfg.n_layers):
        x = cand[f"L{layer}.streams_in"].astype(np.float64)
        want = cand[f"L{layer + 1}.streams_in" if layer + 1 < cfg.n_layers else "final_streams"]
        if x.shape != (len(ids), cfg.hc_mult, cfg.dim) or want.shape != x.shape:
            raise ValueError(f"layer {layer}: dump shapes {x.shape} / {want.shape}, expected "
                             f"{(len(ids), cfg.hc_mult, cfg.dim)}")
        got = ref.block(model.w.layers[layer], cfg, x, 0, ids, model.new_state()[layer],
                        ref.Ctx(np.float64, official))
        rel = rel_per_position(got, want)
        frac = describe(f"layer {layer}", rel, REL_OFFICIAL if official else REL_OFF)
        if official:
            fractions[layer] = frac
        elif frac > 0:
            broken.append(f"layer {layer}")
    if "logits" in cand:
        final = cand["final_streams"].astype(np.float64)
        hidden = ref.rms_norm(ref.hc_head(final, model.w.hc_head, cfg), model.w.norm, cfg.norm_eps)
        rel = rel_per_position(model.logits(hidden, np.float64), cand["logits"])
        if describe("head", rel, REL_OFF) > 0:
            broken.append("head")
    return fractions, broken


def flint_dumps(flint):
    if not flint_has_command(flint, "logits"):
        return False
    out = subprocess.run([flint, "logits", "--help"], capture_output=True, text=True, timeout=60)
    return "--dump" in out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    who = ap.add_mutually_exclusive_group(required=True)
    who.add_argument("--dump", help="the candidate's dump (.npz)")
    who.add_argument("--self-test", action="store_true")
    who.add_argument("--flint", help="run this flint executable with --dump")
    ap.add_argument("--incremental", action="store_true", help="flint runs token by token")
    ap.add_argument("--skip-if-missing", action="store_true",
                    help="exit 77 (ctest skip) when CHECKPOINT has no config.json")
    ap.add_argument("--token-ids")
    ap.add_argument("--n-tokens", type=int, default=320)
    ap.add_argument("--seeds", default="7", help="comma list: one run per pseudo-random sequence")
    ap.add_argument("--quant-simulation", choices=["official", "off"], default="official")
    args = ap.parse_args()
    official = args.quant_simulation == "official"
    if args.flint and not flint_dumps(args.flint):
        print(f"{args.flint} has no `logits --dump` yet: skipped")
        return SKIP
    if args.skip_if_missing and not os.path.exists(os.path.join(args.checkpoint, "config.json")):
        print(f"{args.checkpoint}: no checkpoint: skipped")
        return SKIP
    model = ref.Model(args.checkpoint, np.float64)
    if args.token_ids or args.dump:
        sequences = [np.asarray(ref.parse_ids(args.token_ids))]
    else:
        sequences = [np.asarray(pseudo_random_ids(args.n_tokens, int(seed), model.cfg.vocab_size))
                     for seed in args.seeds.split(",")]
    broken, runs = [], []
    for ids in sequences:
        print(f"sequence of {len(ids)} tokens starting {ids[:4].tolist()}:")
        try:
            cand = candidate_streams(args, model, ids, official)
            fractions, bad = layer_fractions(model, cand, ids, official)
        except (RuntimeError, ValueError, KeyError) as e:
            print(f"FAIL: {e}")
            return 1
        broken += bad
        runs.append(fractions)
    if official:
        limit = FRACTION_ONE_SEQUENCE if len(runs) == 1 else FRACTION_SEVERAL
        for layer in runs[0]:
            smallest = min(r[layer] for r in runs)
            if smallest > limit:
                broken.append(f"layer {layer} ({smallest:.0%} of positions over {REL_OFFICIAL:g}"
                              f" in every sequence, limit {limit:.0%})")
    if broken:
        print("FAIL: " + ", ".join(sorted(set(broken))))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
