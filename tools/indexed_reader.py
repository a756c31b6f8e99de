#!/usr/bin/env python3
"""Independent reader for Megatron-LM MMIDIDX indexed datasets (PREFIX.idx + PREFIX.bin).

Written from the format description (specs/megatron-bert.md section 1.4), not from kiln's C++:
  .idx: 9-byte magic b"MMIDIDX\\x00\\x00", u64 version (1), u8 dtype code, u64 S (sequences),
        u64 D1 (document indices), i32 lengths[S], i64 pointers[S], i64 document_indices[D1]
  .bin: the sequences' tokens back to back in the dtype.

Usage:
  indexed_reader.py PREFIX                  validate and print a summary
  indexed_reader.py PREFIX --vocab V --dump print every document's sentences as WordPiece text
  indexed_reader.py PREFIX --json OUT       write {"dtype", "num_sequences", "num_documents",
                                            "documents": [[[ids of sentence] ...] ...]} to OUT
Exits 1 with a message if the files break the format.
"""
import argparse
import json
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
          8: np.uint16}


def fail(msg):
    print(f"indexed_reader: {msg}", file=sys.stderr)
    sys.exit(1)


def read(prefix):
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    if idx[:9] != MAGIC:
        fail(f"{prefix}.idx: bad magic {idx[:9]!r}")
    version = int(np.frombuffer(idx, dtype="<u8", count=1, offset=9)[0])
    if version != 1:
        fail(f"{prefix}.idx: version {version}")
    code = idx[17]
    if code not in DTYPES:
        fail(f"{prefix}.idx: dtype code {code}")
    dtype = np.dtype(DTYPES[code]).newbyteorder("<")
    s = int(np.frombuffer(idx, dtype="<u8", count=1, offset=18)[0])
    d1 = int(np.frombuffer(idx, dtype="<u8", count=1, offset=26)[0])
    off = 34
    if len(idx) < off + 4 * s + 8 * s + 8 * d1:
        fail(f"{prefix}.idx: truncated")
    lengths = np.frombuffer(idx, dtype="<i4", count=s, offset=off)
    off += 4 * s
    pointers = np.frombuffer(idx, dtype="<i8", count=s, offset=off)
    off += 8 * s
    doc_idx = np.frombuffer(idx, dtype="<i8", count=d1, offset=off)
    off += 8 * d1
    if off != len(idx):
        fail(f"{prefix}.idx: {len(idx) - off} trailing bytes (text datasets have no modes)")
    if d1 < 1 or doc_idx[0] != 0 or doc_idx[-1] != s or np.any(np.diff(doc_idx) < 0):
        fail(f"{prefix}.idx: bad document indices {doc_idx.tolist()}")
    expected = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * dtype.itemsize)[:-1]]) if s else pointers
    if not np.array_equal(pointers, expected):
        fail(f"{prefix}.idx: pointers are not the prefix sums of the lengths")
    with open(prefix + ".bin", "rb") as f:
        binary = f.read()
    total = int(lengths.astype(np.int64).sum()) * dtype.itemsize
    if len(binary) != total:
        fail(f"{prefix}.bin: {len(binary)} bytes, the index describes {total}")
    tokens = np.frombuffer(binary, dtype=dtype)
    sentences = [tokens[p // dtype.itemsize: p // dtype.itemsize + n] for p, n in zip(pointers, lengths)]
    documents = [[sentences[i] for i in range(doc_idx[d], doc_idx[d + 1])] for d in range(d1 - 1)]
    return code, s, documents


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix")
    ap.add_argument("--vocab")
    ap.add_argument("--dump", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    code, s, documents = read(args.prefix)
    print(f"{args.prefix}: dtype code {code}, {s} sequences, {len(documents)} documents, "
          f"{sum(len(x) for d in documents for x in d)} tokens")
    if args.dump:
        vocab = open(args.vocab, encoding="utf-8").read().split("\n") if args.vocab else None
        for d, doc in enumerate(documents):
            print(f"document {d}: {len(doc)} sentences")
            for sent in doc:
                print("  " + (" ".join(vocab[int(t)] for t in sent) if vocab else " ".join(map(str, sent))))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dtype": code, "num_sequences": s, "num_documents": len(documents),
                       "documents": [[[int(t) for t in sent] for sent in doc] for doc in documents]}, f)


if __name__ == "__main__":
    main()
