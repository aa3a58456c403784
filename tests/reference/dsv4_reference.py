#!/usr/bin/python3
"""Independent numpy reference of the DeepSeek-V4 forward pass, for checking flint's logits.

A transcription of DeepSeek's official inference code (inference/model.py, with the kernels of
inference/kernel_tilelang.py and the weight handling of inference/convert.py), module by module.
Comments cite model.py line numbers as "m.py:N" and kernel_tilelang.py as "k_tl.py:N". It reads
config.json (Hugging Face keys) and the checkpoint (official layout, no "model." prefix) with its
own safetensors reader (safetensors_np.py) and computes in float64 (or float32), with weights
dequantised exactly. It shares no code with flint.

What it reproduces, and what it deliberately does not:
  * every operation, in the official order, including the FP8/FP4 activation roundings of the
    official code (--quant-simulation official) or without them (off);
  * NOT the bfloat16 storage of activations between operations (the official code keeps
    activations in bf16): the reference keeps them in float64/float32, like flint;
  * model.py returns the logits of the last position only (m.py:741-742); the reference returns
    every position's logits (the head is applied position-wise, so this is the same function).

Three ways to feed a sequence, which must give the same logits:
  prefill      the whole sequence in one call with start_pos = 0 (model.py's prefill path);
  incremental  one token per call (model.py's decode path, m.py:363-379, 549-553), optionally
               after a prefill of the first --prefill-len tokens (as generate.py does);
  chunked      several tokens per call at start_pos > 0. model.py does not support this (its
               decode path assumes one token); the reference defines it as the generalisation:
               each token attends to the last `sliding_window` tokens (itself included) and to
               the compressed entries whose block is complete at its position; compressor
               state advances token by token.

Files: dsv4_numerics.py (roundings, RoPE, top-k, run options), dsv4_weights.py (config and
dequantised weights), this file (state, modules, model, command line).

Usage:
  /usr/bin/python3 dsv4_reference.py CHECKPOINT --token-ids 0,15,27 --output OUT.npy
      [--incremental] [--prefill-len P] [--chunk C] [--quant-simulation official|off]
      [--dtype float64|float32] [--dump DEBUG.npz] [--mtp-output MTP.npy]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsv4_numerics import (Ctx, count_boundary_ties, fp4_simulate, fp8_simulate,  # noqa: E402,F401
                           hadamard, mm, rms_norm, sigmoid, silu, softmax, topk_indices)
from dsv4_weights import Weights  # noqa: E402


# ----------------------------------------------------------------------------------------
# Per-sequence state (what model.py keeps in its buffers)
# ----------------------------------------------------------------------------------------


class CompressorState:
    """kv_state / score_state (m.py:323-324) and the compressed entries (the kv_cache rows past
    the window, m.py:394-396). A new sequence starts with kv 0 and score -inf: the rows of the
    'previous block' of the first overlapping entry then get softmax weight 0."""

    def __init__(self, comp, dtype):
        coff = 2 if comp["overlap"] else 1
        width = coff * comp["head_dim"]
        self.kv = np.zeros((coff * comp["ratio"], width), dtype=dtype)
        self.score = np.full((coff * comp["ratio"], width), -np.inf, dtype=dtype)
        self.entries = np.zeros((0, comp["head_dim"]), dtype=dtype)


class LayerState:
    def __init__(self, blk, cfg, dtype):
        attn = blk["attn"]
        self.ring = np.zeros((cfg.window, cfg.head_dim), dtype=dtype)   # m.py:493-494
        self.comp = CompressorState(attn["compressor"], dtype) if attn["ratio"] else None
        self.index = (CompressorState(attn["indexer"]["compressor"], dtype)
                      if "indexer" in attn else None)


# ----------------------------------------------------------------------------------------
# Compressor (m.py:299-397)
# ----------------------------------------------------------------------------------------


def overlap_transform(t, fill):
    """m.py:327-334. t [blocks, ratio, 2d] -> [blocks, 2*ratio, d]: rows 0..r-1 are the previous
    block's first-half dims (fill for block 0), rows r..2r-1 the block's own second-half dims."""
    b, r, two_d = t.shape
    d = two_d // 2
    out = np.full((b, 2 * r, d), fill, dtype=t.dtype)
    out[:, r:] = t[:, :, d:]
    out[1:, :r] = t[:-1, :, :d]
    return out


def compressor_finish(comp, entries, block_starts, rope, ctx):
    """m.py:382-392: norm, RoPE at the position of the block's first token, then the indexer's
    Hadamard + FP4 rounding of the whole vector, or FP8 rounding of the non-rope dims."""
    rd = rope.freqs.size * 2
    x = rms_norm(entries, comp["norm"], comp["eps"])
    x[:, -rd:] = rope.apply(x[:, -rd:], block_starts)
    if comp["rotate"]:
        x = hadamard(x)
        if "indexer" in ctx.quant:
            x = fp4_simulate(x, 32)
    elif "kv" in ctx.quant:
        x[:, :-rd] = fp8_simulate(x[:, :-rd], 64)
    return x


def compressor_prefill(comp, x, state, rope, ctx):
    """start_pos == 0 branch, m.py:345-362 and 380-397. Appends the completed blocks' entries."""
    r, overlap = comp["ratio"], comp["overlap"]
    n = len(x)
    kv = comp["wkv"](x, ctx)                      # fp32 linears without activation rounding
    score = comp["wgate"](x, ctx)
    remainder = n % r
    cutoff = n - remainder
    if overlap and cutoff >= r:                   # m.py:350-352: last full block -> 'previous'
        state.kv[:r] = kv[cutoff - r:cutoff]
        state.score[:r] = score[cutoff - r:cutoff] + comp["ape"]
    if remainder > 0:                             # m.py:353-356: pending partial block
        off = r if overlap else 0
        state.kv[off:off + remainder] = kv[cutoff:]
        state.score[off:off + remainder] = score[cutoff:] + comp["ape"][:remainder]
    if n < r:                                     # m.py:346 should_compress
        return
    kvb = kv[:cutoff].reshape(cutoff // r, r, -1)
    sb = score[:cutoff].reshape(cutoff // r, r, -1) + comp["ape"]
    if overlap:
        kvb = overlap_transform(kvb, 0.0)
        sb = overlap_transform(sb, -np.inf)
    entries = np.sum(kvb * softmax(sb, axis=1), axis=1)     # per-dimension softmax over rows
    starts = np.arange(0, cutoff, r)                         # m.py:384 freqs_cis[:cutoff:ratio]
    state.entries = np.concatenate([state.entries, compressor_finish(comp, entries, starts, rope, ctx)])


def compressor_decode(comp, x, pos, state, rope, ctx):
    """start_pos > 0 branch for one token at position pos, m.py:363-379 and 380-397."""
    r, d = comp["ratio"], comp["head_dim"]
    kv = comp["wkv"](x, ctx)[0]
    score = comp["wgate"](x, ctx)[0] + comp["ape"][pos % r]
    complete = (pos + 1) % r == 0
    if comp["overlap"]:
        state.kv[r + pos % r] = kv
        state.score[r + pos % r] = score
        if not complete:
            return
        kv_rows = np.concatenate([state.kv[:r, :d], state.kv[r:, d:]])
        score_rows = np.concatenate([state.score[:r, :d], state.score[r:, d:]])
        entry = np.sum(kv_rows * softmax(score_rows, axis=0), axis=0)
        state.kv[:r] = state.kv[r:]              # m.py:373-374: this block becomes 'previous'
        state.score[:r] = state.score[r:]
    else:
        state.kv[pos % r] = kv
        state.score[pos % r] = score
        if not complete:
            return
        entry = np.sum(state.kv * softmax(state.score, axis=0), axis=0)
    start = np.array([pos + 1 - r])             # m.py:386
    state.entries = np.concatenate([state.entries, compressor_finish(comp, entry[None], start, rope, ctx)])


def compressor_run(comp, x, start_pos, state, rope, ctx):
    if start_pos == 0:
        compressor_prefill(comp, x, state, rope, ctx)
    else:
        for t in range(len(x)):
            compressor_decode(comp, x[t:t + 1], start_pos + t, state, rope, ctx)


# ----------------------------------------------------------------------------------------
# Indexer (m.py:400-453)
# ----------------------------------------------------------------------------------------


def indexer(idx, cfg, x, qr, start_pos, offset, state, rope, ctx, name):
    """Returns [n, k] key indices (entry number + offset) of the selected compressed entries,
    -1 where an entry is not yet complete at the query's position."""
    n = len(x)
    pos = start_pos + np.arange(n)
    r, rd = idx["compressor"]["ratio"], cfg.rope_head_dim
    q = idx["wq_b"](qr, ctx).reshape(n, cfg.index_n_heads, cfg.index_head_dim)
    q[..., -rd:] = rope.apply(q[..., -rd:], pos)
    q = hadamard(q)
    if "indexer" in ctx.quant:
        q = fp4_simulate(q, 32)                                  # m.py:436
    compressor_run(idx["compressor"], x, start_pos, state, rope, ctx)       # m.py:437
    w = idx["weights_proj"](x, ctx) * (cfg.index_head_dim ** -0.5 * cfg.index_n_heads ** -0.5)
    end = (start_pos + n) // r
    keys = state.entries[:end]
    score = np.einsum("nhd,td->nht", q, keys)
    score = np.sum(np.maximum(score, 0) * w[:, :, None], axis=1)     # m.py:440-441
    visible = (pos + 1) // r                                          # entries complete at pos
    score = np.where(np.arange(end)[None, :] >= visible[:, None], -np.inf, score)
    k = min(cfg.index_topk, end)
    top = topk_indices(score, k)
    count_boundary_ties(ctx, score, k, "indexer", visible)
    ctx.record(name + ".index_scores_max", np.max(score, axis=1) if end else np.zeros(n))
    sel = np.where(top >= visible[:, None], -1, top + offset)       # m.py:448-452
    chosen = np.full((n, cfg.index_topk), -1)
    chosen[:, :k] = np.where(sel >= 0, sel - offset, -1)
    ctx.record(name + ".index_topk", chosen)                          # entry numbers, -1 padded
    return sel


# ----------------------------------------------------------------------------------------
# Attention (m.py:456-563)
# ----------------------------------------------------------------------------------------


def window_idxs_prefill(win, n):
    """get_window_topk_idxs with start_pos == 0, m.py:281-284."""
    base = np.arange(n)[:, None]
    m = np.maximum(base - win + 1, 0) + np.arange(min(n, win))[None, :]
    return np.where(m > base, -1, m)


def window_idxs_decode(win, start_pos):
    """get_window_topk_idxs for one token, m.py:276-280 (indices into the ring buffer)."""
    if start_pos >= win - 1:
        s = start_pos % win
        return np.concatenate([np.arange(s + 1, win), np.arange(0, s + 1)])[None, :]
    return np.concatenate([np.arange(start_pos + 1), np.full(win - start_pos - 1, -1)])[None, :]


def compress_idxs(ratio, n, start_pos, offset):
    """get_compress_topk_idxs, m.py:288-296, for any start_pos: entry b is visible to the token at
    position p when b < (p + 1) // ratio."""
    pos = start_pos + np.arange(n)
    count = (start_pos + n) // ratio
    b = np.arange(count)[None, :].repeat(n, axis=0)
    return np.where(b >= ((pos + 1) // ratio)[:, None], -1, b + offset)


def sparse_attn(q, kv, sink, idxs, scale):
    """k_tl.py:276-368: per query, attention over the keys kv[idxs] (-1 = none); K = V; the
    attention sink adds exp(sink[h]) to the softmax denominator only."""
    n, h, d = q.shape
    out = np.empty_like(q)
    for s in range(0, n, 64):                       # bounded memory
        ii = idxs[s:s + 64]
        valid = ii >= 0
        g = kv[np.maximum(ii, 0)]                   # [c, K, d]
        sc = np.matmul(q[s:s + 64], g.transpose(0, 2, 1)) * scale       # [c, h, K]
        sc = np.where(valid[:, None, :], sc, -np.inf)
        m = np.max(sc, axis=-1, keepdims=True)
        e = np.exp(sc - m)
        denom = np.sum(e, axis=-1, keepdims=True) + np.exp(sink[None, :, None] - m)
        out[s:s + 64] = np.matmul(e / denom, g)
    return out


def attention(blk, cfg, x, start_pos, state, ctx, name):
    a = blk["attn"]
    n = len(x)
    pos = start_pos + np.arange(n)
    win, ratio, rd, rope = cfg.window, a["ratio"], cfg.rope_head_dim, a["rope"]
    # q (m.py:516-519): low-rank q, unweighted per-head RMS norm, RoPE on the last rd dims
    qr = rms_norm(a["wq_a"](x, ctx), a["q_norm"], cfg.norm_eps)
    q = a["wq_b"](qr, ctx).reshape(n, cfg.n_heads, cfg.head_dim)
    q = rms_norm(q, None, cfg.norm_eps)
    q[..., -rd:] = rope.apply(q[..., -rd:], pos)
    # kv (m.py:522-526): one head shared as K and V; FP8 rounding of the non-rope dims
    kv = rms_norm(a["wkv"](x, ctx), a["kv_norm"], cfg.norm_eps)
    kv[:, -rd:] = rope.apply(kv[:, -rd:], pos)
    if "kv" in ctx.quant:
        kv[:, :-rd] = fp8_simulate(kv[:, :-rd], 64)
    ctx.record(name + ".q", q)
    ctx.record(name + ".kv", kv)

    if start_pos == 0:                                       # prefill, m.py:529-548
        idxs = window_idxs_prefill(win, n)
        keys = kv
        if n <= win:                                         # ring update, m.py:539-543
            state.ring[:n] = kv
        else:
            c = n % win
            state.ring[c:win], state.ring[:c] = kv[-win:][:win - c], kv[-win:][win - c:]
        offset = n
    elif n == 1:                                             # decode, m.py:549-553
        idxs = window_idxs_decode(win, start_pos)
        state.ring[start_pos % win] = kv[0]
        keys = state.ring
        offset = win
    else:                                                    # chunked generalisation
        past = np.arange(max(0, start_pos - win), start_pos)
        keys = np.concatenate([state.ring[past % win], kv])
        key_pos = np.concatenate([past, pos])
        inside = (key_pos[None, :] <= pos[:, None]) & (key_pos[None, :] > pos[:, None] - win)
        idxs = np.where(inside, np.arange(len(key_pos))[None, :], -1)
        for t in range(max(0, n - win), n):
            state.ring[pos[t] % win] = kv[t]
        offset = len(keys)
    if ratio:
        if "indexer" in a:                                   # m.py:530-534
            cidx = indexer(a["indexer"], cfg, x, qr, start_pos, offset, state.index, rope, ctx, name)
        else:
            cidx = compress_idxs(ratio, n, start_pos, offset)
        idxs = np.concatenate([idxs, cidx], axis=1)
        compressor_run(a["compressor"], x, start_pos, state.comp, rope, ctx)
        keys = np.concatenate([keys, state.comp.entries])
    o = sparse_attn(q, keys, a["sink"], idxs, cfg.head_dim ** -0.5)
    o[..., -rd:] = rope.apply(o[..., -rd:], pos, inverse=True)            # m.py:554
    # grouped output (m.py:557-562): group g = heads g*H/G .. (g+1)*H/G-1 through its wo_a slice
    g = cfg.o_groups
    wo_a = a["wo_a"].w.reshape(g, cfg.o_lora_rank, -1)
    o = np.einsum("ngd,grd->ngr", o.reshape(n, g, -1), wo_a)
    out = a["wo_b"](o.reshape(n, -1), ctx)
    ctx.record(name + ".attn_out", out)
    return out


# ----------------------------------------------------------------------------------------
# MoE (m.py:566-670)
# ----------------------------------------------------------------------------------------


def gate(gt, cfg, x, ids, ctx):
    """m.py:590-610. Returns routing weights [n, k] and expert indices [n, k]."""
    logits = mm(x, gt["w"])                                  # no activation rounding
    if cfg.score_func == "softmax":
        scores = softmax(logits, axis=-1)
    elif cfg.score_func == "sigmoid":
        scores = sigmoid(logits)
    else:
        scores = np.sqrt(np.logaddexp(0, logits))            # sqrt(softplus)
    if gt["hash"]:
        indices = gt["tid2eid"][np.asarray(ids)]
    else:
        biased = scores + gt["bias"]                         # bias only chooses (m.py:599-601)
        indices = topk_indices(biased, cfg.n_activated_experts)
        count_boundary_ties(ctx, biased, cfg.n_activated_experts, "moe")
    weights = np.take_along_axis(scores, indices, axis=1)
    if cfg.score_func != "softmax":
        weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return weights * cfg.route_scale, indices


def expert(ex, cfg, x, weights, ctx):
    """m.py:622-632: clamp w3's output to +-limit and w1's output above at +limit; the routing
    weight multiplies the hidden activation BEFORE w2 (so before w2's FP8 input rounding)."""
    g = ex["w1"](x, ctx)
    u = ex["w3"](x, ctx)
    if cfg.swiglu_limit > 0:
        u = np.clip(u, -cfg.swiglu_limit, cfg.swiglu_limit)
        g = np.minimum(g, cfg.swiglu_limit)
    h = silu(g) * u
    if weights is not None:
        h = weights[:, None] * h
    return ex["w2"](h, ctx)


def moe(blk, cfg, x, ids, ctx, name):
    """m.py:655-670. A token routed twice to one expert (possible only through a hash table
    with a repeated entry) gets that expert once: `y[idx] += ...` with a repeated row index
    writes once in torch, as in numpy."""
    weights, indices = gate(blk["gate"], cfg, x, ids, ctx)
    ctx.record(name + ".moe_indices", indices)
    ctx.record(name + ".moe_weights", weights)
    y = np.zeros_like(x)
    for e in np.unique(indices):
        rows, slots = np.nonzero(indices == e)
        rows, first = np.unique(rows, return_index=True)
        y[rows] += expert(blk["experts"][e], cfg, x[rows], weights[rows, slots[first]], ctx)
    return y + expert(blk["shared"], cfg, x, None, ctx)


# ----------------------------------------------------------------------------------------
# Hyper-connections and the block (m.py:673-726), head (m.py:729-761)
# ----------------------------------------------------------------------------------------


def hc_split_sinkhorn(mixes, scale, base, cfg):
    """k_tl.py:371-438: pre = sigmoid + eps, post = 2 sigmoid, comb = row softmax + eps, then
    column, (row, column) x (iters - 1) normalisations, each with + eps in the denominator."""
    hc, eps = cfg.hc_mult, cfg.hc_eps
    pre = sigmoid(mixes[:, :hc] * scale[0] + base[:hc]) + eps
    post = 2 * sigmoid(mixes[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    comb = mixes[:, 2 * hc:].reshape(-1, hc, hc) * scale[2] + base[2 * hc:].reshape(hc, hc)
    comb = softmax(comb, axis=-1) + eps
    comb = comb / (np.sum(comb, axis=-2, keepdims=True) + eps)
    for _ in range(cfg.hc_sinkhorn_iters - 1):
        comb = comb / (np.sum(comb, axis=-1, keepdims=True) + eps)
        comb = comb / (np.sum(comb, axis=-2, keepdims=True) + eps)
    return pre, post, comb


def hc_mixes(streams, fn, cfg):
    """F.linear(flat, fn) * rsqrt(mean(flat^2) + norm_eps) over all hc*dim values (m.py:702-704)."""
    flat = streams.reshape(len(streams), -1)
    return mm(flat, fn) / np.sqrt(np.mean(flat * flat, axis=-1, keepdims=True) + cfg.norm_eps)


def hc_pre(streams, params, cfg):
    fn, scale, base = params
    pre, post, comb = hc_split_sinkhorn(hc_mixes(streams, fn, cfg), scale, base, cfg)
    return np.sum(pre[:, :, None] * streams, axis=1), post, comb


def hc_post(x, residual, post, comb):
    """m.py:709-712: new stream k = post[k] * x + sum_j comb[j, k] * residual[j]."""
    return post[:, :, None] * x[:, None, :] + np.einsum("njk,njd->nkd", comb, residual)


def hc_head(streams, params, cfg):
    """m.py:754-761: sigmoid weights (+ hc_eps), no Sinkhorn."""
    fn, scale, base = params
    pre = sigmoid(hc_mixes(streams, fn, cfg) * scale + base) + cfg.hc_eps
    return np.sum(pre[:, :, None] * streams, axis=1)


def block(blk, cfg, streams, start_pos, ids, state, ctx):
    """m.py:714-726."""
    name = f"L{blk['layer_id']}"
    ctx.record(name + ".streams_in", streams)
    x, post, comb = hc_pre(streams, blk["hc_attn"], cfg)
    x = rms_norm(x, blk["attn_norm"], cfg.norm_eps)
    ctx.record(name + ".attn_in", x)
    x = attention(blk, cfg, x, start_pos, state, ctx, name)
    streams = hc_post(x, streams, post, comb)
    ctx.record(name + ".streams_mid", streams)
    x, post, comb = hc_pre(streams, blk["hc_ffn"], cfg)
    x = rms_norm(x, blk["ffn_norm"], cfg.norm_eps)
    ctx.record(name + ".ffn_in", x)
    x = moe(blk, cfg, x, ids, ctx, name)
    ctx.record(name + ".ffn_out", x)
    return hc_post(x, streams, post, comb)


# ----------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------


class Model:
    def __init__(self, directory, dtype=np.float64):
        self.w = Weights(directory, dtype)
        self.cfg = self.w.cfg

    def new_state(self, mtp=False):
        blocks = self.w.mtp if mtp else self.w.layers
        return [LayerState(b, self.cfg, self.w.dtype) for b in blocks]

    def forward(self, ids, start_pos, state, ctx):
        """Transformer.forward (m.py:828-835) for tokens at positions start_pos.. : returns the
        final hidden state after hc_head and norm [n, dim] and the final streams [n, hc, dim]."""
        cfg = self.cfg
        h = self.w.embed(ids)
        streams = np.repeat(h[:, None, :], cfg.hc_mult, axis=1)          # m.py:831
        for blk, ls in zip(self.w.layers, state):
            streams = block(blk, cfg, streams, start_pos, ids, ls, ctx)
        ctx.record("final_streams", streams)
        x = rms_norm(hc_head(streams, self.w.hc_head, cfg), self.w.norm, cfg.norm_eps)
        ctx.record("final_hidden", x)
        return x, streams

    def mtp_forward(self, streams, next_ids, start_pos, state, ctx, k=0):
        """MTPBlock.forward (m.py:783-792): streams of the main model at positions p and the
        embedding of the token at p + 1, mixed by e_proj/h_proj, through a full block, then the
        MTP's own hc_head and norm; returns its final hidden state."""
        cfg, m = self.cfg, self.w.mtp[k]
        e = rms_norm(self.w.embed(next_ids), m["enorm"], cfg.norm_eps)
        hn = rms_norm(streams, m["hnorm"], cfg.norm_eps)
        x = m["e_proj"](e, ctx)[:, None, :] + m["h_proj"](hn, ctx)
        x = block(m, cfg, x, start_pos, next_ids, state[k], ctx)
        return rms_norm(hc_head(x, m["hc_head"], cfg), m["norm"], cfg.norm_eps)

    def logits(self, hidden, out_dtype=np.float32):
        """ParallelHead.get_logits (m.py:741-742) for every row."""
        out = np.empty((len(hidden), self.w.head.shape[0]), dtype=out_dtype)
        step = 8192
        for s in range(0, self.w.head.shape[0], step):
            out[:, s:s + step] = mm(hidden, self.w.head[s:s + step].astype(hidden.dtype))
        return out


def run(model, ids, ctx, mode="prefill", prefill_len=None, chunk=None):
    """Feeds the sequence as one prefill, token by token (after an optional prefill), or in
    chunks; returns the final hidden states [n, dim] and final streams [n, hc, dim]."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    state = model.new_state()
    if mode == "prefill":
        bounds = [0, n]
    elif mode == "incremental":
        first = prefill_len or 1
        bounds = [0] + list(range(first, n)) + [n]
    elif mode == "chunked":
        first = prefill_len or chunk
        bounds = [0] + list(range(first, n, chunk)) + [n]
    else:
        raise ValueError(mode)
    bounds = sorted(set(b for b in bounds if b <= n))
    hidden, streams = [], []
    for s, e in zip(bounds[:-1], bounds[1:]):
        h, sm = model.forward(ids[s:e], s, state, ctx)
        hidden.append(h)
        streams.append(sm)
    return np.concatenate(hidden), np.concatenate(streams)


def parse_ids(text):
    return [int(t) for t in text.replace("\n", ",").split(",") if t.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--token-ids", help="comma-separated token ids")
    ap.add_argument("--token-ids-file", help="file of comma/newline-separated token ids")
    ap.add_argument("--output", required=True, help="float32 logits [n, vocab] as .npy")
    ap.add_argument("--incremental", action="store_true", help="one token per call")
    ap.add_argument("--prefill-len", type=int, help="with --incremental/--chunk: first call size")
    ap.add_argument("--chunk", type=int, help="chunked prefill: this many tokens per call")
    ap.add_argument("--quant-simulation", choices=["official", "off"], default="official")
    ap.add_argument("--quant-parts", help="debugging: round only these groups in official mode, "
                    "a comma list of linear,kv,indexer")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--dump", help="write intermediate tensors (per layer) to this .npz")
    ap.add_argument("--mtp-output", help="also write MTP logits [n-1, vocab]: row p predicts "
                    "token p+2 from the main model's streams at p and token p+1 (prefill)")
    args = ap.parse_args(argv)
    if bool(args.token_ids) == bool(args.token_ids_file):
        ap.error("give exactly one of --token-ids and --token-ids-file")
    ids = parse_ids(args.token_ids if args.token_ids else open(args.token_ids_file).read())
    if not ids:
        ap.error("no token ids")
    if args.incremental and args.chunk:
        ap.error("--incremental and --chunk exclude each other")
    dtype = np.float64 if args.dtype == "float64" else np.float32
    t0 = time.time()
    model = Model(args.checkpoint, dtype)
    if max(ids) >= model.cfg.vocab_size or min(ids) < 0:
        ap.error(f"token id out of range [0, {model.cfg.vocab_size})")
    t1 = time.time()
    parts = None
    if args.quant_parts is not None:
        parts = [p for p in args.quant_parts.split(",") if p]
        if args.quant_simulation != "official" or not set(parts) <= set(Ctx.QUANT_PARTS):
            ap.error("--quant-parts takes a subset of linear,kv,indexer, with official")
    ctx = Ctx(dtype, args.quant_simulation == "official", dump=bool(args.dump), quant_parts=parts)
    mode = "incremental" if args.incremental else "chunked" if args.chunk else "prefill"
    hidden, streams = run(model, ids, ctx, mode, args.prefill_len, args.chunk)
    logits = model.logits(hidden)
    np.save(args.output, logits)
    t2 = time.time()
    if args.mtp_output:
        if not model.w.mtp:
            ap.error("the checkpoint has no MTP block")
        mstate = model.new_state(mtp=True)
        mh = model.mtp_forward(streams[:-1], np.asarray(ids[1:]), 0, mstate, ctx)
        np.save(args.mtp_output, model.logits(mh))
    if args.dump:
        arrays = {k: (np.concatenate(v) if v[0].ndim else np.array(v)) for k, v in ctx.dump.items()}
        arrays["logits"] = logits
        np.savez(args.dump, **arrays)
    print(f"dsv4_reference: {len(ids)} tokens, {mode}, quant-simulation {args.quant_simulation},"
          f" {args.dtype}: load {t1 - t0:.1f}s, forward+head {t2 - t1:.1f}s; "
          + ", ".join(f"{k} {v}" for k, v in ctx.stats.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
