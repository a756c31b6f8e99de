#!/usr/bin/env python3
"""tools/gpu_report.py LOG_DIR [--deadline S] [--elapsed S] [--peak TFLOPS] [--device-model NAME] [--rehearse]
— LOG_DIR/report.md from what tools/gpu_check.sh left in LOG_DIR: steps.tsv (one row per step:
name, state, seconds, result), the steps' logs and the performance model's model-*.json.
Sections: environment, benchmarks (kiln against the PyTorch peer: ms/step, MFU, ratio), per op
class (kiln's KILN_PROFILE time beside the model's expectation), per (op, shape) (the longest
rows, each with its share of its roofline at the device model's peaks), the peers' profiles,
correctness, every step, and what failed."""
import argparse
import json
import re
from pathlib import Path

# kiln's ops (backend/ops.def) in the performance model's op classes (train/dry_run/perf_model.h).
# A matmul batched over heads ("[B x heads] ...", heads > 1) is the attention core's; a plain one,
# or one batched over layers (q, k and v's "[3x1] ..."), a GEMM.
CLASS_PREFIXES = [
    ("conv2d_", "gemm"),
    ("attention_", "attention"),
    ("flash_attention_", "attention"),
    ("softmax_forward", "attention"),
    ("softmax_backward", "attention"),
    ("layernorm_", "norm"),
    ("add_layernorm_", "norm"),
    ("batchnorm_", "norm"),
    ("softmax_xent_", "loss"),
    ("vocab_xent_", "loss"),
    ("gather_rows", "embedding"),
    ("scatter_add_rows", "embedding"),
    ("segment_sum_squares", "optimizer"),
    ("scale_all", "optimizer"),
    ("scale_by_step_scalar", "optimizer"),
    ("step_", "optimizer"),
    ("adamw_", "optimizer"),
    ("lamb_", "optimizer"),
    ("lars_", "optimizer"),
]
CLASS_ORDER = ["gemm", "attention", "norm", "elementwise", "loss", "embedding", "optimizer", "exchange",
               "all_reduce", "bubble"]


def op_class(op, shape):
    if op == "matmul":
        batch = re.match(r"\[(\d+)x(\d+)\]", shape)
        return "attention" if batch and int(batch.group(2)) > 1 else "gemm"
    for prefix, cls in CLASS_PREFIXES:
        if op.startswith(prefix):
            return cls
    return "elementwise"


def read(path):
    return path.read_text(errors="replace") if path.exists() else ""


def steps(log_dir):
    rows = []
    for line in read(log_dir / "steps.tsv").splitlines():
        name, state, seconds, result = (line.split("\t") + [""] * 4)[:4]
        rows.append({"name": name, "state": state, "seconds": seconds, "result": result})
    return rows


def shape_rows(log):
    """KILN_PROFILE's per-(op, shape) rows: (op, shape, calls/step, ms/step, TFLOP/s, GB/s)."""
    rows, inside = [], False
    for line in log.splitlines():
        if line.startswith("profile per op and shape"):
            inside = True
        elif inside and line.startswith("  ") and line.count(" | ") == 5:
            op, shape, calls, ms, tflops, gbs = (f.strip() for f in line.split(" | "))
            rows.append((op, shape, float(calls), float(ms), tflops, gbs))
        elif inside:
            inside = False
    return rows


def outside_ops_ms(log):
    m = re.search(r"^  \(outside ops\)\s+([-0-9.]+)", log, re.M)
    return float(m.group(1)) if m else None


