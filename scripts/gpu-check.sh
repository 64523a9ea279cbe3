#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU (issue 16), from files built on a CPU
# machine: the GPU machine (an H200: CUDA 13.0, driver 580, cuBLAS and NVRTC as Python wheels, no
# Rust toolchain, no network) only runs what `prepare` put into .gpu-carry/ (under 64 MiB).
#
#   scripts/gpu-check.sh prepare   on the build machine: builds and collects into .gpu-carry/ our
#                                  libraries, the CUDA unit-test binary, the C scenario test,
#                                  llama-compare, upstream's test-backend-ops / llama-simple /
#                                  llama-bench and their libraries (build ours: our core), gguf-py;
#                                  prints the size and the `carry` list
#   scripts/gpu-check.sh run       on the GPU machine, from the repository root with .gpu-carry/
#                                  carried: every step below with its own timeout, going on after a
#                                  failure; logs and the table in $OUT (or .gpu-out/); the table last
#   scripts/gpu-check.sh dry-run   on the build machine: the run without a GPU (the loader set-up,
#                                  the models, the CPU references, the table; GPU steps fail or skip)
#
# Steps of `run` (budget < 8 minutes): the loader pointed at the wheels' libraries (libcublas,
# libnvrtc under site-packages/nvidia/*/lib, libcuda from the driver); the CUDA unit tests (kernels
# compiled by NVRTC and loaded on the device); test_rscuda_backend (seed-000 and seed-003 through
# our scheduler with CUDA + CPU, copies, events, ops against the CPU); test-backend-ops test -b CUDA0
# for the ops we claim (against upstream's CPU); medium (and large) models generated there
# (scripts/gen_model.py, deterministic); llama-compare greedy tokens and logits, CUDA (-ngl 99) vs
# CPU, normalised error; llama-simple fully offloaded vs CPU; llama-bench pp512 / tg128; a copy-
# bandwidth probe and a cuBLAS GEMM probe for the same shapes (torch), giving the speed goals'
# ratios (tg128: weight bytes per token x tok/s over the copy bandwidth; pp512: tok/s over cuBLAS's).
#
# Environment: GPU_CHECK_LARGE=0 skips the large model (its generation takes about a minute);
# GPU_CHECK_BUDGET (seconds for the whole run, default 450; each step's timeout is cut to what is
# left); GPU_CHECK_PYTHON (default python3: the one with torch and the nvidia wheels); OUT: where
# logs and the table go (the device tool sets it; default .gpu-out/).
#
# With the device tool: run(command="scripts/gpu-check.sh run", carry=[".gpu-carry"],
# timeout_s=540) after `scripts/gpu-check.sh prepare` here; the table is the output's end and
# $OUT/table.txt, the logs $OUT/logs.tar.gz (the tool brings back at most 8 files).
set -uo pipefail

T_START=$SECONDS
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARRY=$ROOT/.gpu-carry

log() { printf '[gpu-check] %s\n' "$*" >&2; }

