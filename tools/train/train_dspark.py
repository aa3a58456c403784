#!/usr/bin/python3
"""Trains a DSpark draft (DeepSeek-V4-Flash-0731's `mtp.0..N-1` stages) on a frozen main model.

  nice -n 19 /usr/bin/python3 tools/train/train_dspark.py --main RUN/ckpt/latest.pt --data DATA \\
      --out DSPARK_RUN [--steps 600] [--stages 2] [--block-size 7] [--markov-rank 64]

The main model (model.py, from --main) is frozen in eval mode; its embedding and head are the
draft's. Trained, as the DSpark paper and DeepSeek's DeepSpec describe (../shared/DSPARK.md):
the stages (ordinary window-only blocks with non-causal block attention), main_proj and
main_norm, the Markov head and the confidence head. Per training sequence the target's features
(dspark_target_layer_ids: the last three layers' output streams, averaged over the hc streams)
and its next-token distributions are computed once; --anchors positions P are drawn, each block
is [gold token at P, noise x (n - 1)] with its context the positions before P, and the Markov
head is teacher-forced (prev = the gold tokens P .. P + n - 1). Loss per block row k (0-based),
weighted by exp(-k / 4):
    0.1 x cross-entropy of the Markov-corrected logits against the gold token P + k + 1
  + 0.9 x L1 distance between the draft's and the target's probabilities
  + 1.0 x binary cross-entropy of the confidence against 1 - L1 / 2 (detached: the probability
        that speculative sampling accepts the draft), with the hidden state detached.
Differences from DeepSpec, forced by this machine: the text is the corpus, not the target's own
answers (the L1 term distils the target's distributions all the same); the block length n is
drawn per step (--block-size with probability 1/2, else uniform 1 .. block size - 1) because
flint runs blocks of exactly the drafts it wants; the stages start from copies of the main
model's last layers where the shapes agree. Quantisation-aware like train.py.

Writes DSPARK_RUN/ckpt/latest.pt (atomic, resumable: a full checkpoint export.py takes, with
config num_nextn_predict_layers = stages and the dspark_* keys) and DSPARK_RUN/log.csv: the loss
terms, and on held-out windows the teacher-forced agreement of each block row's draft with the
target's greedy token and the mean accepted length that agreement implies.
"""
import csv
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402
from train import lr_at, save as save_checkpoint  # noqa: E402
from train_mtp import (head_arg_parser, head_optimizer, head_step, load_head,  # noqa: E402
                       open_head_run, windows)


def dspark_losses(model, w, anchors, n, bf16):
    """w [B, T] windows, anchors [B, a] positions (1 <= P <= T - n - 1) -> dict of [A, n]
    tensors: ce, l1, bce (per row), agree (draft argmax == target argmax)."""
    B, T = w.shape
    rows = torch.arange(B).repeat_interleave(anchors.shape[1])
    P = anchors.flatten()
    at = P[:, None] + torch.arange(n)                               # rows' positions
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        with torch.no_grad():
            streams, feats = model.forward_streams(w, features=True)
            target = model.head(model.hidden(streams[rows[:, None], at])).float()
        U, h = model.dspark_block(feats, w, rows, P, n)
        z, conf = model.dspark_heads(U, h.detach(), w[rows[:, None], at])
    z, conf = z.float(), conf.float()
    gold = w[rows[:, None], at + 1]
    pt = torch.softmax(target, -1)
    pd = torch.softmax(z, -1)
    l1 = (pd - pt).abs().sum(-1)
    ce = F.cross_entropy(z.flatten(0, 1), gold.flatten(), reduction="none").view_as(l1)
    accept = (1 - 0.5 * l1).detach().clamp(0, 1)
    bce = F.binary_cross_entropy_with_logits(conf, accept, reduction="none")
    agree = (z.detach().argmax(-1) == target.argmax(-1)).float()
    return dict(ce=ce, l1=l1, bce=bce, agree=agree, conf=torch.sigmoid(conf.detach()),
                accept=accept)


def weighted(t, n):
    wk = torch.exp(-torch.arange(n, dtype=torch.float32) / 4)
    return (t * wk).sum(-1).mean() / wk.sum()