def model_json(path):
    """The model's expected step (kiln's --json), or an empty one where the step wrote none."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"classes": {}}


def median_ms(log):
    found = re.findall(r"median ([0-9.]+) ms/step", log)
    return float(found[-1]) if found else None


def gflops(log):
    found = re.findall(r"([0-9.]+) GFLOP/s", log)
    return float(found[-1]) if found else None


def fmt(value, spec=".1f", unit=""):
    return "-" if value is None else f"{value:{spec}}{unit}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def benchmarks(log_dir, peak):
    rows = []
    for title, kiln, peer in (("BERT-large S512 bf16", "bert-large", "torch-bert"),
                              ("BERT-large, unfused attention core", "bert-large-unfused", "torch-bert"),
                              ("BERT-large, fused core by mma.sync", "bert-large-warp", "torch-bert"),
                              ("ResNet-50 224 bf16", "resnet50", "torch-resnet")):
        kiln_log, peer_log = read(log_dir / f"{kiln}.log"), read(log_dir / f"{peer}.log")
        k_ms, k_gflops, p_ms = median_ms(kiln_log), gflops(kiln_log), median_ms(peer_log)
        k_mfu = k_gflops / 1e3 / peak if k_gflops else None
        # The peer computes the same model FLOPs a step as kiln.
        p_mfu = k_mfu * k_ms / p_ms if k_mfu and k_ms and p_ms else None
        ratio = p_ms / k_ms if k_ms and p_ms else None
        rows.append((title, fmt(k_ms), fmt(k_mfu and 100 * k_mfu, unit="%"), fmt(p_ms),
                     fmt(p_mfu and 100 * p_mfu, unit="%"), fmt(ratio, ".2f")))
    return table(("step", "kiln ms/step", "kiln MFU", "PyTorch ms/step", "PyTorch MFU", "PyTorch / kiln"), rows)


def per_class(log_dir, title, prof, model):
    log = read(log_dir / f"{prof}.log")
    rows = shape_rows(log)
    measured = {}
    for op, shape, _, ms, _, _ in rows:
        cls = op_class(op, shape)
        measured[cls] = measured.get(cls, 0.0) + ms
    expected = model_json(log_dir / f"{model}.json")
    classes = [c for c in CLASS_ORDER if c in measured or c in expected["classes"]]
    out = []
    for c in classes:
        m, e = measured.get(c), expected["classes"].get(c)
        out.append((c, fmt(m, ".2f"), fmt(e, ".2f"), fmt(m / e if m and e else None, ".2f")))
    out.append(("(outside ops)", fmt(outside_ops_ms(log), ".2f"), "-", "-"))
    total = sum(measured.values()) if measured else None
    out.append(("**step**", fmt(total, ".2f"), fmt(expected.get("step_ms"), ".2f"),
                fmt(total / expected["step_ms"] if total and expected.get("step_ms") else None, ".2f")))
    text = f"### {title}\n\n"
    if not rows:
        return text + f"no profile ({prof}.log has no per-(op, shape) rows)\n"
    return text + table(("op class", "measured ms/step", "model ms/step", "measured / model"), out) + "\n"


def bound_share(tflops, gbs, model):
    """What a row reaches of its roofline: the larger of its arithmetic against the bf16 dense peak
    and its traffic against HBM's (the device model's), or None where the model has no peaks."""
    peak, hbm = model.get("peak_tflops"), model.get("hbm_gb_s")
    if not peak or not hbm:
        return None
    rate = lambda text: float(text) if re.fullmatch(r"[0-9.]+", text) else 0.0
    return max(rate(tflops) / peak, rate(gbs) / hbm)


def per_shape(log_dir, title, prof, model_name, top=15):
    """The longest (op, shape) rows with their share of the roofline; a bandwidth-bound row (not a
    GEMM's or the attention core's) below 70% of it is marked: the row kernels' target."""
    rows = shape_rows(read(log_dir / f"{prof}.log"))
    if not rows:
        return ""
    model = model_json(log_dir / f"{model_name}.json")
    body = []
    for op, shape, calls, ms, tflops, gbs in rows[:top]:
        share = bound_share(tflops, gbs, model)
        below = share is not None and op_class(op, shape) not in ("gemm", "attention") and share < 0.7
        cell = "-" if share is None else f"{100 * share:.0f}%" + (" (below 70%)" if below else "")
        body.append((op, f"`{shape}`", f"{calls:.1f}", f"{ms:.3f}", tflops, gbs, cell))
    return (f"### {title} ({min(top, len(rows))} longest of {len(rows)})\n\n" +
            table(("op", "shape", "calls/step", "ms/step", "TFLOP/s", "GB/s", "of its bound"), body) + "\n\n")


def peer_profile(log_dir, name):
    log = read(log_dir / f"{name}.log")
    at = log.find("phases (median")
    return f"### {name}\n\n```\n{log[at:].rstrip()}\n```\n\n" if at >= 0 else ""