prepare() {
    eval "$("$ROOT/scripts/upstream.sh" paths)"
    local ours=$GGML_RS_BUILD_OURS tree=$GGML_RS_TREE
    [ -x "$ours/bin/test-backend-ops" ] || { log "build ours is missing ($ours): scripts/upstream.sh build ours"; return 1; }
    (cd "$ROOT" && cargo build --release --lib -p ggml-rs -p ggml-rs-cuda 2>&1 | tail -n 2) || return 1
    # the unit tests as one binary (cargo test --no-run), found through cargo's JSON messages
    local testbin
    testbin=$(cd "$ROOT" && cargo test --release -p ggml-rs-cuda --lib --no-run --message-format=json 2>/dev/null \
        | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "ggml_rs_cuda":
        print(m["executable"])' | tail -n1)
    [ -x "$testbin" ] || { log "no unit-test binary"; return 1; }
    rm -rf "$CARRY"
    mkdir -p "$CARRY/lib" "$CARRY/bin"
    strip --strip-unneeded -o "$CARRY/lib/libggml_rs_cuda.so" "$ROOT/target/release/libggml_rs_cuda.so"
    strip --strip-unneeded -o "$CARRY/lib/libggml_rs.so" "$ROOT/target/release/libggml_rs.so"
    strip --strip-unneeded -o "$CARRY/bin/ggml_rs_cuda_tests" "$testbin"
    local f
    for f in libggml-base.so.0 libggml-cpu.so.0 libggml.so.0 libggml-rpc.so.0 libllama.so.0 libllama-common.so.0 libllama-bench-impl.so; do
        [ -e "$ours/bin/$f" ] && strip --strip-unneeded -o "$CARRY/lib/$f" "$(readlink -f "$ours/bin/$f")"
    done
    for f in test-backend-ops llama-simple llama-bench; do
        strip --strip-unneeded -o "$CARRY/bin/$f" "$ours/bin/$f"
    done
    # libgomp of this machine (ggml-cpu needs it; the GPU image may lack it)
    cp "$(ldconfig -p | awk '/libgomp.so.1 .*x86-64/{print $NF; exit}')" "$CARRY/lib/" 2>/dev/null || true
    # llama-compare with --dev (drivers/llama_compare.cpp) and the C scenario test, against build ours
    g++ -O2 -std=c++17 -o "$CARRY/bin/llama-compare" "$ROOT/drivers/llama_compare.cpp" -I"$tree/include" -I"$tree/ggml/include" \
        -L"$CARRY/lib" -l:libllama.so.0 -l:libggml-base.so.0 -l:libggml.so.0 -l:libggml_rs.so || return 1
    cc -O1 -Wall -Wextra -Werror -Wno-unused-function -o "$CARRY/bin/test_rscuda_backend" "$ROOT/c_tests/test_rscuda_backend.c" -I"$ROOT/c_tests" \
        -I"$tree/ggml/include" -I"$tree/ggml/src" -L"$CARRY/lib" -l:libggml-base.so.0 -l:libggml-cpu.so.0 -l:libggml.so.0 -l:libggml_rs.so -ldl -lm || return 1
    # gguf-py of the pinned tree (pure Python) for scripts/gen_model.py there
    cp -r "$tree/gguf-py/gguf" "$CARRY/gguf"
    find "$CARRY/gguf" -name '__pycache__' -prune -exec rm -rf {} +
    du -sh "$CARRY" >&2
    local bytes
    bytes=$(du -sb "$CARRY" | cut -f1)
    [ "$bytes" -lt $((60 << 20)) ] || { log "carry is $bytes bytes: over the 64 MiB the device tool takes"; return 1; }
    grep -qxF '/.gpu-carry/' "$ROOT/.git/info/exclude" 2>/dev/null || grep -qx '\.gpu-carry/\|/\.gpu-carry/' "$ROOT/.gitignore" \
        || log "note: .gpu-carry/ must be ignored by git (it is in .gitignore on main)"
    echo "carry: [\".gpu-carry\"]   command: scripts/gpu-check.sh run   (timeout_s 540)"
}

# ---- run ----------------------------------------------------------------------------------------

ROWS=()
# a row of the table; a FAIL or TIME row makes `run` exit 1 (after the table and the logs)
FAILED_ROWS=0
row() {
    ROWS+=("$(printf '%-44s | %-6s | %s' "$1" "$2" "$3")")
    case "$2" in FAIL | TIME) FAILED_ROWS=$((FAILED_ROWS + 1)) ;; esac
}

# step NAME TIMEOUT CMD...: runs CMD with its own timeout, cut to what is left of the whole run's
# budget (GPU_CHECK_BUDGET seconds, default 450: the device tool's 10-minute command limit leaves
# room for start-up and copies); with under 10 s left the step is not run (status 125)
step() {
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    local left=$((T_START + ${GPU_CHECK_BUDGET:-450} - SECONDS))
    if [ "$left" -lt 10 ]; then
        echo "not run: the budget is spent" > "$LOGS/$name.log"
        log "$name: not run (budget spent)"
        return 125
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    log "$name (timeout ${limit}s)"
    timeout --kill-after=10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && echo "TIMEOUT after ${limit}s" >> "$LOGS/$name.log"
    echo "rc=$rc ($((SECONDS - t0))s)" >> "$LOGS/$name.log"
    return $rc
}

status_of() {
    case "$1" in
        0) echo PASS ;;
        124) echo TIME ;;
        125) echo SKIP ;;
        *) echo FAIL ;;
    esac
}

