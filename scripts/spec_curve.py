#!/usr/bin/python3
"""Speculative decoding's speed-up against acceptance rate and draft length, with the oracle.

Runs `flint bench MODEL --oracle-accept A --speculative-config.num_speculative_tokens K --json`
for every A in --accept and K in --tokens (with or without adaptive verification, or both:
--adaptive), and writes a markdown table and an SVG plot of the decode speed-up (the
speculative median over the plain median, from interleaved runs of one invocation).

  /usr/bin/python3 scripts/spec_curve.py build/flint MODEL --out docs/spec_curve
      [--batch 1] [--prompt-len 64] [--gen-len 64] [--repeats 3] [--accept 0,0.5,0.8,1]
      [--tokens 1,3,5,7] [--adaptive no|yes|both] [--threads T]

Writes OUT.md and OUT.svg; prints each row as it is measured (a long run: use nohup).
  /usr/bin/python3 scripts/spec_curve.py --from-tables A.md B.md ... --out OUT
joins earlier tables into one (OUT.md, OUT.svg) without measuring. Standard library only.
"""
import argparse
import json
import subprocess
import sys


def bench(args, accept, tokens, adaptive):
    cmd = [args.flint, "bench", args.model, "--json", "--log-level", "warning",
           "--batch", str(args.batch), "--prompt-len", str(args.prompt_len),
           "--gen-len", str(args.gen_len), "--repeats", str(args.repeats),
           "--oracle-accept", str(accept),
           "--speculative-config.num_speculative_tokens", str(tokens)]
    if adaptive:
        cmd += ["--speculative-config.enable_adaptive_verification", "true"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def svg(rows, accepts, path, title):
    """A line per (K, adaptive): x = oracle acceptance, y = decode speed-up."""
    W, H, L, R, T, B = 640, 400, 60, 150, 40, 50
    ymax = max(2.0, max(r["speedup"] for r in rows) * 1.1)
    xs = lambda a: L + (W - L - R) * a  # noqa: E731
    ys = lambda v: H - B - (H - T - B) * v / ymax  # noqa: E731
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2 - R / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    step = 0.5 if ymax <= 4 else 1.0
    v = 0.0
    while v <= ymax + 1e-9:
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{ys(v):.1f}" y2="{ys(v):.1f}" '
                   f'stroke="{"#888" if v == 1.0 else "#ddd"}"/>')
        out.append(f'<text x="{L - 6}" y="{ys(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    for a in accepts:
        out.append(f'<text x="{xs(a):.1f}" y="{H - B + 16}" text-anchor="middle">{a:g}</text>')
    out.append(f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="black"/>')
    out.append(f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="black"/>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">probability that '
               f'a draft token is right (oracle)</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(T + H - B) / 2})">decode speed-up over plain</text>')
    keys = sorted({(r["tokens"], r["adaptive"]) for r in rows})
    for i, (k, adaptive) in enumerate(keys):
        colour = colours[sorted({kk for kk, _ in keys}).index(k) % len(colours)]
        pts = sorted((r["accept"], r["speedup"]) for r in rows
                     if r["tokens"] == k and r["adaptive"] == adaptive)
        dash = ' stroke-dasharray="5,4"' if adaptive else ""
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="' +
                   " ".join(f"{xs(a):.1f},{ys(s):.1f}" for a, s in pts) + '"/>')
        for a, s in pts:
            out.append(f'<circle cx="{xs(a):.1f}" cy="{ys(s):.1f}" r="3" fill="{colour}"/>')
        y = T + 10 + 18 * i
        out.append(f'<line x1="{W - R + 12}" x2="{W - R + 36}" y1="{y}" y2="{y}" '
                   f'stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{W - R + 42}" y="{y + 4}">k={k}{" adaptive" if adaptive else ""}'
                   f'</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("flint", nargs="?")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--from-tables", nargs="+", metavar="MD",
                    help="join the tables of earlier runs instead of measuring")
    ap.add_argument("--title", default="oracle speed-up", help="the plot's title (--from-tables)")
    ap.add_argument("--out", required=True, help="writes OUT.md and OUT.svg")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--accept", default="0,0.5,0.7,0.8,0.9,1")
    ap.add_argument("--tokens", default="1,3,5,7")
    ap.add_argument("--adaptive", choices=["no", "yes", "both"], default="no",
                    help="measure with adaptive verification, without, or both")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    header = ("| k | adaptive | oracle accept | acceptance | mean accepted | plain tok/s | "
              "speculative tok/s | speed-up | outputs equal |")
    if args.from_tables:
        rows, intro = read_tables(args.from_tables)
        accepts = sorted({r["accept"] for r in rows})
        write(args.out, intro, header, rows, accepts, args.title)
        return 0
    if not (args.flint and args.model):
        ap.error("FLINT and MODEL are required unless --from-tables is given")
    accepts = [float(x) for x in args.accept.split(",")]
    tokens = [int(x) for x in args.tokens.split(",")]
    rows = []
    print(header, flush=True)
    for adaptive in {"no": [False], "yes": [True], "both": [False, True]}[args.adaptive]:
        for k in tokens:
            for a in accepts:
                j = bench(args, a, k, adaptive)
                c = j["speculative"]["config"]
                r = dict(tokens=k, adaptive=adaptive, accept=a,
                         acceptance=c["acceptance_rate"], mean=c["mean_accepted_length"],
                         plain=j["plain"]["decode_tokens_per_second"],
                         spec=j["speculative"]["decode_tokens_per_second"],
                         speedup=j["decode_speedup"],
                         equal=f'{j["outputs_equal_plain"]}/{j["batch"]}')
                rows.append(r)
                print(f"| {k} | {'yes' if adaptive else 'no'} | {a:g} | {r['acceptance']:.3f} | "
                      f"{r['mean']:.2f} | {r['plain']:.2f} | {r['spec']:.2f} | "
                      f"{r['speedup']:.3f} | {r['equal']} |", flush=True)
    title = (f"oracle speed-up, batch {args.batch}, {args.prompt_len}+{args.gen_len} tokens")
    intro = (f"`flint bench` with the oracle proposer: {title}, medians of {args.repeats} "
             f"interleaved runs per point.")
    write(args.out, intro, header, rows, accepts, title)
    return 0


def write(out, intro, header, rows, accepts, title):
    with open(out + ".md", "w") as f:
        f.write(f"{intro}\n\n{header}\n|" + "---|" * 9 + "\n")
        for r in rows:
            f.write(f"| {r['tokens']} | {'yes' if r['adaptive'] else 'no'} | {r['accept']:g} | "
                    f"{r['acceptance']:.3f} | {r['mean']:.2f} | {r['plain']:.2f} | "
                    f"{r['spec']:.2f} | {r['speedup']:.3f} | {r['equal']} |\n")
    svg(rows, accepts, out + ".svg", title)


def read_tables(paths):
    """The rows (and the first file's first line) of tables this script wrote."""
    rows, intro = [], ""
    for path in paths:
        with open(path) as f:
            lines = f.read().splitlines()
        intro = intro or lines[0]
        for line in lines:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 9 or not cells[0].isdigit():
                continue
            rows.append(dict(tokens=int(cells[0]), adaptive=cells[1] == "yes",
                             accept=float(cells[2]), acceptance=float(cells[3]),
                             mean=float(cells[4]), plain=float(cells[5]), spec=float(cells[6]),
                             speedup=float(cells[7]), equal=cells[8]))
    return rows, intro


if __name__ == "__main__":
    sys.exit(main())
