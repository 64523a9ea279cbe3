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
# `run` (at most 6 minutes: GPU_CHECK_BUDGET, default 330 s, for the steps; `list` prints them):
# the loader pointed at the wheels' libraries (libcublas, libnvrtc and its builtins under
# site-packages/nvidia/*/lib, libcuda from the driver); then the correctness steps, each a gate:
# the CUDA unit tests (kernels compiled by NVRTC to CUBIN and loaded on the device);
# test_rscuda_backend (seed-000 and seed-003 through our scheduler with CUDA + CPU, copies,
# events, ops against the CPU); the medium model generated there (scripts/gen_model.py,
# deterministic); llama logits over the prompt, CUDA (-ngl 99) against our CPU build, normalised
# squared error at most GPU_CHECK_MAX_NMSE (default 1e-3, printed); test-backend-ops test -b
# CUDA0 for the ops we claim (against upstream's CPU), in groups with their own caps; then speed:
# llama-bench pp512 / tg128, a copy-bandwidth probe and a cuBLAS GEMM probe for the same shapes
# (torch), giving the speed goals' ratios (tg128: weight bytes per token x tok/s over the copy
# bandwidth; pp512: tok/s over cuBLAS's); the large model only with GPU_CHECK_LARGE=1. A table
# with PASS / FAIL / TIME per step comes last; `run` exits 1 when a gate step failed, timed out
# or was not reached.
#
#   scripts/gpu-check.sh list      the steps, their caps and kinds; exit 1 when the gate steps'
#                                  caps do not fit the budget (no GPU needed: the suite runs it)
#
# Environment: GPU_CHECK_BUDGET (seconds for the steps, at most 330); GPU_CHECK_MAX_NMSE;
# GPU_CHECK_LARGE=1; GPU_CHECK_PYTHON (default python3: the one with numpy, torch and the nvidia
# wheels); OUT: where logs and the table go (the device tool sets it; default .gpu-out/).
#
# With the device tool: run(command="scripts/gpu-check.sh run", carry=[".gpu-carry"],
# timeout_s=420) after `scripts/gpu-check.sh prepare` here; the table is the output's end and
# $OUT/table.txt, the logs $OUT/logs.tar.gz.
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
    echo "carry: [\".gpu-carry\"]   command: scripts/gpu-check.sh run   (timeout_s 420)"
}

# ---- run ----------------------------------------------------------------------------------------

# The steps of `run`, in order: correctness (gate) first, then speed. Each line:
#   kind | name | cap in seconds | function [argument]
# A gate step that fails, times out or is not reached makes `run` exit 1; a speed step only
# reports. Every cap is cut to what is left of GPU_CHECK_BUDGET (default 330 s: with the loader,
# the table and the logs the whole run stays under 6 minutes); the gate caps add up to at most
# the budget (`list` checks), so correctness always gets its full time and speed what is left.
STEPS=(
    "gate|cuda-unit|45|s_unit"
    "gate|seeds|30|s_seeds"
    "gate|model-medium|30|s_model medium"
    "gate|logits-medium|60|s_logits"
    "gate|ops-elementwise|20|s_ops elementwise"
    "gate|ops-copy-rows-norm|20|s_ops copy-rows-norm"
    "gate|ops-rope-softmax|20|s_ops rope-softmax"
    "gate|ops-mul_mat|30|s_ops mul_mat"
    "gate|ops-flash_attn|30|s_ops flash_attn"
    "speed|bench-medium|75|s_bench medium"
    "speed|ceilings-medium|40|s_ceilings medium"
    "speed|large|120|s_large"
)
BUDGET=${GPU_CHECK_BUDGET:-330}
# llama logits, CUDA (all layers) against our CPU build: the most normalised squared error
# (sum (cuda - cpu)^2 / sum cpu^2 over the prompt's positions) that passes
MAX_NMSE=${GPU_CHECK_MAX_NMSE:-1e-3}

