"""Checks a directory exported for Hugging Face transformers (`kiln checkpoint export --format
hf`) against what BertForPreTraining.from_pretrained needs, without transformers: config.json
holds the BertConfig keys, model.safetensors (metadata format "pt") holds exactly the state-dict
keys of BertForPreTraining for that config, each F32 with its shape, the tied decoder equal to the
word embeddings and MLM bias, and vocab.txt has vocab_size lines.

Usage: check_hf_bert.py DIR   (prints "ok", or the problems and exits 1)
"""
import json
import os
import sys

import numpy as np

import safetensors_np

CONFIG_KEYS = ["architectures", "model_type", "vocab_size", "hidden_size", "num_hidden_layers",
               "num_attention_heads", "intermediate_size", "hidden_act", "hidden_dropout_prob",
               "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
               "initializer_range", "layer_norm_eps"]


def expected_shapes(c):
    """transformers' BertForPreTraining state dict (persistent entries) for config `c`."""
    V, H, I = c["vocab_size"], c["hidden_size"], c["intermediate_size"]
    s = {
        "bert.embeddings.word_embeddings.weight": (V, H),
        "bert.embeddings.position_embeddings.weight": (c["max_position_embeddings"], H),
        "bert.embeddings.token_type_embeddings.weight": (c["type_vocab_size"], H),
        "bert.embeddings.LayerNorm.weight": (H,), "bert.embeddings.LayerNorm.bias": (H,),
        "bert.pooler.dense.weight": (H, H), "bert.pooler.dense.bias": (H,),
        "cls.predictions.bias": (V,),
        "cls.predictions.transform.dense.weight": (H, H), "cls.predictions.transform.dense.bias": (H,),
        "cls.predictions.transform.LayerNorm.weight": (H,), "cls.predictions.transform.LayerNorm.bias": (H,),
        "cls.predictions.decoder.weight": (V, H), "cls.predictions.decoder.bias": (V,),
        "cls.seq_relationship.weight": (2, H), "cls.seq_relationship.bias": (2,),
    }
    for n in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{n}."
        for proj in ("query", "key", "value"):
            s[p + f"attention.self.{proj}.weight"] = (H, H)
            s[p + f"attention.self.{proj}.bias"] = (H,)
        s[p + "attention.output.dense.weight"] = (H, H)
        s[p + "attention.output.dense.bias"] = (H,)
        s[p + "attention.output.LayerNorm.weight"] = (H,)
        s[p + "attention.output.LayerNorm.bias"] = (H,)
        s[p + "intermediate.dense.weight"] = (I, H)
        s[p + "intermediate.dense.bias"] = (I,)
        s[p + "output.dense.weight"] = (H, I)
        s[p + "output.dense.bias"] = (H,)
        s[p + "output.LayerNorm.weight"] = (H,)
        s[p + "output.LayerNorm.bias"] = (H,)
    return s


def problems(directory):
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    out = [f"config.json: no {k}" for k in CONFIG_KEYS if k not in c]
    if out:
        return out
    if c["architectures"] != ["BertForPreTraining"] or c["model_type"] != "bert" or c["hidden_act"] != "gelu":
        out.append("config.json: architectures / model_type / hidden_act")
    path = os.path.join(directory, "model.safetensors")
    tensors, meta = safetensors_np.load(path)
    if meta.get("format") != "pt":
        out.append(f"model.safetensors: metadata format {meta.get('format')!r}, transformers wants 'pt'")
    dtypes = {}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        dtypes = {k: v["dtype"] for k, v in json.loads(f.read(n)).items() if k != "__metadata__"}
    want = expected_shapes(c)
    out += [f"missing {k}" for k in sorted(set(want) - set(tensors))]
    out += [f"unexpected {k}" for k in sorted(set(tensors) - set(want))]
    for k in sorted(set(want) & set(tensors)):
        if tuple(tensors[k].shape) != want[k] or dtypes[k] != "F32":
            out.append(f"{k}: {dtypes[k]} {tuple(tensors[k].shape)}, expected F32 {want[k]}")
    for tied, source in (("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"),
                         ("cls.predictions.decoder.bias", "cls.predictions.bias")):
        if tied in tensors and source in tensors and not np.array_equal(tensors[tied], tensors[source]):
            out.append(f"{tied} differs from {source}")
    with open(os.path.join(directory, "vocab.txt")) as f:
        lines = sum(1 for _ in f)
    if lines != c["vocab_size"]:
        out.append(f"vocab.txt: {lines} lines, vocab_size {c['vocab_size']}")
    return out


if __name__ == "__main__":
    found = problems(sys.argv[1])
    print("\n".join(found) if found else "ok")
    sys.exit(1 if found else 0)