setup_loader() {
    local py=${GPU_CHECK_PYTHON:-python3} dirs=()
    local sp
    for sp in $("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
        local d
        for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/*/lib; do
            [ -d "$d" ] && dirs+=("$d")
        done
    done
    # libcuda.so.1: the driver's (a container mounts it under /usr/local/nvidia or /usr/lib64)
    local cuda
    cuda=$(ldconfig -p 2>/dev/null | awk '/libcuda.so.1 /{print $NF; exit}')
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/lib64 /usr/local/cuda/compat; do
        [ -z "$cuda" ] && [ -e "$d/libcuda.so.1" ] && cuda=$d/libcuda.so.1
    done
    [ -n "$cuda" ] && dirs+=("$(dirname "$cuda")")
    local joined
    joined=$(IFS=:; echo "${dirs[*]:-}")
    export LD_LIBRARY_PATH="$CARRY/lib${joined:+:$joined}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export GGML_BACKEND_PATH=$CARRY/lib/libggml_rs_cuda.so
    export GGML_RS_CUDA_CACHE=$WORK/ptx-cache
    local found=""
    local lib
    for lib in libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13; do
        local p=""
        for d in $(echo "$LD_LIBRARY_PATH" | tr ':' ' '); do
            [ -e "$d/$lib" ] && { p=$d/$lib; break; }
        done
        [ -z "$p" ] && p=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
        found+="$lib=${p:-MISSING} "
    done
    echo "$found" > "$LOGS/loader.log"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$LOGS/loader.log"
    case "$found" in *MISSING*) row "loader: libcuda, cuBLAS, NVRTC" FAIL "$found" ;; *) row "loader: libcuda, cuBLAS, NVRTC" PASS "all found" ;; esac
}

gen_model() { # size type -> path
    local out=$WORK/models/$1-$2.gguf
    mkdir -p "$WORK/models"
    if [ ! -f "$out" ]; then
        PYTHONPATH="$CARRY" "${GPU_CHECK_PYTHON:-python3}" "$ROOT/scripts/gen_model.py" --size "$1" --type "$2" --seed 1 --out "$out.tmp" >&2 && mv "$out.tmp" "$out"
    fi
    [ -f "$out" ] && echo "$out"
}

run_all() {
    local dry=$1
    OUTDIR=${OUT:-$ROOT/.gpu-out}
    mkdir -p "$OUTDIR"
    WORK=${GPU_CHECK_WORK:-/tmp/gpu-check}
    LOGS=$WORK/logs
    mkdir -p "$LOGS" "$WORK"
    [ -d "$CARRY/lib" ] || { log ".gpu-carry/ is missing: run 'scripts/gpu-check.sh prepare' on the build machine and carry it"; return 1; }
    T_START=$SECONDS
    local t_start=$T_START
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$LOGS/gpu.log" 2>&1
    else
        echo "no nvidia-smi" > "$LOGS/gpu.log"
    fi
    setup_loader
    local req=1
    [ "$dry" = 1 ] && req=0

    # 1. the unit tests: host parts, and every kernel compiled by NVRTC and loaded on the device
    step cuda-unit 120 env GGML_RS_CUDA_NVRTC_REQUIRED=$req GGML_RS_CUDA_REQUIRE_GPU=$req "$CARRY/bin/ggml_rs_cuda_tests" --test-threads=1 --nocapture
    local rc=$?
    row "CUDA unit tests (NVRTC, kernels on the GPU)" "$(status_of $rc)" "$(grep -oE '[0-9]+ passed; [0-9]+ failed' "$LOGS/cuda-unit.log" | tail -n1), $(grep -c 'SKIP ' "$LOGS/cuda-unit.log") skipped; $(grep -m1 '^GPU ' "$LOGS/cuda-unit.log")"

    # 2. the C scenarios: seed-000 / seed-003 through our scheduler, CUDA + CPU
    step seeds 90 env GGML_RS_CUDA_REQUIRE_GPU=$req "$CARRY/bin/test_rscuda_backend" "$CARRY/lib/libggml_rs_cuda.so"
    rc=$?
    row "seed-000/003 + ops vs CPU (our scheduler)" "$(status_of $rc)" "$(grep -E 'tests passed|SKIP|failed' "$LOGS/seeds.log" | head -n1 | cut -c1-70)"

    # 3. test-backend-ops against upstream's CPU, the ops we claim, in groups with their own limits
    local groups=(
        "elementwise:ADD,SUB,MUL,DIV,SCALE,SILU,GELU,GELU_QUICK,GELU_ERF,RELU,TANH,SIGMOID,NEG,ABS,SGN,STEP,ELU,EXP,REGLU,GEGLU,SWIGLU,GEGLU_ERF,GEGLU_QUICK:45"
        "copy-rows-norm:CPY,CONT,DUP,GET_ROWS,SET_ROWS,RMS_NORM,NORM:45"
        "rope-softmax:ROPE,SOFT_MAX:45"
        "mul_mat:MUL_MAT:60"
        "flash_attn:FLASH_ATTN_EXT:60"
    )
    local g
    for g in "${groups[@]}"; do
        local name=${g%%:*} rest=${g#*:}
        local ops=${rest%:*} limit=${rest##*:}
        local extra=()
        [ "$name" = flash_attn ] && extra=(-p 'hsk=(64|128),hsv=(64|128),')
        step "ops-$name" "$limit" "$CARRY/bin/test-backend-ops" test -b CUDA0 -o "$ops" "${extra[@]}"
        rc=$?
        local passed failed unsupported
        # one line per case: "OP(params): OK" / "FAIL" / "not supported [CUDA0]" (colour codes around)
        passed=$(grep -c '): .*OK' "$LOGS/ops-$name.log")
        failed=$(grep -c '): .*FAIL' "$LOGS/ops-$name.log")
        unsupported=$(grep -c 'not supported' "$LOGS/ops-$name.log")
        [ "$failed" -gt 0 ] && rc=1
        [ "$passed" -eq 0 ] && [ $rc -eq 0 ] && rc=1
        row "test-backend-ops -b CUDA0: $name" "$(status_of $rc)" "$passed OK, $failed FAIL, $unsupported not supported"
    done

    # 4. models (deterministic; generated here: the files do not fit the carry)
    local medium large=""
    medium=$(gen_model medium q8_0 2> "$LOGS/gen-medium.log")
    if [ "${GPU_CHECK_LARGE:-1}" = 1 ] && [ $((SECONDS - t_start)) -lt 300 ]; then
        large=$(timeout 150 bash -c "$(declare -f gen_model); WORK='$WORK' CARRY='$CARRY' ROOT='$ROOT' gen_model large q8_0" 2> "$LOGS/gen-large.log")
    fi
    row "models (scripts/gen_model.py)" "$([ -n "$medium" ] && echo PASS || echo FAIL)" "medium-q8_0 ${medium:+ok}${large:+, large-q8_0 ok}"

    # 5. greedy tokens and logits: CUDA (all layers) vs CPU (no module in the process)
    if [ -n "$medium" ]; then
        local args=(-m "$medium" -n 32 -c 256 -t 8 -p "Once upon a time there was a little model that generated random text")
        step compare-cpu 120 env -u GGML_BACKEND_PATH "$CARRY/bin/llama-compare" "${args[@]}" --logits "$WORK/cpu.bin"
        step compare-cuda 120 "$CARRY/bin/llama-compare" "${args[@]}" --dev CUDA0 -ngl 99 --logits "$WORK/cuda.bin"
        rc=$?
        local same="different"
        diff <(grep generated_tokens "$LOGS/compare-cpu.log") <(grep generated_tokens "$LOGS/compare-cuda.log") > /dev/null 2>&1 && same="same"
        local err
        err=$(PYTHONPATH="$CARRY" "${GPU_CHECK_PYTHON:-python3}" "$ROOT/scripts/gpu_probe.py" logits "$WORK/cuda.bin" "$WORK/cpu.bin" 32000 2>&1 | tail -n1)
        [ "$same" = same ] || rc=1
        row "llama-compare medium: CUDA -ngl 99 vs CPU" "$(status_of $rc)" "tokens $same; $err"
        step simple-cpu 90 env -u GGML_BACKEND_PATH "$CARRY/bin/llama-simple" -m "$medium" -n 32 -ngl 0 "Once upon a time"
        step simple-cuda 90 "$CARRY/bin/llama-simple" -m "$medium" -n 32 -ngl 99 "Once upon a time"
        rc=$?
        same="different"
        diff <(grep -v 'decoded\|load\|llama_\|ggml\|print_info\|main:' "$LOGS/simple-cpu.log" | head -n 3) \
            <(grep -v 'decoded\|load\|llama_\|ggml\|print_info\|main:' "$LOGS/simple-cuda.log" | head -n 3) > /dev/null && same="same"
        [ "$same" = same ] || rc=1
        row "llama-simple medium -ngl 99 vs CPU" "$(status_of $rc)" "text $same"
    fi

    # 6. speed: llama-bench and the two ceilings
    local bw
    bw=$(step probe-bandwidth 60 "${GPU_CHECK_PYTHON:-python3}" "$ROOT/scripts/gpu_probe.py" bandwidth; tail -n 2 "$LOGS/probe-bandwidth.log" | head -n1)
    row "copy bandwidth probe (torch)" "-" "$bw"
    local m
    for m in $medium $large; do
        local tag
        tag=$(basename "$m" .gguf)
        step "bench-$tag" 150 "$CARRY/bin/llama-bench" -m "$m" -ngl 99 -p 512 -n 128 -r 3 -fa 1 -o jsonl
        rc=$?
        local pp tg
        pp=$(python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        if r.get("n_prompt") == int(sys.argv[2]) and r.get("n_gen") == int(sys.argv[3]): print("%.1f" % r["avg_ts"])' "$LOGS/bench-$tag.log" 512 0 2>/dev/null | tail -n1)
        tg=$(python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        if r.get("n_prompt") == int(sys.argv[2]) and r.get("n_gen") == int(sys.argv[3]): print("%.1f" % r["avg_ts"])' "$LOGS/bench-$tag.log" 0 128 2>/dev/null | tail -n1)
        row "llama-bench $tag pp512 / tg128 (tok/s)" "$(status_of $rc)" "pp512 ${pp:-?}  tg128 ${tg:-?}"
        local wb gemm
        wb=$(PYTHONPATH="$CARRY" "${GPU_CHECK_PYTHON:-python3}" "$ROOT/scripts/gpu_probe.py" weights "$m" 2>&1 | tail -n1)
        gemm=$(step "probe-gemm-$tag" 90 env PYTHONPATH="$CARRY" "${GPU_CHECK_PYTHON:-python3}" "$ROOT/scripts/gpu_probe.py" gemm "$m" 512; tail -n 2 "$LOGS/probe-gemm-$tag.log" | head -n1)
        local ratios
        ratios=$(python3 - "$wb" "$bw" "$gemm" "${pp:-0}" "${tg:-0}" <<'PY'
import sys
kv = {}
for part in sys.argv[1:4]:
    for tok in part.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            kv[k] = v
pp, tg = float(sys.argv[4] or 0), float(sys.argv[5] or 0)
out = []
try:
    bw = float(kv["bytes_per_token"]) * tg / 1e9
    out.append(f"tg reads {bw:.0f} GB/s = {bw / float(kv['copy_GBps']):.0%} of copy bw (goal 70%)")
except (KeyError, ValueError, ZeroDivisionError):
    out.append("tg ratio: n/a")
try:
    out.append(f"pp512 {pp / float(kv['cublas_pp_tok_s']):.0%} of cuBLAS f16 (goal 70%)")
except (KeyError, ValueError, ZeroDivisionError):
    out.append("pp ratio: n/a")
print("; ".join(out))
PY
)
        row "speed goals $tag" "-" "$ratios"
    done

    # the table, last
    {
        echo
        echo "== gpu-check: $(head -n1 "$LOGS/gpu.log")  ($((SECONDS - t_start))s)"
        printf '%-44s | %-6s | %s\n' "check" "result" "detail"
        printf '%s\n' "---------------------------------------------+--------+------------------------------------------"
        printf '%s\n' "${ROWS[@]}"
    } | tee "$OUTDIR/table.txt"
    # two files come back through the device tool: the table and the logs
    tar -czf "$OUTDIR/logs.tar.gz" -C "$WORK" logs
}

case "${1:-}" in
    prepare) prepare ;;
    run)
        run_all 0
        [ "$FAILED_ROWS" = 0 ] || { echo "gpu-check: $FAILED_ROWS step(s) failed or timed out" >&2; exit 1; }
        ;;
    dry-run) run_all 1 ;;
    *) sed -n '2,30p' "$0"; exit 2 ;;
esac