# the ops each test-backend-ops group runs (the ops the backend claims; docs/cuda-backend.md, "Ops")
ops_of() {
    case "$1" in
        elementwise) echo "ADD,SUB,MUL,DIV,SCALE,SILU,GELU,GELU_QUICK,GELU_ERF,RELU,TANH,SIGMOID,NEG,ABS,SGN,STEP,ELU,EXP,REGLU,GEGLU,SWIGLU,GEGLU_ERF,GEGLU_QUICK" ;;
        copy-rows-norm) echo "CPY,CONT,DUP,GET_ROWS,SET_ROWS,RMS_NORM,NORM" ;;
        rope-softmax) echo "ROPE,SOFT_MAX" ;;
        mul_mat) echo "MUL_MAT" ;;
        flash_attn) echo "FLASH_ATTN_EXT" ;;
    esac
}

list_steps() {
    local line gate_sum=0 all_sum=0 i=0
    printf '%-3s %-5s %-20s %5s  %s\n' "#" "kind" "step" "cap" "runs"
    for line in "${STEPS[@]}"; do
        IFS='|' read -r kind name cap fn <<< "$line"
        i=$((i + 1))
        all_sum=$((all_sum + cap))
        [ "$kind" = gate ] && gate_sum=$((gate_sum + cap))
        local what=$fn
        case "$fn" in s_ops\ *) what="test-backend-ops -b CUDA0 -o $(ops_of "${fn#s_ops }")" ;; esac
        printf '%-3s %-5s %-20s %4ss  %s\n' "$i" "$kind" "$name" "$cap" "$what"
    done
    echo "gate caps ${gate_sum}s, all caps ${all_sum}s, budget ${BUDGET}s (speed steps get what is left); logits pass at nmse <= $MAX_NMSE"
    if [ "$gate_sum" -gt "$BUDGET" ] || [ "$BUDGET" -gt 330 ]; then
        echo "gpu-check: the gate steps' caps (${gate_sum}s) or the budget (${BUDGET}s) exceed 330 s" >&2
        return 1
    fi
}

ROWS=()
FAILED_ROWS=0
# row KIND CHECK RESULT DETAIL: a row of the table; a gate row that is FAIL or TIME counts
row() {
    ROWS+=("$(printf '%-5s %-44s | %-6s | %s' "$1" "$2" "$3" "$4")")
    [ "$1" = gate ] && case "$3" in FAIL | TIME) FAILED_ROWS=$((FAILED_ROWS + 1)) ;; esac
    return 0
}

# seconds left of the budget
left() { echo $((T_START + BUDGET - SECONDS)); }

# step NAME CAP CMD...: runs CMD with a timeout of CAP cut to what is left of the budget, its
# output in $LOGS/NAME.log; with under 5 s left it is not run (status 125)
step() {
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS l
    l=$(left)
    if [ "$l" -lt 5 ]; then
        echo "not run: the budget is spent" > "$LOGS/$name.log"
        log "$name: not run (budget spent)"
        return 125
    fi
    [ "$l" -lt "$limit" ] && limit=$l
    log "$name (timeout ${limit}s)"
    timeout --kill-after=5 "$limit" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && { echo "TIMEOUT after ${limit}s" >> "$LOGS/$name.log"; rc=124; }
    echo "rc=$rc ($((SECONDS - t0))s)" >> "$LOGS/$name.log"
    return $rc
}

status_of() {
    case "$1" in
        0) echo PASS ;;
        124 | 125) echo TIME ;;
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
    export GGML_RS_CUDA_CACHE=$WORK/kernel-cache
    local found=""
    local lib
    for lib in libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libnvrtc-builtins.so.13.0; do
        local p=""
        for d in $(echo "$LD_LIBRARY_PATH" | tr ':' ' '); do
            [ -e "$d/$lib" ] && { p=$d/$lib; break; }
        done
        [ -z "$p" ] && p=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
        found+="$lib=${p:-MISSING} "
    done
    echo "$found" > "$LOGS/loader.log"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$LOGS/loader.log"
    case "$found" in
        *MISSING*) row gate "loader: libcuda, cuBLAS, NVRTC (+ builtins)" FAIL "$found" ;;
        *) row gate "loader: libcuda, cuBLAS, NVRTC (+ builtins)" PASS "all found" ;;
    esac
}

