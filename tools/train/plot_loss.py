#!/usr/bin/python3
"""Loss curve of a train.py run as a standalone SVG (no plotting library needed).

  /usr/bin/python3 tools/train/plot_loss.py RUN/log.csv --out docs/training_loss.svg

log.csv may hold the rows of several resumed runs: the last row per step wins. Train loss per
logged step (grey line) and held-out loss (dots, joined), against training tokens.
"""
import argparse
import csv

W, H, L, R, T, B = 720, 400, 60, 20, 30, 50


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="training loss (nats per token)")
    args = ap.parse_args()
    rows = {}
    with open(args.log) as f:
        for r in csv.DictReader(f):
            rows[int(r["step"])] = r
    steps = sorted(rows)
    train = [(int(rows[s]["tokens"]) / 1e6, float(rows[s]["train_loss"])) for s in steps
             if rows[s].get("train_loss")]
    val = [(int(rows[s]["tokens"]) / 1e6, float(rows[s]["val_loss"])) for s in steps
           if rows[s].get("val_loss")]
    xs = [x for x, _ in train + val]
    x1 = max(xs)
    y0, y1 = 3.0, max(y for _, y in train + val)
    y0 = min(y0, min(y for _, y in train + val))

    def px(x):
        return L + (W - L - R) * x / x1

    def py(y):
        return T + (H - T - B) * (y1 - y) / (y1 - y0)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">{args.title}</text>']
    for k in range(int(y0), int(y1) + 1):
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{py(k):.1f}" y2="{py(k):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{py(k) + 4:.1f}" text-anchor="end">{k}</text>')
    step = max(1, round(x1 / 6))
    for k in range(0, int(x1) + 1, step):
        out.append(f'<line x1="{px(k):.1f}" x2="{px(k):.1f}" y1="{T}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{px(k):.1f}" y="{H - B + 16}" text-anchor="middle">{k}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">training tokens '
               f'(millions)</text>')
    pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in train)
    out.append(f'<polyline points="{pts}" fill="none" stroke="#888" stroke-width="1.2"/>')
    pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in val)
    out.append(f'<polyline points="{pts}" fill="none" stroke="#c33" stroke-width="2"/>')
    for x, y in val:
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#c33"/>')
    lx = W - R - 170
    out.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{T + 14}" y2="{T + 14}" stroke="#888"/>'
               f'<text x="{lx + 26}" y="{T + 18}">train</text>')
    out.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{T + 32}" y2="{T + 32}" stroke="#c33" '
               f'stroke-width="2"/><text x="{lx + 26}" y="{T + 36}">held-out</text>')
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
