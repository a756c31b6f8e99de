#!/usr/bin/env python3
"""Reference for Megatron-LM's BERT sample mapping (helpers.cpp build_mapping), written from
specs/megatron-bert.md section 1.6 with its own Mersenne Twisters (std::mt19937 and
std::mt19937_64 as the C++ standard defines them), independently of kiln's C++.

usage: megatron_mapping_ref.py REQUEST.json OUT.json
REQUEST: {"documents": [[sentence length, ...], ...], "doc_begin", "doc_end", "max_len",
          "short_seq_prob", "seed", "min_sentences", "num_samples"}
OUT: [[first sentence, one past the last, target length], ...] after the shuffle;
     sentence indices count over all documents, like an indexed dataset's sequences.
usage: megatron_mapping_ref.py --self-test   checks both generators' 10000th outputs
"""
import json
import math
import sys

LONG_SENTENCE = 512
UNBOUNDED_EPOCHS = 2**31 - 2


class MersenneTwister:
    """The MT19937 family: w-bit words, n-word state, the standard's parameters per width."""

    def __init__(self, seed, w, n, m, r, a, u, d, s, b, t, c, l, f):
        self.w, self.n, self.m, self.a = w, n, m, a
        self.u, self.d, self.s, self.b, self.t, self.c, self.l = u, d, s, b, t, c, l
        self.mask = (1 << w) - 1
        self.lower = (1 << r) - 1
        self.upper = self.mask & ~self.lower
        self.state = [seed & self.mask]
        for i in range(1, n):
            prev = self.state[-1]
            self.state.append((f * (prev ^ (prev >> (w - 2))) + i) & self.mask)
        self.index = n

    def _twist(self):
        x = self.state
        for i in range(self.n):
            y = (x[i] & self.upper) | (x[(i + 1) % self.n] & self.lower)
            x[i] = x[(i + self.m) % self.n] ^ (y >> 1) ^ (self.a if y & 1 else 0)
        self.index = 0

    def __call__(self):
        if self.index >= self.n:
            self._twist()
        y = self.state[self.index]
        self.index += 1
        y ^= (y >> self.u) & self.d
        y ^= (y << self.s) & self.b & self.mask
        y ^= (y << self.t) & self.c & self.mask
        return y ^ (y >> self.l)


def mt19937(seed):
    return MersenneTwister(seed, 32, 624, 397, 31, 0x9908B0DF, 11, 0xFFFFFFFF, 7, 0x9D2C5680, 15,
                           0xEFC60000, 18, 1812433253)


def mt19937_64(seed):
    return MersenneTwister(seed, 64, 312, 156, 31, 0xB5026F5AA96619E9, 29, 0x5555555555555555, 17,
                           0x71D67FFFEDA60000, 37, 0xFFF7EEE000000000, 43, 6364136223846793005)


def target_length(rng, ratio, max_len):
    """One draw: uniform in [2, max_len] with probability about 1/ratio, else max_len."""
    r = rng()
    if ratio > 0 and r % ratio == 0:
        return 2 + r % (max_len - 1)
    return max_len


def build(req):
    docs = req["documents"]
    starts = [0]
    for d in docs:
        starts.append(starts[-1] + len(d))
    max_len, min_sent, wanted = req["max_len"], req["min_sentences"], req["num_samples"]
    p = req["short_seq_prob"]
    ratio = int(math.floor(1.0 / p + 0.5)) if p > 0 else 0  # C++ round(): half away from zero
    rng = mt19937(req["seed"])
    samples = []
    for _ in range(UNBOUNDED_EPOCHS):
        if len(samples) >= wanted:
            break
        epoch_start = len(samples)
        for d in range(req["doc_begin"], req["doc_end"]):
            lengths = docs[d]
            if len(lengths) < min_sent:
                continue
            if len(lengths) > 1 and any(n > LONG_SENTENCE for n in lengths):
                continue
            target, acc, count, first = target_length(rng, ratio, max_len), 0, 0, 0
            for i, n in enumerate(lengths):
                acc += n
                count += 1
                remaining = len(lengths) - i - 1
                if (acc >= target and remaining > 1 and count >= min_sent) or remaining == 0:
                    samples.append([starts[d] + first, starts[d] + i + 1, target])
                    first, acc, count = i + 1, 0, 0
                    target = target_length(rng, ratio, max_len)
        if len(samples) == epoch_start:
            sys.exit("megatron_mapping_ref: an epoch without samples")
    shuffle = mt19937_64(req["seed"] + 1)
    for i in range(len(samples) - 1, 0, -1):
        j = shuffle() % (i + 1)
        samples[i], samples[j] = samples[j], samples[i]
    return samples


def self_test():
    """The standard's required values: the 10000th output of a default-seeded (5489) engine."""
    for make, want in ((mt19937, 4123659995), (mt19937_64, 9981545732273789042)):
        rng = make(5489)
        for _ in range(9999):
            rng()
        assert rng() == want, make.__name__
    print("mersenne twisters ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    with open(sys.argv[1]) as f:
        req = json.load(f)
    with open(sys.argv[2], "w") as f:
        json.dump(build(req), f)


if __name__ == "__main__":
    main()
