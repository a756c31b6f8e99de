#!/usr/bin/env python3
"""Draws from CPython's own random.Random(seed), for tests/data/python_random_test.cc: prints a
JSON list of [op, args..., result] in draw order, which the test replays on kiln's PythonRandom.

usage: python_random_draws.py SEED
"""
import json
import random
import sys


def main():
    r = random.Random(int(sys.argv[1]))
    ops = []
    for _ in range(3):
        ops += [["random", r.random()] for _ in range(4)]
        ops += [["getrandbits", k, r.getrandbits(k)] for k in (0, 1, 5, 31, 32, 33, 48, 63, 64)]
        ranges = [(0, 0), (0, 1), (2, 509), (0, 30521), (-5, 5), (1, 1000000)]
        for k in (1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 40, 62):  # widths 2^k - 1, 2^k, 2^k + 1
            ranges += [(0, 2**k - 2), (0, 2**k - 1), (7, 7 + 2**k)]
        ops += [["randint", a, b, r.randint(a, b)] for a, b in ranges if a <= b]
        for n in (0, 1, 2, 3, 10, 1000):
            x = list(range(n))
            r.shuffle(x)
            ops.append(["shuffle", n, x])
    print(json.dumps(ops))


if __name__ == "__main__":
    main()
