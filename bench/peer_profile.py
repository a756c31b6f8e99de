"""The PyTorch peers' --profile (bert_torch_peer.py, resnet_torch_peer.py): each timed step's
forward + backward and its optimizer step timed apart (on a GPU, synchronised between the two),
and torch.profiler's top ops over the last timed step (self CUDA time on a GPU, self CPU time on
the CPU), so that a peer's step is broken down as kiln's KILN_PROFILE breaks down kiln's.
Off (the default) it adds nothing to a step: no synchronisation, no profiler."""
import contextlib
import statistics
import time

import torch


class StepPhases:
    def __init__(self, enabled, cuda, warmup, steps, top=15):
        self.enabled, self.cuda, self.warmup, self.top = enabled, cuda, warmup, top
        self.last = warmup + steps - 1
        self.times = {}
        self.table = None
        self.step_index = -1

    @contextlib.contextmanager
    def step(self, index):
        """One step; under --profile the last timed one runs under torch.profiler."""
        self.step_index = index
        if not self.enabled or index != self.last:
            yield
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            yield
        key = "self_cuda_time_total" if self.cuda else "self_cpu_time_total"
        self.table = prof.key_averages().table(sort_by=key, row_limit=self.top)

    @contextlib.contextmanager
    def phase(self, name):
        """A part of the step ("forward+backward", "optimizer"), timed under --profile."""
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        yield
        if self.cuda:
            torch.cuda.synchronize()
        if self.step_index >= self.warmup:
            self.times.setdefault(name, []).append(time.perf_counter() - start)

    def report(self):
        """The phases' medians, one line, then the profiler's table; nothing when off."""
        if not self.enabled:
            return
        medians = ", ".join(f"{name} {1e3 * statistics.median(t):.1f} ms" for name, t in self.times.items())
        print(f"phases (median over the timed steps): {medians}")
        print(f"torch.profiler top {self.top} ops of the last timed step:")
        print(self.table)
