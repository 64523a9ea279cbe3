# step 16 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 16 runs this step alone)

step "16. ABI profile 0.9.8 (stable-diffusion.cpp's ggml, GGML_MAX_NAME=128)"
# The library built for another ggml version's ABI (README "Profiles"): its Rust checks, that
# tree built as is and with the library (cached per pin), the ABI test, the seed scenarios (ours
# pass, upstream 0.9.8 fails them), and upstream's own ggml tests of that tree on our library.
P98_STOCK=$GGML_RS_BUILD_GGML_0_9_8_STOCK
P98_OURS=$GGML_RS_BUILD_GGML_0_9_8_OURS
P98_LIB=$ROOT/target/abi-0-9-8/release/libggml_rs.so
check "0.9.8: cargo clippy -D warnings and unit tests with --features abi-0-9-8" bash -o pipefail -c \
    "cd '$ROOT' && cargo clippy -p ggml-rs -p ggml-abi -p ggml-plan --all-targets --features abi-0-9-8 --target-dir target/abi-0-9-8 -- -D warnings 2>&1 | tail -n 20 && cargo test -p ggml-rs -p ggml-abi -p ggml-plan --lib --features abi-0-9-8 --target-dir target/abi-0-9-8 2>&1 | grep -E '^test result|FAILED|panicked'"
check "0.9.8: upstream ggml built as is and with our library" bash -o pipefail -c \
    "'$ROOT/scripts/upstream.sh' build ggml-0.9.8-stock && '$ROOT/scripts/upstream.sh' build ggml-0.9.8-ours"
check "0.9.8: ABI: symbols, signatures, layouts, headers" "$ROOT/scripts/check_abi.sh" 0.9.8
check "0.9.8: the bindgen translation of its headers is the committed one" bash -o pipefail -c \
    "cd '$ROOT' && GGML_RS_UPSTREAM_TREE='$TREE' GGML_RS_UPSTREAM_GGML_0_9_8='$GGML_RS_GGML_0_9_8' GGML_RS_UPSTREAM_REQUIRED=1 cargo test -p ggml-abi-gen --test drift -- --nocapture 2>&1 | grep -E '^test result|differs|panicked|checked'"
# test_alloc_fuzz and test_alloc_mixed are left out: ggml 0.9.8's CPU backend computes some of
# their in-place graphs differently from its own allocator-free reference, with upstream's
# allocator as with ours (the stock build fails the same graph, 6 of test_alloc_fuzz)
check "0.9.8: ctest (our build: seed scenarios, misuse, layouts)" bash -o pipefail -c \
    "cd '$P98_OURS' && GGML_RS_FUZZ_ITERS=$FUZZ_ITERS ctest --output-on-failure -R '^(test_|abi_)' -E '^test_alloc_(fuzz|mixed)$' 2>&1 | tail -n 12"
# upstream_fails on the 0.9.8 reference build (bash's dynamic scope: the local BUILD_STOCK)
p98_upstream_fails() {
    local BUILD_STOCK=$P98_STOCK
    upstream_fails "$@"
}
check "0.9.8: upstream fails the allocator scenarios of its bugs" p98_upstream_fails test_alloc_scenarios "${ALLOC_SEED_SCENARIOS[@]}"
check "0.9.8: upstream fails the scheduler scenarios of its bugs" p98_upstream_fails test_sched_scenarios "${SCHED_SEED_SCENARIOS[@]}"
check "0.9.8: upstream fails the misuse scenarios" p98_upstream_fails test_misuse "${MISUSE_SCENARIOS[@]}"
check "0.9.8: upstream's ggml tests on our library (ctest of the tree: test-opt, test-backend-ops, ...)" bash -o pipefail -c \
    "cd '$P98_OURS' && ctest --output-on-failure -R '^test-' 2>&1 | tail -n 4"
# grad mode: step 5's selection less the ops with thousands of cases (about 15 minutes each run
# on 2 busy cores with them, measured: FLASH_ATTN_EXT 3616 cases, CONV_2D 1568, OUT_PROD 1152,
# MUL_MAT_ID 690, CONV_3D 258); 0.9.8's -o takes plain op names, comma-separated
P98_GRAD_SKIP="$GRAD_SKIP FLASH_ATTN_EXT CONV_2D CONV_3D OUT_PROD MUL_MAT_ID"
P98_GRAD_OPS=$("$P98_STOCK/bin/test-backend-ops" --list-ops 2>/dev/null | tail -n +2 | tr -d ' ' | grep -vxF -f <(tr ' ' '\n' <<< "$P98_GRAD_SKIP") | paste -sd,)
p98_grad() {
    "$1/bin/test-backend-ops" grad -b CPU -o "$P98_GRAD_OPS" > "$T/grad98-$2.log" 2>&1
    local rc=$?
    echo "$2: exit $rc, $(grep -c 'OK' "$T/grad98-$2.log") OK, $(grep -c 'FAIL' "$T/grad98-$2.log") FAIL"
    return $rc
}
check "0.9.8: test-backend-ops grad -b CPU (reference)" p98_grad "$P98_STOCK" reference
check "0.9.8: test-backend-ops grad -b CPU (ours)" p98_grad "$P98_OURS" ours
check "0.9.8: test-backend-ops grad: same results" bash -o pipefail -c \
    "diff <(grep -E 'OK|FAIL' '$T/grad98-reference.log' | sed 's/\x1b\[[0-9;]*m//g') <(grep -E 'OK|FAIL' '$T/grad98-ours.log' | sed 's/\x1b\[[0-9;]*m//g') > /dev/null"
check "0.9.8: test-backend-ops support -b CPU: same as reference" bash -o pipefail -c \
    "diff <('$P98_STOCK/bin/test-backend-ops' support -b CPU 2>&1 | grep -v 'Backend\|device\|memory') <('$P98_OURS/bin/test-backend-ops' support -b CPU 2>&1 | grep -v 'Backend\|device\|memory') > /dev/null"
check "0.9.8: LD_PRELOAD: test-opt of the stock build" bash -o pipefail -c \
    "LD_PRELOAD='$P98_LIB' '$P98_STOCK/bin/test-opt' 2>&1 | tail -n 1"
