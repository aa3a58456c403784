"""Numerical building blocks of the DeepSeek-V4 reference (dsv4_reference.py): matrix products,
norms, the FP8/FP4 activation roundings of DeepSeek's kernels, the Hadamard transform, top-k
with a fixed tie rule, RoPE with YaRN, and the options of one run (Ctx).

Line references: "m.py:N" = inference/model.py, "k_tl.py:N" = inference/kernel_tilelang.py.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402


class Ctx:
    """Options of one run plus the debug dump and diagnostic counters."""

    QUANT_PARTS = ("linear", "kv", "indexer")

    def __init__(self, dtype=np.float64, official=True, dump=False, quant_parts=None):
        self.dtype = dtype
        # --quant-simulation official rounds all three groups of activations; a subset is for
        # localising differences: 'linear' = FP8 inputs of FP8/FP4 linears, 'kv' = FP8 non-rope
        # dims of the window KV and of the compressed entries, 'indexer' = FP4 q and keys.
        parts = self.QUANT_PARTS if official else ()
        self.quant = set(parts if quant_parts is None else quant_parts)
        self.dump = {} if dump else None
        self.stats = {"indexer_rows": 0, "indexer_boundary_ties": 0, "indexer_near_ties": 0,
                      "moe_rows": 0, "moe_boundary_ties": 0, "moe_near_ties": 0}

    def record(self, name, value):
        if self.dump is not None:
            self.dump.setdefault(name, []).append(np.array(value))


# ----------------------------------------------------------------------------------------
# Numerics
# ----------------------------------------------------------------------------------------


def _fast_blas():
    """numpy with the reference (netlib) BLAS multiplies ~3x slower than einsum's own loops."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return False
    return any(lib in maps for lib in ("openblas", "libmkl", "blis"))


_FAST_BLAS = _fast_blas()


def mm(x, w):
    """x [..., k] times w[out, k] transposed -> [..., out] (F.linear without bias)."""
    if _FAST_BLAS:
        return x @ w.T
    x2 = x.reshape(-1, x.shape[-1])
    if w.size <= (1 << 20):
        y = np.einsum("ik,jk->ij", x2, w)
    else:  # keep a slice of w in cache while all rows of x go by
        y = np.empty((x2.shape[0], w.shape[0]), dtype=np.result_type(x2, w))
        step = max(1, (1 << 18) // w.shape[1])
        for s in range(0, w.shape[0], step):
            y[:, s:s + step] = np.einsum("ik,jk->ij", x2, w[s:s + step])
    return y.reshape(x.shape[:-1] + (w.shape[0],))


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def silu(x):
    return x * sigmoid(x)


def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def rms_norm(x, weight, eps):
    """m.py:206-211 (weight may be None for the unweighted per-head norm of m.py:518)."""
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def fp8_simulate(x, block):
    """act_quant(..., scale_fmt='ue8m0', inplace=True), k_tl.py:40-125: per block of `block`
    values along the last axis, scale = 2^ceil(log2(max(amax, 1e-4) / 448)), values divided by
    it, clamped to +-448, rounded to E4M3 and multiplied back."""
    shape = x.shape
    xb = x.reshape(shape[:-1] + (shape[-1] // block, block)).astype(np.float64)
    scale = st.pow2_block_scale(np.abs(xb).max(axis=-1, keepdims=True), st.FP8_E4M3_MAX, 1e-4)
    q = st.round_to_fp8_e4m3(np.clip(xb / scale, -st.FP8_E4M3_MAX, st.FP8_E4M3_MAX)) * scale
    return q.reshape(shape).astype(x.dtype)


def fp4_simulate(x, block):
    """fp4_act_quant(..., inplace=True), k_tl.py:128-200: scale = 2^ceil(log2(max(amax,
    6*2^-126) / 6)), clamp to +-6, round to E2M1, multiply back."""
    shape = x.shape
    xb = x.reshape(shape[:-1] + (shape[-1] // block, block)).astype(np.float64)
    scale = st.pow2_block_scale(np.abs(xb).max(axis=-1, keepdims=True), st.FP4_E2M1_MAX,
                                6.0 * 2.0 ** -126)
    q = st.round_to_fp4_e2m1(np.clip(xb / scale, -st.FP4_E2M1_MAX, st.FP4_E2M1_MAX)) * scale
    return q.reshape(shape).astype(x.dtype)


_HADAMARD = {}


def hadamard(x):
    """rotate_activation, m.py:262-271: Walsh-Hadamard (Sylvester order) scaled by n^-1/2."""
    n = x.shape[-1]
    if n not in _HADAMARD:
        h = np.ones((1, 1))
        while h.shape[0] < n:
            h = np.block([[h, h], [h, -h]])
        if h.shape[0] != n:
            raise ValueError(f"Hadamard size {n} is not a power of two")
        _HADAMARD[n] = h
    return (x @ _HADAMARD[n].astype(x.dtype)) * x.dtype.type(n ** -0.5)


def topk_indices(scores, k):
    """Indices of the k largest values per row, largest first; ties go to the lower index
    (torch.topk leaves their order unspecified)."""
    return np.argsort(-scores, axis=-1, kind="stable")[..., :k]


def count_boundary_ties(ctx, scores, k, prefix, valid_counts=None):
    """Diagnostics: rows whose k-th and (k+1)-th largest valid scores are equal / within 1e-6
    (relative), where the selected set depends on rounding or tie-breaking."""
    s = -np.sort(-scores, axis=-1)
    for r in range(s.shape[0]):
        n_valid = s.shape[1] if valid_counts is None else int(valid_counts[r])
        if n_valid <= k or k == 0:
            continue
        ctx.stats[prefix + "_rows"] += 1
        a, b = s[r, k - 1], s[r, k]
        if a == b:
            ctx.stats[prefix + "_boundary_ties"] += 1
        if abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-30):
            ctx.stats[prefix + "_near_ties"] += 1


class Rope:
    """precompute_freqs_cis (m.py:214-244) and apply_rotary_emb (m.py:247-259): interleaved
    pairs (x[2i], x[2i+1]) rotated by pos * freq[i]. Sliding-window layers use rope_theta
    without YaRN, compressed layers compress_rope_theta with YaRN (m.py:495-501)."""

    def __init__(self, cfg, compressed):
        dim = cfg.rope_head_dim
        if compressed:
            base, original = cfg.compress_rope_theta, cfg.original_seq_len
        else:
            base, original = cfg.rope_theta, 0
        freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
        if original > 0:
            def correction_dim(rotations):
                return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))
            low = max(math.floor(correction_dim(cfg.beta_fast)), 0)
            high = min(math.ceil(correction_dim(cfg.beta_slow)), dim - 1)
            if low == high:
                high += 0.001
            ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
            smooth = 1 - ramp
            freqs = freqs / cfg.rope_factor * (1 - smooth) + freqs * smooth
        self.freqs = freqs

    def apply(self, x, positions, inverse=False):
        """x [n, ..., rope_dim], positions [n]."""
        angles = np.asarray(positions, dtype=np.float64)[:, None] * self.freqs
        angles = angles.reshape((len(angles),) + (1,) * (x.ndim - 2) + (-1,))
        cos, sin = np.cos(angles), np.sin(angles)
        if inverse:
            sin = -sin
        re, im = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = re * cos - im * sin
        out[..., 1::2] = re * sin + im * cos
        return out
