#!/usr/bin/python3
"""Trains DeepSeek-V4's MTP layer (`mtp.0`) on a frozen main model of train.py.

  nice -n 19 /usr/bin/python3 tools/train/train_mtp.py --main RUN/ckpt/latest.pt --data DATA \\
      --out MTP_RUN [--steps 2000] [--seq-len 512] [--batch 8]

The main model (model.py, loaded from --main) is frozen and runs in eval mode; one MTP layer
(model.MTPLayer: e_proj/h_proj/enorm/hnorm, a full window-only block with bias routing, its own
hc_head and norm, the target's embed and head) is added and trained with the DeepSeek-V3/V4 MTP
objective: from the main model's final streams at position p and the embedding of token p + 1,
predict token p + 2 (cross-entropy). Quantisation-aware as train.py (bf16 autocast, weights and
activations rounded as flint runs the model, straight-through); the MTP gate's bias is
balanced without auxiliary loss. The MTP's hc_head and norm start as copies of the main
model's (they feed the same head).

Writes MTP_RUN/ckpt/latest.pt (atomic; every --ckpt-minutes and at the end): a full model
checkpoint (main + mtp.0.*, config with num_nextn_predict_layers 1) that export.py takes as
--ckpt, plus the MTP optimiser state; started again with the same command it resumes from it.
MTP_RUN/log.csv: train loss / top-1 accuracy per --log-every steps; every --eval-every steps on
held-out windows of val.bin: MTP loss, MTP top-1 accuracy (token p + 2) and agreement with the
main model's greedy prediction of the same token (what greedy MTP speculation accepts).
"""
import argparse
import csv
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402
from train import lr_at, save as save_checkpoint  # noqa: E402  (same schedule and format)


def windows(data, rng, n, length):
    starts = rng.integers(0, len(data) - length, n)
    return torch.from_numpy(np.stack([data[s:s + length] for s in starts]).astype(np.int64))


def mtp_step(model, w, bf16, with_main_logits=False):
    """w [B, T + 2]: main model on w[:, :T] (or :T+1), MTP logits [B, T, vocab] for w[:, 2:]."""
    T = w.shape[1] - 2
    n_main = T + 1 if with_main_logits else T
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        with torch.no_grad():
            streams = model.forward_streams(w[:, :n_main])
            main_logits = model.head(model.hidden(streams)) if with_main_logits else None
        logits = model.mtp_logits(streams[:, :T].detach(), w[:, 1:T + 1])
    return logits.float(), main_logits


