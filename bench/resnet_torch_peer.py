#!/usr/bin/env python3
"""PyTorch peer for kiln's ResNet training step: torchvision's ResNet (v1.5), channels-last,
forward + label-smoothed cross-entropy + backward + a momentum-SGD step, fp32 or CPU autocast
bf16. Prints the median step time over the timed steps and the peak RSS.

Usage: resnet_torch_peer.py [--arch resnet50] [--batch 16] [--size 224] [--threads 2] [--dtype f32|bf16]
"""
import argparse
import resource
import statistics
import time

import torch
import torchvision

MODE = {"f32": "fp32", "bf16": "CPU autocast to bf16, fp32 weights and SGD"}


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--arch", default="resnet50")
    for k, v in dict(batch=16, size=224, threads=2, steps=5, warmup=2).items():
        a.add_argument("--" + k, type=int, default=v)
    a.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    args = a.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.arch)().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(args.batch, 3, args.size, args.size).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,))
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float(), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"torch {torch.__version__} threads {args.threads} {args.dtype} ({MODE[args.dtype]}): "
          f"median {1e3 * statistics.median(times):.1f} ms/step, peak RSS {rss:.2f} GiB")


if __name__ == "__main__":
    main()
