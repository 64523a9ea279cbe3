# step 6 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 6 runs this step alone)

step "6. upstream llama.cpp's tests on our library"
check "test-tiled-mulmat" bash -o pipefail -c "'$BUILD_OURS/bin/test-tiled-mulmat' > '$T/tiled.log' 2>&1; rc=\$?; echo \"\$(grep -c PASS '$T/tiled.log') PASS, \$(grep -c FAIL '$T/tiled.log') FAIL\"; exit \$rc"
# test-llama-archs builds a random model of every architecture llama.cpp knows, runs it on each
# device against the CPU and through a save/load round trip; -o writes the models instead
archs() {
    "$BUILD_OURS/bin/test-llama-archs" "$@" > "$T/archs.log" 2>&1
    local rc=$?
    grep -a '^Summary' "$T/archs.log"
    return $rc
}
check "test-llama-archs (every architecture, CPU)" archs
mkdir -p "$T/arch-models"
check "test-llama-archs -o: a model of every architecture" bash -o pipefail -c "'$BUILD_OURS/bin/test-llama-archs' -o '$T/arch-models' > /dev/null 2>&1 && ls '$T/arch-models' | wc -l"
per_model() {
    # in the scratch folder: test-save-load-state writes its state file to the working directory
    (cd "$T" && "$BUILD_OURS/bin/$1" --models "$T/arch-models") > "$T/$1.log" 2>&1
    local rc=$?
    echo "$(grep -ac 'gguf' "$T/$1.log") models, $(grep -ao 'PASS' "$T/$1.log" | wc -l) PASS, $(grep -ao 'FAIL' "$T/$1.log" | wc -l) FAIL"
    return $rc
}
check "test-save-load-state --models (every architecture)" per_model test-save-load-state
check "test-recurrent-state-rollback --models (every architecture)" per_model test-recurrent-state-rollback
rm -rf "$T/arch-models"
# its exit status says whether a thread failed: its last log line may be lost at exit (the logger
# prints from a background thread), so the line is shown, not required
check "test-thread-safety (4 sequences, 2 threads)" bash -o pipefail -c \
    "'$BUILD_OURS/bin/test-thread-safety' -m '$MODELS/tiny-f32.gguf' -ngl 99 -p 'The meaning of life is' -n 64 -c 256 -ub 32 -np 4 -t 2 > '$T/threads.log' 2>&1; rc=\$?; grep -a -c '^.*Context [0-9]/4:' '$T/threads.log'; grep -a 'failed' '$T/threads.log'; exit \$rc"
check "test-state-restore-fragmented" bash -o pipefail -c "'$BUILD_OURS/bin/test-state-restore-fragmented' -m '$MODELS/tiny-f32.gguf' 2>&1 | grep -a SUCCESS"
check "test-autorelease, test-model-load-cancel" bash -o pipefail -c \
    "'$BUILD_OURS/bin/test-autorelease' '$MODELS/tiny-f32.gguf' > /dev/null 2>&1 && '$BUILD_OURS/bin/test-model-load-cancel' '$MODELS/tiny-f32.gguf' > /dev/null 2>&1"
# backend sampling (sampler graphs through the scheduler); cpu_mixed needs a real vocabulary
# (it aborts on upstream too with our 1024-token model)
sampler() {
    local t bad=0 n=0
    for t in greedy logit_bias penalties temp temp_ext top_k top_p min_p multi_sequence dist dist_and_cpu set_sampler \
             multi_output_limit multi_sequence_multi_output_dist multi_output_dist_transaction multi_output_sampling_chain \
             multi_output_cpu mixed; do
        n=$((n + 1))
        "$BUILD_OURS/bin/test-backend-sampler" --model "$MODELS/tiny-f32.gguf" --test "$t" > "$T/sampler.log" 2>&1 \
            || { echo "$t failed"; bad=1; }
    done
    echo "$n sampler tests"
    return $bad
}
check "test-backend-sampler" sampler
imatrix() {
    python3 -c "import random; random.seed(1); w='$PROMPT_WORDS'.split(); print(' '.join(random.choice(w) for _ in range(3000)))" > "$T/calib.txt"
    local v
    for v in stock ours; do
        local b=$BUILD_STOCK
        [ $v = ours ] && b=$BUILD_OURS
        "$b/bin/llama-imatrix" -m "$MODELS/tiny-f32.gguf" -f "$T/calib.txt" -o "$T/imatrix-$v.gguf" -c 128 -t 2 > "$T/imatrix-$v.log" 2>&1 \
            || { tail -n 3 "$T/imatrix-$v.log"; return 1; }
    done
    grep -a 'Final estimate' "$T/imatrix-ours.log"
    cmp "$T/imatrix-stock.gguf" "$T/imatrix-ours.gguf"
}
check "llama-imatrix (eval callback): the same file as upstream" imatrix
