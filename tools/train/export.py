#!/usr/bin/python3
"""Writes a model of model.py in DeepSeek-V4's official checkpoint layout, as flint loads it.

  /usr/bin/python3 tools/train/export.py --ckpt CKPT.pt --tokenizer DATA_DIR --out MODEL_DIR
  /usr/bin/python3 tools/train/export.py --random --seed 1 --tokenizer DATA_DIR --out MODEL_DIR

Layout (as `flint make-tiny` writes, src/model/deepseek_v4/tiny_checkpoint.cpp): config.json,
model-0000K-of-0000N.safetensors (the target's tensors, then a draft's) +
model.safetensors.index.json, tokenizer.json,
tokenizer_config.json. Tensors: FP8 linears as F8_E4M3 `.weight` + F8_E8M0 `.scale` (one per
128x128 block); routed experts as packed FP4 E2M1 (I8 [out, in/2], low nibble = even input)
+ F8_E8M0 `.scale` [out, in/32]; embed, head, norms, gate, compressor wkv/wgate, indexer
weights_proj as BF16; hc_*, ape, attn_sink, gate.bias as F32; tid2eid as I64.

A checkpoint of train_mtp.py (num_nextn_predict_layers 1) also gives the MTP layer `mtp.0.*`
(e_proj/h_proj FP8, enorm/hnorm/norm BF16, its block as the main layers', hc_head_* F32; embed
and head are the target's) and config.json's num_nextn_predict_layers 1 with a trailing 0 in
compress_ratios. A checkpoint of train_dspark.py gives DeepSeek-V4-Flash-0731's layout instead:
stages `mtp.0..N-1.*` (blocks as the main layers'), mtp.0.main_proj (FP8) and main_norm, on the
last stage norm, hc_head_*, markov_head.markov_w{1,2} and confidence_head.proj (BF16), and the
dspark_* keys in config.json. --no-mtp leaves the MTP layer or the DSpark stages out.

Also writes golden logits: golden/ids_K.json and golden/logits_K.npy (float32 [n, vocab]) of
the torch eval forward (model.py, float32, `--quant-simulation official` roundings, weights read
back from the written files) for a few prompts; with an MTP layer golden/mtp_logits_K.npy
([n - 1, vocab], row p predicts token p + 2, as tests/reference/dsv4_reference.py
--mtp-output); with DSpark stages golden/dspark_K.json: the greedy first token after the prompt
(the anchor) and the block-size drafts and confidences from it, as `flint generate
--print-drafts` prints its first draft line, with each draft's margin over the runner-up.
With --val: golden/heldout.i32 (held-out ids) and golden/perplexity.json (the torch forward's
mean NLL on them, windowed as `flint perplexity --context 512 --windows 8`).
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402

GOLDEN_PROMPTS = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune",
    "In the beginning God created the heaven and the earth.",
    "Fellow-Citizens of the Senate and House of Representatives:",
]

# ---------------------------------------------------------------------------------------
# Encoders
# ---------------------------------------------------------------------------------------

_FP8_POS = None


def fp8_codes(q):
    """E4M3FN codes of values already on the E4M3 grid (|q| <= 448)."""
    global _FP8_POS
    if _FP8_POS is None:
        c = np.arange(127)
        e, m = c >> 3, c & 7
        _FP8_POS = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * np.ldexp(1.0, e - 7))
    a = np.abs(q).astype(np.float64)
    code = np.searchsorted(_FP8_POS, a)
    if not np.array_equal(_FP8_POS[np.minimum(code, 126)], a):
        raise ValueError("value not on the E4M3 grid")
    return (code | np.where(np.signbit(q), 0x80, 0)).astype(np.uint8)


_FP4_POS = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def fp4_packed(q):
    a = np.abs(q).astype(np.float64)
    code = np.searchsorted(_FP4_POS, a)
    if not np.array_equal(_FP4_POS[np.minimum(code, 7)], a):
        raise ValueError("value not on the E2M1 grid")
    code = (code | np.where(np.signbit(q), 8, 0)).astype(np.uint8)
    return (code[:, 0::2] | (code[:, 1::2] << 4)).astype(np.uint8)


def e8m0_codes(scale):
    s = scale.astype(np.float64)
    m, e = np.frexp(s)
    if not np.all(m == 0.5):
        raise ValueError("scale is not a power of two")
    return (e - 1 + 127).astype(np.uint8)


def bf16_bytes(t):
    return t.detach().to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


# ---------------------------------------------------------------------------------------
# Checkpoint
# ---------------------------------------------------------------------------------------


def linear_formats(model):
    """{param name: 'fp8' | 'fp4' | 'bf16'} of every Linear's weight."""
    out = {}
    for name, mod in model.named_modules():
        if isinstance(mod, M.Linear):
            out[name + ".weight"] = mod.fmt
    return out


