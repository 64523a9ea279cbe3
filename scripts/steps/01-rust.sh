# step 1 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 1 runs this step alone)

step "1. Rust tests"
check "cargo fmt --check" bash -o pipefail -c "cd '$ROOT' && cargo fmt --all --check 2>&1 | tail -n 20"
check "cargo clippy --workspace --all-targets -D warnings" bash -o pipefail -c "cd '$ROOT' && cargo clippy --workspace --all-targets -- -D warnings 2>&1 | tail -n 20"
check "cargo test (unit, property, header drift; every crate)" bash -o pipefail -c "cd '$ROOT' && cargo test --workspace --lib 2>&1 | tail -n 25"
check "planner fuzz ($PLAN_FUZZ random graphs)" bash -o pipefail -c \
    "cd '$ROOT' && GGML_RS_PLAN_FUZZ=$PLAN_FUZZ cargo test --release -p ggml-plan --lib plan_tests::fuzz_from_env 2>&1 | tail -n 3"
