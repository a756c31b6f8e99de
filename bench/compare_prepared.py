#!/usr/bin/env python3
"""Compares a kiln sample shard (.kbs, docs/formats.md) with a tinygrad wikipedia.py pickle
(a list of dicts of (1, n) numpy arrays): prints how many samples agree exactly.

usage: compare_prepared.py PART.kbs PART.pkl
"""
import pickle
import struct
import sys

import numpy as np


def read_kbs(path):
    data = open(path, "rb").read()
    magic, _, _, S, P, dtype, record, n = struct.unpack_from("<8sIIIIIIQ", data, 0)
    assert magic == b"KILNBSMP", path
    t = np.uint16 if dtype == 1 else np.int32
    w = np.dtype(t).itemsize
    rows = np.frombuffer(data, np.uint8, n * record, 64).reshape(n, record)
    ids = rows[:, :S * w].copy().view(t).astype(np.int32)
    lm_ids = rows[:, S * w:(S + P) * w].copy().view(t).astype(np.int32)
    o = (S + P) * w
    positions = rows[:, o:o + 2 * P].copy().view(np.uint16).astype(np.int32)
    segments = rows[:, o + 2 * P:o + 2 * P + S].astype(np.int32)
    tail = o + 2 * P + S
    length = rows[:, tail:tail + 2].copy().view(np.uint16)[:, 0]
    count = rows[:, tail + 2:tail + 4].copy().view(np.uint16)[:, 0]
    nsp = rows[:, tail + 4].astype(np.int32)
    return [{"input_ids": ids[i], "input_mask": (np.arange(S) < length[i]).astype(np.int32),
             "segment_ids": segments[i], "masked_lm_positions": positions[i], "masked_lm_ids": lm_ids[i],
             "masked_lm_weights": (np.arange(P) < count[i]).astype(np.float32), "next_sentence_labels": nsp[i:i + 1]}
            for i in range(n)]


def main():
    kiln = read_kbs(sys.argv[1])
    with open(sys.argv[2], "rb") as f:
        ref = pickle.load(f)
    same = sum(all(np.array_equal(k[key], r[key][0]) for key in k) for k, r in zip(kiln, ref))
    print(f"samples: kiln {len(kiln)}, reference {len(ref)}; identical at the same index: {same}")
    sys.exit(0 if same == len(kiln) == len(ref) else 1)


if __name__ == "__main__":
    main()
