#!/usr/bin/python3
"""DSpark drafting (the draft stages of DeepSeek-V4-Flash-0731) in numpy, for checking flint's
drafts. Built on the target reference dsv4_reference.py (same weights, modules, roundings).

Sources (DeepSeek's own inference code for 0731 was not available): llama.cpp v0.5.0
(src/models/dflash.cpp graph_dsv4 "dfl:N", build_dspark_markov_head; src/models/deepseek4.cpp
"ds4:N"; common/speculative.cpp draft-dspark "spec:N"; conversion/deepseek.py "conv:N") and
DeepSeek's DeepSpec repository (deepspec/modeling/dspark/*, deepspec/eval/dspark/*).

Sequence x_0 .. x_P: x_0..x_{P-1} computed by the target, x_P the anchor (last sampled token,
not yet computed); n draft tokens, 1 <= n <= dspark_block_size.
  1. features_c, every computed position c: for each l in dspark_target_layer_ids the target's
     streams after layer l (the final streams, before hc_head, for the last layer), averaged
     over the hc streams, concatenated in that order (conv:1034 stores l+1 and ds4:1240-1244,
     1329-1333 take the mean of layer l+1's input; DeepSpec common.py extract_context_feature
     takes hidden_states[l + 1]).
  2. main_x_c = RMSNorm(main_proj(features_c)) * main_norm (dfl:880-884; DeepSpec qwen3
     modeling.py:373 hidden_norm(fc(.))); main_proj is an FP8 linear like any other.
  3. Stage s's context row at c: kv_norm_s(wkv_s(main_x_c)), RoPE at c with rope_theta and no
     YaRN (the stages are ratio 0) (dfl:886-903), FP8-rounded like any window KV row under the
     official quant simulation.
  4. The block [x_P, noise x (n - 1)] at positions P .. P+n-1 (spec:1202-1209: n tokens, n =
     the number of drafts asked), the target's embedding copied into the hc streams, through
     every stage as an ordinary block (dfl:929-997), except attention: the query at position p
     sees the context rows c with max(0, p - window + 1) <= c <= P - 1 and all n block rows
     (non-causal: spec:1052; DeepSpec common.py create_dspark_attention_mask: context < anchor,
     the whole block), with the attention sink. Block rows never persist.
  5. h = hc_head(streams) with the last stage's hc_head weights; U = head(RMSNorm(h) * norm)
     with the last stage's norm and the target's head (dfl:999-1020).
  6. Left to right, prev_0 = x_P: z_k = U_k + markov_w2 . markov_w1[prev_k]; d_k = argmax z_k
     (lowest id on ties); c_k = sigmoid(proj . [h_k ; markov_w1[prev_k]]); prev_{k+1} = d_k
     (dfl:295-409; DeepSpec markov_head.py:76-89, draft_ops.py:57-79).

Usage:
  /usr/bin/python3 dspark_reference.py CHECKPOINT --token-ids 0,15,27,... --anchor A -n 3
      [--quant-simulation official|off] [--dtype float64|float32]
prints {"context": P, "anchor": A, "drafts": [...], "confidence": [...]} for P = the number of
token ids given.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4_reference as ref  # noqa: E402
from dsv4_numerics import Ctx, fp8_simulate, mm, rms_norm, sigmoid  # noqa: E402


class DSparkConfig:
    """The dspark_* keys of config.json."""

    def __init__(self, directory, cfg):
        with open(os.path.join(directory, "config.json")) as f:
            hf = json.load(f)
        missing = [k for k in ("dspark_block_size", "dspark_noise_token_id",
                               "dspark_target_layer_ids", "dspark_markov_rank") if k not in hf]
        if missing:
            raise ValueError("config.json: not a DSpark checkpoint, missing " + ", ".join(missing))
        self.block_size = int(hf["dspark_block_size"])
        self.noise_token_id = int(hf["dspark_noise_token_id"])
        self.target_layer_ids = [int(x) for x in hf["dspark_target_layer_ids"]]
        self.markov_rank = int(hf["dspark_markov_rank"])
        self.n_stages = int(hf.get("num_nextn_predict_layers", 0))
        if not all(0 <= x < cfg.n_layers for x in self.target_layer_ids):
            raise ValueError(f"dspark_target_layer_ids {self.target_layer_ids} outside the "
                             f"{cfg.n_layers} target layers")


class DSpark:
    """The target (dsv4_reference.Model) plus the DSpark stages mtp.0 .. mtp.{N-1}."""

    def __init__(self, directory, dtype=np.float64):
        self.model = ref.Model(directory, dtype)
        cfg, w = self.model.cfg, self.model.w
        self.cfg, self.dtype = cfg, dtype
        self.ds = ds = DSparkConfig(directory, cfg)
        ck = w.ckpt
        n = 0
        while f"mtp.{n}.attn_norm.weight" in ck:
            n += 1
        if n == 0 or (ds.n_stages and n != ds.n_stages):
            raise ValueError(f"found {n} DSpark stages, config says {ds.n_stages}")
        if len(cfg.compress_ratios) < cfg.n_layers + n:
            raise ValueError("config.json: compress_ratios has no entries for the DSpark stages")
        # Ordinary blocks (layer id n_layers + i: bias routing, the ratio from compress_ratios).
        self.stages = [w.block(f"mtp.{i}.", cfg.n_layers + i) for i in range(n)]
        for i, s in enumerate(self.stages):
            if s["attn"]["ratio"] != 0:
                raise ValueError(f"DSpark stage {i}: compress ratio {s['attn']['ratio']}, not 0")
        last = f"mtp.{n - 1}."
        self.main_proj = w.linear("mtp.0.main_proj", True)
        self.main_norm = w.vec("mtp.0.main_norm.weight")
        self.norm = w.vec(last + "norm.weight")
        self.hc_head = [w.vec(last + "hc_head_fn"), w.vec(last + "hc_head_scale"),
                        w.vec(last + "hc_head_base")]
        self.markov_w1 = w.vec(last + "markov_head.markov_w1.weight")        # [V, r]
        self.markov_w2 = w.vec(last + "markov_head.markov_w2.weight")        # [V, r]
        self.conf_proj = w.vec(last + "confidence_head.proj.weight")         # [1, H + r]
        if self.markov_w1.shape[1] != ds.markov_rank or \
                self.conf_proj.shape != (1, cfg.dim + ds.markov_rank):
            raise ValueError("DSpark Markov / confidence head shapes do not match the config")

    # -- target side: features and context rows -------------------------------------------

    def target_forward(self, ids, ctx, mode="prefill", prefill_len=None, chunk=None):
        """The target over ids (fed as dsv4_reference.run does); returns the DSpark features
        [n, n_targets * dim] and the target's final hidden state [n, dim] (for its logits)."""
        cfg, w = self.cfg, self.model.w
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if mode == "prefill":
            bounds = [0, n]
        elif mode == "incremental":
            bounds = [0] + list(range(prefill_len or 1, n)) + [n]
        elif mode == "chunked":
            bounds = [0] + list(range(prefill_len or chunk, n, chunk)) + [n]
        else:
            raise ValueError(mode)
        bounds = sorted(set(b for b in bounds if b <= n))
        state = self.model.new_state()
        want = set(self.ds.target_layer_ids)
        feats, hidden = [], []
        for s, e in zip(bounds[:-1], bounds[1:]):
            streams = np.repeat(w.embed(ids[s:e])[:, None, :], cfg.hc_mult, axis=1)
            taken = {}
            for layer, (blk, ls) in enumerate(zip(w.layers, state)):
                streams = ref.block(blk, cfg, streams, s, ids[s:e], ls, ctx)
                if layer in want:
                    taken[layer] = np.mean(streams, axis=1)
            feats.append(np.concatenate([taken[l] for l in self.ds.target_layer_ids], axis=1))
            hidden.append(rms_norm(ref.hc_head(streams, w.hc_head, cfg), w.norm, cfg.norm_eps))
        return np.concatenate(feats), np.concatenate(hidden)

    def main_x(self, feats, ctx):
        return rms_norm(self.main_proj(feats, ctx), self.main_norm, self.cfg.norm_eps)

    def stage_kv(self, stage, x, positions, ctx):
        """kv_norm(wkv(x)), RoPE at `positions`, FP8 on the non-rope dims (official): the row an
        ordinary attention layer computes and caches (dsv4_reference.attention)."""
        a, rd = stage["attn"], self.cfg.rope_head_dim
        kv = rms_norm(a["wkv"](x, ctx), a["kv_norm"], self.cfg.norm_eps)
        kv[:, -rd:] = a["rope"].apply(kv[:, -rd:], positions)
        if "kv" in ctx.quant:
            kv[:, :-rd] = fp8_simulate(kv[:, :-rd], 64)
        return kv

    def context_rows(self, feats, ctx, start=0):
        """Each stage's context rows [n, head_dim] for the features of positions start..."""
        mx = self.main_x(feats, ctx)
        pos = start + np.arange(len(feats))
        return [self.stage_kv(s, mx, pos, ctx) for s in self.stages]

    # -- the block ----------------------------------------------------------------------------

    def block_attention(self, stage, x, P, rows, ctx):
        """Attention of the block x [n, dim] at positions P.. over the context rows (rows[c] =
        position c, at least positions max(0, P - window + 1) .. P - 1) and all block rows."""
        cfg, a = self.cfg, stage["attn"]
        n, rd, win, rope = len(x), cfg.rope_head_dim, cfg.window, a["rope"]
        pos = P + np.arange(n)
        qr = rms_norm(a["wq_a"](x, ctx), a["q_norm"], cfg.norm_eps)
        q = a["wq_b"](qr, ctx).reshape(n, cfg.n_heads, cfg.head_dim)
        q = rms_norm(q, None, cfg.norm_eps)
        q[..., -rd:] = rope.apply(q[..., -rd:], pos)
        kv = self.stage_kv(stage, x, pos, ctx)
        lo = max(0, P - win + 1)                         # oldest row the first query sees
        keys = np.concatenate([rows[lo:P], kv])
        ctx_pos = np.arange(lo, P)
        seen = np.concatenate([ctx_pos[None, :] >= (pos - win + 1)[:, None],
                               np.ones((n, n), dtype=bool)], axis=1)
        idxs = np.where(seen, np.arange(len(keys))[None, :], -1)
        o = ref.sparse_attn(q, keys, a["sink"], idxs, cfg.head_dim ** -0.5)
        o[..., -rd:] = rope.apply(o[..., -rd:], pos, inverse=True)
        g = cfg.o_groups
        wo_a = a["wo_a"].w.reshape(g, cfg.o_lora_rank, -1)
        o = np.einsum("ngd,grd->ngr", o.reshape(n, g, -1), wo_a)
        return a["wo_b"](o.reshape(n, -1), ctx)

    def stage_forward(self, i, streams, P, ids, rows, ctx):
        """dsv4_reference.block with block_attention in place of attention."""
        cfg, stage = self.cfg, self.stages[i]
        x, post, comb = ref.hc_pre(streams, stage["hc_attn"], cfg)
        x = rms_norm(x, stage["attn_norm"], cfg.norm_eps)
        x = self.block_attention(stage, x, P, rows, ctx)
        streams = ref.hc_post(x, streams, post, comb)
        x, post, comb = ref.hc_pre(streams, stage["hc_ffn"], cfg)
        x = rms_norm(x, stage["ffn_norm"], cfg.norm_eps)
        x = ref.moe(stage, cfg, x, ids, ctx, f"S{i}")
        return ref.hc_post(x, streams, post, comb)

    def draft(self, P, anchor, n, rows, ctx, forced=None):
        """Drafts n tokens after the anchor at position P. rows: per stage, context rows indexed
        by position (>= P of them). forced: optional tokens to use as prev_{k+1} instead of the
        reference's own d_k (to follow another engine's chain past a near-tie).
        Returns dict(drafts, confidence, margin = top-1 minus top-2 of z_k, forced_gap = z_k's
        max minus z_k[forced[k]], U, h)."""
        cfg = self.cfg
        if not 1 <= n <= self.ds.block_size:
            raise ValueError(f"n = {n} outside 1..{self.ds.block_size}")
        if any(len(r) < P for r in rows):
            raise ValueError("fewer context rows than the context")
        ids = np.array([anchor] + [self.ds.noise_token_id] * (n - 1), dtype=np.int64)
        streams = np.repeat(self.model.w.embed(ids)[:, None, :], cfg.hc_mult, axis=1)
        for i in range(len(self.stages)):
            streams = self.stage_forward(i, streams, P, ids, rows[i], ctx)
        h = ref.hc_head(streams, self.hc_head, cfg)
        U = self.model.logits(rms_norm(h, self.norm, cfg.norm_eps), out_dtype=self.dtype)
        drafts, conf, margin, gap = [], [], [], []
        prev = int(anchor)
        for k in range(n):
            e = self.markov_w1[prev]
            z = U[k] + mm(e[None, :], self.markov_w2)[0]
            d = int(np.argmax(z))                                     # first maximum
            top2 = np.partition(z, -2)[-2:]
            drafts.append(d)
            margin.append(float(top2[1] - top2[0]))
            conf.append(float(sigmoid(np.dot(self.conf_proj[0], np.concatenate([h[k], e])))))
            if forced is not None and k < len(forced):
                gap.append(float(z[d] - z[int(forced[k])]))
                prev = int(forced[k])
            else:
                prev = d
        return dict(drafts=drafts, confidence=conf, margin=margin, forced_gap=gap, U=U, h=h)


