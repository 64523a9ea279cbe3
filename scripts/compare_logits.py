#!/usr/bin/env python3
"""Compares two runs of llama-compare that wrote their logits (--logits FILE, raw float32, one row
per evaluated position): the generated tokens, how many positions pick the same top token, and
the normalised error of the whole run (||a - b|| / ||a||, the measure of the CPU backend issue's
bound), with the per-position picture: the median position's error and how many positions are
off by more than 1e-4 (a position whose input or KV cache took a quantization or f16 rounding to
the other side of a half step differs by ~1e-4..1e-2; the others agree to f32 rounding).

usage: compare_logits.py [--max-error E] REFERENCE.txt REFERENCE.bin OTHER.txt OTHER.bin

Exit status 1 when the generated tokens or a top token differ, or (with --max-error) when the
normalised error is above E."""
import array
import math
import sys


def load(txt, binary):
    lines = open(txt).read().splitlines()
    rows = sum(1 for line in lines if line.startswith("pos "))
    generated = next((line.split(":", 1)[1].split() for line in lines if line.startswith("generated_tokens")), [])
    n_prompt = next((int(line.split()[1].rstrip(":")) for line in lines if line.startswith("prompt_tokens")), rows)
    values = array.array("f")
    with open(binary, "rb") as f:
        values.frombytes(f.read())
    if rows == 0 or len(values) % rows:
        sys.exit(f"{binary}: {len(values)} floats do not make {rows} rows")
    return rows, len(values) // rows, values, generated, n_prompt


def main():
    args = sys.argv[1:]
    max_error = None
    if args[:1] == ["--max-error"]:
        max_error, args = float(args[1]), args[2:]
    if len(args) != 4:
        sys.exit(__doc__)
    ra, na, a, ga, n_prompt = load(args[0], args[1])
    rb, nb, b, gb, _ = load(args[2], args[3])
    if (ra, na) != (rb, nb):
        sys.exit(f"different shapes: {ra} x {na} and {rb} x {nb}")
    same_top, row_errors, diff2, norm2, prompt_err = 0, [], 0.0, 0.0, 0.0
    for r in range(ra):
        row_a, row_b = a[r * na:(r + 1) * na], b[r * na:(r + 1) * na]
        same_top += max(range(na), key=row_a.__getitem__) == max(range(na), key=row_b.__getitem__)
        d2 = sum((x - y) ** 2 for x, y in zip(row_a, row_b))
        n2 = sum(x * x for x in row_a)
        diff2, norm2 = diff2 + d2, norm2 + n2
        row_errors.append(math.sqrt(d2 / (n2 or 1.0)))
        if r + 1 == n_prompt:
            prompt_err = math.sqrt(diff2 / (norm2 or 1.0))
    err = math.sqrt(diff2 / (norm2 or 1.0))
    same_gen = sum(x == y for x, y in zip(ga, gb)) if len(ga) == len(gb) else 0
    median = sorted(row_errors)[len(row_errors) // 2]
    off = sum(e > 1e-4 for e in row_errors)
    print(f"same top token at {same_top} of {ra} positions; normalised error of the logits {err:.2e}; "
          f"generated tokens the same {same_gen} of {len(ga)}; median position {median:.1e}, {off} positions > 1e-4; "
          f"the {n_prompt} prompt positions {prompt_err:.1e}")
    ok = same_top == ra and same_gen == len(ga) == len(gb)
    if max_error is not None and err > max_error:
        print(f"normalised error {err:.2e} is above {max_error:.0e}")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
