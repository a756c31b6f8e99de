#!/usr/bin/env python3
"""kiln against its peer as an SVG bar chart: per row, the peer's speed is 1 and kiln's is the
peer's ms/step over kiln's, each bar labelled with its ms/step. bench/table.py draws its table
with chart(); from the command line this reads the first markdown table of a file that has a
`kiln ms/step` column and one other `... ms/step` column (table.py's output, docs/PERFORMANCE.md).

Usage: speed_chart.py MARKDOWN --out FILE.svg [--title TEXT] [--table N]
  --table N: the N-th such table of the file (from 1); rows whose times are not numbers are left out.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import svg_plot  # noqa: E402


def chart(title, rows, peer="PyTorch"):
    """rows: [(label, kiln ms/step, peer ms/step)]."""
    labels = [label for label, _, _ in rows]
    kiln = [p / k for _, k, p in rows]
    texts = [[f"{s:.2f}x ({k:.0f} ms)" for s, (_, k, _) in zip(kiln, rows)],
             [f"1 ({p:g} ms)" for _, _, p in rows]]
    return svg_plot.bar_chart(title, labels, [("kiln", kiln), (peer, [1.0] * len(rows))], texts,
                              axis_label=f"speed relative to {peer} (higher is faster)")


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _number(cell):
    m = re.fullmatch(r"\**([0-9][0-9,]*\.?[0-9]*)\**", cell.replace(" ", ""))
    return float(m.group(1).replace(",", "")) if m else None


def tables(text):
    """Each markdown table as (header cells, [row cells])."""
    found, lines = [], text.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].lstrip().startswith("|") and re.fullmatch(r"\s*\|[-:| ]+\|\s*", lines[i + 1]):
            rows, j = [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            found.append((_cells(lines[i]), rows))
    return found


def speed_rows(header, rows):
    """[(label, kiln ms, peer ms)] and the peer's name, or None when the table is not kiln vs a peer."""
    low = [h.lower() for h in header]
    if "kiln ms/step" not in low:
        return None
    k = low.index("kiln ms/step")
    peers = [i for i, h in enumerate(low) if h.endswith("ms/step") and i != k]
    if not peers:
        return None
    p = peers[0]
    label_cols = [i for i, h in enumerate(low) if h in ("workload", "dtype", "precision")]
    out = []
    for r in rows:
        if len(r) != len(header):
            continue
        kiln, peer = _number(r[k]), _number(r[p])
        if kiln and peer:
            out.append((" ".join(r[i].strip("`*") for i in label_cols) or r[0], kiln, peer))
    return out, header[p].rsplit(" ", 1)[0]


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("markdown")
    a.add_argument("--out", required=True)
    a.add_argument("--title", default="kiln against its peer, time per training step")
    a.add_argument("--table", type=int, default=1)
    args = a.parse_args()
    with open(args.markdown, encoding="utf-8") as f:
        found = [t for t in (speed_rows(h, r) for h, r in tables(f.read())) if t and t[0]]
    if len(found) < args.table:
        sys.exit(f"{args.markdown}: no table {args.table} with `kiln ms/step` and a peer's `ms/step` column")
    rows, peer = found[args.table - 1]
    svg_plot.write(args.out, chart(args.title, rows, peer))


if __name__ == "__main__":
    main()