class Sequence:
    """The target's features and every stage's context rows for one token sequence, computed
    once; drafts at any context P <= len(ids) - 1 read a prefix (the target is causal)."""

    def __init__(self, dspark, ids, ctx, mode="prefill", prefill_len=None, chunk=None):
        self.ids = list(ids)
        self.feats, self.hidden = dspark.target_forward(ids, ctx, mode, prefill_len, chunk)
        self.rows = dspark.context_rows(self.feats, ctx)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--token-ids", required=True, help="x_0..x_{P-1}, comma-separated")
    ap.add_argument("--anchor", type=int, required=True, help="x_P")
    ap.add_argument("-n", type=int, default=None, help="draft tokens (default: block size)")
    ap.add_argument("--quant-simulation", choices=["official", "off"], default="official")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    args = ap.parse_args(argv)
    dtype = np.float64 if args.dtype == "float64" else np.float32
    dsp = DSpark(args.checkpoint, dtype)
    ids = ref.parse_ids(args.token_ids)
    ctx = Ctx(dtype, args.quant_simulation == "official")
    seq = Sequence(dsp, ids, ctx)
    out = dsp.draft(len(ids), args.anchor, args.n or dsp.ds.block_size, seq.rows, ctx)
    print(json.dumps({"context": len(ids), "anchor": args.anchor, "drafts": out["drafts"],
                      "confidence": out["confidence"], "margin": out["margin"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