gen_model() { # size type -> path
    local out=$WORK/models/$1-$2.gguf
    mkdir -p "$WORK/models"
    if [ ! -f "$out" ]; then
        PYTHONPATH="$CARRY" "${GPU_CHECK_PYTHON:-python3}" "$ROOT/scripts/gen_model.py" --size "$1" --type "$2" --seed 1 --out "$out.tmp" >&2 && mv "$out.tmp" "$out"
    fi
    [ -f "$out" ] && echo "$out"
}

# ---- the steps (each: kind, name, cap; it runs its commands through `step` and adds its rows)

# the unit tests: host parts, and every kernel compiled by NVRTC (CUBIN) and loaded on the device
s_unit() {
    step "$2" "$3" env GGML_RS_CUDA_NVRTC_REQUIRED="$REQ" GGML_RS_CUDA_REQUIRE_GPU="$REQ" "$CARRY/bin/ggml_rs_cuda_tests" --test-threads=1 --nocapture
    local rc=$?
    row "$1" "CUDA unit tests (NVRTC, kernels on the GPU)" "$(status_of $rc)" \
        "$(grep -oE '[0-9]+ passed; [0-9]+ failed' "$LOGS/$2.log" | tail -n1), $(grep -c 'SKIP ' "$LOGS/$2.log") skipped; $(grep -m1 '^GPU ' "$LOGS/$2.log")"
}

# the C scenarios: seed-000 / seed-003 through our scheduler, CUDA + CPU, ops against the CPU
s_seeds() {
    step "$2" "$3" env GGML_RS_CUDA_REQUIRE_GPU="$REQ" "$CARRY/bin/test_rscuda_backend" "$CARRY/lib/libggml_rs_cuda.so"
    local rc=$?
    row "$1" "seed-000/003 + ops vs CPU (our scheduler)" "$(status_of $rc)" "$(grep -E 'tests passed|SKIP|failed' "$LOGS/$2.log" | head -n1 | cut -c1-70)"
}

# a model (deterministic; generated here: the files do not fit the carry); MODEL_<size> its path
s_model() {
    local size=$4 path
    step "$2" "$3" bash -c "$(declare -f gen_model); WORK='$WORK' CARRY='$CARRY' ROOT='$ROOT' gen_model $size q8_0"
    local rc=$?
    path=$(grep -E '^/.*\.gguf$' "$LOGS/$2.log" | tail -n1)
    [ $rc -eq 0 ] && [ -z "$path" ] && rc=1
    [ -n "$path" ] && eval "MODEL_${size}=\$path"
    row "$1" "model $size-q8_0 (scripts/gen_model.py)" "$(status_of $rc)" "${path:-none}"
}

# llama logits over the prompt: CUDA (-ngl 99) against our CPU build (no module loaded), the
# normalised squared error at most MAX_NMSE; the generated tokens are shown, not compared
s_logits() {
    local m=${MODEL_medium:-} half=$(($3 / 2))
    if [ -z "$m" ]; then
        row "$1" "llama logits medium: CUDA -ngl 99 vs CPU" FAIL "no model"
        return
    fi
    local args=(-m "$m" -n 8 -c 256 -t 8 -p "Once upon a time there was a little model that generated random text")
    step "$2-cpu" "$half" env -u GGML_BACKEND_PATH "$CARRY/bin/llama-compare" "${args[@]}" --logits "$WORK/cpu.bin"
    local rc_cpu=$?
    step "$2-cuda" "$half" "$CARRY/bin/llama-compare" "${args[@]}" --dev CUDA0 -ngl 99 --logits "$WORK/cuda.bin"
    local rc=$?
    [ $rc_cpu -ne 0 ] && rc=$rc_cpu
    local n_prompt tokens="different" err
    n_prompt=$(grep -m1 -oE '^prompt_tokens [0-9]+' "$LOGS/$2-cpu.log" | awk '{print $2}')
    diff <(grep generated_tokens "$LOGS/$2-cpu.log") <(grep generated_tokens "$LOGS/$2-cuda.log") > /dev/null 2>&1 && tokens="same"
    # the prompt's positions (one batch: the GEMM path); with the same tokens generated, every
    # position (the generated ones decode one token at a time: the mat-vec path)
    local rows=${n_prompt:-0} over="prompt"
    [ "$tokens" = same ] && rows=all over="prompt + 8 generated"
    err=$("${GPU_CHECK_PYTHON:-python3}" "$ROOT/scripts/gpu_probe.py" logits "$WORK/cuda.bin" "$WORK/cpu.bin" 32000 "$rows" "$MAX_NMSE" 2>&1 | tail -n1)
    [ $rc -eq 0 ] && case "$err" in *pass=yes*) ;; *) rc=1 ;; esac
    row "$1" "llama logits medium: CUDA -ngl 99 vs CPU" "$(status_of $rc)" "over the $over: ${err:-no result}; generated tokens $tokens"
}