def checkpoint_tensors(model):
    """{name: (safetensors dtype, numpy array)} plus {name: dequantised torch tensor}."""
    fmts = linear_formats(model)
    tensors, deq = {}, {}
    for name, t in model.state_dict().items():
        t = t.detach().float() if t.is_floating_point() else t
        fmt = fmts.get(name)
        if fmt == "fp8":
            d, q, s = M.quantize_fp8_weight(t)
            base = name[:-len(".weight")]
            tensors[name] = ("F8_E4M3", fp8_codes(q.numpy()))
            tensors[base + ".scale"] = ("F8_E8M0", e8m0_codes(s.numpy()))
            deq[name] = d
        elif fmt == "fp4":
            d, q, s = M.quantize_fp4_weight(t)
            base = name[:-len(".weight")]
            tensors[name] = ("I8", fp4_packed(q.numpy()).view(np.int8))
            tensors[base + ".scale"] = ("F8_E8M0", e8m0_codes(s.numpy()))
            deq[name] = d
        elif t.dtype == torch.int64:
            tensors[name] = ("I64", t.numpy())
            deq[name] = t
        elif fmt == "bf16" or name.endswith("norm.weight") or name == "embed.weight" \
                or name.endswith("gate.weight"):
            tensors[name] = ("BF16", bf16_bytes(t))
            deq[name] = M.round_bf16(t)
        else:                                   # hc_*, ape, attn_sink, gate.bias
            tensors[name] = ("F32", t.numpy().astype(np.float32))
            deq[name] = t
    return tensors, deq


