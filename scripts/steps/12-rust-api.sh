# step 12 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 12 runs this step alone)

step "12. the Rust API"
# bindgen's declarations regenerated from the pinned headers and compared (libclang from set-up),
# then every test of the crate (doc-tests, compile_fail lifetime rules, integration tests with an
# rpc-server of the stock build as the second backend) on the stock build's libraries with our
# libggml_rs opened first; GGML_RS_API_REQUIRED: a missing library or rpc-server fails, not skips
rust_api() {
    (cd "$ROOT" && GGML_RS_TREE="$TREE" GGML_RS_BINDINGS_REQUIRED=1 GGML_RS_LIB_DIR="$BUILD_STOCK/bin" GGML_RS_LIBRARY="$LIB" \
        GGML_RS_API_REQUIRED=1 timeout 900 cargo test -p ggml-rs-api > "$T/rust-api.log" 2>&1)
    local rc=$?
    grep -E '^test result|FAILED|panicked' "$T/rust-api.log"
    # a test binary killed by a signal or a build error leaves no FAILED line: show cargo's own
    # error lines and the log's end, so an intermittent failure can be told apart
    if [ $rc != 0 ]; then
        echo "exit $rc"
        grep -aE '^error|signal|process didn.t exit|Running ' "$T/rust-api.log" | tail -n 8
        tail -n 5 "$T/rust-api.log"
    fi
    return $rc
}
check "ggml-rs-api: bindings drift, doc-tests, tests (stock libraries + ours)" rust_api
check "ggml-rs-api: cargo run --example two_backends (rpc-server + CPU, stock libraries + ours)" bash -o pipefail -c \
    "cd '$ROOT' && GGML_RS_LIB_DIR='$BUILD_STOCK/bin' GGML_RS_LIBRARY='$LIB' timeout 300 cargo run -q -p ggml-rs-api --example two_backends 2>&1 | tail -n 4"
# the same example on upstream's own libraries: the seed scenario must give stale results there
rust_api_upstream() {
    (cd "$ROOT" && GGML_RS_LIB_DIR="$BUILD_STOCK/bin" timeout 300 cargo run -q -p ggml-rs-api --example two_backends > "$T/rust-api-up.log" 2>&1)
    local rc=$?
    grep -m1 'stale' "$T/rust-api-up.log"
    grep -q 'rounds wrong' "$T/rust-api-up.log" && [ $rc = 1 ] || { echo "exit $rc: upstream passes the example"; tail -n 3 "$T/rust-api-up.log"; return 1; }
}
check "ggml-rs-api: upstream alone fails the example's reset + alloc rounds" rust_api_upstream
