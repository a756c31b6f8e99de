"""Golden Megatron indexed datasets (MMIDIDX .bin/.idx) for tests/golden/indexed/corpus.jsonl,
written without kiln: the BERT uncased tokenizer and the file format restated from
specs/megatron-bert.md sections 1.2-1.4 (preprocess_data.py with --split-sentences and without).

Sentence splitting is the one input not derived here: SENTENCES holds the corpus split by hand
the way kiln's rules (data/text/sentence_splitter.h, standing in for NLTK Punkt) read it, and the
script checks that the pieces rebuild each document's text.

Writes tests/golden/indexed/expected_text_{sentence,document}.{bin,idx}.
Run: /usr/bin/python3 tools/golden/make_indexed_golden.py VOCAB [OUT_DIR]
     (VOCAB: bert-base-uncased-vocab.txt, from scripts/fetch_data.sh: data/vocab/)
"""
import json
import os
import struct
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "..", "tests", "golden", "indexed")

SENTENCES = [
    ["The quick brown fox jumps over the lazy dog.", "It was 3.14 meters tall!",
     "Was it Mr. Smith's dog?", "Nobody knew."],
    ["J. R. R. Tolkien wrote books, e.g. The Hobbit.", 'He said "Hello there."',
     "Then he left (quietly.)", "The end..."],
    [],
    ["Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 accents are stripped.",
     "\u4e2d\u6587 characters split apart.", "Wait... what happened?!", "Everything\u2026",
     "Fine."],
    ["One sentence only without a final period"],
    ["The U.S. economy grew 2.5% in 2019.", "Dr. Jones disagreed.", "A new line starts here.",
     "And a paragraph."],
]

CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
MAX_WORD_CHARS = 100
UINT16 = 8  # MMIDIDX dtype code


def is_punctuation(ch):
    o = ord(ch)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def basic_words(text):
    """Clean, space out CJK, split on whitespace, lower-case, strip accents, split punctuation."""
    chars = []
    for ch in text:
        o = ord(ch)
        if o in (0, 0xFFFD) or (ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")):
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            chars.append(" ")
        elif any(lo <= o <= hi for lo, hi in CJK):
            chars.append(f" {ch} ")
        else:
            chars.append(ch)
    words = []
    for word in "".join(chars).split():
        word = "".join(c for c in unicodedata.normalize("NFD", word.lower())
                       if unicodedata.category(c) != "Mn")
        piece = ""
        for c in word:
            if is_punctuation(c):
                words += [piece, c] if piece else [c]
                piece = ""
            else:
                piece += c
        if piece:
            words.append(piece)
    return words


def wordpiece(word, vocab):
    """Greedy longest match first; a word with no full segmentation is [UNK]."""
    if len(word) > MAX_WORD_CHARS:
        return [vocab["[UNK]"]]
    ids, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                ids.append(vocab[piece])
                break
            end -= 1
        if end == start:
            return [vocab["[UNK]"]]
        start = end
    return ids


def encode(text, vocab):
    return [i for w in basic_words(text) for i in wordpiece(w, vocab)]


def write_indexed(prefix, documents):
    """documents: lists of token-id lists. Empty sequences are dropped; empty documents kept."""
    lengths, boundaries, data = [], [0], b""
    for doc in documents:
        for seq in doc:
            if seq:
                lengths.append(len(seq))
                data += struct.pack(f"<{len(seq)}H", *seq)
        boundaries.append(len(lengths))
    pointers, offset = [], 0
    for n in lengths:
        pointers.append(offset)
        offset += 2 * n
    idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, UINT16, len(lengths), len(boundaries))
    idx += struct.pack(f"<{len(lengths)}i", *lengths) + struct.pack(f"<{len(pointers)}q", *pointers)
    idx += struct.pack(f"<{len(boundaries)}q", *boundaries)
    for ext, content in ((".bin", data), (".idx", idx)):
        with open(prefix + ext, "wb") as f:
            f.write(content)


def main():
    vocab_path = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else GOLDEN
    with open(vocab_path, encoding="utf-8") as f:
        vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
    assert len(vocab) < 65500, "uint16 tokens need a vocab under 65500"
    with open(os.path.join(GOLDEN, "corpus.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    assert len(texts) == len(SENTENCES)
    for text, sentences in zip(texts, SENTENCES):
        assert " ".join(text.split()) == " ".join(sentences), (text, sentences)
    write_indexed(os.path.join(out_dir, "expected_text_sentence"),
                  [[encode(s, vocab) for s in doc] for doc in SENTENCES])
    write_indexed(os.path.join(out_dir, "expected_text_document"),
                  [[encode(text, vocab)] for text in texts])
    print(f"wrote {out_dir}/expected_text_{{sentence,document}}.{{bin,idx}}")


if __name__ == "__main__":
    main()
