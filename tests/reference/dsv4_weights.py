"""Configuration and weights of the DeepSeek-V4 reference (dsv4_reference.py): config.json (Hugging
Face keys) mapped to model.py's ModelArgs, and every tensor of the checkpoint dequantised exactly
to the compute dtype, grouped per module as plain dicts.

Line references: "m.py:N" = inference/model.py, "convert.py:N" = inference/convert.py.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402
from dsv4_numerics import Rope, fp8_simulate, mm  # noqa: E402

# ----------------------------------------------------------------------------------------
# Configuration (HF config.json keys -> the ModelArgs fields of m.py:35-95)
# ----------------------------------------------------------------------------------------


class Config:
    def __init__(self, hf):
        def need(key):
            if key not in hf:
                raise ValueError(f"config.json: missing key {key}")
            return hf[key]
        self.vocab_size = need("vocab_size")
        self.dim = need("hidden_size")
        self.n_layers = need("num_hidden_layers")
        self.n_heads = need("num_attention_heads")
        self.head_dim = need("head_dim")
        self.rope_head_dim = need("qk_rope_head_dim")
        self.q_lora_rank = need("q_lora_rank")
        self.o_groups = need("o_groups")
        self.o_lora_rank = need("o_lora_rank")
        self.window = need("sliding_window")
        self.compress_ratios = list(need("compress_ratios"))
        self.n_routed_experts = need("n_routed_experts")
        self.n_activated_experts = need("num_experts_per_tok")
        self.n_shared_experts = hf.get("n_shared_experts", 1)
        self.n_hash_layers = hf.get("num_hash_layers", 0)
        self.score_func = hf.get("scoring_func", "sqrtsoftplus")
        self.route_scale = hf.get("routed_scaling_factor", 1.0)
        self.swiglu_limit = hf.get("swiglu_limit", 0.0)
        self.index_n_heads = hf.get("index_n_heads", 0)
        self.index_head_dim = hf.get("index_head_dim", 0)
        self.index_topk = hf.get("index_topk", 0)
        self.hc_mult = need("hc_mult")
        self.hc_sinkhorn_iters = need("hc_sinkhorn_iters")
        self.hc_eps = need("hc_eps")
        self.norm_eps = hf.get("rms_norm_eps", 1e-6)
        self.rope_theta = need("rope_theta")
        self.compress_rope_theta = hf.get("compress_rope_theta", self.rope_theta)
        scaling = hf.get("rope_scaling") or {}
        self.rope_factor = scaling.get("factor", 1.0)
        self.original_seq_len = scaling.get("original_max_position_embeddings", 0)
        self.beta_fast = scaling.get("beta_fast", 32)
        self.beta_slow = scaling.get("beta_slow", 1)
        self.n_mtp_layers = hf.get("num_nextn_predict_layers", 0)
        if len(self.compress_ratios) < self.n_layers:
            raise ValueError("config.json: compress_ratios has fewer entries than layers")
        if self.n_shared_experts != 1:
            raise ValueError("model.py supports exactly one shared expert (m.py:652)")


# ----------------------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------------------


class Linear:
    """m.py:123-135 + 138-167: the input goes through FP8 act_quant (blocks of 128, ue8m0) only
    when the module is declared FP8/FP4 in model.py AND the checkpoint stores it quantised.
    Declared FP8/FP4 (m.py:477-483, 413, 617-619, 768-769): wq_a, wq_b, wkv, wo_b,
    indexer.wq_b, expert and shared-expert w1/w2/w3, MTP e_proj/h_proj. Declared bf16/fp32, so
    never rounded: wo_a (dequantised by convert.py:137-141, used by an einsum), compressor
    wkv/wgate (m.py:317-318), indexer weights_proj (m.py:414), gate (m.py:577, 591), head."""

    def __init__(self, ckpt, prefix, dtype, act_quant):
        self.prefix = prefix
        self.w = ckpt.dequantize_weight(prefix).astype(dtype)
        self.act_quant = act_quant and ckpt.weight_format(prefix) in ("fp8", "fp4")

    def __call__(self, x, ctx):
        if self.act_quant and "linear" in ctx.quant:
            x = fp8_simulate(x, 128)
        return mm(x, self.w)


class Weights:
    """All tensors of the checkpoint, dequantised to the compute dtype."""

    def __init__(self, directory, dtype):
        with open(os.path.join(directory, "config.json")) as f:
            self.cfg = Config(json.load(f))
        self.ckpt = st.Checkpoint(directory)
        self.dtype = dtype
        cfg, ck = self.cfg, self.ckpt
        self.embed_raw = ck.raw("embed.weight")               # decoded row by row
        self.embed_dtype = ck.dtype("embed.weight")
        head = ck.tensor("head.weight")
        self.head = head.astype(np.float32)                    # BF16 values: exact in float32
        self.norm = self.vec("norm.weight")
        self.hc_head = [self.vec("hc_head_fn"), self.vec("hc_head_scale"), self.vec("hc_head_base")]
        self.layers = [self.block(f"layers.{i}.", i) for i in range(cfg.n_layers)]
        self.mtp = []
        for i in range(cfg.n_mtp_layers):
            p = f"mtp.{i}."
            if p + "e_proj.weight" not in ck:
                break
            blk = self.block(p, cfg.n_layers + i)
            blk.update(e_proj=self.linear(p + "e_proj", True), h_proj=self.linear(p + "h_proj", True),
                       enorm=self.vec(p + "enorm.weight"), hnorm=self.vec(p + "hnorm.weight"),
                       norm=self.vec(p + "norm.weight"),
                       hc_head=[self.vec(p + "hc_head_fn"), self.vec(p + "hc_head_scale"),
                                self.vec(p + "hc_head_base")])
            self.mtp.append(blk)

    def vec(self, name):
        return self.ckpt.tensor(name).astype(self.dtype)

    def linear(self, prefix, act_quant):
        return Linear(self.ckpt, prefix, self.dtype, act_quant)

    def embed(self, ids):
        rows = self.embed_raw[np.asarray(ids)]
        if self.embed_dtype == "BF16":
            rows = st.decode_bf16(rows)
        return rows.astype(self.dtype)

    def block(self, p, layer_id):
        cfg, ck = self.cfg, self.ckpt
        ratio = cfg.compress_ratios[layer_id]
        a = p + "attn."
        attn = dict(ratio=ratio, rope=Rope(cfg, ratio != 0), sink=self.vec(a + "attn_sink"),
                    wq_a=self.linear(a + "wq_a", True), q_norm=self.vec(a + "q_norm.weight"),
                    wq_b=self.linear(a + "wq_b", True), wkv=self.linear(a + "wkv", True),
                    kv_norm=self.vec(a + "kv_norm.weight"),
                    wo_a=self.linear(a + "wo_a", False), wo_b=self.linear(a + "wo_b", True))
        if ratio:
            attn["compressor"] = self.compressor(a + "compressor.", ratio, cfg.head_dim, False)
            if ratio == 4:  # m.py:488-491
                i = a + "indexer."
                attn["indexer"] = dict(
                    wq_b=self.linear(i + "wq_b", True),
                    weights_proj=self.linear(i + "weights_proj", False),
                    compressor=self.compressor(i + "compressor.", ratio, cfg.index_head_dim, True))
        f = p + "ffn."
        gate = dict(w=self.ckpt.tensor(f + "gate.weight").astype(self.dtype),
                    hash=layer_id < cfg.n_hash_layers)                        # m.py:576
        if gate["hash"]:
            gate["tid2eid"] = ck.tensor(f + "gate.tid2eid").astype(np.int64)
        else:
            gate["bias"] = self.vec(f + "gate.bias")
        experts = [self.expert(f + f"experts.{e}.") for e in range(cfg.n_routed_experts)]
        return dict(layer_id=layer_id, attn=attn, gate=gate, experts=experts,
                    shared=self.expert(f + "shared_experts."),
                    attn_norm=self.vec(p + "attn_norm.weight"), ffn_norm=self.vec(p + "ffn_norm.weight"),
                    hc_attn=[self.vec(p + "hc_attn_fn"), self.vec(p + "hc_attn_scale"),
                             self.vec(p + "hc_attn_base")],
                    hc_ffn=[self.vec(p + "hc_ffn_fn"), self.vec(p + "hc_ffn_scale"),
                            self.vec(p + "hc_ffn_base")])

    def compressor(self, p, ratio, head_dim, rotate):
        return dict(ratio=ratio, head_dim=head_dim, rotate=rotate, overlap=ratio == 4,
                    eps=self.cfg.norm_eps,
                    ape=self.vec(p + "ape"), wkv=self.linear(p + "wkv", False),
                    wgate=self.linear(p + "wgate", False), norm=self.vec(p + "norm.weight"))

    def expert(self, p):
        return dict(w1=self.linear(p + "w1", True), w2=self.linear(p + "w2", True),
                    w3=self.linear(p + "w3", True))
