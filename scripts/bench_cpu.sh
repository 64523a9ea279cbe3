#!/usr/bin/env bash
# The Rust CPU backend against upstream's CPU backend built for this machine (issue 15's table):
# llama-bench pp512 and tg128, -t 2, flash attention off and on (-fa 0,1), build rscpu (our core +
# our CPU backend, no upstream backend library) against build native (stock with GGML_NATIVE=ON),
# interleaved: each round runs both builds on a model back to back, in alternating order. Models:
# the medium ones (60M parameters, f16 / q8_0 / q4_0 / q4_K; their weights mostly sit in cache
# here, so tg on them is not memory-bound) and the large ones (n_embd 2048 like a 1B llama, 8
# layers, 510M parameters; q8_0 and q4_0: weights of 540 and 290 MB, far beyond any cache).
# Prints a markdown table: medians of each build, the median of the per-round ratios (ours /
# upstream, paired: runs close in time share the machine's load), their range, and the load.
#
#   scripts/bench_cpu.sh [--isa avx2] [ROUNDS]   (default 7; bench.sh runs it as table 4)
#
# --isa avx2: the AVX2 kernel set against upstream built for AVX2 only (issue 30's second
# table): ours with GGML_RS_CPU_SIMD=avx2, upstream's stock build (GGML_NATIVE=OFF: its ggml-cpu
# for AVX + AVX2 + BMI2 + FMA + F16C, no AVX-512).
#
# GGML_RS_CPU_REF_BIN / GGML_RS_CPU_OURS_BIN override the two program folders (default: the
# native and rscpu builds' bin/); GGML_RS_CPU_BENCH_MODELS the models (default "medium-f16
# medium-q8_0 medium-q4_0 medium-q4_K large-q8_0 large-q4_0"), made by make_cpu_models /
# make_large_models on first use (the large ones take about a minute each).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_cpu_backend() {
    local isa=native
    if [ "${1:-}" = --isa ]; then
        isa=${2:?--isa avx2}
        shift 2
    fi
    local rounds=${1:-7} ref=${GGML_RS_CPU_REF_BIN:-$GGML_RS_BUILD_NATIVE/bin} ours=${GGML_RS_CPU_OURS_BIN:-$GGML_RS_BUILD_RSCPU/bin}
    local simd=()
    case "$isa" in
        native) ;;
        avx2)
            ref=${GGML_RS_CPU_REF_BIN:-$GGML_RS_BUILD_STOCK/bin}
            [ -x "$ref/llama-bench" ] || "$ROOT/scripts/upstream.sh" build stock >&2 || return 1
            simd=(env GGML_RS_CPU_SIMD=avx2) ;;
        *) echo "bench_cpu.sh: --isa $isa: only avx2 (or none: native)" >&2; return 2 ;;
    esac
    local models=${GGML_RS_CPU_BENCH_MODELS:-medium-f16 medium-q8_0 medium-q4_0 medium-q4_K large-q8_0 large-q4_0}
    local dir r m which order n=0 t0 total
    dir=$(mktemp -d)
    make_cpu_models > /dev/null || return 1
    case " $models " in *" large-"*) make_large_models > /dev/null || return 1 ;; esac
    total=$((rounds * $(wc -w <<< "$models")))
    local load_before
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    t0=$SECONDS
    for r in $(seq "$rounds"); do
        for m in $models; do
            progress "CPU backend: round $r, $m" $((n++)) "$total" "$t0"
            order="native rscpu"
            [ $((r % 2)) = 0 ] && order="rscpu native"
            for which in $order; do
                local bin=$ref pre=()
                [ "$which" = rscpu ] && bin=$ours && pre=("${simd[@]}")
                "${pre[@]}" "$bin/llama-bench" -m "$MODELS/$m.gguf" -p 512 -n 128 -fa 0,1 -t 2 -r 1 -o csv \
                    > "$dir/$which-$m-$r.csv" 2> "$dir/err" || { tail -n 3 "$dir/err"; rm -rf "$dir"; return 1; }
            done
        done
    done
    echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1); kernel sets: upstream $isa build, ours $([ "$isa" = avx2 ] && echo 'GGML_RS_CPU_SIMD=avx2' || echo 'native');"
    echo "llama-bench -t 2, $rounds interleaved rounds, $(nproc) cores;" \
        "load average (1, 5, 15 min) before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    BENCH_ISA=$isa python3 - "$dir" "$rounds" $models <<'PY'
import csv, os, statistics, sys
d, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ts = {}
for r in range(1, rounds + 1):
    for which in ("native", "rscpu"):
        for model in models:
            for row in csv.DictReader(open(os.path.join(d, f"{which}-{model}-{r}.csv"))):
                test = f"pp{row['n_prompt']}" if row["n_gen"] == "0" else f"tg{row['n_gen']}"
                fa = "on" if row["flash_attn"] in ("1", "true", "True") else "off"
                ts.setdefault((which, model, test, fa), []).append(float(row["avg_ts"]))
print(f"| model | test | flash attn | upstream CPU, {os.environ.get('BENCH_ISA', 'native')} (t/s) | Rust CPU backend (t/s) | ours/upstream, paired median | range of the paired ratios |")
print("|---|---|---|---:|---:|---:|---:|")
below = []
for model in models:
    for test in ("pp512", "tg128"):
        for fa in ("off", "on"):
            u, o = ts[("native", model, test, fa)], ts[("rscpu", model, test, fa)]
            ratios = sorted(b / a for a, b in zip(u, o))
            med = statistics.median(ratios)
            if med < 1.0:
                below.append(f"{model} {test} fa {fa} ({med:.2f})")
            print(f"| {model} | {test} | {fa} | {statistics.median(u):.1f} | {statistics.median(o):.1f} | "
                  f"{med:.3f} | {ratios[0]:.2f}-{ratios[-1]:.2f} |")
print()
print(f"- rows below 1.0 (issue 15's goal: none): {len(below)} of {len(models) * 4}" + (": " + ", ".join(below) if below else ""))
PY
    rm -rf "$dir"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    bench_cpu_backend "$@"
fi
