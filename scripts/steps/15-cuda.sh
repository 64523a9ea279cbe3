# step 15 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 15 runs this step alone)

step "15. the Rust CUDA backend (no GPU here: scripts/gpu-check.sh runs the GPU half)"
CUDA_LIB=$ROOT/target/release/libggml_rs_cuda.so
check "cargo build --release -p ggml-rs-cuda (no CUDA toolkit, no driver)" bash -o pipefail -c \
    "cd '$ROOT' && cargo build --release -p ggml-rs-cuda 2>&1 | tail -n 3 && ! readelf -d '$CUDA_LIB' | grep -E 'NEEDED.*lib(cuda|cudart|cublas|nvrtc)'"
# the NVRTC test must run here, not skip: GGML_RS_CUDA_NVRTC_REQUIRED turns its skip into a failure
cuda_unit() {
    local nvrtc
    nvrtc=$("$ROOT/scripts/cuda-nvrtc.sh" | tail -n1) || return 1
    (cd "$ROOT" && LD_LIBRARY_PATH="$nvrtc" GGML_RS_CUDA_NVRTC_REQUIRED=1 GGML_RS_UPSTREAM_TREE="$TREE" GGML_RS_UPSTREAM_REQUIRED=1 cargo test -p ggml-rs-cuda --lib -- --nocapture > "$T/cuda-unit.log" 2>&1)
    local rc=$?
    grep -E '^test result|NVRTC [0-9]|SKIP|FAILED|panicked' "$T/cuda-unit.log"
    return $rc
}
check "ggml-rs-cuda: unit tests (cache keys, launch shapes, dispatch, zero devices, no driver) + every kernel through NVRTC for sm_90" cuda_unit
# the GPU check's script: its syntax, and its plan (the gate steps' caps fit its 6-minute budget)
check "gpu-check.sh: bash -n, and 'list' (gate caps within the budget)" bash -o pipefail -c \
    "bash -n '$ROOT/scripts/gpu-check.sh' && '$ROOT/scripts/gpu-check.sh' list | tail -n 1"
# upstream's loader (GGML_BACKEND_PATH's ggml_backend_load) on our core (build ours), no driver
cuda_module() {
    local prog=$T/test_rscuda_backend
    cc -O1 -Wall -Wextra -Werror -Wno-unused-function -o "$prog" "$ROOT/c_tests/test_rscuda_backend.c" -I"$ROOT/c_tests" \
        -I"$TREE/ggml/include" -I"$TREE/ggml/src" -L"$BUILD_OURS/bin" -L"$ROOT/target/release" -lggml-base -lggml-cpu -lggml -lggml_rs \
        -ldl -lm -Wl,-rpath,"$BUILD_OURS/bin:$ROOT/target/release" || return 1
    "$prog" "$CUDA_LIB" > "$T/rscuda.log" 2>&1
    local rc=$?
    tail -n 4 "$T/rscuda.log"
    return $rc
}
check "test_rscuda_backend: the module by path (one log line, ggml-cuda.h, zero devices; GPU scenarios skipped)" cuda_module
# what a GPU session will carry (scripts/gpu-check.sh run needs no toolchain there): it builds and
# stays under the device tool's 64 MiB
check "gpu-check.sh prepare: .gpu-carry/ built, under 60 MiB" bash -o pipefail -c "'$ROOT/scripts/gpu-check.sh' prepare 2>&1 | tail -n 2"
