#!/usr/bin/python3
"""Writes a small random DeepSeek-V4 checkpoint in the official Hugging Face layout, in numpy.

Used to test the reference (tests/reference/dsv4_reference.py) without flint: the tensor names,
dtypes and quantisation layouts of a real checkpoint, the dimensions of flint's `tiny` preset:
  FP8 E4M3 weights + E8M0 scale per 128x128 block: attention wq_a, wq_b, wkv, wo_a, wo_b,
    indexer wq_b, shared experts, MTP e_proj/h_proj;
  routed experts packed FP4 E2M1 (I8 [out, in/2]) + E8M0 scale per 32 inputs, or with
    --expert-dtype fp8 FP8 + per-block scales (E8M0, or F32 with --fp8-scale-dtype f32);
  BF16 embed, head, norms, gate, compressor wkv/wgate, indexer weights_proj;
  F32 hc_*, attn_sink, ape, gate bias; I64 (or I32) tid2eid.
Written as two shards plus model.safetensors.index.json, to exercise the sharded reader.

  /usr/bin/python3 make_test_checkpoint.py OUT_DIR [--seed N] [--expert-dtype fp4|fp8]
      [--fp8-scale-dtype e8m0|f32] [--tid2eid-dtype i64|i32]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

TINY_CONFIG = {
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
    "vocab_size": 129280, "hidden_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
    "qk_rope_head_dim": 64, "q_lora_rank": 128, "o_groups": 2, "o_lora_rank": 128,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
    "n_shared_experts": 1, "num_hash_layers": 2, "compress_ratios": [0, 4, 128, 4, 0],
    "num_nextn_predict_layers": 1, "sliding_window": 128, "index_n_heads": 4,
    "index_head_dim": 128, "index_topk": 16, "hc_mult": 4, "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-6, "rms_norm_eps": 1e-6, "rope_theta": 10000, "compress_rope_theta": 160000,
    "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                     "beta_fast": 32, "beta_slow": 1},
    "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "norm_topk_prob": True,
    "swiglu_limit": 10.0, "topk_method": "noaux_tc", "expert_dtype": "fp4",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
    "bos_token_id": 0, "eos_token_id": 1, "max_position_embeddings": 1048576,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "hidden_act": "silu",
}


class Writer:
    def __init__(self, seed, expert_dtype, fp8_scale_dtype, tid2eid_dtype):
        self.rng = np.random.default_rng(seed)
        self.expert_dtype = expert_dtype
        self.fp8_scale_dtype = fp8_scale_dtype
        self.tid2eid_dtype = tid2eid_dtype
        self.tensors = {}

    def normal(self, shape, std):
        return self.rng.standard_normal(shape) * std

    def bf16(self, name, value):
        self.tensors[name] = ("BF16", st.encode_bf16(value))

    def f32(self, name, value):
        self.tensors[name] = ("F32", np.asarray(value, dtype=np.float32))

    def fp8(self, prefix, out, inp):
        """FP8 weight with one power-of-two scale per 128x128 block."""
        w = self.normal((out, inp), inp ** -0.5)
        rb, cb = -(-out // 128), -(-inp // 128)
        pad = np.zeros((rb * 128, cb * 128))
        pad[:out, :inp] = np.abs(w)
        amax = pad.reshape(rb, 128, cb, 128).max(axis=(1, 3))
        scale = st.pow2_block_scale(amax, st.FP8_E4M3_MAX, 1e-30)
        full = np.repeat(np.repeat(scale, 128, 0), 128, 1)[:out, :inp]
        codes = st.encode_fp8_e4m3(st.round_to_fp8_e4m3(w / full))
        self.tensors[prefix + ".weight"] = ("F8_E4M3", codes)
        if self.fp8_scale_dtype == "f32":
            self.tensors[prefix + ".scale"] = ("F32", scale.astype(np.float32))
        else:
            self.tensors[prefix + ".scale"] = ("F8_E8M0", st.encode_e8m0(scale))

    def fp4(self, prefix, out, inp):
        """Packed FP4 weight with one power-of-two scale per 32 inputs."""
        w = self.normal((out, inp), inp ** -0.5)
        amax = np.abs(w).reshape(out, inp // 32, 32).max(axis=-1)
        scale = st.pow2_block_scale(amax, st.FP4_E2M1_MAX, 1e-30)
        values = st.round_to_fp4_e2m1(w / np.repeat(scale, 32, axis=1))
        self.tensors[prefix + ".weight"] = ("I8", st.encode_fp4_e2m1_packed(values))
        self.tensors[prefix + ".scale"] = ("F8_E8M0", st.encode_e8m0(scale))

    def norm(self, name, dim):
        self.bf16(name, 1.0 + self.normal(dim, 0.1))

    def hc(self, prefix, kind, rows, hc_dim):
        self.f32(f"{prefix}hc_{kind}_fn", self.normal((rows, hc_dim), hc_dim ** -0.5))
        self.f32(f"{prefix}hc_{kind}_base", self.normal(rows, 0.5))
        self.f32(f"{prefix}hc_{kind}_scale", 0.5 + self.rng.random(3 if rows > 4 else 1))

    def compressor(self, prefix, ratio, head_dim, dim):
        coff = 2 if ratio == 4 else 1
        self.f32(prefix + "ape", self.normal((ratio, coff * head_dim), 0.5))
        self.bf16(prefix + "wkv.weight", self.normal((coff * head_dim, dim), dim ** -0.5))
        self.bf16(prefix + "wgate.weight", self.normal((coff * head_dim, dim), dim ** -0.5))
        self.norm(prefix + "norm.weight", head_dim)

    def block(self, p, layer_id, cfg):
        dim, hc = cfg["hidden_size"], cfg["hc_mult"]
        heads, hd = cfg["num_attention_heads"], cfg["head_dim"]
        ratio = cfg["compress_ratios"][layer_id]
        self.norm(p + "attn_norm.weight", dim)
        self.norm(p + "ffn_norm.weight", dim)
        self.hc(p, "attn", (2 + hc) * hc, hc * dim)
        self.hc(p, "ffn", (2 + hc) * hc, hc * dim)
        a = p + "attn."
        self.f32(a + "attn_sink", self.normal(heads, 1.0))
        self.fp8(a + "wq_a", cfg["q_lora_rank"], dim)
        self.norm(a + "q_norm.weight", cfg["q_lora_rank"])
        self.fp8(a + "wq_b", heads * hd, cfg["q_lora_rank"])
        self.fp8(a + "wkv", hd, dim)
        self.norm(a + "kv_norm.weight", hd)
        g = cfg["o_groups"]
        self.fp8(a + "wo_a", g * cfg["o_lora_rank"], heads * hd // g)
        self.fp8(a + "wo_b", dim, g * cfg["o_lora_rank"])
        if ratio:
            self.compressor(a + "compressor.", ratio, hd, dim)
        if ratio == 4:
            i = a + "indexer."
            self.fp8(i + "wq_b", cfg["index_n_heads"] * cfg["index_head_dim"], cfg["q_lora_rank"])
            self.bf16(i + "weights_proj.weight", self.normal((cfg["index_n_heads"], dim), dim ** -0.5))
            self.compressor(i + "compressor.", ratio, cfg["index_head_dim"], dim)
        f = p + "ffn."
        n_exp, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
        self.bf16(f + "gate.weight", self.normal((n_exp, dim), dim ** -0.5))
        if layer_id < cfg["num_hash_layers"]:
            table = np.argsort(self.rng.random((cfg["vocab_size"], n_exp)), axis=1)[:, :k]
            if self.tid2eid_dtype == "i32":
                self.tensors[f + "gate.tid2eid"] = ("I32", table.astype(np.int32))
            else:
                self.tensors[f + "gate.tid2eid"] = ("I64", table.astype(np.int64))
        else:
            self.f32(f + "gate.bias", self.normal(n_exp, 0.1))
        inter = cfg["moe_intermediate_size"]
        for e in range(n_exp):
            make = self.fp4 if self.expert_dtype == "fp4" else self.fp8
            make(f + f"experts.{e}.w1", inter, dim)
            make(f + f"experts.{e}.w2", dim, inter)
            make(f + f"experts.{e}.w3", inter, dim)
        self.fp8(f + "shared_experts.w1", inter, dim)
        self.fp8(f + "shared_experts.w2", dim, inter)
        self.fp8(f + "shared_experts.w3", inter, dim)


def make(out_dir, seed=7, expert_dtype="fp4", fp8_scale_dtype="e8m0", tid2eid_dtype="i64",
         config=None):
    cfg = dict(config or TINY_CONFIG)
    cfg["expert_dtype"] = expert_dtype
    w = Writer(seed, expert_dtype, fp8_scale_dtype, tid2eid_dtype)
    dim, hc, vocab = cfg["hidden_size"], cfg["hc_mult"], cfg["vocab_size"]
    w.bf16("embed.weight", w.normal((vocab, dim), 1.0))
    w.bf16("head.weight", w.normal((vocab, dim), dim ** -0.5))
    w.norm("norm.weight", dim)
    w.hc("", "head", hc, hc * dim)
    for i in range(cfg["num_hidden_layers"]):
        w.block(f"layers.{i}.", i, cfg)
    for k in range(cfg["num_nextn_predict_layers"]):
        p = f"mtp.{k}."
        w.block(p, cfg["num_hidden_layers"] + k, cfg)
        w.fp8(p + "e_proj", dim, dim)
        w.fp8(p + "h_proj", dim, dim)
        w.norm(p + "enorm.weight", dim)
        w.norm(p + "hnorm.weight", dim)
        w.norm(p + "norm.weight", dim)
        w.hc(p, "head", hc, hc * dim)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    # Two shards: the big global tensors and layer 0 in one, the rest in the other.
    shards = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    weight_map = {}
    for name, value in w.tensors.items():
        first = not name.startswith(("layers.1", "layers.2", "layers.3", "mtp."))
        file = "model-00001-of-00002.safetensors" if first else "model-00002-of-00002.safetensors"
        shards[file][name] = value
        weight_map[name] = file
    for file, tensors in shards.items():
        st.write_safetensors(os.path.join(out_dir, file), tensors, {"format": "pt"})
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--expert-dtype", choices=["fp4", "fp8"], default="fp4")
    ap.add_argument("--fp8-scale-dtype", choices=["e8m0", "f32"], default="e8m0")
    ap.add_argument("--tid2eid-dtype", choices=["i64", "i32"], default="i64")
    a = ap.parse_args()
    make(a.out_dir, a.seed, a.expert_dtype, a.fp8_scale_dtype, a.tid2eid_dtype)


if __name__ == "__main__":
    main()
