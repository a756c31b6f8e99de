"""Golden reference for kiln's BertForPretraining: a self-contained PyTorch BERT pretraining model
with Hugging Face parameter names, evaluated in float64 on a tiny config.

Writes tests/golden/bert_tiny_postln.safetensors and tests/golden/bert_tiny_preln.safetensors:
  <param>            initial parameters (F32; the float64 model starts from these exact values)
  input_ids, segment_ids, input_mask (B, S), masked_positions, masked_ids (B, P)   I32
  masked_weights (B, P) F32, nsp_labels (B) I32
  mlm_logits (B*P, V), nsp_logits (B, 2), mlm_loss, nsp_loss, loss ([])
  grad.<param>       d(mlm_loss + nsp_loss)/d(param) at the initial parameters
  lamb3.<param>      parameters after 3 MLPerf LAMB steps (clip to global norm 1, then LAMB),
                     forward/backward recomputed at each step
Metadata holds the config. Everything is computed in float64 from float32-rounded parameters
and stored as F32, so the reference's own rounding (~6e-8) is far below the tolerances of a
float32 implementation under test (~1e-4).

Post-LN (BERT): embeddings LayerNorm, post-LN layers, exact-erf GELU everywhere.
Pre-LN (Megatron): no embeddings LayerNorm; per layer x + attn(LN_a(x)), then x + mlp(LN_o(x))
with LN_a = attention.output.LayerNorm, LN_o = output.LayerNorm (same names as post-LN, as in
kiln/nn/transformer.h); a final LayerNorm named bert.encoder.LayerNorm (Megatron's
encoder.final_layernorm); tanh GELU in the MLP, exact GELU in the LM head.

Run: /usr/bin/python3 tools/golden/make_bert_golden.py   (Debian python3-torch 1.13, CPU)
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

import safetensors_np as st

torch.set_default_dtype(torch.float64)
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden")

CONFIG = dict(vocab_size=96, hidden=32, layers=2, heads=4, intermediate=64, max_position=32,
              type_vocab=2, batch=3, seq_len=16, max_pred=5)
EPS = 1e-12
LAMB = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.01, clip=1.0, steps=3)


def param_shapes(c, pre_ln):
    H, I, V = c["hidden"], c["intermediate"], c["vocab_size"]
    s = {
        "bert.embeddings.word_embeddings.weight": (V, H),
        "bert.embeddings.position_embeddings.weight": (c["max_position"], H),
        "bert.embeddings.token_type_embeddings.weight": (c["type_vocab"], H),
    }
    if not pre_ln:
        s["bert.embeddings.LayerNorm.weight"] = (H,)
        s["bert.embeddings.LayerNorm.bias"] = (H,)
    for n in range(c["layers"]):
        p = f"bert.encoder.layer.{n}."
        for lin, (o, i) in {"attention.self.query": (H, H), "attention.self.key": (H, H),
                            "attention.self.value": (H, H), "attention.output.dense": (H, H),
                            "intermediate.dense": (I, H), "output.dense": (H, I)}.items():
            s[p + lin + ".weight"] = (o, i)
            s[p + lin + ".bias"] = (o,)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            s[p + ln + ".weight"] = (H,)
            s[p + ln + ".bias"] = (H,)
    if pre_ln:
        s["bert.encoder.LayerNorm.weight"] = (H,)
        s["bert.encoder.LayerNorm.bias"] = (H,)
    s["bert.pooler.dense.weight"] = (H, H)
    s["bert.pooler.dense.bias"] = (H,)
    s["cls.predictions.transform.dense.weight"] = (H, H)
    s["cls.predictions.transform.dense.bias"] = (H,)
    s["cls.predictions.transform.LayerNorm.weight"] = (H,)
    s["cls.predictions.transform.LayerNorm.bias"] = (H,)
    s["cls.predictions.bias"] = (V,)
    s["cls.seq_relationship.weight"] = (2, H)
    s["cls.seq_relationship.bias"] = (2,)
    return s


def init_params(shapes, gen):
    """std 0.1 weights and biases, LayerNorm weight 1 + 0.1 N(0,1), rounded to float32."""
    out = {}
    for name, shape in shapes.items():
        x = 0.1 * torch.randn(shape, generator=gen)
        if "LayerNorm.weight" in name:
            x = x + 1.0
        out[name] = x.float().double().requires_grad_(True)
    return out


def make_inputs(c, gen):
    B, S, P, V = c["batch"], c["seq_len"], c["max_pred"], c["vocab_size"]
    lengths = [S, 11, 7]
    n_pred = [5, 3, 2]
    input_ids = torch.zeros(B, S, dtype=torch.int32)
    segment_ids = torch.zeros(B, S, dtype=torch.int32)
    input_mask = torch.zeros(B, S, dtype=torch.int32)
    masked_positions = torch.zeros(B, P, dtype=torch.int32)
    masked_ids = torch.zeros(B, P, dtype=torch.int32)
    masked_weights = torch.zeros(B, P, dtype=torch.float32)
    for b in range(B):
        L = lengths[b]
        input_ids[b, :L] = torch.randint(1, V, (L,), generator=gen, dtype=torch.int32)
        input_mask[b, :L] = 1
        segment_ids[b, L // 2:L] = 1
        pos = torch.randperm(L - 1, generator=gen)[:n_pred[b]].sort().values + 1
        masked_positions[b, :n_pred[b]] = pos.int()
        masked_ids[b, :n_pred[b]] = torch.randint(0, V, (n_pred[b],), generator=gen,
                                                  dtype=torch.int32)
        masked_weights[b, :n_pred[b]] = 1.0
    nsp_labels = torch.tensor([0, 1, 1], dtype=torch.int32)
    return dict(input_ids=input_ids, segment_ids=segment_ids, input_mask=input_mask,
                masked_positions=masked_positions, masked_ids=masked_ids,
                masked_weights=masked_weights, nsp_labels=nsp_labels)


def layer_norm(x, p, name):
    return F.layer_norm(x, x.shape[-1:], p[name + ".weight"], p[name + ".bias"], EPS)


def linear(x, p, name):
    return F.linear(x, p[name + ".weight"], p[name + ".bias"])


def forward(p, x, c, pre_ln):
    """Returns (mlm_logits (B*P, V), nsp_logits (B, 2), mlm_loss, nsp_loss)."""
    B, S, P = c["batch"], c["seq_len"], c["max_pred"]
    H, nh = c["hidden"], c["heads"]
    d = H // nh
    ids, seg = x["input_ids"].long(), x["segment_ids"].long()
    h = (p["bert.embeddings.word_embeddings.weight"][ids]
         + p["bert.embeddings.position_embeddings.weight"][torch.arange(S)][None]
         + p["bert.embeddings.token_type_embeddings.weight"][seg])
    if not pre_ln:
        h = layer_norm(h, p, "bert.embeddings.LayerNorm")
    mask_add = ((1.0 - x["input_mask"].double()) * -10000.0)[:, None, None, :]  # (B,1,1,S)
    mlp_gelu = (lambda t: F.gelu(t, approximate="tanh")) if pre_ln else F.gelu

    def attention(t, pre):
        def heads(u):
            return u.view(B, S, nh, d).transpose(1, 2)  # (B, nh, S, d)
        q = heads(linear(t, p, pre + "attention.self.query"))
        k = heads(linear(t, p, pre + "attention.self.key"))
        v = heads(linear(t, p, pre + "attention.self.value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + mask_add, dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(B, S, H)
        return linear(ctx, p, pre + "attention.output.dense")

    def mlp(t, pre):
        return linear(mlp_gelu(linear(t, p, pre + "intermediate.dense")), p,
                      pre + "output.dense")

    for n in range(c["layers"]):
        pre = f"bert.encoder.layer.{n}."
        if pre_ln:
            h = h + attention(layer_norm(h, p, pre + "attention.output.LayerNorm"), pre)
            h = h + mlp(layer_norm(h, p, pre + "output.LayerNorm"), pre)
        else:
            h = layer_norm(h + attention(h, pre), p, pre + "attention.output.LayerNorm")
            h = layer_norm(h + mlp(h, pre), p, pre + "output.LayerNorm")
    if pre_ln:
        h = layer_norm(h, p, "bert.encoder.LayerNorm")

    pooled = torch.tanh(linear(h[:, 0], p, "bert.pooler.dense"))
    nsp_logits = linear(pooled, p, "cls.seq_relationship")  # (B, 2)

    pos = x["masked_positions"].long()
    gathered = h[torch.arange(B)[:, None], pos].reshape(B * P, H)
    t = F.gelu(linear(gathered, p, "cls.predictions.transform.dense"))
    t = layer_norm(t, p, "cls.predictions.transform.LayerNorm")
    mlm_logits = t @ p["bert.embeddings.word_embeddings.weight"].T + p["cls.predictions.bias"]

    w = x["masked_weights"].double().reshape(-1)
    logp = torch.log_softmax(mlm_logits, dim=-1)
    picked = logp[torch.arange(B * P), x["masked_ids"].long().reshape(-1)]
    mlm_loss = -(w * picked).sum() / (w.sum() + 1e-5)
    nsp_loss = F.cross_entropy(nsp_logits, x["nsp_labels"].long())
    return mlm_logits, nsp_logits, mlm_loss, nsp_loss


def decays(name):
    return "bias" not in name and "LayerNorm" not in name


def lamb_steps(p0, x, c, pre_ln):
    """MLPerf LAMB (tinygrad LAMB(adam=False)) with global-norm clipping, float64."""
    p = {k: v.detach().clone().requires_grad_(True) for k, v in p0.items()}
    m = {k: torch.zeros_like(v) for k, v in p.items()}
    v2 = {k: torch.zeros_like(v) for k, v in p.items()}
    b1, b2, eps, wd, lr = (LAMB[k] for k in ("beta1", "beta2", "eps", "weight_decay", "lr"))
    for t in range(1, LAMB["steps"] + 1):
        for q in p.values():
            q.grad = None
        _, _, mlm, nsp = forward(p, x, c, pre_ln)
        (mlm + nsp).backward()
        g = {k: q.grad for k, q in p.items()}
        norm = math.sqrt(sum(float((gi * gi).sum()) for gi in g.values()))
        if norm > LAMB["clip"]:
            g = {k: gi * (LAMB["clip"] / norm) for k, gi in g.items()}
        with torch.no_grad():
            for k, q in p.items():
                m[k] = b1 * m[k] + (1 - b1) * g[k]
                v2[k] = b2 * v2[k] + (1 - b2) * g[k] * g[k]
                mh = m[k] / (1 - b1 ** t)
                vh = v2[k] / (1 - b2 ** t)
                u = mh / (vh.sqrt() + eps) + (wd * q if decays(k) else 0.0)
                wn, un = float(q.norm()), float(u.norm())
                r = wn / un if wn > 0 and un > 0 else 1.0
                q -= lr * r * u
    return p


def f32(t):
    return t.detach().to(torch.float32).numpy()


def make(pre_ln, seed):
    gen = torch.Generator().manual_seed(seed)
    c = CONFIG
    params = init_params(param_shapes(c, pre_ln), gen)
    x = make_inputs(c, gen)
    mlm_logits, nsp_logits, mlm, nsp = forward(params, x, c, pre_ln)
    (mlm + nsp).backward()
    after = lamb_steps(params, x, c, pre_ln)

    out = {k: v.numpy() for k, v in x.items()}
    out.update(mlm_logits=f32(mlm_logits), nsp_logits=f32(nsp_logits), mlm_loss=f32(mlm),
               nsp_loss=f32(nsp), loss=f32(mlm + nsp))
    for k, q in params.items():
        out[k] = f32(q)
        out["grad." + k] = f32(q.grad)
        out["lamb3." + k] = f32(after[k])
    meta = {k: str(v) for k, v in c.items()}
    meta.update(pre_ln=str(int(pre_ln)), seed=str(seed), mlm_loss=repr(float(mlm)),
                nsp_loss=repr(float(nsp)), **{"lamb." + k: str(v) for k, v in LAMB.items()})
    name = f"bert_tiny_{'preln' if pre_ln else 'postln'}.safetensors"
    path = os.path.normpath(os.path.join(OUT_DIR, name))
    st.save(path, out, meta)
    print(f"wrote {path} ({os.path.getsize(path)} bytes): mlm {float(mlm):.6f} "
          f"nsp {float(nsp):.6f}")


if __name__ == "__main__":
    make(pre_ln=False, seed=1234)
    make(pre_ln=True, seed=4321)
