# step 18 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 18 runs this step alone)

step "18. aarch64: the NEON kernel sets, cross-built and run under qemu-user (correctness only)"
# qemu-user runs aarch64 binaries here but times nothing: ARM speed is not measured by the suite
A64=$ROOT/scripts/aarch64.sh
A64_STOCK=$(dirname "$BUILD_STOCK")/build-aarch64-stock
a64_cargo() {
    (cd "$ROOT" && CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" cargo "$@")
}
# the crate's tests at each aarch64 kernel set (qemu's default CPU has DotProd), then its
# comparisons with upstream's own aarch64 build (armv8.2-a+dotprod): vec_dot, SiLU, quantizers
a64_crate() {
    local cap out rc=0
    for cap in scalar neon dotprod; do
        out=$(GGML_RS_CPU_SIMD=$cap a64_cargo test --release -p ggml-rs-cpu --target aarch64-unknown-linux-gnu --lib 2>&1) || rc=1
        echo "$cap: $(cargo_totals <<< "$out")"
        grep -E 'FAILED|panicked' <<< "$out" | head -n 5
    done
    out=$(GGML_RS_UPSTREAM_LIB_DIR="$A64_STOCK/bin" LD_LIBRARY_PATH="$A64_STOCK/bin" GGML_RS_UPSTREAM_TREE="$TREE" GGML_RS_UPSTREAM_REQUIRED=1 \
        a64_cargo test --release -p ggml-rs-cpu --target aarch64-unknown-linux-gnu --test upstream --test upstream_ops --test upstream_iq --test upstream_lowbit --test enums -- --nocapture 2>&1) || rc=1
    echo "against upstream's aarch64 build: $(cargo_totals <<< "$out")"
    grep -E 'FAILED|panicked|SKIP' <<< "$out" | head -n 8
    return $rc
}
check "aarch64: the cross tools (Debian's gcc/g++-aarch64-linux-gnu, qemu-user; rustup's target)" "$A64" deps
a64_clippy() { a64_cargo clippy --release -p ggml-rs-cpu --target aarch64-unknown-linux-gnu --all-targets -- -D warnings 2>&1 | tail -n 20; }
check "aarch64: clippy -D warnings of ggml-rs-cpu for aarch64-unknown-linux-gnu" a64_clippy
check "aarch64: upstream cross-built, stock (armv8.2-a+dotprod) and with our core + Rust CPU backend" "$A64" build
check "aarch64: ggml-rs-cpu's tests under qemu at scalar, neon, dotprod; vec_dot, SiLU, quantizers equal upstream's aarch64 build's" a64_crate
check "aarch64: test-backend-ops -b RSCPU beside upstream's aarch64 CPU under qemu: 0 FAIL" "$A64" ops
check "aarch64: llama-simple's text and llama-compare's logits, stock vs ours, under qemu" "$A64" text
