"""Writes a kiln BERT's weights (a checkpoint's model.safetensors, Hugging Face names) as a
TensorFlow TensorBundle with the names of Google's / MLPerf's TF1 BERT checkpoint, for kiln's
tests of `--init-checkpoint`. Dense weights are transposed to TF's (in, out) `kernel`, LayerNorm
weight/bias become gamma/beta, the NSP head output_weights/output_bias, the MLM decoder bias
cls/predictions/output_bias. Like the MLPerf checkpoint the bundle also holds a global_step and
adam_m / adam_v slots, which a reader must skip.

Usage: kiln_to_tf_bert.py MODEL.safetensors PREFIX [--vocab-size N] [--shards N]
                          [--drop TF_NAME]... [--extra TF_NAME]...
--vocab-size keeps the first N rows of the vocab-sized tensors (kiln may pad the vocabulary);
--drop leaves a variable out and --extra adds one the model does not have (error tests).
"""
import argparse
import re

import numpy as np

import safetensors_np
import write_tf_bundle as tfb

_VOCAB_SIZED = ("bert.embeddings.word_embeddings.weight", "cls.predictions.bias")
_SPECIAL = {
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
}


def tf_name(name, array):
    """(TF name, whether the array is transposed) of kiln parameter `name`."""
    if name in _SPECIAL:
        return _SPECIAL[name], False
    path = re.sub(r"\.layer\.(\d+)\.", r".layer_\1.", name).split(".")
    last = path.pop()
    if path[-1].endswith("_embeddings"):
        return "/".join(path), False
    if path[-1] == "LayerNorm":
        return "/".join(path + [{"weight": "gamma", "bias": "beta"}[last]]), False
    if last == "weight" and array.ndim == 2:
        return "/".join(path + ["kernel"]), True
    return "/".join(path + [last]), False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("prefix")
    p.add_argument("--vocab-size", type=int, default=0)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--drop", action="append", default=[])
    p.add_argument("--extra", action="append", default=[])
    a = p.parse_args()
    weights, _ = safetensors_np.load(a.model)
    tensors = {"global_step": (tfb.DT_INT64, np.array(28252, dtype=np.int64))}
    for name, array in weights.items():
        if a.vocab_size and name in _VOCAB_SIZED:
            array = array[:a.vocab_size]
        tf, transposed = tf_name(name, array)
        value = np.ascontiguousarray(array.T if transposed else array, dtype=np.float32)
        if tf in a.drop:
            continue
        tensors[tf] = (tfb.DT_FLOAT, value)
        for slot in ("adam_m", "adam_v"):
            tensors[f"{tf}/{slot}"] = (tfb.DT_FLOAT, np.zeros_like(value))
    for extra in a.extra:
        tensors[extra] = (tfb.DT_FLOAT, np.ones((3,), dtype=np.float32))
    tfb.write_bundle(a.prefix, tensors, a.shards)


if __name__ == "__main__":
    main()