# test-backend-ops against upstream's CPU for one group of the claimed ops
s_ops() {
    local group=$4 extra=()
    [ "$group" = flash_attn ] && extra=(-p 'hsk=(64|128),hsv=(64|128),')
    step "$2" "$3" "$CARRY/bin/test-backend-ops" test -b CUDA0 -o "$(ops_of "$group")" "${extra[@]}"
    local rc=$?
    local passed failed unsupported
    # one line per case: "OP(params): OK" / "FAIL" / "not supported [CUDA0]" (colour codes around)
    passed=$(grep -c '): .*OK' "$LOGS/$2.log")
    failed=$(grep -c '): .*FAIL' "$LOGS/$2.log")
    unsupported=$(grep -c 'not supported' "$LOGS/$2.log")
    [ "$failed" -gt 0 ] && [ $rc -eq 0 ] && rc=1
    [ "$passed" -eq 0 ] && [ $rc -eq 0 ] && rc=1
    row "$1" "test-backend-ops -b CUDA0: $group" "$(status_of $rc)" "$passed OK, $failed FAIL, $unsupported not supported"
}

json_ts() { # log n_prompt n_gen -> tok/s of that llama-bench row
    python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        if r.get("n_prompt") == int(sys.argv[2]) and r.get("n_gen") == int(sys.argv[3]): print("%.1f" % r["avg_ts"])' "$@" 2>/dev/null | tail -n1
}

# llama-bench pp512 / tg128, all layers on CUDA
s_bench() {
    local size=$4 m
    eval "m=\${MODEL_${size}:-}"
    [ -n "$m" ] || { row "$1" "llama-bench $size" SKIP "no model"; return; }
    step "$2" "$3" "$CARRY/bin/llama-bench" -m "$m" -ngl 99 -p 512 -n 128 -r 2 -fa 1 -o jsonl
    local rc=$?
    eval "PP_${size}=\$(json_ts '$LOGS/$2.log' 512 0); TG_${size}=\$(json_ts '$LOGS/$2.log' 0 128)"
    local pp tg
    eval "pp=\${PP_${size}:-?}; tg=\${TG_${size}:-?}"
    row "$1" "llama-bench $size pp512 / tg128 (tok/s)" "$(status_of $rc)" "pp512 $pp  tg128 $tg"
}

