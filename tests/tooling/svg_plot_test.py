#!/usr/bin/env python3
"""tools/svg_plot.py and what draws with it (bench/speed_chart.py, tools/loss_curves.py), fed fixed
numbers: the SVG must parse, hold one bar per value and one polyline per series, and its bar
lengths and point coordinates must be the values under one linear map. Run by ctest (SvgPlot)."""
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import loss_curves  # noqa: E402
import speed_chart  # noqa: E402
import svg_plot  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"


def bars(svg):
    return [r for r in ET.fromstring(svg).iter(NS + "rect") if r.get("class") == "bar"]


def polylines(svg):
    out = {}
    for p in ET.fromstring(svg).iter(NS + "polyline"):
        out[p.get("data-series")] = [tuple(map(float, xy.split(","))) for xy in p.get("points").split()]
    return out


class BarChart(unittest.TestCase):
    LABELS = ["BERT-base f32", "BERT-base bf16", "ResNet-50 bf16"]
    SERIES = [("kiln", [3.26, 3.57, 1.48]), ("PyTorch", [1.0, 1.0, 1.0]), ("other", [0.25, 2.0, 0.0])]

    def test_one_bar_per_value_with_its_length_proportional_to_it(self):
        rects = bars(svg_plot.bar_chart("t", self.LABELS, self.SERIES))
        self.assertEqual(len(rects), 9)
        scale = None
        for name, values in self.SERIES:
            mine = [r for r in rects if r.get("data-series") == name]
            self.assertEqual([r.get("data-label") for r in mine], self.LABELS)
            for r, v in zip(mine, values):
                width = float(r.get("width"))
                if v == 0:
                    self.assertEqual(width, 0.0)
                    continue
                scale = scale or width / v
                self.assertAlmostEqual(width / v, scale, delta=1e-3 * scale)
        # every bar starts on the axis, and the groups go down the page in the labels' order
        self.assertEqual(len({r.get("x") for r in rects}), 1)
        ys = [float(r.get("y")) for r in rects]
        self.assertEqual(ys, sorted(ys))

    def test_the_axis_covers_the_longest_bar(self):
        svg = svg_plot.bar_chart("t", ["a", "b"], [("kiln", [7.3, 2.0])], width=600)
        width = max(float(r.get("width")) for r in bars(svg))
        self.assertLess(width, 600)
        self.assertGreater(width, 0.5 * (600 - 230 - 150))

    def test_mismatched_or_negative_values_are_refused(self):
        with self.assertRaises(ValueError):
            svg_plot.bar_chart("t", ["a", "b"], [("kiln", [1.0])])
        with self.assertRaises(ValueError):
            svg_plot.bar_chart("t", ["a"], [("kiln", [-1.0])])


class LineChart(unittest.TestCase):
    SERIES = [("bert", [(25, 10.31), (50, 8.02), (75, 7.4), (100, 6.9)]),
              ("resnet", [(10, 2.3), (40, 0.6), (70, float("nan")), (100, 0.31)])]

    def test_one_polyline_per_series_under_one_linear_map(self):
        lines = polylines(svg_plot.line_chart("loss", self.SERIES, "step", "loss"))
        self.assertEqual(sorted(lines), ["bert", "resnet"])
        self.assertEqual(len(lines["bert"]), 4)
        self.assertEqual(len(lines["resnet"]), 3)  # the NaN is left out
        # fit x_px = a x + b and y_px = c y + d on two points, then every point must follow it
        (x0, y0), (x1, y1) = self.SERIES[0][1][0], self.SERIES[0][1][3]
        (p0, q0), (p1, q1) = lines["bert"][0], lines["bert"][3]
        a, c = (p1 - p0) / (x1 - x0), (q1 - q0) / (y1 - y0)
        self.assertGreater(a, 0)
        self.assertLess(c, 0)  # pixel rows grow downwards: a falling loss goes down the page
        for name, points in self.SERIES:
            finite = [(x, y) for x, y in points if y == y]
            for (x, y), (px, py) in zip(finite, lines[name]):
                self.assertAlmostEqual(px, p0 + a * (x - x0), delta=0.01)
                self.assertAlmostEqual(py, q0 + c * (y - y0), delta=0.01)


