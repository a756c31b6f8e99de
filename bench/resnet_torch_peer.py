#!/usr/bin/env python3
"""PyTorch peer for kiln's ResNet training step: torchvision's ResNet (v1.5), channels-last,
forward + label-smoothed cross-entropy + backward + a momentum-SGD step, fp32 or autocast
bf16 (CPU, or CUDA with --device cuda, the step timed to its last kernel). Prints the median
step time over the timed steps and the peak RSS.

--profile: also forward + backward apart from the SGD step, and torch.profiler's top ops
(bench/peer_profile.py).

Usage: resnet_torch_peer.py [--arch resnet50] [--batch 16] [--size 224] [--threads 2] [--dtype f32|bf16]
       [--device cpu|cuda] [--profile]
"""
import argparse
import resource
import statistics
import time

import torch
import torchvision

from peer_profile import StepPhases

MODE = {"f32": "fp32", "bf16": "autocast to bf16, fp32 weights and SGD"}


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--arch", default="resnet50")
    for k, v in dict(batch=16, size=224, threads=2, steps=5, warmup=2).items():
        a.add_argument("--" + k, type=int, default=v)
    a.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    a.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a.add_argument("--profile", action="store_true", help="phases and torch.profiler's top ops")
    args = a.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cuda = args.device == "cuda"
    torch.backends.cudnn.allow_tf32 = False  # kiln's f32 convolutions do not use TF32
    torch.backends.cudnn.benchmark = cuda
    model = getattr(torchvision.models, args.arch)().to(args.device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(args.batch, 3, args.size, args.size, device=args.device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=args.device)
    times = []
    phases = StepPhases(args.profile, cuda, args.warmup, args.steps)
    for step in range(args.warmup + args.steps):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with phases.step(step):
            with phases.phase("forward+backward"):
                opt.zero_grad(set_to_none=True)
                with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
                    logits = model(x)
                loss = torch.nn.functional.cross_entropy(logits.float(), y, label_smoothing=0.1)
                loss.backward()
            with phases.phase("optimizer"):
                opt.step()
            if cuda:
                torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    where = torch.cuda.get_device_name() if cuda else f"threads {args.threads}"
    print(f"torch {torch.__version__} {where} {args.dtype} ({MODE[args.dtype]}): "
          f"median {1e3 * statistics.median(times):.1f} ms/step, peak RSS {rss:.2f} GiB")
    phases.report()


if __name__ == "__main__":
    main()
