"""DeepSeek-V4 in torch, batched and trainable, computing what flint computes.

A port of tests/reference/dsv4_reference.py + dsv4_numerics.py (the numpy transcription of
DeepSeek's inference/model.py) for whole sequences from position 0 (model.py's prefill path):
hyper-connections with Sinkhorn, low-rank q with a per-head q norm, one shared K=V head,
interleaved RoPE (YaRN on compressed layers), sliding window with attention sink, inverse RoPE
on the output, grouped wo_a/wo_b, compressors (ratio 4 overlapping, ratio 128), the indexer
(Hadamard, FP4, top-k), hash and sqrt-softplus biased routing, shared expert, SwiGLU clamps,
hc_head, norm, head. Comments cite the reference's functions and model.py lines ("m.py:N").

Parameter and buffer names are the checkpoint's (official layout), so export.py writes
state_dict() as it is. Quantisation-aware training (Quant):
  weights   FP8 linears (wq_a, wq_b, wkv, wo_a, wo_b, indexer wq_b, shared experts) fake-quantised
            to E4M3 with one power-of-two (E8M0) scale per 128x128 block, routed experts to MXFP4
            (E2M1, one E8M0 scale per 32 inputs), BF16 tensors rounded to bf16; straight-through.
  acts      --quant-simulation official: FP8 (blocks of 128) on the inputs of the FP8/FP4
            linears except wo_a, FP8 (blocks of 64) on the KV's non-rope dims and the compressed
            entries, Hadamard + FP4 (blocks of 32) on indexer queries and keys; straight-through.
Top-k (indexer, biased routing) breaks ties toward the lower index when Quant.stable_topk is
set (eval), as flint and the reference do.

The indexer's top-k is not differentiable; as in DeepSeek-V3.2 (the published method for its
lightning indexer, which V4 keeps) the indexer is trained by a KL loss against the main
attention: target = the main attention's probability mass on each visible compressed entry,
summed over heads and normalised; the indexer's inputs are detached, so this loss trains only
the indexer and the main loss never reaches it.

Drafts: Block is the full decoder layer that MTP (`mtp.0`, m.py:765-792) and DSpark stages
reuse. With num_nextn_predict_layers > 0 the Transformer also holds `mtp.K`: MTPLayer
(train_mtp.py), or with the dspark_* keys DSparkStage (train_dspark.py; Transformer.dspark_block
and dspark_heads run the draft, forward_streams(features=True) gives its target features).
"""
import json
import math
from dataclasses import dataclass, field, asdict
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------
# Configuration (Hugging Face config.json keys, as flint reads them)
# ---------------------------------------------------------------------------------------


@dataclass
class Config:
    vocab_size: int = 8192
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_nextn_predict_layers: int = 0
    num_attention_heads: int = 4
    head_dim: int = 256
    qk_rope_head_dim: int = 64
    q_lora_rank: int = 128
    o_groups: int = 2
    o_lora_rank: int = 128
    sliding_window: int = 128
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    rope_factor: float = 16.0
    original_max_position_embeddings: int = 65536
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    compress_ratios: List[int] = field(default_factory=lambda: [0, 4, 128, 4])
    index_n_heads: int = 4
    index_head_dim: int = 128
    index_topk: int = 16
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 256
    num_hash_layers: int = 2
    routed_scaling_factor: float = 1.5
    swiglu_limit: float = 10.0
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    rms_norm_eps: float = 1e-6
    bos_token_id: int = 0
    eos_token_id: int = 1
    # DeepSeek-V4-Flash-0731's DSpark draft (0: none); the stages are mtp.0..N-1 with
    # N = num_nextn_predict_layers
    dspark_block_size: int = 0
    dspark_noise_token_id: int = 0
    dspark_target_layer_ids: List[int] = field(default_factory=list)
    dspark_markov_rank: int = 0

    def to_hf(self):
        """config.json as DeepSeek ships it (and `flint make-tiny` writes it)."""
        hf = {
            "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_nextn_predict_layers": self.num_nextn_predict_layers,
            "max_position_embeddings": 1048576, "rms_norm_eps": self.rms_norm_eps,
            "bos_token_id": self.bos_token_id, "eos_token_id": self.eos_token_id,
            "tie_word_embeddings": False, "hidden_act": "silu",
            "num_attention_heads": self.num_attention_heads, "num_key_value_heads": 1,
            "head_dim": self.head_dim, "qk_rope_head_dim": self.qk_rope_head_dim,
            "q_lora_rank": self.q_lora_rank, "o_groups": self.o_groups,
            "o_lora_rank": self.o_lora_rank, "sliding_window": self.sliding_window,
            "rope_theta": self.rope_theta, "compress_rope_theta": self.compress_rope_theta,
            "rope_scaling": {"type": "yarn", "factor": self.rope_factor,
                             "original_max_position_embeddings": self.original_max_position_embeddings,
                             "beta_fast": self.beta_fast, "beta_slow": self.beta_slow},
            "compress_ratios": list(self.compress_ratios) + [0] * self.num_nextn_predict_layers,
            "index_n_heads": self.index_n_heads, "index_head_dim": self.index_head_dim,
            "index_topk": self.index_topk, "n_routed_experts": self.n_routed_experts,
            "n_shared_experts": 1, "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.moe_intermediate_size,
            "num_hash_layers": self.num_hash_layers, "scoring_func": "sqrtsoftplus",
            "norm_topk_prob": True, "routed_scaling_factor": self.routed_scaling_factor,
            "swiglu_limit": self.swiglu_limit, "topk_method": "noaux_tc", "expert_dtype": "fp4",
            "hc_mult": self.hc_mult, "hc_sinkhorn_iters": self.hc_sinkhorn_iters,
            "hc_eps": self.hc_eps,
            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                    "quant_method": "fp8", "scale_fmt": "ue8m0",
                                    "weight_block_size": [128, 128]},
            "torch_dtype": "bfloat16",
        }
        if self.dspark_block_size:
            for k in ("dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
                      "dspark_markov_rank"):
                hf[k] = getattr(self, k)
        return hf

    @staticmethod
    def from_hf(hf):
        c = Config()
        for k in asdict(c):
            if k in hf:
                setattr(c, k, hf[k])
        rs = hf.get("rope_scaling") or {}
        c.rope_factor = rs.get("factor", c.rope_factor)
        c.original_max_position_embeddings = rs.get("original_max_position_embeddings",
                                                    c.original_max_position_embeddings)
        c.beta_fast, c.beta_slow = rs.get("beta_fast", c.beta_fast), rs.get("beta_slow", c.beta_slow)
        c.compress_ratios = list(hf["compress_ratios"])[:c.num_hidden_layers]
        if isinstance(c.eos_token_id, list):
            c.eos_token_id = c.eos_token_id[0]
        return c

    @staticmethod
    def load(path):
        with open(path) as f:
            return Config.from_hf(json.load(f))