class SpeedChart(unittest.TestCase):
    def test_kiln_bar_over_the_peer_bar_is_the_peer_time_over_kiln_time(self):
        rows = [("BERT-base S128 B8 bf16", 923.0, 3295.0), ("ResNet-50 224 B16 bf16", 667.0, 988.0)]
        rects = bars(speed_chart.chart("t", rows))
        kiln = [float(r.get("width")) for r in rects if r.get("data-series") == "kiln"]
        peer = [float(r.get("width")) for r in rects if r.get("data-series") == "PyTorch"]
        for (_, k, p), kw, pw in zip(rows, kiln, peer):
            self.assertAlmostEqual(kw / pw, p / k, places=3)

    def test_rows_are_read_from_a_markdown_table(self):
        text = ("intro\n\n| workload | precision | kiln ms/step | PyTorch ms/step | note |\n"
                "|---|---|---|---|---|\n| BERT-base | bf16 | 923 | 3,295 | x |\n"
                "| ResNet-50 | bf16 | **667** | 988 | y |\n| GPU | bf16 | failed | 30.6 | z |\n")
        found = [speed_chart.speed_rows(h, r) for h, r in speed_chart.tables(text)]
        self.assertEqual(found, [([("BERT-base bf16", 923.0, 3295.0), ("ResNet-50 bf16", 667.0, 988.0)],
                                  "PyTorch")])

    def test_the_chart_in_the_docs_is_the_table_in_the_docs(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "perf_cpu.svg")
            subprocess.run([sys.executable, os.path.join(ROOT, "bench/speed_chart.py"),
                            os.path.join(ROOT, "docs/PERFORMANCE.md"), "--out", out], check=True)
            with open(out) as a, open(os.path.join(ROOT, "docs/perf_cpu.svg")) as b:
                drawn, committed = bars(a.read()), bars(b.read())
        key = lambda r: (r.get("data-series"), r.get("data-label"), r.get("data-value"), r.get("width"))
        self.assertEqual([key(r) for r in drawn], [key(r) for r in committed],
                         "docs/perf_cpu.svg does not show docs/PERFORMANCE.md's first table: redraw it "
                         "(docs/PERFORMANCE.md, How to measure)")


class LossCurves(unittest.TestCase):
    LOG = ["kiln: bert-tiny, 4.4M parameters\n",
           "step     25/600 | loss 9.8123 (mlm 9.1, nsp 0.7) | lr 5.000e-03 | grad norm 2.1 | ...\n",
           "step     50/600 | loss 7.5000 (mlm 6.8, nsp 0.7) | lr 6.000e-03 | grad norm 1.1 | ...\n",
           "epoch   2 step    100/564 | loss 0.6120 | acc 0.781 | lr 2.0e+00 | ...\n",
           " iteration       10/    1000 | consumed samples: 320 | lm loss: 7.123456E+00 | sop loss: 0.69 |\n",
           "step      0/600 | loss - | lr 0.000e+00 |\n"]

    def test_console_lines_give_step_and_loss(self):
        self.assertEqual(loss_curves.losses(self.LOG), [(25, 9.8123), (50, 7.5), (100, 0.612), (10, 7.123456)])

    def test_the_command_draws_one_line_per_log(self):
        with tempfile.TemporaryDirectory() as d:
            for name in ("a", "b"):
                with open(os.path.join(d, name + ".log"), "w") as f:
                    f.writelines(self.LOG[:3])
            out = os.path.join(d, "loss.svg")
            subprocess.run([sys.executable, os.path.join(ROOT, "tools/loss_curves.py"), "--out", out,
                            "first=" + os.path.join(d, "a.log"), os.path.join(d, "b.log")], check=True)
            with open(out) as f:
                lines = polylines(f.read())
            self.assertEqual(sorted(lines), sorted([os.path.basename(d), "first"]))
            self.assertEqual([len(v) for v in lines.values()], [2, 2])


if __name__ == "__main__":
    unittest.main()
