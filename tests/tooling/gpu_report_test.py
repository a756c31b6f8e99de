#!/usr/bin/env python3
"""tools/gpu_report.py over a made-up log folder of tools/gpu_check.sh: kiln's ops summed into the
performance model's op classes (a batched matmul is the attention core's), the benchmark's ratio
and MFU, the steps not run at the deadline, and a failed step's log tail. Run by ctest (GpuReport)."""
import argparse
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gpu_report  # noqa: E402

PROFILE = """profile over 2 steps (10.0 ms/step): op, calls/step, ms/step, share
  matmul                          4.0      6.00   60.0%
  (outside ops)                            1.00   10.0%
profile per op and shape: op | shape | calls/step | ms/step | TFLOP/s | GB/s
  matmul | 512x1024x1024 bf16->bf16 | 2.0 | 4.000 | 300.00 | 900.00
  matmul | [1x16] 512x512x64 bf16->f32 | 2.0 | 2.000 | 50.00 | 800.00
  layernorm_forward | bf16[512,1024] f32[1024] | 1.0 | 1.500 | - | 1000.00
  lamb_update | - | 1.0 | 0.500 | - | -
  gelu_forward | bf16[512,4096] bf16[512,4096] | 1.0 | 1.000 | - | 2000.00
"""
MODEL = {"device": "h200", "step_ms": 8.0, "mfu": 0.5, "samples_per_s": 1.0, "peak_tflops": 1000.0, "hbm_gb_s": 4000.0,
         "classes": {"gemm": 3.0, "attention": 2.0, "norm": 1.0, "elementwise": 1.0, "optimizer": 1.0}, "ops": []}
STEPS = [("build", "ok", "0", "build"), ("env", "ok", "1", "device model: h200"),
         ("bert-large", "ok", "5", "kiln median 100.0 ms/step, MFU 50.0%"), ("torch-bert", "ok", "9", "x"),
         ("bert-prof", "ok", "3", "top"), ("model-bert", "ok", "1", "expected"),
         ("bert-tiny", "FAIL", "2", "largest relative loss difference 1e-2"),
         ("parity", "not run (deadline)", "0", ""), ("unit", "not run (deadline)", "0", "")]


class GpuReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        (self.dir / "steps.tsv").write_text("".join("\t".join(r) + "\n" for r in STEPS))
        (self.dir / "env.log").write_text("name, driver_version\nNVIDIA H200, 570.1\n")
        (self.dir / "bert-large.log").write_text("median 100.0 ms/step | 494500.0 GFLOP/s |\n")
        (self.dir / "bert-large-unfused.log").write_text("median 125.0 ms/step | 395600.0 GFLOP/s |\n")
        (self.dir / "bert-large-warp.log").write_text("median 110.0 ms/step | 449545.5 GFLOP/s |\n")
        (self.dir / "torch-bert.log").write_text(
            "torch 2.5 median 150.0 ms/step\nphases (median over the timed steps): forward+backward 120.0 ms, "
            "optimizer 30.0 ms\ntorch.profiler top 15 ops of the last timed step:\nTABLE\n")
        (self.dir / "model-bert.json").write_text(json.dumps(MODEL))
        (self.dir / "bert-tiny.log").write_text("step 20 loss 7.1\nlargest relative loss difference 1e-2\n")
        (self.dir / "tp2pp2.log").write_text("kiln: rank 1: cuBLASLt refused a pointer-array batch: x\nstep 1\n")
        (self.dir / "bert-prof.log").write_text(PROFILE + "kiln: cuBLASLt refused a pointer-array batch: x\n")
        args = argparse.Namespace(deadline=60, elapsed=61, peak=989.0, device_model="h200", rehearse=False)
        self.report = gpu_report.report(self.dir, args)

    def row(self, first_cell):
        return next(line for line in self.report.splitlines() if line.startswith(f"| {first_cell} |"))

    def test_classes_sum_kiln_ops_beside_the_model(self):
        self.assertEqual(self.row("gemm"), "| gemm | 4.00 | 3.00 | 1.33 |")
        self.assertEqual(self.row("attention"), "| attention | 2.00 | 2.00 | 1.00 |")
        self.assertEqual(self.row("norm"), "| norm | 1.50 | 1.00 | 1.50 |")
        self.assertEqual(self.row("optimizer"), "| optimizer | 0.50 | 1.00 | 0.50 |")
        self.assertEqual(self.row("(outside ops)"), "| (outside ops) | 1.00 | - | - |")
        self.assertEqual(self.row("**step**"), "| **step** | 9.00 | 8.00 | 1.12 |")

    def test_benchmark_ratio_and_mfu(self):
        # 494.5 TFLOP/s of 989: 50%; the peer's 150 ms for the same FLOPs: 33.3%.
        self.assertEqual(self.row("BERT-large S512 bf16"), "| BERT-large S512 bf16 | 100.0 | 50.0% | 150.0 | 33.3% | 1.50 |")
        self.assertEqual(self.row("BERT-large, unfused attention core"),
                         "| BERT-large, unfused attention core | 125.0 | 40.0% | 150.0 | 33.3% | 1.20 |")
        self.assertEqual(self.row("BERT-large, fused core by mma.sync"),
                         "| BERT-large, fused core by mma.sync | 110.0 | 45.5% | 150.0 | 33.3% | 1.36 |")
        self.assertEqual(self.row("ResNet-50 224 bf16"), "| ResNet-50 224 bf16 | - | - | - | - | - |")

    def test_deadline_and_failures(self):
        self.assertIn("1 failed (bert-tiny); 2 not run (deadline) (parity, unit).", self.report)
        self.assertEqual(self.row("parity"), "| parity | not run (deadline) |  |")
        self.assertIn("### bert-tiny (FAIL)\n\n```\nstep 20 loss 7.1\n", self.report)
        self.assertIn("forward+backward 120.0 ms, optimizer 30.0 ms", self.report)
        self.assertIn("| matmul | `[1x16] 512x512x64 bf16->f32` | 2.0 | 2.000 | 50.00 | 800.00 |", self.report)

    def test_rows_share_of_their_bound(self):
        # At the model's peaks (1000 TFLOP/s, 4000 GB/s): the GEMM by its arithmetic, unmarked;
        # the row kernels by their traffic, marked below 70%.
        self.assertIn("| matmul | `512x1024x1024 bf16->bf16` | 2.0 | 4.000 | 300.00 | 900.00 | 30% |", self.report)
        self.assertIn("| layernorm_forward | `bf16[512,1024] f32[1024]` | 1.0 | 1.500 | - | 1000.00 | 25% (below 70%) |",
                      self.report)
        self.assertIn("| gelu_forward | `bf16[512,4096] bf16[512,4096]` | 1.0 | 1.000 | - | 2000.00 | 50% (below 70%) |",
                      self.report)

    def test_notices_once_each_with_their_steps(self):
        self.assertIn("| `kiln: cuBLASLt refused a pointer-array batch: x` | bert-prof, tp2pp2 |", self.report)
        self.assertEqual(self.report.count("refused a pointer-array batch"), 1)

    def test_op_classes(self):
        self.assertEqual(gpu_report.op_class("matmul", "[2x16] 8x8x8 bf16->bf16"), "attention")
        self.assertEqual(gpu_report.op_class("matmul", "[3x1] 512x1024x1024 bf16->bf16"), "gemm")
        self.assertEqual(gpu_report.op_class("flash_attention_backward", "-"), "attention")
        self.assertEqual(gpu_report.op_class("conv2d_backward_data", "-"), "gemm")
        self.assertEqual(gpu_report.op_class("attention_probs_backward", "-"), "attention")
        self.assertEqual(gpu_report.op_class("vocab_xent_sumexp", "-"), "loss")
        self.assertEqual(gpu_report.op_class("relu_forward", "-"), "elementwise")


if __name__ == "__main__":
    unittest.main()