def write_safetensors(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        b = np.ascontiguousarray(arr).tobytes()
        shape = list(arr.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return offset


def export(model, out, tokenizer_dir):
    """The target's tensors go to one shard and a draft's (mtp.*) to a second, so the target's
    shard is the same file, byte for byte, whichever draft rides along (git stores it once
    for models/dsv4-mini and models/dsv4-mini-0731)."""
    os.makedirs(out, exist_ok=True)
    tensors, deq = checkpoint_tensors(model)
    parts = [{k: v for k, v in tensors.items() if not k.startswith("mtp.")},
             {k: v for k, v in tensors.items() if k.startswith("mtp.")}]
    parts = [p for p in parts if p]
    weight_map, size = {}, 0
    for i, part in enumerate(parts):
        shard = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
        size += write_safetensors(os.path.join(out, shard), part)
        weight_map.update({k: shard for k in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": size},
                   "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}, f, indent=2)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(model.cfg.to_hf(), f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out, name))
    return deq


def read_back(directory):
    """The written checkpoint, dequantised by tests/reference's independent reader, as a
    model.py Transformer (weights exact; no further weight rounding needed)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "tests", "reference"))
    import safetensors_np as st
    cfg = M.Config.load(os.path.join(directory, "config.json"))
    model = M.Transformer(cfg, M.Quant(weights=False, acts=True, stable_topk=True))
    ck = st.Checkpoint(directory)
    sd = {}
    for name, t in model.state_dict().items():
        if name.endswith(".weight") and (name[:-7] + ".scale") in ck:
            arr = ck.dequantize_weight(name[:-7])
        else:
            arr = ck.tensor(name)
        sd[name] = torch.from_numpy(np.array(arr)).to(t.dtype)
    model.load_state_dict(sd)
    model.eval()
    return model


@torch.no_grad()
def eval_logits(model, ids, dtype=torch.float32):
    m = model.to(dtype)
    x = torch.tensor([ids], dtype=torch.int64)
    return m(x)[0].to(torch.float32).numpy()


@torch.no_grad()
def eval_mtp_logits(model, ids, dtype=torch.float32):
    """MTP logits [n - 1, vocab]: row p predicts token p + 2 from the main streams at p and
    token p + 1 (as dsv4_reference.py --mtp-output)."""
    m = model.to(dtype)
    x = torch.tensor([ids], dtype=torch.int64)
    streams = m.forward_streams(x)
    return m.mtp_logits(streams[:, :-1], x[:, 1:])[0].to(torch.float32).numpy()


@torch.no_grad()
def eval_dspark_drafts(model, ids, anchor=None, n=None, dtype=torch.float32):
    """Greedy DSpark drafts after the prompt ids: the anchor (default: the target's greedy next
    token), then n (default: block size) drafts, left to right through the Markov head, with
    their confidences and the margin of each draft's logit over the runner-up."""
    m = model.to(dtype)
    n = n or m.cfg.dspark_block_size
    x = torch.tensor([ids], dtype=torch.int64)
    streams, feats = m.forward_streams(x, features=True)
    if anchor is None:
        anchor = int(m.head(m.hidden(streams[:, -1:]))[0, -1].argmax())
    seq = torch.cat([x, torch.tensor([[anchor]])], 1)
    U, h = m.dspark_block(torch.cat([feats, feats[:, -1:]], 1), seq, torch.tensor([0]),
                         torch.tensor([len(ids)]), n)
    prev, drafts, conf, margin = anchor, [], [], []
    for k in range(n):
        z, c = m.dspark_heads(U[:, k:k + 1], h[:, k:k + 1], torch.tensor([[prev]]))
        top = torch.topk(z[0, 0].double(), 2)
        prev = int(top.indices[0])
        drafts.append(prev)
        conf.append(float(torch.sigmoid(c[0, 0].double())))
        margin.append(float(top.values[0] - top.values[1]))
    return {"context": len(ids), "anchor": anchor, "drafts": drafts, "confidence": conf,
            "margin": margin}


@torch.no_grad()
def eval_perplexity(model, ids, context, windows, dtype=torch.float32):
    """Mean NLL of `flint perplexity --context C --windows W` on ids: W windows at k * step
    (step = (n - C - 1) // W), each scored from an empty context."""
    m = model.to(dtype)
    step = max(1, (len(ids) - context - 1) // windows)
    total = 0.0
    for k in range(windows):
        w = torch.tensor([ids[k * step:k * step + context + 1]], dtype=torch.int64)
        logits = m(w[:, :-1])[0].double()
        total += F.cross_entropy(logits, w[0, 1:], reduction="sum").item()
    return total / (windows * context)


def write_perplexity(directory, model, val_bin, tokens=16385, context=512, windows=8):
    """golden/heldout.i32: the first `tokens` held-out ids (val.bin), golden/perplexity.json:
    the torch eval forward's mean NLL on them as `flint perplexity` windows them."""
    ids = np.fromfile(val_bin, dtype=np.uint16)[:tokens].astype("<i4")
    gdir = os.path.join(directory, "golden")
    ids.tofile(os.path.join(gdir, "heldout.i32"))
    nll = eval_perplexity(model, ids.tolist(), context, windows)
    with open(os.path.join(gdir, "perplexity.json"), "w") as f:
        json.dump({"file": "heldout.i32", "context": context, "windows": windows,
                   "quant_simulation": "official", "dtype": "float32", "mean_nll": nll,
                   "perplexity": math.exp(nll)}, f)


def write_golden(directory, model, tokenizer_dir):
    import data as D
    tok = D.Tokenizer(D.load_merges(tokenizer_dir))
    gdir = os.path.join(directory, "golden")
    os.makedirs(gdir, exist_ok=True)
    for k, text in enumerate(GOLDEN_PROMPTS):
        ids = [0] + tok.encode(text)
        with open(os.path.join(gdir, f"ids_{k}.json"), "w") as f:
            json.dump({"text": text, "ids": ids, "dtype": "float32",
                       "quant_simulation": "official"}, f)
        np.save(os.path.join(gdir, f"logits_{k}.npy"), eval_logits(model, ids))
        if model.cfg.dspark_block_size:
            with open(os.path.join(gdir, f"dspark_{k}.json"), "w") as f:
                json.dump(eval_dspark_drafts(model, ids), f)
        elif model.cfg.num_nextn_predict_layers:
            np.save(os.path.join(gdir, f"mtp_logits_{k}.npy"), eval_mtp_logits(model, ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", help="training checkpoint (.pt) of train.py")
    ap.add_argument("--random", action="store_true", help="export a randomly initialised model")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--config", help="config.json to use with --random (default: model.py's)")
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json (data.py --out)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-golden", action="store_true")
    ap.add_argument("--val", help="held-out ids (data.py's val.bin): also write golden/heldout.i32 "
                                  "and the torch perplexity on it")
    ap.add_argument("--no-mtp", action="store_true",
                    help="leave out the MTP layer of a train_mtp.py checkpoint (target only)")
    args = ap.parse_args()
    if bool(args.ckpt) == args.random:
        ap.error("give --ckpt or --random")
    if args.random:
        torch.manual_seed(args.seed)
        cfg = M.Config.load(args.config) if args.config else M.Config()
        model = M.Transformer(cfg)
    else:
        state = torch.load(args.ckpt, map_location="cpu")
        cfg = M.Config(**state["config"])
        sd = state["model"]
        if args.no_mtp:
            cfg.num_nextn_predict_layers = cfg.dspark_block_size = 0
            sd = {k: v for k, v in sd.items() if not k.startswith("mtp.")}
        model = M.Transformer(cfg)
        model.load_state_dict(sd)
    export(model, args.out, args.tokenizer)
    print(f"wrote {args.out}: {M.count_params(model) / 1e6:.2f} M parameters", file=sys.stderr)
    if not args.no_golden:
        back = read_back(args.out)
        write_golden(args.out, back, args.tokenizer)
        if args.val:
            write_perplexity(args.out, back, args.val)


if __name__ == "__main__":
    main()
