#!/usr/bin/env python3
"""The MLPerf BERT reference's sample generation, restated in Python as the independent check of
kiln's C++ (`kiln prepare bert --sampling reference`, tests/data/reference_sampling_test.cc).

It restates the algorithm of create_pretraining_data.py as published in mlcommons/training at
commit aa344c7fb900e82ed19fb94aebfed50c63ab2204 (retired_benchmarks/bert/cleanup_scripts/; it
was language_model/tensorflow/bert/cleanup_scripts/ before), and the eval pick of
pick_eval_samples.py there; tinygrad's extra/datasets/wikipedia.py (commit a9069c17) ports the
same algorithm. Randomness is CPython's own random.Random(seed), one per input file, drawn in the
reference's order. Only tokenization is taken from kiln: IDS holds, for each '\\n'-separated line
of TEXT, the ids kiln's tokenizer gives it; everything else (lines, blank-line documents,
instances, masking, shuffles, picking) is computed here.

usage: reference_pretraining_data.py TEXT IDS.json VOCAB OUT.json --seed N [--max-seq-length 512]
       [--max-predictions 76] [--masked-lm-prob 0.15] [--short-seq-prob 0.1] [--dupe-factor 10]
       [--eval-samples K]
OUT: a JSON list of {input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
     next_sentence_label} in output order (unpadded); with --eval-samples, the K picked ones.
"""
import argparse
import json
import random


def read_documents(text_path, line_ids, vocab_list):
    documents = [[]]
    with open(text_path, encoding="utf-8", newline="\n") as f:
        for number, line in enumerate(f):
            line = line.strip()
            if not line:
                documents.append([])
            tokens = [vocab_list[i] for i in line_ids[number]]
            if tokens:
                documents[-1].append(tokens)
    return [d for d in documents if d]


def truncate_pair(a, b, max_tokens, rng):
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def mask_tokens(tokens, args, vocab_words, rng):
    candidates = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(candidates)
    out = list(tokens)
    n = min(args.max_predictions, max(1, int(round(len(tokens) * args.masked_lm_prob))))
    picked = []
    for i in candidates[:n]:
        if rng.random() < 0.8:
            out[i] = "[MASK]"
        elif rng.random() < 0.5:
            out[i] = tokens[i]
        else:
            out[i] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
        picked.append((i, tokens[i]))
    picked.sort()
    return out, [i for i, _ in picked], [t for _, t in picked]


def document_instances(documents, index, args, vocab_words, rng):
    document = documents[index]
    max_tokens = args.max_seq_length - 3
    target = max_tokens
    if rng.random() < args.short_seq_prob:
        target = rng.randint(2, max_tokens)
    instances, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = [t for segment in chunk[:a_end] for t in segment]
            b = []
            if len(chunk) == 1 or rng.random() < 0.5:
                is_random_next = True
                for _ in range(10):
                    other = rng.randint(0, len(documents) - 1)
                    if other != index:
                        break
                other_document = documents[other]
                for j in range(rng.randint(0, len(other_document) - 1), len(other_document)):
                    b.extend(other_document[j])
                    if len(b) >= target - len(a):
                        break
                i -= len(chunk) - a_end  # the unused segments are read again
            else:
                is_random_next = False
                b = [t for segment in chunk[a_end:] for t in segment]
            truncate_pair(a, b, max_tokens, rng)
            tokens = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
            segment_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            tokens, positions, labels = mask_tokens(tokens, args, vocab_words, rng)
            instances.append((tokens, segment_ids, positions, labels, is_random_next))
            chunk, length = [], 0
        i += 1
    return instances


def main():
    p = argparse.ArgumentParser()
    for name in ("text", "ids", "vocab", "out"):
        p.add_argument(name)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--max-seq-length", type=int, default=512)
    p.add_argument("--max-predictions", type=int, default=76)
    p.add_argument("--masked-lm-prob", type=float, default=0.15)
    p.add_argument("--short-seq-prob", type=float, default=0.1)
    p.add_argument("--dupe-factor", type=int, default=10)
    p.add_argument("--eval-samples", type=int, default=0)
    args = p.parse_args()

    vocab = {}
    with open(args.vocab, encoding="utf-8") as f:
        for index, line in enumerate(f):
            vocab[line.strip()] = index
    vocab_list = list(vocab.keys())
    with open(args.ids) as f:
        line_ids = json.load(f)

    rng = random.Random(args.seed)
    documents = read_documents(args.text, line_ids, vocab_list)
    rng.shuffle(documents)
    instances = []
    for _ in range(args.dupe_factor):
        for index in range(len(documents)):
            instances.extend(document_instances(documents, index, args, vocab_list, rng))
    rng.shuffle(instances)
    if args.eval_samples:
        ratio = len(instances) / args.eval_samples
        instances = [instances[int(k * ratio)] for k in range(args.eval_samples)]

    out = [{"input_ids": [vocab[t] for t in tokens], "segment_ids": segment_ids,
            "masked_lm_positions": positions, "masked_lm_ids": [vocab[t] for t in labels],
            "next_sentence_label": int(is_random_next)}
           for tokens, segment_ids, positions, labels, is_random_next in instances]
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