@torch.no_grad()
def evaluate(model, val, seq, n_windows, n, per_window, bf16):
    model.mtp.eval()
    agree, l1, ce = [], [], []
    step = max(1, (len(val) - seq) // n_windows)
    for k in range(n_windows):
        w = torch.from_numpy(val[k * step:k * step + seq].astype(np.int64))[None]
        anchors = torch.linspace(1, seq - n - 1, per_window).long()[None]
        r = dspark_losses(model, w, anchors, n, bf16)
        agree.append(r["agree"])
        l1.append(r["l1"])
        ce.append(r["ce"])
    model.mtp.train()
    agree, l1, ce = torch.cat(agree), torch.cat(l1), torch.cat(ce)
    accepted = torch.cumprod(agree, -1).sum(-1).mean()             # greedy, teacher-forced
    return dict(ce=ce.mean().item(), l1=l1.mean().item(), accepted=accepted.item(),
                agree=[round(v, 3) for v in agree.mean(0).tolist()])


def new_draft(state, args):
    cfg = M.Config(**state["config"])
    if cfg.num_nextn_predict_layers:
        sys.exit(f"{args.main} already has num_nextn_predict_layers {cfg.num_nextn_predict_layers}")
    L = cfg.num_hidden_layers
    cfg.num_nextn_predict_layers = args.stages
    cfg.dspark_block_size = args.block_size
    cfg.dspark_noise_token_id = args.noise_token_id
    cfg.dspark_target_layer_ids = list(range(max(0, L - 3), L))
    cfg.dspark_markov_rank = args.markov_rank
    return cfg


def main():
    ap = head_arg_parser(__doc__, steps=600, warmup=30, seed=3, log_every=10, eval_every=100,
                         eval_windows=8)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=7, help="dspark_block_size")
    ap.add_argument("--markov-rank", type=int, default=64, help="dspark_markov_rank")
    ap.add_argument("--noise-token-id", type=int, default=8129,
                    help="dspark_noise_token_id (default: <｜place▁holder▁no▁0｜> of data.py)")
    ap.add_argument("--anchors", type=int, default=32, help="anchor positions per sequence")
    args = ap.parse_args()
    train, val, latest, resumed, state = open_head_run(args)
    bf16 = not args.no_bf16
    cfg = M.Config(**state["config"]) if resumed else new_draft(state, args)
    torch.manual_seed(args.seed)
    model = M.Transformer(cfg, M.Quant(weights=not args.no_quant, acts=not args.no_quant))
    load_head(model, state, resumed)
    if not resumed:
        # stage k starts as a copy of layer L - stages + k where the shapes agree (attention
        # projections, experts, gate, hc mixes); hc_head and norm as the main model's
        sd, L = model.state_dict(), cfg.num_hidden_layers
        with torch.no_grad():
            for k in range(args.stages):
                src = f"layers.{max(0, L - args.stages + k)}."
                for name, t in sd.items():
                    other = src + name[len(f"mtp.{k}."):]
                    if name.startswith(f"mtp.{k}.") and other in sd and sd[other].shape == t.shape:
                        t.copy_(sd[other])
    params, opt = head_optimizer(model, args)
    step = 0
    if resumed:
        opt.load_state_dict(state["opt"])
        step = state["step"]
        print(f"resumed from {latest}: step {step}", flush=True)
    else:
        print(f"new DSpark draft on {args.main} (main step {state.get('step')}): "
              f"{sum(p.numel() for _, p in params) / 1e6:.2f} M parameters, {cfg.num_nextn_predict_layers}"
              f" stages, block {cfg.dspark_block_size}, target layers {cfg.dspark_target_layer_ids}, "
              f"{args.steps} steps of {args.batch}x{args.seq_len} with {args.anchors} anchors each",
              flush=True)
    del state
    model.eval()
    model.mtp.train()
    nb = cfg.dspark_block_size

    log_path = os.path.join(args.out, "log.csv")
    new_log = not os.path.exists(log_path)
    log = open(log_path, "a", newline="")
    wr = csv.writer(log)
    if new_log:
        wr.writerow(["step", "time", "lr", "n", "ce", "l1", "bce", "agree", "val_ce", "val_l1",
                     "val_accepted", "val_agree_per_row", "s_per_step"])
    last_ckpt = t_window = t_start = time.time()
    acc = {k: 0.0 for k in ("ce", "l1", "bce", "agree")}
    n_acc = 0

    def eval_row():
        return evaluate(model, val, args.seq_len, args.eval_windows, nb, 16, bf16)

    if step == 0:
        ev = eval_row()
        print(f"step=0 val {ev}", flush=True)
        wr.writerow([0, 0, "", "", "", "", "", "", f"{ev['ce']:.4f}", f"{ev['l1']:.4f}",
                     f"{ev['accepted']:.3f}", " ".join(map(str, ev["agree"])), ""])
        log.flush()
    while step < args.steps:
        rng = np.random.default_rng([args.seed, step])
        n = nb if nb == 1 or rng.random() < 0.5 else int(rng.integers(1, nb))
        w = windows(train, rng, args.batch, args.seq_len)
        anchors = torch.from_numpy(rng.integers(1, args.seq_len - n, (args.batch, args.anchors)))
        lr = lr_at(step, args.steps, args)
        for g in opt.param_groups:
            g["lr"] = lr
        r = dspark_losses(model, w, anchors, n, bf16)
        terms = {k: weighted(r[k], n) for k in ("ce", "l1", "bce")}
        loss = 0.1 * terms["ce"] + 0.9 * terms["l1"] + terms["bce"]
        head_step(model, params, opt, loss, args)
        step += 1
        for k in ("ce", "l1", "bce"):
            acc[k] += terms[k].item()
        acc["agree"] += r["agree"].mean().item()
        n_acc += 1
        ev = None
        if step % args.eval_every == 0 or step == args.steps:
            ev = eval_row()
        if step % args.log_every == 0 or ev:
            now = time.time()
            row = [step, f"{now - t_start:.0f}", f"{lr:.3g}", n,
                   *(f"{acc[k] / n_acc:.4f}" for k in ("ce", "l1", "bce", "agree")),
                   *((f"{ev['ce']:.4f}", f"{ev['l1']:.4f}", f"{ev['accepted']:.3f}",
                      " ".join(map(str, ev["agree"]))) if ev else ("", "", "", "")),
                   f"{(now - t_window) / n_acc:.2f}"]
            wr.writerow(row)
            log.flush()
            print(" ".join(f"{k}={v}" for k, v in zip(
                ["step", "time", "lr", "n", "ce", "l1", "bce", "agree", "val_ce", "val_l1",
                 "val_accepted", "val_agree", "s/step"], row)), flush=True)
            t_window, n_acc = now, 0
            acc = {k: 0.0 for k in acc}
        if time.time() - last_ckpt > args.ckpt_minutes * 60 or step == args.steps or (
                args.max_steps and step >= args.max_steps):
            save_checkpoint(latest, model, opt, step, 0, args, main_ckpt=os.path.abspath(args.main))
            last_ckpt = time.time()
        if args.max_steps and step >= args.max_steps:
            break
    print(f"done: step {step}", flush=True)


if __name__ == "__main__":
    main()
