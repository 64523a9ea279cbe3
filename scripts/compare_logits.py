#!/usr/bin/env python3
"""Compares two runs of llama-compare that wrote their logits (--logits FILE, raw float32, one row
per evaluated position): how many positions pick the same top token, and the normalised error of
the whole run (||a - b|| / ||a||, the measure of the CPU backend issue's bound).

usage: compare_logits.py REFERENCE.txt REFERENCE.bin OTHER.txt OTHER.bin"""
import array
import math
import sys


def load(txt, binary):
    rows = sum(1 for line in open(txt) if line.startswith("pos "))
    values = array.array("f")
    with open(binary, "rb") as f:
        values.frombytes(f.read())
    if rows == 0 or len(values) % rows:
        sys.exit(f"{binary}: {len(values)} floats do not make {rows} rows")
    return rows, len(values) // rows, values


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ra, na, a = load(sys.argv[1], sys.argv[2])
    rb, nb, b = load(sys.argv[3], sys.argv[4])
    if (ra, na) != (rb, nb):
        sys.exit(f"different shapes: {ra} x {na} and {rb} x {nb}")
    same_top = 0
    for r in range(ra):
        row_a, row_b = a[r * na:(r + 1) * na], b[r * na:(r + 1) * na]
        same_top += max(range(na), key=row_a.__getitem__) == max(range(na), key=row_b.__getitem__)
    diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    norm = math.sqrt(sum(x * x for x in a)) or 1.0
    print(f"same top token at {same_top} of {ra} positions; normalised error of the logits {diff / norm:.2e}")
    return 0 if same_top == ra else 1


if __name__ == "__main__":
    sys.exit(main())
