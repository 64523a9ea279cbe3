# step 17 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 17 runs this step alone)

step "17. the abi-0-26-0 profile: ggml 0.26.0 (llama-cpp-sys-2 0.1.161) and a Rust program on it"
# ggml 0.26.0 built alone, stock and with our library (--features abi-0-26-0; cached like the pin's
# builds), the C tests and the pin's test-alloc.cpp against its headers; then the example
# (examples/llama-cpp-2-generate, llama-cpp-2 with llama-cpp-sys-2's system-ggml route: only
# llama.cpp's own part compiles; its target dir is cached) on stock, ours and LD_PRELOAD
L2=$ROOT/scripts/llama_cpp_2.sh
check "0.26.0: build ggml stock and ours, the profile's library, the llama-cpp-2 example" "$L2" build
check "0.26.0: symbols, ggml-base without the two files, layouts, signatures, bindgen proof" "$L2" abi
# the fuzzers with fewer graphs than step 4 (the same code; this checks the profile's ABI)
check "0.26.0: C tests on ours (0.26.0's headers; fuzzers: 50 graphs)" env GGML_RS_FUZZ_ITERS=50 "$L2" ctest-ours
check "0.26.0: C tests that hold for upstream, on stock" "$L2" ctest-stock
check "0.26.0: stock fails the seed scenarios (allocator, fuzz, scheduler, misuse)" bash -c \
    "'$L2' upstream-fails test_alloc_scenarios ${ALLOC_SEED_SCENARIOS[*]} && '$L2' upstream-fails test_alloc_fuzz random_graphs &&
     '$L2' upstream-fails test_sched_scenarios ${SCHED_SEED_SCENARIOS[*]} && '$L2' upstream-fails test_misuse ${MISUSE_SCENARIOS[*]}"
check "0.26.0: the pin's test-alloc on stock and ours" "$L2" test-alloc
check "0.26.0: llama-cpp-2 example: same tokens and logits (bits) on stock, ours, LD_PRELOAD" "$L2" compare "$MODELS/tiny-f32.gguf"
