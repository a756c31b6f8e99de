#!/usr/bin/env python3
"""PyTorch peer for kiln's BERT training step: the same model (post-LN BERT, MLM head only at
the masked positions, NSP head), the same batch shapes, forward + backward + global-norm clip
+ a LAMB step, fp32 or bf16. Prints the median step time over the timed steps and the peak RSS.
On a GPU (--device cuda): fused attention (scaled_dot_product_attention, where this torch has it)
and CUDA autocast to bf16 with fp32 weights and LAMB; the step is timed to its last kernel.

--profile: also forward + backward apart from the optimizer step (the clip, the per-tensor LAMB loop
and the bf16 copies), and torch.profiler's top ops (bench/peer_profile.py).

Usage: bert_torch_peer.py --layers 2 --hidden 128 --heads 2 --intermediate 512 --batch 32
       --seq 128 --pred 20 [--threads 2] [--steps 7] [--warmup 2] [--dtype f32|bf16] [--device cpu|cuda]
       [--profile]
"""
import argparse
import contextlib
import copy
import resource
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from peer_profile import StepPhases

# Debian's torch 1.13 rejects this model under CPU autocast (LayerNorm: "expected scalar type
# BFloat16 but found Float"), so bf16 is explicit: a bf16 copy of the model computes, its
# gradients are widened onto fp32 master weights, which LAMB updates and copies back.
MODE = {"f32": "fp32", "bf16": "bf16 model copy, fp32 master weights and LAMB"}
CUDA_MODE = {"f32": "fp32 (TF32 off)", "bf16": "CUDA autocast to bf16, fp32 weights and LAMB"}


class Layer(nn.Module):
    def __init__(self, h, heads, inter):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(h, eps=1e-12), nn.LayerNorm(h, eps=1e-12)
        self.fc1, self.fc2 = nn.Linear(h, inter), nn.Linear(inter, h)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, mask_add):
        B, S, H = x.shape
        d = H // self.heads

        def split(t):
            return t.view(B, S, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        if x.is_cuda and hasattr(F, "scaled_dot_product_attention"):
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask_add, dropout_p=0.1 if self.training else 0.0)
        else:
            probs = self.drop(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + mask_add, -1))
            ctx = probs @ v
        ctx = ctx.transpose(1, 2).reshape(B, S, H)
        x = self.ln1(x + self.drop(self.o(ctx)))
        return self.ln2(x + self.drop(self.fc2(F.gelu(self.fc1(x)))))


class Bert(nn.Module):
    def __init__(self, vocab, h, layers, heads, inter, max_pos=512):
        super().__init__()
        self.word, self.pos, self.seg = nn.Embedding(vocab, h), nn.Embedding(max_pos, h), nn.Embedding(2, h)
        self.ln = nn.LayerNorm(h, eps=1e-12)
        self.layers = nn.ModuleList(Layer(h, heads, inter) for _ in range(layers))
        self.pool, self.nsp = nn.Linear(h, h), nn.Linear(h, 2)
        self.transform, self.tln = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.drop = nn.Dropout(0.1)

    def forward(self, ids, seg, mask, pos, mids, mw, nsp_labels):
        B, S = ids.shape
        x = self.drop(self.ln(self.word(ids) + self.pos.weight[:S][None] + self.seg(seg)))
        mask_add = ((1.0 - mask.float()) * -10000.0)[:, None, None, :].to(x.dtype)
        for layer in self.layers:
            x = layer(x, mask_add)
        nsp = self.nsp(torch.tanh(self.pool(x[:, 0])))
        g = x[torch.arange(B)[:, None], pos].reshape(-1, x.shape[-1])
        logits = self.tln(F.gelu(self.transform(g))) @ self.word.weight.T + self.bias
        w = mw.reshape(-1)
        logp = torch.log_softmax(logits.float(), -1)
        mlm = -(w * logp[torch.arange(logits.shape[0]), mids.reshape(-1)]).sum() / (w.sum() + 1e-5)
        return mlm + F.cross_entropy(nsp.float(), nsp_labels)


def lamb_step(params, state, lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
    with torch.no_grad():
        state["t"] += 1
        t = state["t"]
        for name, p in params:
            m, v = state[name]
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            u = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
            if "bias" not in name and "ln" not in name:
                u.add_(p, alpha=wd)
            wn, un = p.norm(), u.norm()
            r = torch.where((wn > 0) & (un > 0), wn / un, torch.ones_like(wn))
            p.sub_(lr * r * u)


def main():
    a = argparse.ArgumentParser()
    for k, v in dict(layers=2, hidden=128, heads=2, intermediate=512, batch=32, seq=128, pred=20,
                     threads=2, steps=7, warmup=2, vocab=30522).items():
        a.add_argument("--" + k, type=int, default=v)
    a.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    a.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a.add_argument("--profile", action="store_true", help="phases and torch.profiler's top ops")
    args = a.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cuda = args.device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # kiln's f32 is pedantic f32
    model = Bert(args.vocab, args.hidden, args.layers, args.heads, args.intermediate).to(args.device)
    params = list(model.named_parameters())
    compute = copy.deepcopy(model).bfloat16() if args.dtype == "bf16" and not cuda else model
    state = {"t": 0, **{n: (torch.zeros_like(p), torch.zeros_like(p)) for n, p in params}}
    B, S, P = args.batch, args.seq, args.pred
    on = dict(device=args.device)
    ids = torch.randint(0, args.vocab, (B, S), **on)
    seg, mask = torch.zeros(B, S, dtype=torch.long, **on), torch.ones(B, S, dtype=torch.long, **on)
    pos = torch.randint(1, S, (B, P), **on)
    mids, mw = torch.randint(0, args.vocab, (B, P), **on), torch.ones(B, P, **on)
    labels = torch.randint(0, 2, (B,), **on)
    times = []
    phases = StepPhases(args.profile, cuda, args.warmup, args.steps)
    for step in range(args.warmup + args.steps):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with phases.step(step):
            with phases.phase("forward+backward"):
                model.zero_grad(set_to_none=True)
                compute.zero_grad(set_to_none=True)
                autocast = cuda and args.dtype == "bf16"
                with torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
                    loss = compute(ids, seg, mask, pos, mids, mw, labels)
                loss.backward()
            with phases.phase("optimizer"):
                if compute is not model:
                    for (_, p), c in zip(params, compute.parameters()):
                        p.grad = c.grad.float()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                lamb_step(params, state, 1e-4)
                if compute is not model:
                    with torch.no_grad():
                        for (_, p), c in zip(params, compute.parameters()):
                            c.copy_(p)
            if cuda:
                torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    where = torch.cuda.get_device_name() if cuda else f"threads {args.threads}"
    mode = (CUDA_MODE if cuda else MODE)[args.dtype]
    print(f"torch {torch.__version__} {where} {args.dtype} ({mode}): "
          f"median {1e3 * statistics.median(times):.1f} ms/step, peak RSS {rss:.2f} GiB")
    phases.report()


if __name__ == "__main__":
    main()
