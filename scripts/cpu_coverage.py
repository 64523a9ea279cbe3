#!/usr/bin/env python3
"""The coverage table of the Rust CPU backend (docs/cpu-backend-results.md): ops x types that RSCPU supports, next to
upstream's CPU, from `test-backend-ops support` (every case the pinned harness builds, asked of
each backend's supports_op).

    scripts/cpu_coverage.py TEST_BACKEND_OPS LIBGGML_RS_CPU      # runs the harness twice
    scripts/cpu_coverage.py --csv RSCPU.csv CPU.csv              # or reads its two CSV outputs

TEST_BACKEND_OPS is a test-backend-ops of a build with upstream's CPU backend (the native build);
LIBGGML_RS_CPU is loaded beside it through GGML_BACKEND_PATH (device RSCPU). Prints a markdown
table on stdout: one row per op, one column per type; a cell is the number of cases supported,
`ours/upstream` where the two differ, `·` where neither has any. A case is counted under the
first of its type parameters (type, type_a, type_K, type_src, ...) that is not f32, or under f32
when all are, or under "-" when it has none; the types without a block format in the crate are
summed under "other"."""
import collections
import csv
import io
import os
import re
import subprocess
import sys

COLUMNS = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
           "iq4_nl", "iq4_xs", "tq1_0", "tq2_0", "mxfp4", "other", "-"]
OWN = set(COLUMNS[:-2])


def run(tbo, lib, backend):
    env = dict(os.environ, GGML_BACKEND_PATH=lib)
    out = subprocess.run([tbo, "support", "-b", backend, "--output", "csv"], env=env, check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return out


def column(params):
    types = re.findall(r"(?:^|,)type[A-Za-z_0-9]*=([A-Za-z0-9_]+)", params)
    if not types:
        return "-"
    t = next((t for t in types if t != "f32"), "f32")
    return t if t in OWN else "other"


def supported(text):
    """{(op, column): cases supported}, {op: cases}"""
    yes, cases = collections.Counter(), collections.Counter()
    for r in csv.DictReader(io.StringIO(text)):
        key = (r["op_name"], column(r["op_params"]))
        cases[key] += 1
        yes[key] += r["supported"] == "1"
    return yes, cases


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--csv":
        ours_csv, up_csv = (open(p).read() for p in sys.argv[2:4])
    elif len(sys.argv) == 3:
        ours_csv, up_csv = run(sys.argv[1], sys.argv[2], "RSCPU"), run(sys.argv[1], sys.argv[2], "CPU")
    else:
        sys.exit(__doc__)
    ours, cases = supported(ours_csv)
    up, up_cases = supported(up_csv)
    if cases != up_cases:
        sys.exit("the two runs list different cases")
    ops = sorted({op for op, _ in cases})

    def cell(o, u):
        return "·" if o == u == 0 else str(o) if o == u else f"{o}/{u}"

    print("| op | " + " | ".join(COLUMNS) + " | all |")
    print("|---|" + "---:|" * (len(COLUMNS) + 1))
    tot_o, tot_u = collections.Counter(), collections.Counter()
    for op in ops:
        row = []
        for c in COLUMNS:
            o, u = ours[(op, c)], up[(op, c)]
            tot_o[c] += o
            tot_u[c] += u
            row.append(cell(o, u))
        so, su = sum(ours[(op, c)] for c in COLUMNS), sum(up[(op, c)] for c in COLUMNS)
        row.append(cell(so, su))
        print(f"| {op} | " + " | ".join(row) + " |")
    print("| **all** | " + " | ".join(cell(tot_o[c], tot_u[c]) for c in COLUMNS)
          + f" | {cell(sum(tot_o.values()), sum(tot_u.values()))} |")
    extra = [k for k in cases if ours[k] > up[k]]
    if extra:
        # RSCPU claims a case upstream's CPU does not: test mode could not check it
        print("\ncases RSCPU supports and upstream's CPU does not: " + ", ".join(f"{op} {c}" for op, c in sorted(extra)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