class Quant:
    """What the forward rounds; shared by every module of one model."""

    def __init__(self, weights=True, acts=True, stable_topk=False):
        self.weights = weights
        self.acts = acts
        self.stable_topk = stable_topk


# ---------------------------------------------------------------------------------------
# Number formats (dsv4_numerics.py / safetensors_np.py in torch)
# ---------------------------------------------------------------------------------------

FP8_MAX = 448.0
FP4_MAX = 6.0


def round_to_grid(x, mantissa_bits, min_exponent, max_value):
    """Nearest value of a binary float grid with `mantissa_bits` fraction bits (ties to even),
    saturating at max_value; below 2^min_exponent the step stays 2^(min_exponent -
    mantissa_bits) (subnormals). x is float32 or float64; every step is exact. Implemented on
    the bit pattern (frexp/ldexp are ~50x slower on CPU)."""
    if x.dtype == torch.float64:
        it, frac = torch.int64, 52
    else:
        it, frac = torch.int32, 23
    x = torch.clamp(x, -max_value, max_value).contiguous()
    shift = frac - mantissa_bits
    b = x.view(it)
    b = (b + ((1 << (shift - 1)) - 1) + ((b >> shift) & 1)) & ~((1 << shift) - 1)
    q = b.view(x.dtype)
    step = 2.0 ** (min_exponent - mantissa_bits)
    sub = torch.round(x * (1.0 / step)) * step
    return torch.where(x.abs() < 2.0 ** min_exponent, sub, q)


def round_fp8(x):
    return round_to_grid(x, 3, -6, FP8_MAX)


def round_fp4(x):
    return round_to_grid(x, 1, 0, FP4_MAX)


def pow2_scale(amax, max_value, floor):
    """Smallest power of two >= max(amax, floor) / max_value, computed in float32 as DeepSeek's
    kernels do (fast_round_scale: ceil(log2) read off the float32 bits)."""
    a = torch.clamp(amax.float(), min=floor) * torch.tensor(1.0 / max_value, dtype=torch.float32)
    b = a.contiguous().view(torch.int32)
    e = (b >> 23) + ((b & 0x7FFFFF) != 0).to(torch.int32)
    return (e << 23).view(torch.float32)


