#!/usr/bin/env python3
"""Draws the training loss of kiln runs against the step as an SVG line chart, from the console
lines `kiln train` prints every --log-interval steps: kiln's (`[epoch N ]step S/T | loss L ...`;
BERT's loss is the interval's mean, ResNet's the interval's last step) or Megatron's
(`iteration S/ T | ... | lm loss: L | ...`).

Usage: loss_curves.py --out FILE.svg [--title TEXT] [NAME=]CONSOLE_LOG...
  one line per log; NAME defaults to the log's folder name. Exit 1 when a log has no step lines.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svg_plot  # noqa: E402

STEP_LINES = [re.compile(r"step +(\d+)/\d+ \| loss (\S+)"),
              re.compile(r"iteration +(\d+)/ *\d+ \|.*? lm loss: (\S+)")]


def losses(lines):
    """[(step, loss)] from console lines; a loss printed as '-' (no steps yet) is left out."""
    points = []
    for line in lines:
        m = next((m for m in (p.search(line) for p in STEP_LINES) if m), None)
        if m and m.group(2) != "-":
            points.append((int(m.group(1)), float(m.group(2))))
    return points


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--out", required=True)
    a.add_argument("--title", default="training loss")
    a.add_argument("logs", nargs="+", metavar="[NAME=]CONSOLE_LOG")
    args = a.parse_args()
    series = []
    for arg in args.logs:
        name, _, path = arg.rpartition("=")
        name = name or os.path.basename(os.path.dirname(os.path.abspath(path)))
        with open(path, encoding="utf-8", errors="replace") as f:
            points = losses(f)
        if not points:
            sys.exit(f"{path}: no console step lines (`step N/M | loss L`)")
        series.append((name, points))
    svg_plot.write(args.out, svg_plot.line_chart(args.title, series, x_label="step", y_label="loss"))


if __name__ == "__main__":
    main()
