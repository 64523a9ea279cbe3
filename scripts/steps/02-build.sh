# step 2 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 2 runs this step alone)

step "2. build"
# every step needs these two (--always: they run, and are cached, whichever steps were asked for)
check --always "cargo build --release" build_library
check --always "upstream build (reference, and with our library)" build_upstream
[ -x "$BUILD_OURS/bin/llama-compare" ] || { summary; exit 1; }
# the Rust CPU backend's numeric core (crates/ggml-rs-cpu): its own tests, and its block formats,
# activation quantization and dot products against the reference build's libggml-base/-cpu
# (required here: a missing library fails instead of skipping)
check "ggml-rs-cpu: kernels, pool, mat-vec; formats and vec_dot against upstream's libraries" bash -o pipefail -c \
    "cd '$ROOT' && GGML_RS_UPSTREAM_LIB_DIR='$BUILD_STOCK/bin' GGML_RS_UPSTREAM_TREE='$TREE' GGML_RS_UPSTREAM_REQUIRED=1 cargo test --release --manifest-path crates/ggml-rs-cpu/Cargo.toml 2>&1 | grep -E '^test result|FAILED|panicked'"
# every kernel set this CPU runs below its own (GGML_RS_CPU_SIMD caps the set: the avx2 set on an
# AVX-512 machine, the scalar one anywhere), against the definitions and the stock build (upstream's
# AVX2 configuration: SiLU, SOFT_MAX's exp, the tinyBLAS and Q8_0 orders of its AVX2 build)
# cargo_totals: the passed / failed counts of cargo test's "test result" lines on stdin, summed
cargo_totals() { grep -E '^test result' | awk '{p += $4; f += $6} END {print p " passed, " f " failed"}'; }
cpu_caps() {
    local cap out rc=0
    for cap in $(cd "$ROOT" && cargo run --release -q -p ggml-rs-cpu --example kernel_sets); do
        out=$(cd "$ROOT" && GGML_RS_CPU_SIMD=$cap GGML_RS_UPSTREAM_LIB_DIR="$BUILD_STOCK/bin" GGML_RS_UPSTREAM_TREE="$TREE" GGML_RS_UPSTREAM_REQUIRED=1 \
            cargo test --release --manifest-path crates/ggml-rs-cpu/Cargo.toml 2>&1) || rc=1
        echo "$cap: $(cargo_totals <<< "$out")"
        grep -E 'FAILED|panicked' <<< "$out" | head -n 5
    done
    return $rc
}
check "ggml-rs-cpu at every lower kernel set (GGML_RS_CPU_SIMD): the same tests" cpu_caps