def parity_lists(log_dir):
    log = read(log_dir / "parity.log")
    failing = sorted(set(re.findall(r"^\[  FAILED  \] ([A-Za-z][^ \n]*)", log, re.M)))
    missing = sorted(set(re.findall(r"op ([a-z0-9_]+): not implemented on cuda", log)))
    out = ""
    if failing:
        out += "Parity tests failing on the GPU: " + ", ".join(f"`{t}`" for t in failing) + "\n\n"
    if missing:
        out += "Ops not implemented on the GPU (their tests fail above): " + ", ".join(f"`{o}`" for o in missing) + "\n\n"
    return out


def failures(log_dir, rows):
    out = ""
    for r in rows:
        if r["state"] == "FAIL" or r["state"].startswith("stopped"):
            tail = "\n".join(read(log_dir / f"{r['name']}.log").splitlines()[-15:])
            out += f"### {r['name']} ({r['state']})\n\n```\n{tail}\n```\n\n"
    return out + parity_lists(log_dir)


def notices(log_dir, most=30):
    """kiln's own lines to the user ("kiln: ..."), each once, with the steps whose logs have it:
    where the run took a plainer path (a plan cuBLASLt refused, an instruction set missing)."""
    seen = {}
    for path in sorted(log_dir.glob("*.log")):
        for line in read(path).splitlines():
            text = re.sub(r"^kiln: rank \d+: ", "kiln: ", line.strip())
            if text.startswith("kiln: "):
                seen.setdefault(text, []).append(path.stem)
    rows = [(f"`{text}`", ", ".join(dict.fromkeys(names))) for text, names in sorted(seen.items())[:most]]
    return table(("notice", "steps"), rows) if rows else "none\n"


def report(log_dir, args):
    rows = steps(log_dir)
    by_name = {r["name"]: r for r in rows}
    not_run = [r["name"] for r in rows if r["state"].startswith("not run")]
    failed = [r["name"] for r in rows if r["state"] == "FAIL"]
    kind = "rehearsal on the simulated device" if args.rehearse else "GPU check"
    parts = [f"# kiln {kind}\n",
             f"{args.elapsed} s of a {args.deadline} s deadline; device model {args.device_model}; "
             f"MFU against {args.peak:g} TFLOP/s (bf16 dense).",
             f"{len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "") + "; " +
             f"{len(not_run)} not run (deadline)" + (f" ({', '.join(not_run)})" if not_run else "") + ".\n",
             "## Environment\n", f"```\n{read(log_dir / 'env.log').rstrip() or 'not recorded'}\n```\n",
             "## Benchmarks\n", benchmarks(log_dir, args.peak) + "\n",
             "## Per op class: KILN_PROFILE beside the performance model\n",
             "Measured: the profiled run (each op synchronised, so device time per op); model: "
             "`--dry-run --device-model --json` for the same command line.\n",
             per_class(log_dir, "BERT", "bert-prof", "model-bert"),
             per_class(log_dir, "ResNet-50", "resnet-prof", "model-resnet"),
             "## Per op and shape\n",
             (per_shape(log_dir, "BERT", "bert-prof", "model-bert") +
              per_shape(log_dir, "ResNet-50", "resnet-prof", "model-resnet")) or
             "not profiled\n",
             "## PyTorch peers' profiles\n",
             (peer_profile(log_dir, "torch-bert") + peer_profile(log_dir, "torch-resnet")) or "not run\n",
             "## Correctness\n",
             table(("check", "state", "result"),
                   [(n, by_name[n]["state"], by_name[n]["result"]) for n in
                    ("bert-tiny", "resnet-small", "parity") if n in by_name]) + "\n",
             "## kiln's notices\n", notices(log_dir) + "\n",
             "## Steps\n",
             table(("step", "state", "seconds", "result"),
                   [(r["name"], r["state"], r["seconds"], r["result"]) for r in rows]) + "\n",
             "## Failures\n", failures(log_dir, rows) or "none\n"]
    return "\n".join(parts)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("log_dir", type=Path)
    a.add_argument("--deadline", type=int, default=0)
    a.add_argument("--elapsed", type=int, default=0)
    a.add_argument("--peak", type=float, default=989.0)
    a.add_argument("--device-model", default="none")
    a.add_argument("--rehearse", action="store_true")
    args = a.parse_args()
    (args.log_dir / "report.md").write_text(report(args.log_dir, args))


if __name__ == "__main__":
    main()
