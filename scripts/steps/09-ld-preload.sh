# step 9 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 9 runs this step alone)

step "9. LD_PRELOAD into any process"
# the library is inert until ggml-base is there: no ggml symbol is bound when it is loaded
preload_inert() {
    local bad=0 out strong imports name dynsym
    out=$(LD_PRELOAD="$LIB" timeout 5 true 2>&1) || { echo "timeout 5 true: $out"; bad=1; }
    out=$(LD_PRELOAD="$LIB" env true 2>&1) || { echo "env true: $out"; bad=1; }
    out=$(LD_PRELOAD="$LIB" bash -c 'echo ok' 2>&1); [ "$out" = ok ] || { echo "bash -c 'echo ok': $out"; bad=1; }
    out=$(LD_PRELOAD="$LIB" python3 -c 'print(1)' 2>&1); [ "$out" = 1 ] || { echo "python3 -c 'print(1)': $out"; bad=1; }
    dynsym=$(nm -D "$LIB")
    strong=$(awk '$1 == "U" && $2 ~ /^ggml_/ { print $2 }' <<< "$dynsym")
    [ -z "$strong" ] || { echo "bound at load time: $strong"; bad=1; }
    # every import of crates/ggml-abi/src/sys.rs is a weak undefined symbol: never one of our own exports
    imports=$(grep -oP '^\s*(variadic )?fn \Kggml_\w+' "$ROOT/crates/ggml-abi/src/sys.rs")
    for name in $imports; do
        grep -qxE "\s+w $name" <<< "$dynsym" || { echo "$name is not a weak undefined symbol of the library"; bad=1; }
    done
    [ $bad = 0 ] && echo "timeout, env, bash, python3 start as usual; $(wc -w <<< "$imports") ggml imports, all weak"
    return $bad
}
check "LD_PRELOAD into programs without ggml (timeout, env, bash, python3)" preload_inert
# called without ggml-base, the first function that needs it is named, then the process aborts
missing_base() {
    python3 -c "
import ctypes
lib = ctypes.CDLL('$LIB')
lib.ggml_backend_cpu_buffer_type.restype = ctypes.c_void_p
lib.ggml_backend_buft_alloc_buffer.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
lib.ggml_backend_buft_alloc_buffer(lib.ggml_backend_cpu_buffer_type(), 1024)
" > "$T/missing.out" 2>&1
    local rc=$?
    grep -m1 'ggml_aligned_malloc is not in this process: ggml-base' "$T/missing.out" && [ $rc = 134 ] \
        || { echo "exit $rc: $(head -c 300 "$T/missing.out")"; return 1; }
}
check "without ggml-base, a call that needs it names the missing function and aborts" missing_base
# the static library linked into an executable with ggml-base's objects (from an archive, as a
# static ggml-base is): nothing is exported, so only the weak references find ggml-base, and
# ggml-backend-meta's object stays out of the link
static_link() {
    local obj=$BUILD_STOCK/llama.cpp/ggml/src/CMakeFiles/ggml-base.dir o objs=()
    for o in "$obj"/*.o; do
        case $o in */ggml-backend.cpp.o | */ggml-alloc.c.o) ;; *) objs+=("$o") ;; esac
    done
    rm -f "$T/libbase.a"
    ar rcs "$T/libbase.a" "${objs[@]}" \
        && gcc -std=c11 -Wall -Wextra -Werror -I"$TREE/ggml/include" -c "$ROOT/c_tests/static_link.c" -o "$T/static_link.o" \
        && g++ -o "$T/static_link" "$T/static_link.o" -Wl,--start-group "$T/libbase.a" "${LIB%.so}.a" -Wl,--end-group \
            -fopenmp -lpthread -ldl -lm || return 1
    [ -z "$(nm -D "$T/static_link" | grep ' ggml_')" ] || { echo "the executable exports ggml symbols"; return 1; }
    ! grep -q ' T ggml_backend_meta_device$' <<< "$(nm "$T/static_link")" || { echo "ggml-backend-meta was linked"; return 1; }
    "$T/static_link"
}
check "static library in an executable with ggml-base's objects, nothing exported, no meta device" static_link
# the stock libllama dlopened with RTLD_LOCAL by a program that links nothing of ggml
preload_dlopen() {
    local prog=$BUILD_STOCK/c_tests/dlopen_llama args=("$BUILD_STOCK/bin/libllama.so" "$MODELS/tiny-f32.gguf" "$PROMPT" 24)
    GGML_RS_LOG=1 "$prog" "${args[@]}" > "$T/dlopen-plain.txt" 2> "$T/dlopen-plain.err" || { tail -n 3 "$T/dlopen-plain.err"; return 1; }
    GGML_RS_LOG=1 LD_PRELOAD="$LIB" "$prog" "${args[@]}" > "$T/dlopen-preload.txt" 2> "$T/dlopen-preload.err" \
        || { tail -n 3 "$T/dlopen-preload.err"; return 1; }
    grep -m1 'ggml-rs .*: scheduler with' "$T/dlopen-preload.err" || { echo "our scheduler was not used"; return 1; }
    ! grep -q 'ggml-rs .*: scheduler with' "$T/dlopen-plain.err" || { echo "ggml-rs was used without the preload"; return 1; }
    cmp "$T/dlopen-plain.txt" "$T/dlopen-preload.txt" && echo "$(grep -c '^step' "$T/dlopen-preload.txt") steps: same tokens and logits"
}
check "LD_PRELOAD: a C client that dlopens libllama (RTLD_LOCAL), same output" preload_dlopen
# the real Python client: llama-cpp-python (the pin's own package, from its sdist) on the stock libllama
preload_python() {
    local py client=$ROOT/scripts/llama_cpp_python_client.py
    py=$("$ROOT/scripts/llama_cpp_python.sh" | tail -n1) || return 1
    LLAMA_CPP_LIB_PATH="$BUILD_STOCK/bin" GGML_RS_LOG=1 "$py" "$client" run "$MODELS/tiny-f32.gguf" "$PROMPT" 24 "$T/py-plain.npy" \
        > "$T/py-plain.txt" 2> "$T/py-plain.err" || { tail -n 3 "$T/py-plain.err"; return 1; }
    LLAMA_CPP_LIB_PATH="$BUILD_STOCK/bin" GGML_RS_LOG=1 LD_PRELOAD="$LIB" "$py" "$client" run "$MODELS/tiny-f32.gguf" "$PROMPT" 24 "$T/py-preload.npy" \
        > "$T/py-preload.txt" 2> "$T/py-preload.err" || { tail -n 3 "$T/py-preload.err"; return 1; }
    grep -m1 'ggml-rs .*: scheduler with' "$T/py-preload.err" || { echo "our scheduler was not used"; return 1; }
    ! grep -q 'ggml-rs .*: scheduler with' "$T/py-plain.err" || { echo "ggml-rs was used without the preload"; return 1; }
    cmp "$T/py-plain.txt" "$T/py-preload.txt" || { diff "$T/py-plain.txt" "$T/py-preload.txt"; return 1; }
    grep '^completion:' "$T/py-preload.txt" | cut -c1-100
    "$py" "$client" compare "$T/py-plain.npy" "$T/py-preload.npy"
}
check "LD_PRELOAD: llama-cpp-python (the pin's package), same completion and logits" preload_python
# the issue's shape through the same client: llama-cpp-python reserves once, then decodes a long
# prompt with logits for every position; with GGML_SCHED_DEBUG_REALLOC=1 a reallocation aborts,
# and llama.cpp's own check at the end must say the compute buffer matches its expectation
preload_python_no_realloc() {
    local py client=$ROOT/scripts/llama_cpp_python_client.py model=$MODELS/medium-q8_0.gguf
    py=$("$ROOT/scripts/llama_cpp_python.sh" | tail -n1) || return 1
    if [ ! -f "$model" ]; then
        "$("$ROOT/scripts/pyenv.sh" | tail -n1)" "$ROOT/scripts/gen_model.py" --size medium --type q8_0 --seed 1 --out "$model" >&2 || return 1
    fi
    LLAMA_CPP_LIB_PATH="$BUILD_STOCK/bin" GGML_RS_LOG=1 GGML_SCHED_DEBUG_REALLOC=1 LD_PRELOAD="$LIB" \
        "$py" "$client" run "$model" "$LONG_PROMPT" 4 "$T/py-nr.npy" 1024 64 32 > "$T/py-nr.txt" 2> "$T/py-nr.err" \
        || { grep -a -m1 'reallocation\|error' "$T/py-nr.err"; tail -n 3 "$T/py-nr.err"; return 1; }
    grep -m1 -q 'ggml-rs .*: scheduler with' "$T/py-nr.err" || { echo "our scheduler was not used"; return 1; }
    grep -a '^tokens:' "$T/py-nr.txt"
    grep -a -m1 -o 'compute buffer size is .* matches expectation .*' "$T/py-nr.err" || { grep -a -m1 expectation "$T/py-nr.err"; return 1; }
}
check "LD_PRELOAD: llama-cpp-python, -c 1024 -b 64 -ub 32, all logits: the reserved buffer holds every batch" preload_python_no_realloc
