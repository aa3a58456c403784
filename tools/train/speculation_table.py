#!/usr/bin/python3
"""Acceptance of greedy speculative decoding on held-out prompts, measured by flint.

  /usr/bin/python3 tools/train/speculation_table.py --flint build/flint --text-file VAL.txt \\
      --model mtp=MODEL_DIR --model dspark=MODEL_0731_DIR [--drafts 1-7] [--prompts 8]
      [--prompt-len 64] [--gen 128]

Prompts: --prompts windows of --prompt-len tokens (data.py's tokenizer, BOS first) spread over
the text file. For every method and number of draft tokens k, `flint generate --temperature 0
--ignore-eos --print-drafts` runs all prompts together (fixed k: no adaptive verification) and
its ids must equal plain greedy decoding's (lossless); then, from the draft lines:
  acceptance   accepted drafts / proposed drafts
  accepted     mean accepted drafts per verification step
  tokens/step  accepted + 1 (the target's own token)
Prints a markdown table and, with --json, the raw numbers.
"""
import argparse
import json
import os
import subprocess
import sys



def generate(flint, model, prompts, gen, threads, spec):
    """Greedy `flint generate` of every prompt (token id lists) in one batch, gen tokens each;
    spec: None or a --speculative-config object. -> (generated ids per prompt, the draft
    lines of --print-drafts). tests/golden/trained_model uses it too (numpy-free)."""
    cmd = [flint, "generate", model, "--temperature", "0", "--ignore-eos", "--max-tokens",
           str(gen), "--threads", str(threads), "--log-level", "warning"]
    for p in prompts:
        cmd += ["--token-ids", ",".join(map(str, p))]
    cmd += ["--print-drafts", "--speculative-config", json.dumps(spec)] if spec else ["--print-ids"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    out = p.stdout
    if not spec:        # "--- prompt label (finish) ---" then the ids, prompts in order
        blocks = [b for b in out.split("--- ") if b.strip()]
        return [[int(t) for t in b.split("---", 1)[1].replace("\n", "").split(",") if t.strip()]
                for b in blocks], []
    tokens, lines = {}, []
    for raw in out.splitlines():
        j = json.loads(raw)
        if "tokens" in j:
            tokens[j["prompt"]] = j["tokens"][len(prompts[j["prompt"]]):]
        else:
            lines.append(j)
    return [tokens[i] for i in range(len(prompts))], lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flint", required=True)
    ap.add_argument("--model", action="append", required=True, metavar="METHOD=DIR")
    ap.add_argument("--text-file", required=True)
    ap.add_argument("--drafts", default="1-7")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    lo, _, hi = args.drafts.partition("-")
    ks = range(int(lo), int(hi or lo) + 1)
    models = dict(m.split("=", 1) for m in args.model)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import data as D
    tok = D.Tokenizer(D.load_merges(next(iter(models.values()))))
    ids = tok.encode(open(args.text_file, encoding="utf-8").read()[:200000])
    step = (len(ids) - args.prompt_len) // args.prompts
    prompts = [[0] + ids[i * step:i * step + args.prompt_len - 1] for i in range(args.prompts)]
    rows = []
    for method, model in models.items():
        plain, _ = generate(args.flint, model, prompts, args.gen, args.threads, None)
        for k in ks:
            spec = {"method": method, "num_speculative_tokens": k}
            out, lines = generate(args.flint, model, prompts, args.gen, args.threads, spec)
            proposed = sum(len(d["drafts"]) for d in lines)
            accepted = sum(d["accepted"] for d in lines)
            r = dict(method=method, k=k, lossless=out == plain, steps=len(lines),
                     proposed=proposed, accepted=accepted,
                     acceptance=accepted / max(1, proposed),
                     mean_accepted=accepted / max(1, len(lines)))
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    print("| method | k | lossless | acceptance | accepted per step | tokens per step |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['k']} | {'yes' if r['lossless'] else 'NO'} | "
              f"{100 * r['acceptance']:.1f}% | {r['mean_accepted']:.2f} | "
              f"{r['mean_accepted'] + 1:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["lossless"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