# the ceilings: device copy bandwidth and cuBLAS f16 on the model's pp512 shapes (torch), and the
# speed goals' ratios
s_ceilings() {
    local size=$4 m pp tg
    eval "m=\${MODEL_${size}:-}; pp=\${PP_${size}:-0}; tg=\${TG_${size}:-0}"
    [ -n "$m" ] || { row "$1" "speed goals $size" SKIP "no model"; return; }
    local py=${GPU_CHECK_PYTHON:-python3} half=$(($3 / 2)) bw gemm wb
    [ -n "${COPY_BW:-}" ] || { step "$2-bandwidth" "$half" "$py" "$ROOT/scripts/gpu_probe.py" bandwidth; COPY_BW=$(grep -m1 'copy_GBps=\|skipped=' "$LOGS/$2-bandwidth.log"); }
    bw=$COPY_BW
    step "$2-gemm" "$half" env PYTHONPATH="$CARRY" "$py" "$ROOT/scripts/gpu_probe.py" gemm "$m" 512
    gemm=$(grep -m1 'cublas_\|skipped=' "$LOGS/$2-gemm.log")
    wb=$(PYTHONPATH="$CARRY" "$py" "$ROOT/scripts/gpu_probe.py" weights "$m" 2>&1 | tail -n1)
    local ratios
    ratios=$(python3 - "$wb" "$bw" "$gemm" "$pp" "$tg" <<'PY'
import sys
kv = {}
for part in sys.argv[1:4]:
    for tok in part.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            kv[k] = v
def num(s):
    try:
        return float(s)
    except ValueError:
        return 0.0
pp, tg = num(sys.argv[4]), num(sys.argv[5])
out = []
try:
    bw = float(kv["bytes_per_token"]) * tg / 1e9
    out.append(f"tg reads {bw:.0f} GB/s = {bw / float(kv['copy_GBps']):.0%} of copy bw {kv['copy_GBps']} GB/s (goal 70%)")
except (KeyError, ValueError, ZeroDivisionError):
    out.append("tg ratio: n/a")
try:
    out.append(f"pp512 {pp / float(kv['cublas_pp_tok_s']):.0%} of cuBLAS f16 (goal 70%)")
except (KeyError, ValueError, ZeroDivisionError):
    out.append("pp ratio: n/a")
print("; ".join(out))
PY
)
    row "$1" "speed goals $size" "-" "$ratios"
}

# the large model (weights well beyond L2), only with GPU_CHECK_LARGE=1 and time left for it
s_large() {
    if [ "${GPU_CHECK_LARGE:-0}" != 1 ]; then
        row "$1" "large model" SKIP "GPU_CHECK_LARGE=1 to run it"
        return
    fi
    local cap=$3
    s_model "$1" "$2-model" $((cap / 2)) large
    s_bench "$1" "$2-bench" $((cap / 2)) large
}

run_all() {
    local dry=$1
    OUTDIR=${OUT:-$ROOT/.gpu-out}
    mkdir -p "$OUTDIR"
    WORK=${GPU_CHECK_WORK:-/tmp/gpu-check}
    LOGS=$WORK/logs
    mkdir -p "$LOGS" "$WORK"
    [ -d "$CARRY/lib" ] || { log ".gpu-carry/ is missing: run 'scripts/gpu-check.sh prepare' on the build machine and carry it"; return 1; }
    list_steps > "$LOGS/plan.log" 2>&1 || log "warning: the gate steps' caps do not fit GPU_CHECK_BUDGET=$BUDGET: the last ones are cut (TIME)"
    T_START=$SECONDS
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$LOGS/gpu.log" 2>&1
    else
        echo "no nvidia-smi" > "$LOGS/gpu.log"
    fi
    REQ=1
    [ "$dry" = 1 ] && REQ=0
    setup_loader
    local line
    for line in "${STEPS[@]}"; do
        IFS='|' read -r kind name cap fn <<< "$line"
        # shellcheck disable=SC2086  # fn is a function and its argument
        set -- $fn
        "$1" "$kind" "$name" "$cap" "${@:2}"
    done

    # the table, last
    {
        echo
        echo "== gpu-check: $(head -n1 "$LOGS/gpu.log")  ($((SECONDS - T_START))s of a ${BUDGET}s budget)"
        printf '%-5s %-44s | %-6s | %s\n' "kind" "check" "result" "detail"
        printf '%s\n' "---------------------------------------------------+--------+------------------------------------------"
        printf '%s\n' "${ROWS[@]}"
        echo "gate steps failed or timed out: $FAILED_ROWS"
    } | tee "$OUTDIR/table.txt"
    # two files come back through the device tool: the table and the logs
    tar -czf "$OUTDIR/logs.tar.gz" -C "$WORK" logs
}

case "${1:-}" in
    prepare) prepare ;;
    list) list_steps ;;
    run | dry-run)
        [ "$1" = dry-run ] && dry=1 || dry=0
        run_all "$dry" || exit 1
        # nonzero when a gate step failed, timed out or was not reached (dry-run: GPU steps fail)
        [ "$FAILED_ROWS" = 0 ] || { echo "gpu-check: $FAILED_ROWS gate step(s) failed or timed out" >&2; exit 1; }
        ;;
    *) sed -n '2,41p' "$0"; exit 2 ;;
esac
