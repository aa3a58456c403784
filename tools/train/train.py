#!/usr/bin/python3
"""Resumable training of the small DeepSeek-V4 model (model.py) on data.py's token files.

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \\
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \\
  MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \\
  nice -n 19 /usr/bin/python3 tools/train/train.py --data DATA --out RUN [--tokens 20e6]

Writes RUN/ckpt/latest.pt (atomically, every --ckpt-minutes and at the end; snapshots
RUN/ckpt/tokens_XXM.pt every --snapshot-every tokens), RUN/log.csv (one row per --log-every
steps; val loss every --eval-every steps) and prints progress. Started again with the same
command it resumes from RUN/ckpt/latest.pt: same data order (batches are drawn from a
generator seeded by the step), same schedule.

Loss: next-token cross-entropy + --index-loss-weight x the indexers' KL to the main attention
(model.py explains). bf16 autocast; weights and activations rounded as flint runs the model
(quantisation-aware, straight-through); gate biases balanced without auxiliary loss.
"""
import argparse
import csv
import math
import os
import sys
import time
from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402


def batch(data, rng, n, seq):
    starts = rng.integers(0, len(data) - seq - 1, n)
    x = np.stack([data[s:s + seq + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x[:, :-1]), torch.from_numpy(x[:, 1:])


@torch.no_grad()
def evaluate(model, val, seq, n_windows, bf16):
    model.eval()
    losses = []
    step = max(1, (len(val) - seq - 1) // n_windows)
    for k in range(n_windows):
        s = k * step
        x = torch.from_numpy(val[s:s + seq + 1].astype(np.int64))[None]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x[:, :-1])
        losses.append(F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten()).item())
    model.train()
    return float(np.mean(losses))


def lr_at(step, total, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def save(path, model, opt, step, tokens, args, **extra):
    """Atomic checkpoint (train_mtp.py adds the main checkpoint's path in `extra`)."""
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "tokens": tokens, "config": asdict(model.cfg), "args": vars(args), **extra}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="data.py --out folder (train.bin, val.bin)")
    ap.add_argument("--out", required=True, help="run folder: ckpt/, log.csv")
    ap.add_argument("--tokens", type=float, default=20e6, help="training tokens in total")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--index-loss-weight", type=float, default=1.0)
    ap.add_argument("--bias-rate", type=float, default=1e-3, help="gate bias update per step")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--compress-ratios", default="0,4,128,4")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-bf16", action="store_true")
    ap.add_argument("--no-quant", action="store_true", help="train without QAT roundings")
    ap.add_argument("--ckpt-minutes", type=float, default=10)
    ap.add_argument("--snapshot-every", type=float, default=5e6)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-windows", type=int, default=32)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (tests)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    bf16 = not args.no_bf16

    train = np.memmap(os.path.join(args.data, "train.bin"), dtype=np.uint16, mode="r")
    val = np.memmap(os.path.join(args.data, "val.bin"), dtype=np.uint16, mode="r")
    ckdir = os.path.join(args.out, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    latest = os.path.join(ckdir, "latest.pt")
    tokens_per_step = args.batch * args.seq_len
    total_steps = int(args.tokens // tokens_per_step)

    state = torch.load(latest, map_location="cpu") if os.path.exists(latest) else None
    if state:
        cfg = M.Config(**state["config"])
    else:
        ratios = [int(r) for r in args.compress_ratios.split(",")]
        cfg = M.Config(num_hidden_layers=args.layers, compress_ratios=ratios)
        torch.manual_seed(args.seed)
    quant = M.Quant(weights=not args.no_quant, acts=not args.no_quant)
    model = M.Transformer(cfg, quant)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "hc_" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "hc_" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    step, tokens = 0, 0
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, tokens = state["step"], state["tokens"]
        print(f"resumed from {latest}: step {step}, {tokens / 1e6:.2f} M tokens", flush=True)
    else:
        print(f"new run: {M.count_params(model) / 1e6:.2f} M parameters, {total_steps} steps of "
              f"{tokens_per_step} tokens", flush=True)
    del state

    log_path = os.path.join(args.out, "log.csv")
    new_log = not os.path.exists(log_path)
    log = open(log_path, "a", newline="")
    w = csv.writer(log)
    if new_log:
        w.writerow(["step", "tokens", "time", "lr", "train_loss", "index_kl", "val_loss",
                    "tokens_per_s"])
    model.train()
    last_ckpt = time.time()
    t_window, tok_window, loss_acc, kl_acc, n_acc = time.time(), 0, 0.0, 0.0, 0
    t_start = time.time()
    while step < total_steps:
        rng = np.random.default_rng([args.seed, step])
        x, y = batch(train, rng, args.batch, args.seq_len)
        lr = lr_at(step, total_steps, args)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        aux = model.aux_losses()
        kl = sum(aux) / len(aux) if aux else torch.zeros(())
        opt.zero_grad(set_to_none=True)
        (loss + args.index_loss_weight * kl).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        model.update_gate_bias(args.bias_rate)
        step += 1
        tokens += tokens_per_step
        tok_window += tokens_per_step
        loss_acc += loss.item()
        kl_acc += float(kl)
        n_acc += 1
        val_loss = ""
        if step % args.eval_every == 0 or step == total_steps:
            val_loss = f"{evaluate(model, val, args.seq_len, args.eval_windows, bf16):.4f}"
        if step % args.log_every == 0 or val_loss:
            now = time.time()
            tps = tok_window / (now - t_window)
            row = [step, tokens, f"{now - t_start:.0f}", f"{lr:.3g}", f"{loss_acc / n_acc:.4f}",
                   f"{kl_acc / n_acc:.4f}", val_loss, f"{tps:.0f}"]
            w.writerow(row)
            log.flush()
            print(" ".join(f"{k}={v}" for k, v in zip(
                ["step", "tokens", "time", "lr", "loss", "index_kl", "val", "tok/s"], row)),
                flush=True)
            t_window, tok_window, loss_acc, kl_acc, n_acc = now, 0, 0.0, 0.0, 0
        snap = int(tokens // args.snapshot_every) != int((tokens - tokens_per_step) // args.snapshot_every)
        if time.time() - last_ckpt > args.ckpt_minutes * 60 or step == total_steps or snap:
            save(latest, model, opt, step, tokens, args)
            if snap:
                save(os.path.join(ckdir, f"tokens_{tokens / 1e6:05.1f}M.pt"), model, opt, step,
                     tokens, args)
            last_ckpt = time.time()
        if args.max_steps and step >= args.max_steps:
            save(latest, model, opt, step, tokens, args)
            break
    print(f"done: step {step}, {tokens / 1e6:.2f} M tokens", flush=True)


if __name__ == "__main__":
    main()
