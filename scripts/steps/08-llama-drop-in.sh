# step 8 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 8 runs this step alone)

step "8. llama.cpp on our library: identical logits and text"
compare_llama() {
    local args=$*
    "$BUILD_STOCK/bin/llama-compare" $args -p "$PROMPT" > "$T/stock.txt" 2> "$T/stock.err" || { tail -n 3 "$T/stock.err"; return 1; }
    "$BUILD_OURS/bin/llama-compare" $args -p "$PROMPT" > "$T/ours.txt" 2> "$T/ours.err" || { tail -n 3 "$T/ours.err"; return 1; }
    if ! cmp -s "$T/stock.txt" "$T/ours.txt"; then
        diff "$T/stock.txt" "$T/ours.txt" | head -n 6
        return 1
    fi
    echo "$(grep -c logits_fnv1a64 "$T/ours.txt") logits rows identical"
}
SETTINGS=(
    "-m $MODELS/tiny-f32.gguf -n 48"
    "-m $MODELS/tiny-f16.gguf -n 32 -c 256 -b 64 -ub 16"
    "-m $MODELS/tiny-q8_0.gguf -n 32 -c 128 -b 8 -ub 4"
    "-m $MODELS/tiny-f32.gguf -n 32 -fa on"
    "-m $MODELS/tiny-f16.gguf -n 32 -fa on -b 16 -ub 16"
    "-m $MODELS/tiny-f32.gguf -n 40 --vary-batch -b 16"
    "-m $MODELS/tiny-q8_0.gguf -n 40 --vary-batch -fa on -c 512"
)
[ "${GGML_RS_QUICK:-0}" = 1 ] && SETTINGS=("${SETTINGS[@]:0:3}")
for s in "${SETTINGS[@]}"; do
    check "llama-compare ${s#-m "$MODELS"/}" compare_llama $s
done
# the compute buffer llama.cpp reserves once holds every batch decoded afterwards: with
# GGML_SCHED_DEBUG_REALLOC=1 a reallocation aborts, and llama.cpp's own check at the end must say
# the size matches its expectation (medium model, logits for every position of a long prompt)
LONG_PROMPT=$(for i in $(seq 40); do printf 'The quick brown fox jumps over the lazy dog number %d and then it rests. ' "$i"; done)
no_realloc() {
    local model=$MODELS/medium-q8_0.gguf
    if [ ! -f "$model" ]; then
        "$("$ROOT/scripts/pyenv.sh" | tail -n1)" "$ROOT/scripts/gen_model.py" --size medium --type q8_0 --seed 1 --out "$model" >&2 || return 1
    fi
    GGML_SCHED_DEBUG_REALLOC=1 "$BUILD_OURS/bin/llama-compare" -m "$model" "$@" -n 8 -v -p "$LONG_PROMPT" > "$T/nr.txt" 2> "$T/nr.err" \
        || { grep -a -m1 'reallocation\|error' "$T/nr.err"; return 1; }
    grep -a -m1 -o 'compute buffer size is .* matches expectation .*' "$T/nr.err" || { grep -a -m1 expectation "$T/nr.err"; return 1; }
}
check "reserved compute buffer holds every batch (-c 1024 -b 64 -ub 32, GGML_SCHED_DEBUG_REALLOC=1)" no_realloc -c 1024 -b 64 -ub 32 -fa off
check "reserved compute buffer holds every batch (-c 2048 -b 128 -ub 64 -fa on, GGML_SCHED_DEBUG_REALLOC=1)" no_realloc -c 2048 -b 128 -ub 64 -fa on
preload() {
    GGML_RS_LOG=1 LD_PRELOAD="$LIB" "$BUILD_STOCK/bin/llama-compare" -m "$MODELS/tiny-f32.gguf" -n 32 -v -p "$PROMPT" \
        > "$T/preload.txt" 2> "$T/preload.err" || return 1
    grep -m1 'ggml-rs .*Rust implementation' "$T/preload.err" || { echo "our scheduler was not used"; return 1; }
    "$BUILD_STOCK/bin/llama-compare" -m "$MODELS/tiny-f32.gguf" -n 32 -p "$PROMPT" > "$T/plain.txt" 2>/dev/null
    cmp "$T/preload.txt" "$T/plain.txt"
}
check "LD_PRELOAD over the stock shared build: ours is used, same output" preload
check "LD_PRELOAD: test-alloc and test-opt of the stock build" bash -o pipefail -c \
    "LD_PRELOAD='$LIB' '$BUILD_STOCK/bin/test-alloc' | grep -c PASSED && LD_PRELOAD='$LIB' '$BUILD_STOCK/bin/test-opt' > /dev/null 2>&1"
