#!/usr/bin/env python3
"""Reference for one Megatron BERT sample, written from specs/megatron-bert.md sections 1.7-1.8
with numpy's own RandomState (the C++ emulates it). Reads the indexed dataset with
tools/indexed_reader.py.

usage: megatron_sample_ref.py REQUEST.json OUT.json
REQUEST: {"prefix", "vocab", "seed", "seq_length", "mask_prob", "binary_head",
          "samples": [[index, first, last, target], ...]}
OUT: [{"tokens", "types", "positions", "labels", "is_random"}, ...] per sample
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools"))
import indexed_reader  # noqa: E402


def build(req, sentences, vocab, index, first, last, target):
    cls, sep, mask = vocab.index("[CLS]"), vocab.index("[SEP]"), vocab.index("[MASK]")
    rs = np.random.RandomState(seed=(req["seed"] + index) % 2**32)
    sample = [list(map(int, sentences[i])) for i in range(first, last)]
    pivot, is_random = len(sample), False
    if req["binary_head"]:
        pivot = 1
        if len(sample) >= 3:
            pivot = rs.randint(low=1, high=len(sample))
        is_random = rs.random() < 0.5
    a = [t for s in sample[:pivot] for t in s]
    b = [t for s in sample[pivot:] for t in s]
    if is_random:
        a, b = b, a
    while len(a) + len(b) > target:
        seg = a if len(a) > len(b) else b
        if rs.random() < 0.5:
            del seg[0]
        else:
            del seg[-1]
    tokens = [cls] + a + [sep]
    types = [0] * len(tokens)
    if b:
        tokens += b + [sep]
        types += [1] * (len(b) + 1)

    p = req["mask_prob"]
    cands = []
    for i, t in enumerate(tokens):
        if t in (cls, sep):
            continue
        if cands and vocab[t].startswith("##"):
            cands[-1].append(i)
        else:
            cands.append([i])
    num_to_predict = min(p * target, max(1, int(round(len(tokens) * p))))
    ngrams = np.arange(1, 4, dtype=np.int64)
    pvals = 1.0 / np.arange(1, 4)
    pvals /= pvals.sum(keepdims=True)
    ngram_index = [[cands[idx:idx + n] for n in ngrams] for idx in range(len(cands))]
    rs.shuffle(ngram_index)
    out = list(tokens)
    covered, masked = set(), []
    for cand in ngram_index:
        if len(masked) >= num_to_predict:
            break
        n = rs.choice(ngrams[:len(cand)], p=pvals[:len(cand)] / pvals[:len(cand)].sum(keepdims=True))
        index_set = sum(cand[n - 1], [])
        n -= 1
        while len(masked) + len(index_set) > num_to_predict:
            if n == 0:
                break
            index_set = sum(cand[n - 1], [])
            n -= 1
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(i in covered for i in index_set):
            continue
        for i in index_set:
            covered.add(i)
            if rs.random() < 0.8:
                tok = mask
            elif rs.random() < 0.5:
                tok = tokens[i]
            else:
                tok = int(rs.randint(0, len(vocab)))
            out[i] = tok
            masked.append((i, tokens[i]))
    masked.sort()
    return {"tokens": out, "types": types, "positions": [m[0] for m in masked],
            "labels": [m[1] for m in masked], "is_random": int(is_random)}


def main():
    req = json.load(open(sys.argv[1]))
    vocab = open(req["vocab"], encoding="utf-8").read().rstrip("\n").split("\n")
    _, _, documents = indexed_reader.read(req["prefix"])
    sentences = [s for doc in documents for s in doc]
    result = [build(req, sentences, vocab, *s) for s in req["samples"]]
    json.dump(result, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