def _blockwise(x, block, max_value, floor, rounder):
    """Rounds x (float32/float64) in blocks of `block` along the last axis with power-of-two
    block scales."""
    shape = x.shape
    xb = x.reshape(shape[:-1] + (shape[-1] // block, block))
    scale = pow2_scale(xb.abs().amax(dim=-1, keepdim=True), max_value, floor).to(x.dtype)
    return (rounder(xb / scale) * scale).reshape(shape)


def fp8_act(x, block):
    """act_quant with ue8m0 scales (k_tl.py:40-125), straight-through."""
    xf = x.detach()
    xf = xf if xf.dtype in (torch.float32, torch.float64) else xf.float()
    q = _blockwise(xf, block, FP8_MAX, 1e-4, round_fp8).to(x.dtype)
    return x + (q - x).detach()


def fp4_act(x, block):
    """fp4_act_quant (k_tl.py:128-200), straight-through."""
    xf = x.detach()
    xf = xf if xf.dtype in (torch.float32, torch.float64) else xf.float()
    q = _blockwise(xf, block, FP4_MAX, 6.0 * 2.0 ** -126, round_fp4).to(x.dtype)
    return x + (q - x).detach()


def quantize_fp8_weight(w):
    """FP8 E4M3 weight with one E8M0 scale per 128x128 block. Returns (dequantised w,
    values in units of their block scale, scales [ceil(out/128), ceil(in/128)])."""
    o, i = w.shape
    w = w.float()
    po, pi = -o % 128, -i % 128
    wp = F.pad(w, (0, pi, 0, po)) if po or pi else w
    amax = F.max_pool2d(wp.abs()[None, None], 128)[0, 0]
    scale = pow2_scale(amax, FP8_MAX, 1e-30)
    full = scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[:o, :i]
    q = round_fp8(w / full)
    return q * full, q, scale


def quantize_fp4_weight(w):
    """MXFP4: E2M1 values with one E8M0 scale per 32 inputs. Returns (dequantised, values in
    units of their scale, scale [out, in/32])."""
    o, i = w.shape
    blocks = w.float().reshape(o, i // 32, 32)
    scale = pow2_scale(blocks.abs().amax(dim=-1), FP4_MAX, 1e-30)
    q = round_fp4(blocks / scale[..., None])
    return (q * scale[..., None]).reshape(o, i), q.reshape(o, i), scale


def round_bf16(w):
    return w.to(torch.bfloat16).to(w.dtype)


def ste(w, q):
    return w + (q.to(w.dtype) - w).detach()


# ---------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------


class Linear(nn.Module):
    """y = x W^T. fmt: 'fp8' / 'fp4' (weights stored quantised; inputs FP8-rounded unless
    act_quant=False, which is wo_a) or 'bf16' (never rounded inputs)."""

    def __init__(self, quant, d_in, d_out, fmt, act_quant=True, std=0.02):
        super().__init__()
        self.quant, self.fmt = quant, fmt
        self.act_quant = act_quant and fmt in ("fp8", "fp4")
        self.weight = nn.Parameter(torch.randn(d_out, d_in) * std)

    def qweight(self):
        w = self.weight
        if not self.quant.weights:
            return w
        if self.fmt == "fp8":
            return ste(w, quantize_fp8_weight(w.detach())[0])
        if self.fmt == "fp4":
            return ste(w, quantize_fp4_weight(w.detach())[0])
        return ste(w, round_bf16(w.detach()))

    def forward(self, x):
        if self.act_quant and self.quant.acts:
            x = fp8_act(x, 128)
        return F.linear(x, self.qweight())


class RMSNorm(nn.Module):
    """m.py:206-211, in float32 (or float64), weight stored as BF16."""

    def __init__(self, quant, dim, eps):
        super().__init__()
        self.quant, self.eps = quant, eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        w = self.weight
        if self.quant.weights:
            w = ste(w, round_bf16(w.detach()))
        return rms_norm(x, w, self.eps)


def rms_norm(x, w, eps):
    dt = x.dtype
    xf = x.float() if dt not in (torch.float32, torch.float64) else x
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if w is not None:
        y = y * w.to(y.dtype)
    return y


class Rope:
    """dsv4_numerics.Rope: interleaved pairs, YaRN (no attention factor) on compressed layers."""

    def __init__(self, cfg, compressed):
        dim = cfg.qk_rope_head_dim
        if compressed:
            base, original = cfg.compress_rope_theta, cfg.original_max_position_embeddings
        else:
            base, original = cfg.rope_theta, 0
        freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        if original > 0:
            def corr(rot):
                return dim * math.log(original / (rot * 2 * math.pi)) / (2 * math.log(base))
            low = max(math.floor(corr(cfg.beta_fast)), 0)
            high = min(math.ceil(corr(cfg.beta_slow)), dim - 1)
            if low == high:
                high += 0.001
            ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
            smooth = 1 - ramp
            freqs = freqs / cfg.rope_factor * (1 - smooth) + freqs * smooth
        self.freqs = freqs
        self.cache = {}

    def cos_sin(self, positions, dtype):
        """positions [n] (cached: ranges repeat every step) or [N, n] (DSpark blocks)."""
        if positions.dim() != 1:
            ang = positions.to(torch.float64)[..., None] * self.freqs
            return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)
        key = (positions.numel(), int(positions[0]) if positions.numel() else 0,
               int(positions[-1]) if positions.numel() else 0, dtype)
        got = self.cache.get(key)
        if got is None:
            ang = positions.to(torch.float64)[:, None] * self.freqs
            got = (torch.cos(ang).to(dtype), torch.sin(ang).to(dtype))
            self.cache[key] = got
        return got

    def apply(self, x, positions, inverse=False):
        """x [..., n, heads, rd]: position axis -3; positions [n] or [N, n] (x [N, n, ...])."""
        dt = torch.float64 if x.dtype == torch.float64 else torch.float32
        cos, sin = self.cos_sin(positions, dt)
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)             # [n, 1, rd/2]
        if inverse:
            sin = -sin
        xf = x.to(dt)
        re, im = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((re * cos - im * sin, re * sin + im * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)


def rope_tail(rope, x, positions, rd, inverse=False):
    """RoPE on the last rd dims of x [B, n, d] or [B, n, H, d]."""
    if x.dim() == 4:
        tail = rope.apply(x[..., -rd:], positions, inverse)
    else:
        tail = rope.apply(x[..., -rd:].unsqueeze(-2), positions, inverse).squeeze(-2)
    return torch.cat([x[..., :-rd], tail.to(x.dtype)], dim=-1)


_HADAMARD = {}


def hadamard(x):
    """rotate_activation (m.py:262-271): Walsh-Hadamard in Sylvester order, scaled n^-1/2."""
    n = x.shape[-1]
    key = (n, x.dtype)
    if key not in _HADAMARD:
        h = torch.ones(1, 1, dtype=torch.float64)
        while h.shape[0] < n:
            h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
        _HADAMARD[key] = (h * n ** -0.5).to(x.dtype if x.dtype != torch.bfloat16 else torch.float32)
    h = _HADAMARD[key]
    return (x.to(h.dtype) @ h).to(x.dtype)


def topk_idx(scores, k, stable):
    """Indices of the k largest per row; with stable, ties go to the lower index."""
    if stable:
        return torch.sort(scores, dim=-1, descending=True, stable=True)[1][..., :k]
    return torch.topk(scores, k, dim=-1)[1]


# ---------------------------------------------------------------------------------------
# Compressor (m.py:299-397; reference compressor_prefill / compressor_finish)
# ---------------------------------------------------------------------------------------


class Compressor(nn.Module):
    def __init__(self, quant, cfg, ratio, head_dim, rotate):
        super().__init__()
        self.quant, self.cfg = quant, cfg
        self.ratio, self.head_dim, self.rotate = ratio, head_dim, rotate
        self.overlap = ratio == 4
        coff = 2 if self.overlap else 1
        self.ape = nn.Parameter(torch.zeros(ratio, coff * head_dim))
        self.wkv = Linear(quant, cfg.hidden_size, coff * head_dim, "bf16")
        self.wgate = Linear(quant, cfg.hidden_size, coff * head_dim, "bf16")
        self.norm = RMSNorm(quant, head_dim, cfg.rms_norm_eps)

    def forward(self, x, rope):
        """x [B, T, H] from position 0 -> entries [B, T // ratio, head_dim] of complete blocks."""
        B, T, _ = x.shape
        r, d = self.ratio, self.head_dim
        C = T // r
        if C == 0:
            return x.new_zeros(B, 0, d)
        cut = C * r
        kv = self.wkv(x[:, :cut]).float() if x.dtype != torch.float64 else self.wkv(x[:, :cut])
        sc = self.wgate(x[:, :cut]).to(kv.dtype)
        kv = kv.reshape(B, C, r, -1)
        sc = sc.reshape(B, C, r, -1) + self.ape.to(kv.dtype)
        if self.overlap:                                   # overlap_transform, m.py:327-334
            prev_kv = F.pad(kv[:, :-1, :, :d], (0, 0, 0, 0, 1, 0))
            prev_sc = F.pad(sc[:, :-1, :, :d], (0, 0, 0, 0, 1, 0), value=float("-inf"))
            kv = torch.cat([prev_kv, kv[..., d:]], dim=2)
            sc = torch.cat([prev_sc, sc[..., d:]], dim=2)
        entries = (kv * torch.softmax(sc, dim=2)).sum(dim=2)          # [B, C, d]
        x = self.norm(entries)
        starts = torch.arange(0, cut, r)
        rd = self.cfg.qk_rope_head_dim
        x = rope_tail(rope, x, starts, rd)
        if self.rotate:
            x = hadamard(x)
            if self.quant.acts:
                x = fp4_act(x, 32)
        elif self.quant.acts:
            x = torch.cat([fp8_act(x[..., :-rd], 64), x[..., -rd:]], dim=-1)
        return x


# ---------------------------------------------------------------------------------------
# Indexer (m.py:400-453)
# ---------------------------------------------------------------------------------------


class Indexer(nn.Module):
    def __init__(self, quant, cfg):
        super().__init__()
        self.quant, self.cfg = quant, cfg
        self.wq_b = Linear(quant, cfg.q_lora_rank, cfg.index_n_heads * cfg.index_head_dim, "fp8")
        self.weights_proj = Linear(quant, cfg.hidden_size, cfg.index_n_heads, "bf16")
        self.compressor = Compressor(quant, cfg, 4, cfg.index_head_dim, rotate=True)

    def scores(self, x, qr, rope):
        """[B, T, C] index scores, -inf where the entry is not complete at the query."""
        cfg = self.cfg
        B, T, _ = x.shape
        pos = torch.arange(T)
        q = self.wq_b(qr).reshape(B, T, cfg.index_n_heads, cfg.index_head_dim)
        q = rope_tail(rope, q, pos, cfg.qk_rope_head_dim)
        q = hadamard(q)
        if self.quant.acts:
            q = fp4_act(q, 32)
        keys = self.compressor(x, rope)                                # [B, C, d]
        w = self.weights_proj(x) * (cfg.index_head_dim ** -0.5 * cfg.index_n_heads ** -0.5)
        s = torch.einsum("bthd,bcd->bthc", q.to(keys.dtype), keys)
        s = (torch.relu(s) * w.to(s.dtype)[..., None]).sum(dim=2)      # m.py:440-441
        C = keys.shape[1]
        visible = torch.arange(C)[None, :] < ((pos + 1) // 4)[:, None]  # [T, C]
        return s.masked_fill(~visible, float("-inf")), visible


# ---------------------------------------------------------------------------------------
# Attention (m.py:456-563)
# ---------------------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, quant, cfg, ratio):
        super().__init__()
        self.quant, self.cfg, self.ratio = quant, cfg, ratio
        H, hd = cfg.num_attention_heads, cfg.head_dim
        self.attn_sink = nn.Parameter(torch.zeros(H))
        self.wq_a = Linear(quant, cfg.hidden_size, cfg.q_lora_rank, "fp8")
        self.q_norm = RMSNorm(quant, cfg.q_lora_rank, cfg.rms_norm_eps)
        self.wq_b = Linear(quant, cfg.q_lora_rank, H * hd, "fp8")
        self.wkv = Linear(quant, cfg.hidden_size, hd, "fp8")
        self.kv_norm = RMSNorm(quant, hd, cfg.rms_norm_eps)
        self.wo_a = Linear(quant, H * hd // cfg.o_groups, cfg.o_groups * cfg.o_lora_rank, "fp8",
                           act_quant=False)
        self.wo_b = Linear(quant, cfg.o_groups * cfg.o_lora_rank, cfg.hidden_size, "fp8",
                           std=0.02 / math.sqrt(2 * cfg.num_hidden_layers))
        self.rope = Rope(cfg, ratio != 0)
        if ratio:
            self.compressor = Compressor(quant, cfg, ratio, hd, rotate=False)
            if ratio == 4:
                self.indexer = Indexer(quant, cfg)
        self.aux_loss = None

    def forward(self, x):
        cfg = self.cfg
        B, T, _ = x.shape
        H, hd, rd, win = cfg.num_attention_heads, cfg.head_dim, cfg.qk_rope_head_dim, cfg.sliding_window
        pos = torch.arange(T)
        qr = self.q_norm(self.wq_a(x))
        q = self.wq_b(qr).reshape(B, T, H, hd)
        q = rms_norm(q, None, cfg.rms_norm_eps)                       # m.py:518
        q = rope_tail(self.rope, q, pos, rd)
        kv = self.kv_rows(x, pos)
        dt = q.dtype if q.dtype == torch.float64 else torch.float32
        i, j = pos[:, None], pos[None, :]
        mask = ((j <= i) & (j > i - win)).expand(B, T, T)             # window, m.py:281-284
        keys = kv
        self.aux_loss = None
        if self.ratio:
            comp = self.compressor(x, self.rope)                      # [B, C, hd]
            C = comp.shape[1]
            visible = torch.arange(C)[None, :] < ((pos + 1) // self.ratio)[:, None]
            if self.ratio == 4:
                xi, qri = (x.detach(), qr.detach()) if self.training else (x, qr)
                iscore, _ = self.indexer.scores(xi, qri, self.rope)
                k = min(cfg.index_topk, C)
                cmask = torch.zeros(B, T, C, dtype=torch.bool)
                if k > 0:
                    top = topk_idx(iscore, k, self.quant.stable_topk)
                    cmask.scatter_(2, top, True)
                cmask = cmask & visible
            else:
                cmask = visible.expand(B, T, C)
            keys = torch.cat([kv, comp.to(kv.dtype)], dim=1)
            mask = torch.cat([mask, cmask], dim=2)
        scale = hd ** -0.5
        s = torch.einsum("bthd,bsd->bhts", q, keys.to(q.dtype)).to(dt) * scale
        sink = self.attn_sink.to(dt).view(1, H, 1, 1).expand(B, H, T, 1)
        logits = torch.cat([s.masked_fill(~mask[:, None], float("-inf")), sink], dim=-1)
        p = torch.softmax(logits, dim=-1)[..., :-1]                   # sink: denominator only
        if self.ratio == 4 and self.training:
            self.aux_loss = self.indexer_loss(s, mask, visible, iscore, T)
        return self.output(p, keys, q.dtype, pos)

    def kv_rows(self, x, pos):
        """The window KV rows of x [B, T, D] at positions pos: kv_norm(wkv(x)), RoPE, the
        non-rope dims through FP8 in blocks of 64 (m.py:522-526)."""
        rd = self.cfg.qk_rope_head_dim
        kv = rope_tail(self.rope, self.kv_norm(self.wkv(x)), pos, rd)
        if self.quant.acts:
            kv = torch.cat([fp8_act(kv[..., :-rd], 64), kv[..., -rd:]], dim=-1)
        return kv

    def output(self, p, keys, dtype, pos):
        """p [B, H, T, S] attention weights over keys [B, S, hd] (K = V) -> [B, T, D]: inverse
        RoPE (m.py:554), grouped wo_a (m.py:557-562), wo_b."""
        cfg = self.cfg
        B, _, T, _ = p.shape
        o = torch.einsum("bhts,bsd->bthd", p.to(keys.dtype), keys)
        o = rope_tail(self.rope, o.to(dtype), pos, cfg.qk_rope_head_dim, inverse=True)
        g = cfg.o_groups
        wo_a = self.wo_a.qweight().reshape(g, cfg.o_lora_rank, -1)
        o = torch.einsum("btgd,grd->btgr", o.reshape(B, T, g, -1), wo_a.to(o.dtype))
        return self.wo_b(o.reshape(B, T, -1))

    def draft_block(self, x, pos, ctx, ctx_pos):
        """A DSpark stage's attention (flint attention.cpp, segment.block; DeepSpec's
        create_dspark_attention_mask): x [N, n, D] the block rows at positions pos [N, n];
        ctx [N, W, hd] the stage's context rows at ctx_pos [N, W] (all before the block's
        anchor; -1: none). The row at p sees the context rows c > p - window and all n block
        rows (non-causal); softmax with the sink."""
        cfg = self.cfg
        N, n, _ = x.shape
        H, hd, rd = cfg.num_attention_heads, cfg.head_dim, cfg.qk_rope_head_dim
        q = self.wq_b(self.q_norm(self.wq_a(x))).reshape(N, n, H, hd)
        q = rope_tail(self.rope, rms_norm(q, None, cfg.rms_norm_eps), pos, rd)
        kv = self.kv_rows(x, pos)
        keys = torch.cat([ctx.to(kv.dtype), kv], dim=1)               # [N, W + n, hd]
        seen = (ctx_pos[:, None, :] >= 0) & (ctx_pos[:, None, :] > pos[:, :, None] - cfg.sliding_window)
        mask = torch.cat([seen, torch.ones(N, n, n, dtype=torch.bool)], dim=2)
        dt = q.dtype if q.dtype == torch.float64 else torch.float32
        s = torch.einsum("bthd,bsd->bhts", q, keys.to(q.dtype)).to(dt) * hd ** -0.5
        sink = self.attn_sink.to(dt).view(1, H, 1, 1).expand(N, H, n, 1)
        p = torch.softmax(torch.cat([s.masked_fill(~mask[:, None], float("-inf")), sink], -1), -1)
        return self.output(p[..., :-1], keys, q.dtype, pos)

    def indexer_loss(self, s, mask, visible, iscore, T):
        """KL(target || indexer) over the visible compressed entries (DeepSeek-V3.2's dense
        indexer objective): target = main attention's mass on each entry with every visible
        entry attended, summed over heads, normalised."""
        with torch.no_grad():
            C = iscore.shape[-1]
            win_mask = mask[:, :, :T]
            full = torch.cat([win_mask, visible.expand_as(mask[:, :, T:])], dim=2)
            sink = self.attn_sink.detach().float().view(1, -1, 1, 1).expand(s.shape[0], s.shape[1], T, 1)
            lg = torch.cat([s.detach().float().masked_fill(~full[:, None], float("-inf")), sink], -1)
            pc = torch.softmax(lg, dim=-1)[..., T:T + C].sum(dim=1)     # [B, T, C]
            tgt = pc / pc.sum(-1, keepdim=True).clamp_min(1e-12)
            rows = visible.any(-1)                                       # [T]
        logq = torch.log_softmax(iscore.float().masked_fill(~visible, -1e30), dim=-1)
        kl = (tgt * (torch.log(tgt.clamp_min(1e-12)) - logq)).masked_fill(~visible, 0).sum(-1)
        return kl[:, rows].mean() if rows.any() else kl.sum() * 0


# ---------------------------------------------------------------------------------------
# MoE (m.py:566-670)
# ---------------------------------------------------------------------------------------


class Expert(nn.Module):
    def __init__(self, quant, cfg, fmt):
        super().__init__()
        self.cfg = cfg
        D, I = cfg.hidden_size, cfg.moe_intermediate_size
        self.w1 = Linear(quant, D, I, fmt)
        self.w2 = Linear(quant, I, D, fmt, std=0.02 / math.sqrt(2 * cfg.num_hidden_layers))
        self.w3 = Linear(quant, D, I, fmt)

    def forward(self, x, weights=None):
        """m.py:622-632: clamp w1 from above, w3 both ways; routing weight before w2."""
        lim = self.cfg.swiglu_limit
        g = self.w1(x)
        u = self.w3(x)
        if lim > 0:
            u = torch.clamp(u, -lim, lim)
            g = torch.clamp(g, max=lim)
        h = F.silu(g) * u
        if weights is not None:
            h = weights[:, None].to(h.dtype) * h
        return self.w2(h)


class Gate(nn.Module):
    def __init__(self, quant, cfg, hashed, layer_seed):
        super().__init__()
        self.quant, self.cfg, self.hashed = quant, cfg, hashed
        self.weight = nn.Parameter(torch.randn(cfg.n_routed_experts, cfg.hidden_size) * 0.02)
        if hashed:
            gen = torch.Generator().manual_seed(1000 + layer_seed)
            t = torch.stack([torch.randperm(cfg.n_routed_experts, generator=gen)[:cfg.num_experts_per_tok]
                             for _ in range(cfg.vocab_size)])
            self.register_buffer("tid2eid", t.to(torch.int64))
        else:
            self.register_buffer("bias", torch.zeros(cfg.n_routed_experts))
        self.load = None

    def forward(self, x, ids):
        """m.py:590-610: weights [N, k], indices [N, k]."""
        cfg = self.cfg
        w = self.weight
        if self.quant.weights:
            w = ste(w, round_bf16(w.detach()))
        xf = x if x.dtype == torch.float64 else x.float()
        with torch.autocast("cpu", enabled=False):
            logits = F.linear(xf, w.to(xf.dtype))
        scores = torch.sqrt(F.softplus(logits))
        if self.hashed:
            idx = self.tid2eid[ids]
        else:
            idx = topk_idx(scores.detach() + self.bias.to(scores.dtype), cfg.num_experts_per_tok,
                           self.quant.stable_topk)
            if self.training:
                self.load = torch.bincount(idx.flatten(), minlength=cfg.n_routed_experts)
        wts = scores.gather(1, idx)
        wts = wts / wts.sum(-1, keepdim=True)
        return wts * cfg.routed_scaling_factor, idx


class MoE(nn.Module):
    def __init__(self, quant, cfg, layer_id):
        super().__init__()
        self.cfg = cfg
        self.gate = Gate(quant, cfg, layer_id < cfg.num_hash_layers, layer_id)
        self.experts = nn.ModuleList([Expert(quant, cfg, "fp4") for _ in range(cfg.n_routed_experts)])
        self.shared_experts = Expert(quant, cfg, "fp8")

    def forward(self, x, ids):
        B, T, D = x.shape
        xf = x.reshape(-1, D)
        wts, idx = self.gate(xf, ids.reshape(-1))
        y = torch.zeros_like(xf)
        for e in range(self.cfg.n_routed_experts):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            out = self.experts[e](xf[rows], wts[rows, slot])
            y = y.index_add(0, rows, out.to(y.dtype))
        y = y + self.shared_experts(xf).to(y.dtype)
        return y.reshape(B, T, D)


# ---------------------------------------------------------------------------------------
# Hyper-connections (m.py:673-712; k_tl.py:371-438) and the block
# ---------------------------------------------------------------------------------------


def hc_mixes(streams, fn, eps):
    flat = streams.flatten(-2)
    return F.linear(flat, fn) * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + eps)


def hc_init(block, name, cfg, n_out):
    hc, D = cfg.hc_mult, cfg.hidden_size
    setattr(block, f"hc_{name}_fn", nn.Parameter(torch.randn(n_out, hc * D) * 0.01))
    base = torch.zeros(n_out)
    base[:hc] = -math.log(hc - 1)         # pre weights sigmoid = 1/hc at start
    setattr(block, f"hc_{name}_base", nn.Parameter(base))
    setattr(block, f"hc_{name}_scale", nn.Parameter(torch.ones(3 if n_out > hc else 1)))


class Block(nn.Module):
    """m.py:714-726: hc_pre, attn_norm, attention, hc_post, hc_pre, ffn_norm, MoE, hc_post."""

    def __init__(self, quant, cfg, layer_id, ratio):
        super().__init__()
        self.cfg, self.layer_id = cfg, layer_id
        self.attn_norm = RMSNorm(quant, cfg.hidden_size, cfg.rms_norm_eps)
        self.ffn_norm = RMSNorm(quant, cfg.hidden_size, cfg.rms_norm_eps)
        self.attn = Attention(quant, cfg, ratio)
        self.ffn = MoE(quant, cfg, layer_id)
        n = (2 + cfg.hc_mult) * cfg.hc_mult
        hc_init(self, "attn", cfg, n)
        hc_init(self, "ffn", cfg, n)

    def hc_pre(self, streams, name):
        cfg = self.cfg
        hc, eps = cfg.hc_mult, cfg.hc_eps
        fn, scale, base = (getattr(self, f"hc_{name}_{k}") for k in ("fn", "scale", "base"))
        dt = torch.float64 if streams.dtype == torch.float64 else torch.float32
        with torch.autocast("cpu", enabled=False):
            s = streams.to(dt)
            mixes = hc_mixes(s, fn.to(dt), cfg.rms_norm_eps)
            pre = torch.sigmoid(mixes[..., :hc] * scale[0] + base[:hc]) + eps
            post = 2 * torch.sigmoid(mixes[..., hc:2 * hc] * scale[1] + base[hc:2 * hc])
            comb = mixes[..., 2 * hc:].reshape(mixes.shape[:-1] + (hc, hc)) * scale[2] \
                + base[2 * hc:].reshape(hc, hc)
            comb = torch.softmax(comb, dim=-1) + eps
            comb = comb / (comb.sum(-2, keepdim=True) + eps)
            for _ in range(cfg.hc_sinkhorn_iters - 1):
                comb = comb / (comb.sum(-1, keepdim=True) + eps)
                comb = comb / (comb.sum(-2, keepdim=True) + eps)
            x = (pre.unsqueeze(-1) * s).sum(-2)
        return x, post, comb

    @staticmethod
    def hc_post(x, streams, post, comb):
        """new stream k = post[k] x + sum_j comb[j, k] streams[j] (m.py:709-712)."""
        dt = post.dtype
        return post.unsqueeze(-1) * x.to(dt).unsqueeze(-2) + torch.einsum(
            "btjk,btjd->btkd", comb, streams.to(dt))

    def forward(self, streams, ids, attn=None):
        """attn: replaces self.attn's forward (a DSpark stage's block attention)."""
        x, post, comb = self.hc_pre(streams, "attn")
        x = (attn or self.attn)(self.attn_norm(x))
        streams = self.hc_post(x, streams, post, comb)
        x, post, comb = self.hc_pre(streams, "ffn")
        x = self.ffn(self.ffn_norm(x), ids)
        return self.hc_post(x, streams, post, comb)


class Embedding(nn.Module):
    def __init__(self, quant, vocab, dim):
        super().__init__()
        self.quant = quant
        self.weight = nn.Parameter(torch.randn(vocab, dim) * 0.02)

    def forward(self, ids):
        w = self.weight
        if self.quant.weights:
            w = ste(w, round_bf16(w.detach()))
        return F.embedding(ids, w)


def hc_head(owner, streams, cfg):
    """hc_head (m.py:754-761) with owner's hc_head_fn / hc_head_scale / hc_head_base."""
    dt = torch.float64 if streams.dtype == torch.float64 else torch.float32
    with torch.autocast("cpu", enabled=False):
        s = streams.to(dt)
        pre = torch.sigmoid(hc_mixes(s, owner.hc_head_fn.to(dt), cfg.rms_norm_eps)
                            * owner.hc_head_scale + owner.hc_head_base) + cfg.hc_eps
        return (pre.unsqueeze(-1) * s).sum(-2)


def hc_head_init(owner, cfg):
    hc, D = cfg.hc_mult, cfg.hidden_size
    owner.hc_head_fn = nn.Parameter(torch.randn(hc, hc * D) * 0.01)
    owner.hc_head_base = nn.Parameter(torch.full((hc,), -math.log(hc - 1)))
    owner.hc_head_scale = nn.Parameter(torch.ones(1))


class MTPLayer(Block):
    """DeepSeek-V3/V4 MTP layer `mtp.K` (MTPBlock, m.py:765-792; tests/reference
    dsv4_reference.mtp_forward; flint src/model/deepseek_v4/mtp.cpp): a full Block (layer id
    num_hidden_layers + K: its compress_ratios entry, window-only 0 as DeepSeek ships it, and
    bias routing since the id is past num_hash_layers) fed with
        e_proj(enorm(embed(token p+1))) + h_proj(hnorm(stream k of the main model at p)),
    then its own hc_head and norm and the target's head: row p predicts token p + 2.
    embed and head are the target's (passed in, not owned)."""

    def __init__(self, quant, cfg, k=0):
        layer_id = cfg.num_hidden_layers + k
        ratios = list(cfg.compress_ratios) + [0] * (layer_id + 1 - len(cfg.compress_ratios))
        super().__init__(quant, cfg, layer_id, ratios[layer_id])
        D = cfg.hidden_size
        self.e_proj = Linear(quant, D, D, "fp8")
        self.h_proj = Linear(quant, D, D, "fp8")
        self.enorm = RMSNorm(quant, D, cfg.rms_norm_eps)
        self.hnorm = RMSNorm(quant, D, cfg.rms_norm_eps)
        self.norm = RMSNorm(quant, D, cfg.rms_norm_eps)
        hc_head_init(self, cfg)

    def hidden(self, streams, next_ids, embed):
        """streams [B, T, hc, D] of the main model at p, next_ids [B, T] = tokens p + 1 ->
        the MTP hidden state [B, T, D] (m.py:783-792)."""
        e = self.e_proj(self.enorm(embed(next_ids)))
        x = self.h_proj(self.hnorm(streams))
        dt = torch.float64 if streams.dtype == torch.float64 else torch.float32
        x = x.to(dt) + e.unsqueeze(-2).to(dt)
        x = self.forward(x, next_ids)
        return self.norm(hc_head(self, x, self.cfg))


class MarkovHead(nn.Module):
    """DSpark's Markov head: z_k = U_k + markov_w2 . markov_w1[prev_k] (markov_w1 [V, r] read as
    an embedding, markov_w2 r -> V, no bias; DeepSpec markov_head.py)."""

    def __init__(self, quant, cfg):
        super().__init__()
        r, V = cfg.dspark_markov_rank, cfg.vocab_size
        self.markov_w1 = Linear(quant, r, V, "bf16")
        self.markov_w2 = Linear(quant, r, V, "bf16")
        with torch.no_grad():                   # starts as no correction
            self.markov_w2.weight.zero_()

    def embed(self, prev):
        return F.embedding(prev, self.markov_w1.qweight())


class ConfidenceHead(nn.Module):
    """c_k = sigmoid(proj . [h_k ; markov_w1[prev_k]]) (no bias on V4)."""

    def __init__(self, quant, cfg):
        super().__init__()
        self.proj = Linear(quant, cfg.hidden_size + cfg.dspark_markov_rank, 1, "bf16")
        with torch.no_grad():
            self.proj.weight.zero_()


class DSparkStage(Block):
    """Stage `mtp.K` of a DSpark draft (DeepSeek-V4-Flash-0731; flint model/deepseek_v4/dspark.h,
    tests/reference/dspark_reference.py): an ordinary window-only block (layer id
    num_hidden_layers + K, bias routing) whose attention is Attention.draft_block. Stage 0 also
    holds main_proj / main_norm (target features -> main_x, the context rows' input); the last
    stage holds norm, hc_head_*, the Markov head and the confidence head."""

    def __init__(self, quant, cfg, k):
        super().__init__(quant, cfg, cfg.num_hidden_layers + k, 0)
        D = cfg.hidden_size
        if k == 0:
            self.main_proj = Linear(quant, len(cfg.dspark_target_layer_ids) * D, D, "fp8")
            self.main_norm = RMSNorm(quant, D, cfg.rms_norm_eps)
        if k == cfg.num_nextn_predict_layers - 1:
            self.norm = RMSNorm(quant, D, cfg.rms_norm_eps)
            hc_head_init(self, cfg)
            self.markov_head = MarkovHead(quant, cfg)
            self.confidence_head = ConfidenceHead(quant, cfg)


class Transformer(nn.Module):
    def __init__(self, cfg, quant=None):
        super().__init__()
        self.cfg = cfg
        self.quant = quant or Quant()
        q = self.quant
        self.embed = Embedding(q, cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([Block(q, cfg, i, cfg.compress_ratios[i])
                                     for i in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(q, cfg.hidden_size, cfg.rms_norm_eps)
        self.head = Linear(q, cfg.hidden_size, cfg.vocab_size, "bf16")
        hc_head_init(self, cfg)
        if cfg.num_nextn_predict_layers:
            kind = DSparkStage if cfg.dspark_block_size else MTPLayer
            self.mtp = nn.ModuleList([kind(q, cfg, k) for k in range(cfg.num_nextn_predict_layers)])

    def embed_streams(self, ids):
        h = self.embed(ids)
        if self.cfg.hc_mult and h.dtype != torch.float64:
            h = h.float()
        return h.unsqueeze(-2).expand(h.shape[:-1] + (self.cfg.hc_mult, h.shape[-1]))

    def forward_streams(self, ids, features=False):
        """ids [B, T] from position 0 -> final streams [B, T, hc, D]; with features, also the
        DSpark features [B, T, len(dspark_target_layer_ids) * D]: each target layer's output
        streams averaged over the hc streams, concatenated in the config's order."""
        streams = self.embed_streams(ids)
        means = {}
        for i, blk in enumerate(self.layers):
            streams = blk(streams, ids)
            if features and i in self.cfg.dspark_target_layer_ids:
                means[i] = streams.mean(-2)
        if not features:
            return streams
        return streams, torch.cat([means[i] for i in self.cfg.dspark_target_layer_ids], -1)

    def hidden(self, streams):
        """hc_head (m.py:754-761), then norm."""
        return self.norm(hc_head(self, streams, self.cfg))

    def forward(self, ids):
        """Logits [B, T, vocab]."""
        return self.head(self.hidden(self.forward_streams(ids)))

    def mtp_logits(self, streams, next_ids, k=0):
        """MTP layer k: streams [B, T, hc, D] at p and tokens p + 1 -> logits for p + 2."""
        return self.head(self.mtp[k].hidden(streams, next_ids, self.embed))

    def dspark_block(self, features, ids, rows, anchors, n):
        """The DSpark draft's base logits for blocks of n rows. features [B, T, F] and ids
        [B, T]: the target's features and tokens from position 0; block a starts at position
        anchors[a] of sequence rows[a] (its anchor token ids[rows[a], anchors[a]]; its context
        the positions before it), then n - 1 noise tokens. -> U [A, n, V] (base logits: row k
        predicts the token at anchor + k + 1), h [A, n, D] (hc_head's output).
        The context rows are computed for all T positions, then each block gathers the
        window - 1 before its anchor."""
        cfg, stages = self.cfg, self.mtp
        A, T = anchors.shape[0], ids.shape[1]
        main_x = stages[0].main_norm(stages[0].main_proj(features))           # [B, T, D]
        W = cfg.sliding_window - 1
        ctx_pos = anchors[:, None] - W + torch.arange(W)                       # [A, W]
        ctx_pos = torch.where(ctx_pos >= 0, ctx_pos, torch.full_like(ctx_pos, -1))
        pos = anchors[:, None] + torch.arange(n)                               # [A, n]
        blk = torch.full((A, n), cfg.dspark_noise_token_id, dtype=torch.int64)
        blk[:, 0] = ids[rows, anchors]
        streams = self.embed_streams(blk)
        for st in stages:
            ctx = st.attn.kv_rows(main_x, torch.arange(T))[rows[:, None], ctx_pos.clamp(min=0)]
            streams = st(streams, blk,
                         attn=lambda x, st=st, ctx=ctx: st.attn.draft_block(x, pos, ctx, ctx_pos))
        h = hc_head(stages[-1], streams, cfg)
        return self.head(stages[-1].norm(h)), h

    def dspark_heads(self, U, h, prev):
        """Markov-corrected logits z [A, n, V] and confidence logits [A, n] given prev [A, n]
        (prev_0 = the anchor, then the previous row's token)."""
        last = self.mtp[-1]
        e = last.markov_head.embed(prev)
        z = U + last.markov_head.markov_w2(e).to(U.dtype)
        c = last.confidence_head.proj(torch.cat([h.to(e.dtype), e], -1)).squeeze(-1)
        return z, c

    def aux_losses(self):
        return [b.attn.aux_loss for b in self.layers if b.attn.aux_loss is not None]

    @torch.no_grad()
    def update_gate_bias(self, rate):
        """DeepSeek's auxiliary-loss-free balancing: raise the bias of under-loaded experts."""
        for b in self.layers:
            g = b.ffn.gate
            if not g.hashed and g.load is not None:
                load = g.load.float()
                g.bias += rate * torch.sign(load.mean() - load)
                g.load = None


def count_params(model):
    return sum(p.numel() for p in model.parameters())
