# step 19 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 19 runs this step alone)

step "19. an AVX2-only x86 CPU: the avx2 kernel set with no AVX-512 in the machine (qemu-x86_64 -cpu max)"
# The avx2 set is tested above under GGML_RS_CPU_SIMD=avx2 on whatever machine this is; on an
# AVX-512 one a stray AVX-512 instruction in an avx2 path still runs. qemu-user's "max" CPU has
# AVX2 + FMA + F16C and no AVX-512 (QEMU's TCG has none), so there the backend detects the avx2
# set and any such instruction is SIGILL (flash attention's prompt blocks had three, found by
# this step). Correctness only: qemu times nothing.
QX86=(qemu-x86_64 -cpu max)
qx86_crate() {
    local out rc=0
    command -v qemu-x86_64 > /dev/null || { echo "qemu-x86_64 missing (qemu-user: step 18's deps)"; return 1; }
    out=$(cd "$ROOT" && CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="${QX86[*]}" GGML_RS_UPSTREAM_LIB_DIR="$BUILD_STOCK/bin" GGML_RS_UPSTREAM_TREE="$TREE" \
        GGML_RS_UPSTREAM_REQUIRED=1 cargo test --release -p ggml-rs-cpu --lib --test upstream --test upstream_ops --test upstream_iq --test upstream_lowbit --test enums 2>&1) || rc=1
    echo "the crate under qemu-x86_64 -cpu max (the avx2 set): $(cargo_totals <<< "$out")"
    grep -E 'FAILED|panicked|signal' <<< "$out" | head -n 5
    return $rc
}
check "x86 AVX2-only (qemu): ggml-rs-cpu's tests and its comparisons with upstream's AVX2 build" qx86_crate
# upstream's stock build (AVX2, no AVX-512) with our library as its RSCPU module, a sample of the
# ops whose kernels differ by set (qemu runs them some 20-50x slower than the machine: about 2 min
# here): flash attention of head size 64 over 512 positions (1 to 64 query rows: the one-row path
# and the prompt blocks), products of k = 256 and of 8 to 64 activation rows (row kernels, int8 /
# tinyBLAS / float tiles), softmax, activations, norms, RoPE, copies
qx86_ops_run() { # label, then test-backend-ops arguments
    local log=$T/tbo-qx86-$1.log
    shift
    GGML_BACKEND_PATH="$CPU_LIB" timeout 600 "${QX86[@]}" "$BUILD_STOCK/bin/test-backend-ops" test -j "$TBO_JOBS" -b RSCPU "$@" > "$log" 2>&1
    local rc=$?
    printf '%s OK, %s FAIL; ' "$(grep -c ': .*OK' "$log")" "$(grep -c 'FAIL' "$log")"
    grep -m5 -E 'FAIL|signal' "$log"
    [ "$rc" = 0 ] && ! grep -q FAIL "$log"
}
qx86_ops() {
    local rc=0
    # built by step 13 (run alone, this step builds it: seconds when it is there)
    (cd "$ROOT" && cargo build --release -q -p ggml-rs-cpu) || return 1
    printf 'flash attention: '; qx86_ops_run fa -o FLASH_ATTN_EXT -p 'hsk=64,hsv=64,nh=4,nr23=\[1,1\],kv=512,nb=(1|35|64),' || rc=1
    printf 'products: '; qx86_ops_run mm -o MUL_MAT -p 'k=256,bs=\[1,1\]|type_b=f32,m=16,n=(8|16|32|64),' || rc=1
    printf 'others: '; qx86_ops_run rest -o SOFT_MAX,SWIGLU,SILU,RMS_NORM,ROPE,CPY -p '^(?!.*(ne_a=\[16,16,8192|ne_a=\[36,16,2457|be1=700))' || rc=1
    echo
    return $rc
}
check "x86 AVX2-only (qemu): test-backend-ops -b RSCPU beside upstream's AVX2 CPU: 0 FAIL" qx86_ops
