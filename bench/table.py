#!/usr/bin/env python3
"""kiln and its PyTorch peer on the same training steps, in one invocation: BERT-base seq 128,
BERT-large seq 512 and ResNet-50 224, each in f32 and bf16, same shapes and threads, kiln and
the peer alternating per workload, --rounds times each (a shared machine's speed swings between
invocations minutes apart; the table's numbers are then medians over the rounds, and the last
column lists each round's ratio). Prints a markdown table: median ms/step, samples/s, the
kiln/torch time ratio, kiln's GFLOP/s and its share of the measured matmul peak of the same
dtype, and the peak RSS of both. With --svg, the same rows as a bar chart (bench/speed_chart.py),
rewritten after each row. Called by `bench/run.sh table [rounds]`; see docs/PERFORMANCE.md.

Usage: table.py ROOT [--threads N] [--only bert-base,bert-large,resnet50] [--dtypes f32,bf16] [--rounds N]
                [--bert-large-batch N] [--svg FILE]

BERT-large runs at batch 2 unless told otherwise: in f32 the peer holds 10.7 GiB at batch 2 and 16.5 at
batch 4, so from about batch 7 it no longer fits a 24 GiB machine (kiln fits 15, docs/PERFORMANCE.md), and
its f32 step takes most of a minute at batch 4 on 2 cores.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import speed_chart

# Every median is of at least 5 timed steps after 2 warm-up steps, on both sides: kiln's
# BENCHMARK median leaves its first 2 steps out, the peers take --warmup 2.
BERT = {  # name: (config, layers, hidden, heads, intermediate, batch, seq, pred, kiln steps, torch timed steps)
    "bert-base": ("bert-base", 12, 768, 12, 3072, 8, 128, 20, 7, 5),
    "bert-large": ("bert-large", 24, 1024, 16, 4096, 2, 512, 76, 7, 5),
}
RESNET_BATCH, VOCAB = 16, 30522
AVX512_CORE_TYPES = {"skylakex", "cooperlake", "sapphirerapids"}  # OpenBLAS 0.3.21's AVX-512 kernels
RESNET50_FLOPS_PER_IMAGE = 3 * 8.18e9  # forward + backward, 2 x multiply-adds of every conv and fc


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout


def bert_flops(layers, h, inter, seq, pred):  # per sample, as BertForPretraining::flops_per_sample
    return 6 * (seq * layers * (4 * h * h + 2 * h * inter) + pred * (h * h + h * VOCAB) + h * h + 2 * h) \
        + 12 * layers * seq * seq * h


def kiln_numbers(text):
    median = float(re.search(r"median ([0-9.]+) ms/step", text).group(1))
    rss = max(float(x) for x in re.findall(r"RSS [0-9.]+ GiB \(peak ([0-9.]+)\)", text))
    return median, rss


def torch_numbers(text):
    m = re.search(r"median ([0-9.]+) ms/step, peak RSS ([0-9.]+) GiB", text)
    return float(m.group(1)), float(m.group(2))


def measure(root, name, dtype, threads, out_dir, bert_large_batch):
    kiln, py = os.path.join(root, "build/kiln"), "/usr/bin/python3"
    low = ["--bf16"] if dtype == "bf16" else []
    if name in BERT:
        cfg, L, H, A, I, B, S, P, ksteps, tsteps = BERT[name]
        B = bert_large_batch if name == "bert-large" else B
        k = run([kiln, "train", "bert", "--config", f"{root}/configs/{cfg}.toml", "--benchmark", str(ksteps),
                 "--global-batch-size", str(B), "--seq-length", str(S), "--max-predictions", str(P),
                 "--threads", str(threads), "--output-dir", out_dir, *low])
        t = run([py, f"{root}/bench/bert_torch_peer.py", "--layers", str(L), "--hidden", str(H), "--heads", str(A),
                 "--intermediate", str(I), "--batch", str(B), "--seq", str(S), "--pred", str(P),
                 "--threads", str(threads), "--steps", str(tsteps), "--warmup", "2", "--dtype", dtype])
        return B, B * bert_flops(L, H, I, S, P), kiln_numbers(k), torch_numbers(t)
    k = run([kiln, "train", "resnet", "--benchmark", "7", "--batch-size", str(RESNET_BATCH), "--threads",
             str(threads), "--output-dir", out_dir, *low])
    t = run([py, f"{root}/bench/resnet_torch_peer.py", "--batch", str(RESNET_BATCH), "--threads", str(threads),
             "--steps", "5", "--warmup", "2", "--dtype", dtype])
    return RESNET_BATCH, RESNET_BATCH * RESNET50_FLOPS_PER_IMAGE, kiln_numbers(k), torch_numbers(t)


def matmul_peaks(root, tries=3):
    """GFLOP/s of a 2048^3 product per dtype, now: the best of a few runs of matmul_peak (each a
    median of 7 products), since one disturbed run on a shared machine reads far below the peak."""
    peaks = {}
    for _ in range(tries):
        text = run([f"{root}/build/matmul_peak"])
        for m in re.finditer(r"matmul \d+\^3 (\w+): [0-9.]+ ms, ([0-9.]+) GFLOP/s", text):
            peaks[m.group(1)] = max(peaks.get(m.group(1), 0.0), float(m.group(2)))
    return peaks


def fair_blas():
    """The peer's f32 matmuls go through libblas.so.3: it must be OpenBLAS, told the core type on
    AVX-512 CPUs, which OpenBLAS 0.3.21 does not recognise (it falls back to slow kernels)."""
    if subprocess.run(["dpkg-query", "-W", "libopenblas0-pthread"], capture_output=True).returncode != 0:
        sys.exit("install libopenblas0-pthread (scripts/setup.sh --with-torch) for a fair peer")
    with open("/proc/cpuinfo") as f:
        avx512 = " avx512f" in f.read()
    if avx512:
        os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
        core = os.environ["OPENBLAS_CORETYPE"]
        if core.lower() not in AVX512_CORE_TYPES:
            print(f"warning: OPENBLAS_CORETYPE={core} holds the peer's f32 matmuls below this AVX-512 CPU's "
                  "kernels; set OPENBLAS_CORETYPE=SkylakeX (or unset it) for a fair peer", file=sys.stderr)
    return os.environ.get("OPENBLAS_CORETYPE", "detected by OpenBLAS")


def main():
    a = argparse.ArgumentParser()
    a.add_argument("root")
    a.add_argument("--threads", type=int, default=os.cpu_count())
    a.add_argument("--only", default="bert-base,bert-large,resnet50")
    a.add_argument("--dtypes", default="f32,bf16")
    a.add_argument("--rounds", type=int, default=1)
    a.add_argument("--bert-large-batch", type=int, default=BERT["bert-large"][5])
    a.add_argument("--svg", help="also draw the table as an SVG bar chart in this file")
    args = a.parse_args()
    if args.rounds < 1:
        sys.exit(f"--rounds {args.rounds}: at least 1")
    core = fair_blas()
    print(f"threads {args.threads}; the peer's OpenBLAS core type: {core}; the matmul peak is measured again "
          "before each row, the best of three runs (a shared machine's speed drifts over the minutes a table "
          f"takes); {args.rounds} round(s) of kiln then the peer per row, times and ratio the medians over the "
          "rounds")
    print("| workload | dtype | kiln ms/step | torch ms/step | kiln / torch time | kiln samples/s | "
          "kiln GFLOP/s | matmul peak GFLOP/s | % of matmul peak | peak RSS kiln / torch (GiB) | "
          "kiln / torch per round |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    chart_rows = []
    with tempfile.TemporaryDirectory() as out_dir:
        for name in args.only.split(","):
            for dtype in args.dtypes.split(","):
                peak = matmul_peaks(args.root).get(dtype)
                rounds = [measure(args.root, name, dtype, args.threads, out_dir, args.bert_large_batch)
                          for _ in range(args.rounds)]
                batch, flops = rounds[0][0], rounds[0][1]
                k_ms = statistics.median(r[2][0] for r in rounds)
                t_ms = statistics.median(r[3][0] for r in rounds)
                k_rss, t_rss = max(r[2][1] for r in rounds), max(r[3][1] for r in rounds)
                per_round = " ".join(f"{r[2][0] / r[3][0]:.2f}" for r in rounds)
                gflops = flops / (k_ms * 1e-3) / 1e9
                share = f"{100 * gflops / peak:.0f}%" if peak else "n/a"
                print(f"| {name} B{batch} | {dtype} | {k_ms:.0f} | {t_ms:.0f} | {k_ms / t_ms:.2f} | "
                      f"{batch / (k_ms * 1e-3):.2f} | {gflops:.0f} | {peak or 0:.0f} | {share} | "
                      f"{k_rss:.2f} / {t_rss:.2f} | {per_round} |", flush=True)
                if args.svg:
                    chart_rows.append((f"{name} B{batch} {dtype}", k_ms, t_ms))
                    title = f"kiln against PyTorch, {args.threads} threads, medians of {args.rounds} round(s)"
                    with open(args.svg, "w", encoding="utf-8") as f:
                        f.write(speed_chart.chart(title, chart_rows))


if __name__ == "__main__":
    main()
