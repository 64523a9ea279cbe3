#!/usr/bin/env bash
# Benchmarks, ggml-rs against upstream built from the pin with GGML_NATIVE=ON (the native build,
# this CPU's kernels: the reference users see), in the same run; three tables on stdout:
#   1. llama-bench pp512 / tg128, -t 2, on the medium models (f16, q8_0, q4_0): the native build's
#      llama-bench as it is and with libggml_rs in LD_PRELOAD (the same ggml-cpu ops in both),
#      LLAMA_ROUNDS interleaved rounds (the order alternates), paired ratios; goal: geometric mean
#      >= 0.99 and no row below 0.97
#   2. plan quality: compute-buffer bytes of upstream's gallocr, ours, a plain offline
#      greedy-by-size placement of the same lifetimes, and the live-bytes lower bound, for
#      llama-shaped graphs, 120 seeded random DAGs and 100 seeded "mixed" DAGs (bench_alloc.c);
#      goal: median <= 1.05x the bound, never above upstream or greedy-by-size
#   3. allocator and scheduler time (reserve, first alloc, replayed alloc of a ~2800-node graph;
#      scheduler reset + alloc over two backends; the same and a new 60-layer graph in three
#      splits, reset + alloc each time; compute overhead with 2000 tiny ops) over ROUNDS
#      interleaved runs of each (each run already reports medians): medians, the median of the
#      paired ratios, and the best runs; and with valgrind, the instructions each operation
#      executes (exact where times are noisy; on the stock AVX2 build: valgrind cannot run
#      AVX-512 code, and the allocator code is the same)
#   4. the Rust CPU backend (build rscpu: our core + our CPU backend) against upstream's native
#      CPU: llama-bench pp512 / tg128 on the medium models (scripts/bench_cpu.sh, CPU_ROUNDS rounds)
#   5. the Rust CPU backend's MUL_MAT against upstream's native CPU at prompt shapes of the medium
#      and a ~1B llama model (bench_mul_mat.c, the same harness for both, MM_ROUNDS rounds), with
#      this machine's peaks (bench_peak.c) to read each figure against
# Ours is always the native (or stock) build's program with $LIB in LD_PRELOAD: the library of
# this checkout, whatever the build-ours tree links.
# Environment: ROUNDS (default 15), LLAMA_ROUNDS (default 15), CPU_ROUNDS (default 7), MM_ROUNDS
# (default 5), GGML_RS_BENCH_TABLES (default "1 2 3 4 5": which tables; GGML_RS_BENCH_ONLY=mul_mat
# is table 5 alone), GGML_RS_BENCH_SKIP_LLAMA=1 (tables 2 and 3 only), GGML_RS_BENCH_LIB (the
# library to measure, default $LIB), GGML_RS_BENCH_NO_BUILD=1 (use the upstream builds as they
# are: they are shared), GGML_RS_MODELS.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROUNDS=${ROUNDS:-15}
LLAMA_ROUNDS=${LLAMA_ROUNDS:-15}
TABLES=${GGML_RS_BENCH_TABLES:-1 2 3 4 5}
[ "${GGML_RS_BENCH_ONLY:-}" = mul_mat ] && TABLES=5
MM_ROUNDS=${MM_ROUNDS:-5}
[ "${GGML_RS_BENCH_SKIP_LLAMA:-0}" = 1 ] && TABLES=${TABLES//1/}
table() { [[ " $TABLES " == *" $1 "* ]]; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# Table 5: MUL_MAT weights [K, M] × f32 activations [K, 512] (a pp512 batch), types × shapes
# of the medium model (n_embd 512, n_ff 1536) and a ~1B llama (n_embd 2048, n_ff 5632), on
# upstream's CPU backend (native build) and ours (RSCPU, GGML_BACKEND_PATH), 2 threads, in
# MM_ROUNDS interleaved rounds (order alternating); medians of each round's median, the median
# of the paired ratios, and ours as a fraction of the peak of its instructions (VNNI int8 for the
# quantized types, FMA f32 for the float ones; both 2 threads × the one-thread peak).
bench_mul_mat() {
    local native=$GGML_RS_BUILD_NATIVE rs=$ROOT/target/release/libggml_rs_cpu.so
    (cd "$ROOT" && cargo build --release -p ggml-rs-cpu 2>&1 | tail -n 1) && "$ROOT/scripts/upstream.sh" build native || return 1
    cc -O2 -I"$TREE/ggml/include" "$ROOT/c_tests/bench_mul_mat.c" -L"$native/bin" -lggml -lggml-base \
        -Wl,-rpath,"$native/bin" -o "$T/bench_mul_mat" || return 1
    cc -O2 -mavx512f -mavx512bw -mavx512vnni "$ROOT/c_tests/bench_peak.c" -o "$T/bench_peak" || return 1
    echo
    echo "## 5. MUL_MAT, prompt shapes (N = 512), Rust CPU backend vs upstream native, -t 2, $MM_ROUNDS interleaved rounds"
    "$T/bench_peak" > "$T/peak" || return 1
    local shapes="512x512 1536x512 512x1536 2048x2048 5632x2048 2048x5632"
    local t0=$SECONDS n=0
    for r in $(seq "$MM_ROUNDS"); do
        for ty in q8_0 q4_0 q4_K q6_K f16 bf16; do
            progress "table 5: round $r, $ty" $((n++)) $((MM_ROUNDS * 6)) $t0
            for s in $shapes; do
                local m=${s%x*} k=${s#*x} order="CPU RSCPU"
                [ $((r % 2)) = 0 ] && order="RSCPU CPU"
                for be in $order; do
                    GGML_BACKEND_PATH=$rs "$T/bench_mul_mat" "$be" "$ty" "$m" "$k" 512 5 2 2>/dev/null >> "$T/mm" || return 1
                done
            done
        done
    done
    python3 - "$T/mm" "$T/peak" <<'EOF'
import statistics, sys
peak = {l.split()[1]: float(l.split()[2]) for l in open(sys.argv[2])}
runs = {}
for l in open(sys.argv[1]):
    _, be, ty, m, k, n, med, _best = l.split()
    runs.setdefault((ty, int(m), int(k), int(n)), {}).setdefault(be, []).append(float(med))
bpe = {"q8_0": 34 / 32, "q4_0": 18 / 32, "q4_K": 144 / 256, "q6_K": 210 / 256, "f16": 2, "bf16": 2}
print(f"peaks, one thread: VNNI int8 {peak['vnni']:.0f} GOPS, FMA f32 {peak['fma']:.0f} GFLOPS, read bandwidth {peak['mem']:.1f} GB/s")
print()
print("| type | M × K (× 512) | upstream GFLOP/s | ggml-rs GFLOP/s | ggml-rs/upstream | ggml-rs weights GB/s | ggml-rs % of peak |")
print("|---|---|---:|---:|---:|---:|---:|")
for (ty, m, k, n), v in runs.items():
    flop = 2.0 * m * k * n
    u, o = statistics.median(v["CPU"]), statistics.median(v["RSCPU"])
    ratio = statistics.median(a / b for a, b in zip(v["CPU"], v["RSCPU"]))
    top = 2 * (peak["fma"] if ty in ("f16", "bf16") else peak["vnni"])
    print(f"| {ty} | {m} × {k} | {flop / u * 1e-9:.1f} | {flop / o * 1e-9:.1f} | {ratio:.2f} | {m * k * bpe[ty] / o * 1e-9:.2f} | {100 * flop / o * 1e-9 / top:.1f} % |")
EOF
}


if [ "${GGML_RS_BENCH_NO_BUILD:-0}" != 1 ]; then
    setup_tools && build_library || exit 1
    "$ROOT/scripts/upstream.sh" build stock && "$ROOT/scripts/upstream.sh" build native || exit 1
    cmake --build "$BUILD_NATIVE" --target llama-bench > /dev/null || exit 1
fi
LIB=${GGML_RS_BENCH_LIB:-$LIB}
[ -f "$LIB" ] || { echo "$LIB is missing (cargo build --release --lib)"; exit 1; }
# bench_alloc from this checkout's source, against each upstream build's libraries (the shared
# builds' own copies may be older than the source)
bench_alloc_for() {
    cc -O2 -Wall -Wno-unused-function -o "$2" "$ROOT/bench/bench_alloc.c" "$ROOT/c_tests/fake_backend.c" -I"$ROOT/c_tests" \
        -I"$TREE/ggml/include" -I"$TREE/ggml/src" -L"$1/bin" -lggml -lggml-base -lggml-cpu -lm -Wl,-rpath,"$1/bin"
}
NATIVE_BENCH=$T/bench_alloc-native
STOCK_BENCH=$T/bench_alloc-stock
bench_alloc_for "$BUILD_NATIVE" "$NATIVE_BENCH" && bench_alloc_for "$BUILD_STOCK" "$STOCK_BENCH" || exit 1
# ours: the same program with this checkout's library first
OURS="env LD_PRELOAD=$LIB"
load() { uptime | sed 's/.*load average/load average/'; }

echo "# ggml-rs benchmarks ($(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m); reference: upstream's native build)"
echo "start: $(load)"

if table 1; then
    echo
    echo "## 1. llama-bench on our core vs stock, native build, medium models (60M parameters), -t 2, $LLAMA_ROUNDS interleaved rounds"
    make_models medium || exit 1
    t0=$SECONDS n=0
    for r in $(seq "$LLAMA_ROUNDS"); do
        for m in f16 q8_0 q4_0; do
            progress "table 1: round $r, medium $m" $((n++)) $((LLAMA_ROUNDS * 3)) $t0
            # the order alternates round by round: a slow spell hits both sides alike
            order="stock ours"; [ $((r % 2)) = 0 ] && order="ours stock"
            for which in $order; do
                pre=""; [ "$which" = ours ] && pre=$OURS
                $pre "$BUILD_NATIVE/bin/llama-bench" -m "$MODELS/medium-$m.gguf" -p 512 -n 128 -t 2 -r 1 -o csv \
                    > "$T/llama-$which-$m-$r.csv" 2>/dev/null || exit 1
            done
        done
    done
    echo "(load during the run: $(load))"
    echo
    python3 - "$T" <<'EOF'
import csv, glob, math, os, statistics, sys
ts = {}
for path in glob.glob(os.path.join(sys.argv[1], "llama-*.csv")):
    _, which, model, r = os.path.basename(path)[:-4].split("-", 3)
    for row in csv.DictReader(open(path)):
        test = f"pp{row['n_prompt']}" if row["n_gen"] == "0" else f"tg{row['n_gen']}"
        ts.setdefault((which, model, test), {})[int(r)] = float(row["avg_ts"])
print("| model | test | stock (t/s) | ggml-rs (t/s) | ggml-rs/stock, paired median | rounds below 1 |")
print("|---|---|---:|---:|---:|---:|")
rows, low = [], []
for model in ("f16", "q8_0", "q4_0"):
    for test in ("pp512", "tg128"):
        u, o = ts[("stock", model, test)], ts[("ours", model, test)]
        pairs = [o[r] / u[r] for r in u if r in o]
        p = statistics.median(pairs)
        rows.append(p)
        if p < 0.97:
            low.append(f"{model} {test}")
        print(f"| medium {model} | {test} | {statistics.median(u.values()):.1f} | {statistics.median(o.values()):.1f} | {p:.3f} | {sum(x < 1 for x in pairs)} of {len(pairs)} |")
g = math.exp(sum(map(math.log, rows)) / len(rows))
print()
print(f"- geometric mean of the paired medians: {g:.3f} (goal >= 0.99); rows below 0.97: {', '.join(low) or 'none'} (goal: none)")
EOF
fi

QUALITY=0
if table 2; then
echo
echo "## 2. Plan quality: compute-buffer bytes"
$OURS "$NATIVE_BENCH" quality > "$T/q-ours" || exit 1
"$NATIVE_BENCH" quality > "$T/q-stock" || exit 1
# the same lifetimes (upstream's walk, ours) placed by plain offline greedy-by-size
GGML_RS_ALLOC_PLANNER=greedy-by-size $OURS "$NATIVE_BENCH" quality > "$T/q-greedy" || exit 1
python3 - "$T/q-stock" "$T/q-ours" "$T/q-greedy" <<'EOF'
import statistics, sys
def load(p):
    return {l.split()[1]: (int(l.split()[2]), int(l.split()[3])) for l in open(p) if l.startswith("quality ")}
up, ours, greedy = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
print("| graph | upstream | ggml-rs | greedy-by-size | lower bound | ggml-rs/upstream | upstream/LB | greedy/LB | ggml-rs/LB |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
families = {"random": "random DAGs", "mixed": "mixed DAGs"}
ratios = {f: ([], [], []) for f in families}
worst, above_up, above_greedy, above_greedy_names = 0.0, 0, 0, []
for name in ours:
    u, (o, lb), g = up[name][0], ours[name], greedy[name][0]
    worst = max(worst, o / u)
    above_up += o > u
    above_greedy += o > g
    if o > g:
        above_greedy_names.append(f"{name} +{o - g} B")
    fam = name.split("-")[0]
    if fam in ratios:
        for col, v in zip(ratios[fam], (u, g, o)):
            col.append(v / lb)
        # a few rows of each family; the medians below
        if name.split("-")[-1 if fam == "random" else -2] not in ("s0", "s1", "s2"):
            continue
    print(f"| {name} | {u} | {o} | {g} | {lb} | {o / u:.3f} | {u / lb:.3f} | {g / lb:.3f} | {o / lb:.3f} |")
for fam, label in families.items():
    ru, rg, ro = ratios[fam]
    print(f"| {label} ({len(ro)}), median | | | | | | {statistics.median(ru):.3f} | {statistics.median(rg):.3f} | {statistics.median(ro):.3f} |")
    print(f"| {label} ({len(ro)}), max | | | | | | {max(ru):.3f} | {max(rg):.3f} | {max(ro):.3f} |")
print()
print(f"- graphs where ggml-rs needs more than upstream: {above_up} of {len(ours)} (largest ggml-rs/upstream {worst:.3f}); "
      f"more than greedy-by-size: {above_greedy} (goal: 0 and 0)")
if above_greedy_names:
    print(f"  above greedy-by-size: {', '.join(above_greedy_names)}")
for fam, label in families.items():
    ru, rg, ro = ratios[fam]
    print(f"- {label}: median over the lower bound {statistics.median(ro):.3f} for ggml-rs (goal <= 1.05), "
          f"{statistics.median(rg):.3f} greedy-by-size, {statistics.median(ru):.3f} upstream; worst {max(ro):.3f} / {max(rg):.3f} / {max(ru):.3f}")
ok = above_up == 0 and above_greedy == 0 and all(statistics.median(r[2]) <= 1.05 for r in ratios.values())
sys.exit(0 if ok else 1)
EOF
QUALITY=$?
fi

if table 3; then
echo
echo "## 3. Allocator and scheduler time ($ROUNDS interleaved runs of each, each the median of 41 repetitions)"
# address-space randomization off for both (fewer slow runs, see the note under the table)
NORAND=$(setarch "$(uname -m)" -R true 2> /dev/null && echo "setarch $(uname -m) -R")
t0=$SECONDS
for r in $(seq "$ROUNDS"); do
    progress "table 3: round $r" $((r - 1)) "$ROUNDS" $t0
    $NORAND "$NATIVE_BENCH" time >> "$T/t-stock" || exit 1
    $NORAND $OURS "$NATIVE_BENCH" time >> "$T/t-ours" || exit 1
done
echo "(load: $(load))"
echo
python3 - "$T/t-stock" "$T/t-ours" <<'EOF'
import statistics, sys
def load(p):
    d = {}
    for l in open(p):
        if l.startswith("time "):
            k, v = l.split()[1], float(l.split()[2])
            d.setdefault(k, []).append(v)
        if l.startswith(("nodes ", "splits ")):
            d.setdefault("_" + l.split()[0], []).append(int(l.split()[1]))
        if l.startswith("split3 "):
            d["_split3"] = [int(x) for x in l.split()[1:3]]
    return d
up, ours = load(sys.argv[1]), load(sys.argv[2])
labels = {
    "sched3_same_us": ("sched reset + alloc_graph, 60 layers / 3 splits, same graph", "<= 0.3"),
    "sched3_new_us": ("sched reset + alloc_graph, 60 layers / 3 splits, new graph", "<= 0.5"),
    "gallocr_reserve_us": ("gallocr reserve (plan + buffer)", "<= 0.5"),
    "gallocr_alloc_first_us": ("gallocr alloc_graph, first (plan)", "<= 0.5"),
    "gallocr_alloc_replay_us": ("gallocr alloc_graph, same graph again (replay)", "<= 0.5"),
    "gallocr_reserve_mixed20_us": ("gallocr reserve, 20 mixed graphs (offline placement)", ""),
    "sched_reset_alloc_us": ("sched reset + alloc_graph, 2 backends", ""),
    "sched_compute_2000_tiny_ops_us": ("sched graph_compute, 2000 tiny ops", ""),
}
print(f"graph: {up['_nodes'][0]} nodes; scheduler graph: {ours['_splits'][0]} splits; 60-layer graph: {ours['_split3'][0]} nodes, {ours['_split3'][1]} splits")
print()
print("| measurement | goal | upstream (us) | ggml-rs (us) | ggml-rs/upstream, paired | upstream, best run | ggml-rs, best run | best/best |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for k, (label, goal) in labels.items():
    u, o = statistics.median(up[k]), statistics.median(ours[k])
    paired = statistics.median(b / a for a, b in zip(up[k], ours[k]))
    bu, bo = min(up[k]), min(ours[k])
    print(f"| {label} | {goal} | {u:.1f} | {o:.1f} | {paired:.2f} | {bu:.1f} | {bo:.1f} | {bo / bu:.2f} |")
print()
print("(paired: the median over the rounds of ggml-rs's run divided by upstream's run just before it. A process")
print("on this kind of host runs either at full speed or about 1.6x slower throughout, in spells; runs close in")
print("time tend to share the speed, so the paired ratio and the best runs compare like with like, while the")
print("two medians alone may not)")
EOF

if command -v valgrind > /dev/null; then
    echo
    echo "## 3b. Instructions per operation (callgrind on the stock AVX2 build with and without the library: exact,"
    echo "unlike the times on a shared machine; valgrind cannot run AVX-512 code, and the allocator code is the same;"
    echo "replay, sched and sched3 include their first plan, spread over the repetitions; the sched3 rows count reset too)"
    echo
    echo "| operation | goal | upstream | ggml-rs | ggml-rs/upstream |"
    echo "|---|---|---:|---:|---:|"
    # operation, goal, repetitions, the exported functions whose inclusive counts are taken (summed);
    # sched3 / sched3new: the 60-layer graph in three splits, the same graph / a new one each time
    for spec in "sched3 <=0.3 50 ggml_backend_sched_alloc_graph ggml_backend_sched_reset" \
                "sched3new <=0.5 20 ggml_backend_sched_alloc_graph ggml_backend_sched_reset" \
                "reserve <=0.5 20 ggml_gallocr_reserve" "first <=0.5 20 ggml_gallocr_alloc_graph" "replay <=0.5 200 ggml_gallocr_alloc_graph" \
                "sched - 50 ggml_backend_sched_alloc_graph" "reserve-mixed - 5 ggml_gallocr_reserve"; do
        set -- $spec
        op=$1 goal=$2 reps=$3
        echo "[table 3b: callgrind, $op]" >&2
        shift 3
        row="| $op | $goal |"
        for pre in "" "$OURS"; do
            $pre valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" "$STOCK_BENCH" profile "$op" "$reps" > /dev/null 2>&1
            total=0
            for f in "$@"; do
                ir=$(callgrind_annotate --inclusive=yes "$T/cg.out" 2>/dev/null | grep -E "[: ]$f( \[|$)" | head -n1 | awk '{gsub(",", "", $1); print $1}')
                total=$(( total + ${ir:-0} ))
            done
            row="$row $(( total / reps )) |"
        done
        python3 -c "import sys; a, b = (int(x.strip().replace(',', '')) for x in sys.argv[1].split('|')[3:5]); print(sys.argv[1], f'{b / a:.2f} |' if a else '- |')" "$row"
    done
fi
fi
if table 4; then
echo
echo "## 4. The Rust CPU backend against upstream's native CPU backend (llama-bench, medium models)"
"$ROOT/scripts/upstream.sh" build native > /dev/null && "$ROOT/scripts/upstream.sh" build rscpu > /dev/null || exit 1
"$ROOT/scripts/bench_cpu.sh" "${CPU_ROUNDS:-7}" || exit 1
fi

if table 5; then
bench_mul_mat || exit 1
fi

echo
echo "end: $(load)"
exit $QUALITY
