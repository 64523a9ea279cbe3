#!/usr/bin/env bash
# The Rust CPU backend against upstream's CPU backend built for this machine: llama-bench pp512 and
# tg128, -t 2, on the medium models (f16, q8_0), build rscpu (our core + our CPU backend, no
# upstream backend library) against build native (stock with GGML_NATIVE=ON), interleaved: each
# round runs both builds on a model back to back, in alternating order. Prints a markdown table:
# medians of each build, the median of the per-round ratios (ours / upstream, paired: runs close
# in time share the machine's load), and the load average before and after.
#
#   scripts/bench_cpu.sh [ROUNDS]        (default 7; bench.sh runs it as its last section)
#
# GGML_RS_CPU_REF_BIN / GGML_RS_CPU_OURS_BIN override the two program folders (default: the
# native and rscpu builds' bin/); the models come from make_cpu_models.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_cpu_backend() {
    local rounds=${1:-7} ref=${GGML_RS_CPU_REF_BIN:-$GGML_RS_BUILD_NATIVE/bin} ours=${GGML_RS_CPU_OURS_BIN:-$GGML_RS_BUILD_RSCPU/bin}
    local dir r m which order
    dir=$(mktemp -d)
    make_cpu_models > /dev/null || return 1
    local load_before
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    for r in $(seq "$rounds"); do
        for m in f16 q8_0; do
            order="native rscpu"
            [ $((r % 2)) = 0 ] && order="rscpu native"
            for which in $order; do
                local bin=$ref
                [ "$which" = rscpu ] && bin=$ours
                "$bin/llama-bench" -m "$MODELS/medium-$m.gguf" -p 512 -n 128 -t 2 -r 1 -o csv \
                    > "$dir/$which-$m-$r.csv" 2> "$dir/err" || { tail -n 3 "$dir/err"; rm -rf "$dir"; return 1; }
            done
        done
    done
    echo "llama-bench -t 2, medium models (60M parameters), $rounds interleaved rounds, $(nproc) cores;" \
        "load average (1, 5, 15 min) before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 - "$dir" "$rounds" <<'EOF'
import csv, os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
ts = {}
for r in range(1, rounds + 1):
    for which in ("native", "rscpu"):
        for model in ("f16", "q8_0"):
            for row in csv.DictReader(open(os.path.join(d, f"{which}-{model}-{r}.csv"))):
                test = f"pp{row['n_prompt']}" if row["n_gen"] == "0" else f"tg{row['n_gen']}"
                ts.setdefault((which, model, test), []).append(float(row["avg_ts"]))
print("| model | test | upstream CPU, native (t/s) | Rust CPU backend (t/s) | ours/upstream, paired median | range of the paired ratios |")
print("|---|---|---:|---:|---:|---:|")
for model in ("f16", "q8_0"):
    for test in ("pp512", "tg128"):
        u, o = ts[("native", model, test)], ts[("rscpu", model, test)]
        ratios = sorted(b / a for a, b in zip(u, o))
        print(f"| medium {model} | {test} | {statistics.median(u):.1f} | {statistics.median(o):.1f} | "
              f"{statistics.median(ratios):.3f} | {ratios[0]:.2f}-{ratios[-1]:.2f} |")
EOF
    rm -rf "$dir"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    bench_cpu_backend "${1:-7}"
fi
