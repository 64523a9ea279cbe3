# step 5 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 5 runs this step alone)

step "5. upstream's test programs on our library"
check "test-alloc" bash -o pipefail -c "'$BUILD_OURS/bin/test-alloc' | tail -n 3"
check "test-opt" bash -o pipefail -c "'$BUILD_OURS/bin/test-opt' > '$T/opt.log' 2>&1; rc=\$?; grep -c OK '$T/opt.log'; tail -n 2 '$T/opt.log'; exit \$rc"
# grad mode on the CPU backend, every op except those whose gradient tests abort or fail on
# upstream itself at the pin (no backward pass in ggml.c, or a failing check), and MUL_MAT, which
# takes minutes; the same selection runs on the reference build and the results are compared
GRAD_SKIP="CEIL CPY CUMSUM DIAG EXPM1 FILL FLOOR GEGLU GEGLU_ERF GEGLU_QUICK IM2COL_3D MUL_MAT OPT_STEP_SGD POOL_1D REGLU RMS_NORM ROPE ROUND SCALE SET SOFT_MAX SOLVE_TRI SUM SWIGLU_CLAMP SWIGLU_OAI TRI TRUNC XIELU"
GRAD_OPS=$("$BUILD_STOCK/bin/test-backend-ops" --list-ops 2>/dev/null | tail -n +2 | tr -d ' ' | grep -vxF -f <(tr ' ' '\n' <<< "$GRAD_SKIP") | sed 's/.*/^&$/' | paste -sd,)
grad() {
    "$1/bin/test-backend-ops" grad -b CPU -o "$GRAD_OPS" > "$T/grad-$2.log" 2>&1
    local rc=$?
    echo "$2: exit $rc, $(grep -c 'OK' "$T/grad-$2.log") OK, $(grep -c 'FAIL' "$T/grad-$2.log") FAIL, $(grep -c 'not supported' "$T/grad-$2.log") not supported"
    return $rc
}
check "test-backend-ops grad -b CPU (reference)" grad "$BUILD_STOCK" reference
check "test-backend-ops grad -b CPU (ours)" grad "$BUILD_OURS" ours
check "test-backend-ops grad: same results" bash -o pipefail -c \
    "diff <(grep -E 'OK|FAIL' '$T/grad-reference.log' | sed 's/\x1b\[[0-9;]*m//g') <(grep -E 'OK|FAIL' '$T/grad-ours.log' | sed 's/\x1b\[[0-9;]*m//g') > /dev/null"
check "test-backend-ops support -b CPU: same as reference" bash -o pipefail -c \
    "diff <('$BUILD_STOCK/bin/test-backend-ops' support -b CPU 2>&1 | grep -v 'Backend\|device\|memory') <('$BUILD_OURS/bin/test-backend-ops' support -b CPU 2>&1 | grep -v 'Backend\|device\|memory') > /dev/null"
