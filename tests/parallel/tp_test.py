#!/usr/bin/python3
"""Tensor and expert parallelism end to end: flint on 2 MPI ranks against flint on one.

Each case is one ctest (tests/parallel/CMakeLists.txt). The single-rank run is the truth:
its logits are checked against the numpy reference and llama.cpp by the other suites, so
here the claim is "2 ranks compute what 1 rank computes" (and fail loudly when a rank does
not take part).

  logits   TP 2 and TP 2 + EP logits vs TP 1, quant simulation off (only the summation order
           over ranks differs: float32 noise) and official (roundings may flip: the
           reference suite's bound on gross errors)
  generate greedy ids of TP 2 and TP 2 + EP equal TP 1's, with a prefix-cache hit (the KV
           cache's journal replayed on rank 1) and steps where one rank's experts get no token
  offload  the KV disk tier on rank 0, its pages reaching rank 1 through the journal
  speculative  MTP and DSpark drafts (split over the ranks like the target) verified by the
           split target: greedy ids equal plain decoding on one rank, also with adaptive
           verification
  speculative_trained  on the trained models: the same drafts as one rank, token for token
  serve    flint serve on 2 ranks answers like one rank and stops on SIGTERM
  corrupt  a NaN scale in one rank's part: that rank fails at start-up, named by rank 0
  memory   each rank keeps about half the weights and has read about only those
  faults   a rank that fails, stalls or dies at start-up or at a step ends every rank with a
           message naming it, promptly
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import safetensors_np  # noqa: E402  (the reference suite's reader)

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def run(cmd, timeout=600):
    env = dict(os.environ, **MPI_ENV)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def mpirun(n, flint, *args):
    return ["mpirun", "-np", str(n), "--oversubscribe", "--bind-to", "none", flint, *args,
            "--tensor-parallel-size", str(n), "--threads", "1"]


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        check.failed = True


check.failed = False

TOKENS = ",".join(str((i * 7919 + 5) % 129000) for i in range(300))  # crosses window and blocks


def case_logits(a):
    outs = {}
    for sim in ("off", "official"):
        base = [a.flint, "logits", a.ckpt, "--token-ids", TOKENS, "--quant-simulation", sim]
        rc, _, err, _ = run(base + ["--output", f"{a.work}/tp1-{sim}.npy", "--threads", "1"])
        check(rc == 0, f"TP 1 {sim} runs" + ("" if rc == 0 else err[-2000:]))
        for tag, extra in (("tp2", []), ("tp2ep", ["--enable-expert-parallel"])):
            out = f"{a.work}/{tag}-{sim}.npy"
            rc, _, err, _ = run(mpirun(2, a.flint, *base[1:], "--output", out, *extra))
            check(rc == 0, f"{tag} {sim} runs" + ("" if rc == 0 else err[-2000:]))
            outs[(tag, sim)] = out
    for (tag, sim), out in outs.items():
        ref, got = np.load(f"{a.work}/tp1-{sim}.npy"), np.load(out)
        d = np.abs(ref.astype(np.float64) - got)
        same = float((ref.argmax(1) == got.argmax(1)).mean())
        print(f"     {tag} {sim}: max |diff| {d.max():.3g}, mean {d.mean():.3g}, same argmax {same:.1%}")
        if sim == "off":
            # Measured 1.9e-6 max (the float32 noise of a different summation order is ~3e-6,
            # tests/reference/README.md); the smallest injected bug there moves logits 6.5e-3.
            check(d.max() <= 1e-4 and same == 1.0, f"{tag} off within 1e-4 of TP 1, same argmax")
        else:
            check(d.mean() <= 0.025 and same >= 0.93,
                  f"{tag} official within the reference bound (mean <= 0.025, argmax >= 93%)")


def hash_table(ckpt):
    """tid2eid of hash layers 0 and 1 ([vocab, top_k] expert ids)."""
    c = safetensors_np.Checkpoint(ckpt)
    return [np.asarray(c.tensor(f"layers.{i}.ffn.gate.tid2eid")) for i in (0, 1)]


def case_generate(a):
    # Prompts: one that hits the prefix cache of another (run one at a time: --max-num-seqs
    # 1), and single tokens whose hash-routed experts (layers 0 and 1) all live on one rank
    # under EP (experts 0-3 on rank 0, 4-7 on rank 1): in their first step the other rank has
    # no token for its experts and must still join every collective.
    ids = [int(x) for x in TOKENS.split(",")]
    tables = hash_table(a.ckpt)
    half = tables[0].max() // 2 + 1

    def only_rank(r):
        for t in range(1000, 129000):
            if all(((tab[t] >= half) == bool(r)).all() for tab in tables):
                return t
        raise SystemExit("no token routes to one rank only")

    prompts = [ids, ids[:260] + ids[:20], [0, only_rank(0)], [0, only_rank(1)]]
    args = ["generate", a.ckpt, "--print-ids", "--max-tokens", "24", "--block-size", "128",
            "--max-num-seqs", "1", "--max-model-len", "512"]
    for p in prompts:
        args += ["--token-ids", ",".join(map(str, p))]
    rc, ref, err, _ = run([a.flint, *args, "--threads", "1"])
    check(rc == 0, "TP 1 generates" + ("" if rc == 0 else err[-2000:]))
    hits = re.search(r"\((\d+) from the prefix cache\)", err)
    check(hits is not None and int(hits.group(1)) >= 256, "the second prompt hits the prefix cache")
    for tag, extra in (("tp2", []), ("tp2ep", ["--enable-expert-parallel"])):
        rc, out, err, _ = run(mpirun(2, a.flint, *args, *extra))
        check(rc == 0, f"{tag} generates" + ("" if rc == 0 else err[-2000:]))
        check(out == ref, f"{tag} greedy ids equal TP 1's")
        hits2 = re.search(r"\((\d+) from the prefix cache\)", err)
        check(hits2 is not None and hits is not None and hits2.group(1) == hits.group(1),
              f"{tag} restores the same prefix")


def case_offload(a):
    # The KV disk tier under TP: only rank 0 writes and reads files; the pages it reads back
    # reach rank 1 in the KV journal. A small pool (29 pages: one sequence) makes the third
    # prompt push the first one's blocks to disk, and the fourth (the first again) restores
    # them from there: greedy ids equal one rank's, with the same 256 tokens from disk.
    import shutil
    ids = [[(i * 7919 + o) % 129000 for i in range(300)] for o in (5, 11, 17)]
    args = ["generate", a.ckpt, "--print-ids", "--max-tokens", "8", "--block-size", "128",
            "--max-num-seqs", "1", "--max-model-len", "512", "--kv-cache-memory-bytes", "1200000",
            "--kv-offloading-size", "0.1"]
    for p in (ids[0], ids[1], ids[2], ids[0]):
        args += ["--token-ids", ",".join(map(str, p))]
    results = {}
    for tag, launch in (("tp1", lambda x: [a.flint, *x, "--threads", "1"]),
                        ("tp2", lambda x: mpirun(2, a.flint, *x)),
                        ("tp2ep", lambda x: mpirun(2, a.flint, *x, "--enable-expert-parallel"))):
        d = os.path.join(a.work, tag)
        shutil.rmtree(d, ignore_errors=True)
        rc, out, err, _ = run(launch(args + ["--kv-offloading-dir", d]))
        check(rc == 0, f"{tag} generates with the disk tier" + ("" if rc == 0 else err[-2000:]))
        hits = re.search(r"\((\d+) from the prefix cache, (\d+) of them from disk\)", err)
        check(hits is not None and hits.group(2) == "256", f"{tag} restores 256 tokens from disk")
        files = [f for f in os.listdir(d) if f.endswith(".kv")] if os.path.isdir(d) else []
        check(len(files) > 0, f"{tag} wrote {len(files)} block files")
        results[tag] = out
    check(results["tp2"] == results["tp1"], "tp2 greedy ids equal TP 1's")
    check(results["tp2ep"] == results["tp1"], "tp2ep greedy ids equal TP 1's")


def case_speculative(a):
    # The draft runs split over the ranks; its drafts are verified by the split target, the
    # rejected tokens rolled back on every rank. Lossless: greedy ids equal plain decoding's
    # on one rank, for MTP (the tiny checkpoint's mtp.0) and DSpark (tiny-dspark's stages),
    # with adaptive verification (its profiling runs forward calls on every rank).
    ids = [int(x) for x in TOKENS.split(",")]
    for ckpt, method in ((a.ckpt, "mtp"), (a.ckpt + "-dspark", "dspark")):
        args = ["generate", ckpt, "--print-ids", "--max-tokens", "40", "--max-model-len", "512",
                "--token-ids", ",".join(map(str, ids[:200])), "--token-ids", "0,17,4000,9"]
        rc, ref, err, _ = run([a.flint, *args, "--threads", "1"])
        check(rc == 0, f"{method}: plain TP 1 generates" + ("" if rc == 0 else err[-2000:]))
        for tag, spec in (("", '{"method":"%s","num_speculative_tokens":3}' % method),
                          (" adaptive", '{"method":"%s","num_speculative_tokens":3,'
                                        '"enable_adaptive_verification":true}' % method)):
            for ep in ([], ["--enable-expert-parallel"]):
                rc, out, err, _ = run(mpirun(2, a.flint, *args, "--speculative-config", spec, *ep))
                name = f"{method}{tag} on TP 2{' + EP' if ep else ''}"
                check(rc == 0, f"{name} generates" + ("" if rc == 0 else err[-2000:]))
                check(out == ref, f"{name}: greedy ids equal plain TP 1's")
                spec_lines = [l for l in err.splitlines() if "accept" in l]
                print(f"     {name}: {spec_lines[-1][:200] if spec_lines else ''}")


def draft_lines(out):
    return [json.loads(l) for l in out.splitlines() if l.startswith('{"accepted"')]


def case_speculative_trained(a):
    # The draft split like the target, on the trained model (models/, real acceptance): TP 2
    # (+ EP) proposes the same drafts as one rank, token for token, with the same
    # confidences (float32 noise) and the same accepted counts, and decodes the same ids.
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")
    prompt = "It is a truth universally acknowledged, that a single man in possession of a"
    for name, method in (("dsv4-mini", "mtp"), ("dsv4-mini-0731", "dspark")):
        args = ["generate", os.path.join(models, name), "--prompt", prompt, "--max-tokens", "48",
                "--temperature", "0", "--print-drafts", "--speculative-config",
                '{"method":"%s","num_speculative_tokens":4}' % method]
        rc, ref, err, _ = run([a.flint, *args, "--threads", "1"])
        check(rc == 0, f"{method}: TP 1 generates" + ("" if rc == 0 else err[-2000:]))
        want = draft_lines(ref)
        accepted = sum(d["accepted"] for d in want)
        check(len(want) >= 8 and 2 * accepted >= len(want),
              f"{method}: TP 1 drafts accepted ({accepted} in {len(want)} verifications)")
        for ep in ([], ["--enable-expert-parallel"]):
            name2 = f"{method} on TP 2{' + EP' if ep else ''}"
            rc, out, err, _ = run(mpirun(2, a.flint, *args, *ep))
            check(rc == 0, f"{name2} generates" + ("" if rc == 0 else err[-2000:]))
            got = draft_lines(out)
            same = len(got) == len(want) and all(
                g["drafts"] == w["drafts"] and g["accepted"] == w["accepted"]
                for g, w in zip(got, want))
            conf = max((abs(x - y) for g, w in zip(got, want)
                        for x, y in zip(g["confidence"], w["confidence"])), default=0.0)
            print(f"     {name2}: {len(got)} drafts, max confidence difference {conf:.3g}")
            check(same, f"{name2}: the same drafts and accepted counts as TP 1")
            check(conf <= 1e-4, f"{name2}: confidences within 1e-4 of TP 1's")
            check(out.splitlines()[-1:] == ref.splitlines()[-1:], f"{name2}: the same ids")


def case_serve(a):
    # flint serve on 2 ranks (started by flint itself through mpirun): rank 0 answers HTTP;
    # a greedy completion equals the one of a single-rank server; SIGTERM to the launcher
    # ends every rank.
    import signal
    import socket
    import urllib.request

    def serve_once(extra):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [a.flint, "serve", a.ckpt, "--port", str(port), "--max-model-len", "1024",
               "--kv-cache-memory-bytes", "64M", *extra]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, **MPI_ENV), start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(120):
                try:
                    if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                        break
                except Exception:
                    time.sleep(0.5)
            body = json.dumps({"model": a.ckpt, "prompt": "The capital of France is",
                               "max_tokens": 12, "temperature": 0}).encode()
            req = urllib.request.Request(url + "/v1/completions", body,
                                         {"Content-Type": "application/json"})
            text = json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["text"]
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        return text, out

    ref, _ = serve_once(["--threads", "1"])
    got, log = serve_once(["--tensor-parallel-size", "2", "--enable-expert-parallel"])
    check("rank 1 of 2: weights" in log, "the server started 2 ranks")
    check(got == ref, f"TP 2 + EP server's greedy completion equals one rank's ({got!r})")
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", f"serve {a.ckpt} --port"], capture_output=True, text=True)
    check(left.stdout.strip() == "", "every rank exited after SIGTERM")


def case_corrupt(a):
    # Each rank checks the E8M0 scales of the part it keeps (not the whole checkpoint's): a NaN
    # scale in expert 7 (rank 1's under EP) stops every rank, rank 0 reporting rank 1's error
    # with the tensor's name; one rank (the loader's check) reports it too.
    import glob
    import shutil
    import struct
    bad = os.path.join(a.work, "corrupt")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(a.ckpt, bad)
    name = "layers.3.ffn.experts.7.w1.scale"
    for path in glob.glob(os.path.join(bad, "*.safetensors")):
        with open(path, "r+b") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            if name in header:
                f.seek(8 + n + header[name]["data_offsets"][0])
                f.write(b"\xff")
    args = ["logits", bad, "--token-ids", "0,1,2", "--output", os.path.join(a.work, "x.npy")]
    rc, _, err, _ = run([a.flint, *args, "--threads", "1"])
    check(rc != 0 and name in err, "one rank: the loader names the NaN scale")
    rc, _, err, secs = run(mpirun(2, a.flint, *args, "--enable-expert-parallel"))
    check(rc != 0 and re.search(r"rank 1 of 2 failed at start-up: " + re.escape(name) +
                                r": an E8M0 scale is 0xFF \(NaN\) in the part rank 1 keeps", err)
          is not None and "rank 0 of 2 failed" not in err,
          f"TP 2 + EP: rank 1 (expert 7's owner) fails naming the tensor, rank 0 does not ({secs:.1f} s)"
          + ("" if rc != 0 else err[-2000:]))


def case_memory(a):
    base = ["logits", a.ckpt, "--token-ids", "0,1,2", "--output", f"{a.work}/mem.npy"]
    line = re.compile(r"rank (\d) of (\d): weights ([\d.]+) MiB .*checkpoint resident ([\d.]+) MiB")
    rc, _, err, _ = run([a.flint, *base, "--threads", "1"])
    one = line.findall(err)
    check(rc == 0 and len(one) == 1, "TP 1 reports its weights")
    w1 = float(one[0][2])
    for tag, extra in (("tp2", []), ("tp2ep", ["--enable-expert-parallel"])):
        rc, _, err, _ = run(mpirun(2, a.flint, *base, *extra))
        ranks = line.findall(err)
        check(rc == 0 and len(ranks) == 2, f"{tag}: rank 0 logs both ranks")
        for r, _, w, res in ranks:
            w, res = float(w), float(res)
            print(f"     {tag} rank {r}: weights {w} MiB of TP 1's {w1}, checkpoint resident {res} MiB")
            # The replicated parts (wq_a, wkv, compressors, gate, norms) keep it above 1/2.
            check(w <= 0.55 * w1, f"{tag} rank {r} keeps at most 55% of the weights")
            # Resident beyond its own weights: the scales read for the NaN check, the rows of
            # the embedding in use, and partial pages at tensor edges.
            check(res <= 1.2 * w + 2, f"{tag} rank {r} has read little beyond its part")


def case_faults(a):
    gen = ["generate", a.ckpt, "--token-ids", "0,15,27,99", "--print-ids", "--max-tokens", "12",
           "--collective-timeout", "5"]
    cases = [
        ("1:fail:start-up", r"rank 1 of 2 failed at start-up: rank 1: injected failure", 30),
        ("1:stall:start-up", r"collective #\d+ 'start-up' waited \d+ s: ranks 0 arrived .*not "
                             r"arrived: rank 1", 30),
        ("1:stall:3", r"not arrived: rank 1 \(its last collective", 30),
        ("0:stall:3", r"rank 1/2: rank 0 sent no step and no heartbeat", 30),
        ("1:fail:3", r"rank 1/2: error in a step of rank 0's engine \d+: rank 1: injected failure "
                     r"at step 3", 30),
        ("1:die:3", r"process rank 1 .*exited on signal 9", 10),
    ]
    for fault, pattern, limit in cases:
        rc, out, err, secs = run(mpirun(2, a.flint, *gen, "--debug-fault", fault), timeout=120)
        found = re.search(pattern, err) is not None
        print(f"     {fault}: exit {rc}, {secs:.1f} s")
        check(rc != 0 and found and secs < limit,
              f"{fault}: every rank stops (non-zero) within {limit} s, the message names the rank"
              + ("" if found else "\n" + err[-3000:]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--flint", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--case", required=True,
                   choices=["logits", "generate", "offload", "speculative", "speculative_trained",
                            "serve", "memory", "corrupt", "faults"])
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    globals()["case_" + a.case](a)
    sys.exit(1 if check.failed else 0)


if __name__ == "__main__":
    main()