@torch.no_grad()
def evaluate(model, val, seq, n_windows, bf16):
    model.mtp.eval()
    losses, acc, agree = [], [], []
    step = max(1, (len(val) - seq - 2) // n_windows)
    for k in range(n_windows):
        s = k * step
        w = torch.from_numpy(val[s:s + seq + 2].astype(np.int64))[None]
        logits, main_logits = mtp_step(model, w, bf16, with_main_logits=True)
        tgt = w[:, 2:]
        losses.append(F.cross_entropy(logits.flatten(0, 1), tgt.flatten()).item())
        pred = logits.argmax(-1)
        acc.append((pred == tgt).float().mean().item())
        agree.append((pred == main_logits[:, 1:].float().argmax(-1)).float().mean().item())
    model.mtp.train()
    return float(np.mean(losses)), float(np.mean(acc)), float(np.mean(agree))


@torch.no_grad()
def update_gate_bias(mtp, rate):
    for layer in mtp:
        g = layer.ffn.gate
        if not g.hashed and g.load is not None:
            load = g.load.float()
            g.bias += rate * torch.sign(load.mean() - load)
            g.load = None


def head_arg_parser(doc, steps, warmup, seed, log_every, eval_every, eval_windows):
    """The flags every head trainer (train_mtp.py, train_dspark.py) takes."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--main", required=True, help="train.py checkpoint of the main model (frozen)")
    ap.add_argument("--data", required=True, help="data.py --out folder (train.bin, val.bin)")
    ap.add_argument("--out", required=True, help="run folder: ckpt/, log.csv")
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--bias-rate", type=float, default=1e-3, help="gate bias update per step")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-bf16", action="store_true")
    ap.add_argument("--no-quant", action="store_true", help="train without QAT roundings")
    ap.add_argument("--ckpt-minutes", type=float, default=10)
    ap.add_argument("--log-every", type=int, default=log_every)
    ap.add_argument("--eval-every", type=int, default=eval_every)
    ap.add_argument("--eval-windows", type=int, default=eval_windows)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (tests)")
    return ap


def open_head_run(args):
    """Threads, the data, and the state to start from: the run's own latest checkpoint when
    it has one (resumed), else the main model's. -> (train, val, latest path, resumed, state)."""
    torch.set_num_threads(args.threads)
    train = np.memmap(os.path.join(args.data, "train.bin"), dtype=np.uint16, mode="r")
    val = np.memmap(os.path.join(args.data, "val.bin"), dtype=np.uint16, mode="r")
    ckdir = os.path.join(args.out, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    latest = os.path.join(ckdir, "latest.pt")
    resumed = os.path.exists(latest)
    return train, val, latest, resumed, torch.load(latest if resumed else args.main,
                                                   map_location="cpu")


def load_head(model, state, resumed):
    """A resumed head run's full state, or the main model's with the head new: only mtp.*
    missing; the last head layer's hc_head and norm start as the main model's (they feed the
    same head)."""
    if resumed:
        model.load_state_dict(state["model"])
        return
    missing, unexpected = model.load_state_dict(state["model"], strict=False)
    assert not unexpected and all(k.startswith("mtp.") for k in missing), (missing, unexpected)
    with torch.no_grad():
        last = model.mtp[-1]
        for k in ("hc_head_fn", "hc_head_base", "hc_head_scale"):
            getattr(last, k).copy_(getattr(model, k))
        last.norm.weight.copy_(model.norm.weight)


def head_step(model, params, opt, loss, args):
    """One optimiser step on the head: gradients clipped, then the gate biases balanced."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for _, p in params], args.grad_clip)
    opt.step()
    update_gate_bias(model.mtp, args.bias_rate)


def head_optimizer(model, args):
    """Freezes all but mtp.*; AdamW over the head (no weight decay on vectors and hc_*)."""
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith("mtp."))
    params = list(model.mtp.named_parameters())
    decay = [p for n, p in params if p.dim() >= 2 and "hc_" not in n]
    no_decay = [p for n, p in params if not (p.dim() >= 2 and "hc_" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    return params, opt


def main():
    ap = head_arg_parser(__doc__, steps=2000, warmup=50, seed=2, log_every=10, eval_every=250,
                         eval_windows=16)
    args = ap.parse_args()
    train, val, latest, resumed, state = open_head_run(args)
    bf16 = not args.no_bf16
    cfg = M.Config(**state["config"])
    if not resumed:
        if cfg.num_nextn_predict_layers:
            sys.exit(f"{args.main} already has num_nextn_predict_layers "
                     f"{cfg.num_nextn_predict_layers}")
        cfg.num_nextn_predict_layers = 1
        torch.manual_seed(args.seed)
    quant = M.Quant(weights=not args.no_quant, acts=not args.no_quant)
    model = M.Transformer(cfg, quant)
    load_head(model, state, resumed)
    params, opt = head_optimizer(model, args)
    step, tokens = 0, 0
    if resumed:
        opt.load_state_dict(state["opt"])
        step, tokens = state["step"], state["tokens"]
        print(f"resumed from {latest}: step {step}", flush=True)
    else:
        n_mtp = sum(p.numel() for _, p in params)
        print(f"new MTP run on {args.main} (main step {state.get('step')}): {n_mtp / 1e6:.2f} M "
              f"MTP parameters, {args.steps} steps of {args.batch}x{args.seq_len}", flush=True)
    del state
    model.eval()                                 # main model frozen, eval mode
    model.mtp.train()

    log_path = os.path.join(args.out, "log.csv")
    new_log = not os.path.exists(log_path)
    log = open(log_path, "a", newline="")
    wr = csv.writer(log)
    if new_log:
        wr.writerow(["step", "tokens", "time", "lr", "train_loss", "train_acc", "val_loss",
                     "val_acc", "val_agree_main", "tokens_per_s"])
    tokens_per_step = args.batch * args.seq_len
    last_ckpt = t_window = t_start = time.time()
    tok_window, loss_acc, acc_acc, n_acc = 0, 0.0, 0.0, 0
    if step == 0:
        vl, va, vg = evaluate(model, val, args.seq_len, args.eval_windows, bf16)
        print(f"step=0 val_loss={vl:.4f} val_acc={va:.4f} val_agree_main={vg:.4f}", flush=True)
        wr.writerow([0, 0, 0, "", "", "", f"{vl:.4f}", f"{va:.4f}", f"{vg:.4f}", ""])
        log.flush()
    while step < args.steps:
        rng = np.random.default_rng([args.seed, step])
        w = windows(train, rng, args.batch, args.seq_len + 2)
        lr = lr_at(step, args.steps, args)
        for g in opt.param_groups:
            g["lr"] = lr
        logits, _ = mtp_step(model, w, bf16)
        tgt = w[:, 2:]
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten())
        head_step(model, params, opt, loss, args)
        step += 1
        tokens += tokens_per_step
        tok_window += tokens_per_step
        loss_acc += loss.item()
        acc_acc += (logits.detach().argmax(-1) == tgt).float().mean().item()
        n_acc += 1
        ev = ("", "", "")
        if step % args.eval_every == 0 or step == args.steps:
            ev = tuple(f"{v:.4f}" for v in evaluate(model, val, args.seq_len, args.eval_windows, bf16))
        if step % args.log_every == 0 or ev[0]:
            now = time.time()
            row = [step, tokens, f"{now - t_start:.0f}", f"{lr:.3g}", f"{loss_acc / n_acc:.4f}",
                   f"{acc_acc / n_acc:.4f}", *ev, f"{tok_window / (now - t_window):.0f}"]
            wr.writerow(row)
            log.flush()
            print(" ".join(f"{k}={v}" for k, v in zip(
                ["step", "tokens", "time", "lr", "loss", "acc", "val_loss", "val_acc",
                 "val_agree_main", "tok/s"], row)), flush=True)
            t_window, tok_window, loss_acc, acc_acc, n_acc = now, 0, 0.0, 0.0, 0
        if time.time() - last_ckpt > args.ckpt_minutes * 60 or step == args.steps:
            save_checkpoint(latest, model, opt, step, tokens, args, main_ckpt=os.path.abspath(args.main))
            last_ckpt = time.time()
        if args.max_steps and step >= args.max_steps:
            save_checkpoint(latest, model, opt, step, tokens, args, main_ckpt=os.path.abspath(args.main))
            break
    print(f"done: step {step}", flush=True)


if __name__ == "__main__":
    main()
