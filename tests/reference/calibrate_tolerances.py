#!/usr/bin/python3
"""Measures what the tolerances of compare_logits.py are based on (not run by ctest: ~2-4 min).

For one checkpoint and a few pseudo-random sequences it prints, for --quant-simulation
official and off, the logit differences (max, mean abs, same-argmax fraction) between:
  noise     the reference in float32 vs float64: what a correct float32 engine may show;
  w/o X     official mode without one group of roundings (linear, kv, indexer);
  bug: ...  the reference with one plausible implementation mistake injected.

  /usr/bin/python3 calibrate_tolerances.py CHECKPOINT [--seeds 7,1,2] [--n-tokens 320]
"""
import argparse
import os
import sys
from contextlib import contextmanager

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4_reference as ref  # noqa: E402
import dsv4_weights  # noqa: E402
from compare_logits import pseudo_random_ids  # noqa: E402


@contextmanager
def patched(module, name, replacement):
    original = getattr(module, name)
    setattr(module, name, replacement(original))
    try:
        yield
    finally:
        setattr(module, name, original)


def zero_score_state(original):      # compressor state starting at score 0 instead of -inf
    class State(original):
        def __init__(self, comp, dtype):
            super().__init__(comp, dtype)
            self.score[:] = 0
    return State


def rope_at_block_end(original):     # compressed entry rotated at its block's last position
    return lambda comp, entries, starts, rope, ctx: original(
        comp, entries, np.asarray(starts) + comp["ratio"] - 1, rope, ctx)


def no_inverse_rope(original):       # output de-rotation forgotten
    class Rope(original):
        def apply(self, x, positions, inverse=False):
            return x.copy() if inverse else super().apply(x, positions)
    return Rope


def no_sink(original):               # attention sink left out of the denominator
    return lambda q, kv, sink, idxs, scale: original(q, kv, sink - 1e30, idxs, scale)


def window_129(original):            # one key too many in the sliding window (prefill)
    return lambda win, n: original(win + 1, n)


def entry_late(original):            # a compressed entry visible one token after its block
    def f(ratio, n, start_pos, offset):
        idx = original(ratio, n, start_pos, offset)
        pos = start_pos + np.arange(n)
        return np.where((idx - offset) >= (pos // ratio)[:, None], -1, idx)
    return f


def weight_after_w2(original):       # routing weight applied to w2's output
    def f(ex, cfg, x, weights, ctx):
        y = original(ex, cfg, x, None, ctx)
        return y if weights is None else weights[:, None] * y
    return f


def ties_high_first(original):       # top-k ties broken toward the higher index
    def f(scores, k):
        n = scores.shape[-1]
        return (n - 1 - np.argsort(-scores[..., ::-1], axis=-1, kind="stable"))[..., :k]
    return f


BUGS = {  # (module, name, patch); the compressor state bug only shows in incremental runs
    "compressor score state 0": (ref, "CompressorState", zero_score_state),
    "entry RoPE at block end": (ref, "compressor_finish", rope_at_block_end),
    "no inverse RoPE": (dsv4_weights, "Rope", no_inverse_rope),
    "no attention sink": (ref, "sparse_attn", no_sink),
    "window 129": (ref, "window_idxs_prefill", window_129),
    "ratio-128 entry 1 late": (ref, "compress_idxs", entry_late),
    "routing weight after w2": (ref, "expert", weight_after_w2),
    "top-k ties high first": (ref, "topk_indices", ties_high_first),
}


def logits(directory, dtype, ids, official, parts=None):
    model = ref.Model(directory, dtype)   # reloaded: patched classes act at load time
    hidden, _ = ref.run(model, ids, ref.Ctx(dtype, official, quant_parts=parts))
    return model.logits(hidden, np.float64)


def show(tag, a, b):
    d = np.abs(a - b)
    print(f"  {tag:<28} max {d.max():8.3g}  mean {d.mean():9.3g}  same argmax "
          f"{np.mean(a.argmax(1) == b.argmax(1)):7.2%}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--seeds", default="7,1,2")
    ap.add_argument("--n-tokens", type=int, default=320)
    ap.add_argument("--bugs-seed", type=int, default=7, help="sequence used for the bugs")
    args = ap.parse_args()
    vocab = ref.Model(args.checkpoint).cfg.vocab_size
    for seed in [int(s) for s in args.seeds.split(",")]:
        ids = pseudo_random_ids(args.n_tokens, seed, vocab)
        print(f"seed {seed}:")
        for sim in ("off", "official"):
            base = logits(args.checkpoint, np.float64, ids, sim == "official")
            show(f"{sim}: noise", base, logits(args.checkpoint, np.float32, ids, sim == "official"))
            if sim == "official":
                for omit in ref.Ctx.QUANT_PARTS:
                    keep = [p for p in ref.Ctx.QUANT_PARTS if p != omit]
                    show(f"official: w/o {omit}", base, logits(args.checkpoint, np.float64, ids,
                                                               True, keep))
            if seed == args.bugs_seed:
                for bug, (module, name, make) in BUGS.items():
                    with patched(module, name, make):
                        show(f"{sim}: bug: {bug}", base,
                             logits(args.checkpoint, np.float64, ids, sim == "official"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
