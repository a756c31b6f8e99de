"""Per-step golden for kiln's LAMB, LARS and AdamW (optim/), in numpy float64, written from the
published update rules (tinygrad-mlperf.md 1.8 for LAMB, the MLPerf ResNet LARS, PyTorch AdamW)
and not from kiln's code.

Writes tests/golden/optim_steps.safetensors:
  init.<param>                 initial values, F32
  grad.<t>.<param>             the gradient fed at step t = 1..STEPS, F32
  <opt>.<t>.<param>            the parameter after step t          (opt: lamb, adamw, lars)
  <opt>.<t>.<state>.<param>    the optimizer state after step t    (state: m, v / momentum)
Inputs are float32 values; the rules run in float64 on them, with every hyperparameter rounded
to float32 first (kiln takes them as float). Metadata: the parameter order with decay flags,
each optimizer's hyperparameters and its learning rate per step.

Run: /usr/bin/python3 tools/golden/make_optim_golden.py
"""
import os

import numpy as np

import safetensors_np as st

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden",
                   "optim_steps.safetensors")
STEPS = 4
# name, shape, decay, initial values: random, zero (the ‖w‖ = 0 branches) or 1 + noise (a BN gamma).
PARAMS = [("dense.weight", (8, 12), True, "random"), ("dense.bias", (12,), False, "zero"),
          ("head.weight", (3, 8), True, "zero"), ("norm.weight", (6,), False, "one")]
# Step 2's gradient of dense.weight is zero: LARS's ‖g‖ = 0 branch, LAMB/AdamW moving on momentum.
ZERO_GRAD = (2, "dense.weight")
LAMB = dict(beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.1, lr=(0.0, 0.02, 0.015, 0.01))
ADAMW = dict(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, lr=(0.01, 0.008, 0.006, 0.004))
LARS = dict(momentum=0.9, weight_decay=0.05, eeta=0.001, epsilon=0.0, lr=(0.0, 2.0, 1.5, 1.0))


def f32(x):
    return float(np.float32(x))


def norm(x):
    return float(np.sqrt(np.sum(x * x)))


def adam_moments(c, m, v, g, t):
    """The shared moment update and bias-corrected Adam direction m̂ / (sqrt(v̂) + eps)."""
    b1, b2 = f32(c["beta1"]), f32(c["beta2"])
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mh, vh = m / (1 - b1 ** t), v / (1 - b2 ** t)
    return m, v, mh / (np.sqrt(vh) + f32(c["eps"]))


def lamb_step(c, w, g, state, t, lr, decay):
    """MLPerf BERT LAMB: u = Adam direction + wd·w, w -= lr·(‖w‖/‖u‖)·u (ratio 1 if a norm is 0)."""
    m, v, direction = adam_moments(c, state.get("m", 0 * w), state.get("v", 0 * w), g, t)
    u = direction + (f32(c["weight_decay"]) if decay else 0.0) * w
    wn, un = norm(w), norm(u)
    r = wn / un if wn > 0 and un > 0 else 1.0
    return w - lr * r * u, dict(m=m, v=v)


def adamw_step(c, w, g, state, t, lr, decay):
    """PyTorch AdamW: w *= 1 - lr·wd, then w -= lr·m̂/(sqrt(v̂) + eps)."""
    m, v, direction = adam_moments(c, state.get("m", 0 * w), state.get("v", 0 * w), g, t)
    w = w * (1 - lr * (f32(c["weight_decay"]) if decay else 0.0))
    return w - lr * direction, dict(m=m, v=v)


def lars_step(c, w, g, state, t, lr, decay):
    """MLPerf ResNet LARS (momentum inside, the tinygrad / MXNet form): decay parameters take
    r = eeta·‖w‖/(‖g‖ + wd·‖w‖ + eps) (1 if a norm is 0), the rest plain momentum SGD."""
    mom, wd, eeta, eps = (f32(c[k]) for k in ("momentum", "weight_decay", "eeta", "epsilon"))
    if decay:
        wn, gn = norm(w), norm(g)
        r = eeta * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 else 1.0
        update = lr * r * (g + wd * w)
    else:
        update = lr * g
    buf = mom * state.get("momentum", 0 * w) + update
    return w - buf, dict(momentum=buf)


def initial(rng, shape, kind):
    if kind == "random":
        return 0.5 * rng.standard_normal(shape)
    if kind == "zero":
        return np.zeros(shape)
    return 1.0 + 0.1 * rng.standard_normal(shape)


def main():
    rng = np.random.default_rng(2024)
    out = {}
    w0 = {}
    for name, shape, _, kind in PARAMS:
        w0[name] = initial(rng, shape, kind).astype(np.float32).astype(np.float64)
        out["init." + name] = w0[name].astype(np.float32)
    grads = {}
    for t in range(1, STEPS + 1):
        for name, shape, _, _ in PARAMS:
            g = 0.1 * rng.standard_normal(shape)
            if (t, name) == ZERO_GRAD:
                g = np.zeros(shape)
            grads[t, name] = g.astype(np.float32).astype(np.float64)
            out[f"grad.{t}.{name}"] = grads[t, name].astype(np.float32)

    for opt, c, rule in (("lamb", LAMB, lamb_step), ("adamw", ADAMW, adamw_step),
                         ("lars", LARS, lars_step)):
        for name, _, decay, _ in PARAMS:
            w, state = w0[name], {}
            for t in range(1, STEPS + 1):
                w, state = rule(c, w, grads[t, name], state, t, f32(c["lr"][t - 1]), decay)
                out[f"{opt}.{t}.{name}"] = w.astype(np.float32)
                for key, s in state.items():
                    out[f"{opt}.{t}.{key}.{name}"] = s.astype(np.float32)

    meta = dict(steps=STEPS, params=",".join(f"{n}:{int(d)}" for n, _, d, _ in PARAMS))
    for opt, c in (("lamb", LAMB), ("adamw", ADAMW), ("lars", LARS)):
        for k, v in c.items():
            meta[f"{opt}_{k}"] = ",".join(map(repr, v)) if k == "lr" else repr(v)
    st.save(OUT, out, meta)
    print(f"wrote {OUT}: {os.path.getsize(OUT)} bytes, {len(out)} tensors")


if __name__ == "__main__":
    main()
