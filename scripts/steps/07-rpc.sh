# step 7 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 7 runs this step alone)

step "7. processes: rpc-servers + local CPU"
if ! selected; then
    :
elif start_rpc_server "$BUILD_OURS"; then
    check "scheduler: rpc-server + CPU = CPU alone" env GGML_RS_RPC_ENDPOINT="$RPC_ENDPOINT" "$BUILD_OURS/c_tests/test_rpc_sched"
    RPC_OPS="ADD,MUL,SCALE,SQR,CPY,CONT,GET_ROWS,SET_ROWS,MUL_MAT,RMS_NORM,SOFT_MAX,ROPE,GLU,ADD_ID"
    check "test-backend-ops test -b RPC0 ($RPC_OPS)" bash -c \
        "GGML_RS_RPC_SERVER='$RPC_ENDPOINT' LD_PRELOAD='$BUILD_OURS/c_tests/librpc_preload.so' '$BUILD_OURS/bin/test-backend-ops' test -b RPC0 -o '$RPC_OPS' > '$T/rpc-ops.log' 2>&1; rc=\$?; echo \"\$(grep -c 'OK' '$T/rpc-ops.log') OK, \$(grep -c 'FAIL' '$T/rpc-ops.log') FAIL\"; tail -n 2 '$T/rpc-ops.log'; exit \$rc"
    rpc_llama() {
        "$BUILD_OURS/bin/llama-compare" -m "$MODELS/tiny-f32.gguf" -p "The quick brown fox jumps over the lazy dog" -n 32 \
            --rpc "$RPC_ENDPOINT" -ngl 1 > "$T/rpc-llama.txt" 2> "$T/rpc-llama.err" || { tail -n 5 "$T/rpc-llama.err"; return 1; }
        "$BUILD_OURS/bin/llama-compare" -m "$MODELS/tiny-f32.gguf" -p "The quick brown fox jumps over the lazy dog" -n 32 \
            > "$T/cpu-llama.txt" 2>/dev/null
        diff <(grep '^text:' "$T/rpc-llama.txt") <(grep '^text:' "$T/cpu-llama.txt")
    }
    check "llama: layers split between rpc-server and CPU give the CPU's text" rpc_llama
    check "test-llama-archs with the RPC device (RPC and meta device against CPU)" bash -c \
        "GGML_RS_RPC_SERVER='$RPC_ENDPOINT' LD_PRELOAD='$BUILD_OURS/c_tests/librpc_preload.so' '$BUILD_OURS/bin/test-llama-archs' > '$T/archs-rpc.log' 2>&1; rc=\$?; grep -a '^Summary' '$T/archs-rpc.log'; exit \$rc"
    first_endpoint=$RPC_ENDPOINT
    if start_rpc_server "$BUILD_OURS"; then
        # the script picks its ports from its process id; once in a while one is taken (by the
        # servers above, or another program): then it waits 30 s for its server and gives up, so
        # it gets a second run (with another process id)
        rpc_multi() {
            local run
            for run in first second; do
                bash "$TREE/tests/test-rpc-multi-server.sh" "$BUILD_OURS/bin/ggml-rpc-server" "$BUILD_OURS/bin/test-rpc-multi-server" && return 0
                echo "$run run failed"
            done
            return 1
        }
        check "test-rpc-multi-server (upstream's script, two servers)" rpc_multi
        # tensor parallelism: ggml's meta device splits every offloaded tensor across both servers
        meta() {
            local v args=(-m "$MODELS/tiny-f32.gguf" -p "$PROMPT" -n 32 --rpc "$first_endpoint,$RPC_ENDPOINT" -ngl 99 -sm tensor -fa on)
            "$BUILD_STOCK/bin/llama-compare" "${args[@]}" > "$T/meta-stock.txt" 2> "$T/meta-stock.err" || { tail -n 3 "$T/meta-stock.err"; return 1; }
            "$BUILD_OURS/bin/llama-compare" "${args[@]}" > "$T/meta-ours.txt" 2> "$T/meta-ours.err" || { tail -n 3 "$T/meta-ours.err"; return 1; }
            cmp "$T/meta-stock.txt" "$T/meta-ours.txt" && echo "$(grep -c logits_fnv1a64 "$T/meta-ours.txt") logits rows identical"
        }
        check "llama: tensors split across two rpc-servers (meta device), same logits as upstream" meta
    else
        check "a second rpc-server starts" false
    fi
    stop_rpc_server
else
    check "rpc-server starts" false
fi
