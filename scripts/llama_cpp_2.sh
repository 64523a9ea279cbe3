#!/usr/bin/env bash
# The abi-0-26-0 profile: ggml 0.26.0 as Rust programs get it (the crate llama-cpp-sys-2 0.1.161,
# scripts/pin.env), and a Rust program built with llama-cpp-2 on it (examples/llama-cpp-2-generate).
#
#   scripts/llama_cpp_2.sh build          ggml 0.26.0 stock and ours (scripts/upstream.sh, cached),
#                                         the profile's libggml_rs, and the example: built once,
#                                         against the stock install (llama-cpp-sys-2's system-ggml
#                                         route: only llama.cpp's own part compiles)
#   scripts/llama_cpp_2.sh abi            symbols and ggml-base without the two files; layouts
#   scripts/llama_cpp_2.sh ctest-ours     the C tests (0.26.0's headers) on ours; ctest-stock: the common ones
#   scripts/llama_cpp_2.sh upstream-fails PROGRAM TEST...   each seed scenario must fail on stock 0.26.0
#   scripts/llama_cpp_2.sh test-alloc     the pin's test-alloc.cpp built against 0.26.0: stock and ours
#   scripts/llama_cpp_2.sh compare [MODEL] [-n N]   the example on stock, ours (ggml-base without
#                                         the two files + our library: the same binary, the
#                                         libraries swapped by the loader path) and stock with our
#                                         library in LD_PRELOAD; one line; exit 1 unless the tokens
#                                         and every logits row are identical
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eval "$("$ROOT/scripts/upstream.sh" paths)"
EXAMPLE=$ROOT/examples/llama-cpp-2-generate
EXE=$EXAMPLE/target/release/llama-cpp-2-generate
STOCK=$GGML_RS_SYS2_BUILD_STOCK
OURS=$GGML_RS_SYS2_BUILD_OURS
LIB=$GGML_RS_SYS2_LIB
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

cmd_build() {
    "$ROOT/scripts/upstream.sh" build sys2-stock && "$ROOT/scripts/upstream.sh" build sys2-ours || return 1
    # the example's target dir is its own (examples/llama-cpp-2-generate/target: cache it in CI);
    # llama-cpp-sys-2 compiles llama.cpp with cmake, finding ggml through CMAKE_PREFIX_PATH
    # the first build compiles llama.cpp's own part (libllama, llama-common: about 100 objects)
    # and takes minutes: every 30 s a line with the objects compiled so far
    # libllama (the C++ half of llama-cpp-sys-2; ggml is the installed one) unoptimized: it is not
    # what this checks (the stock and ours runs share it), and -O0 compiles its ~100 files in a
    # fraction of Release's time (llama-cpp-sys-2 passes CMAKE_* variables on to CMake)
    CMAKE_PREFIX_PATH=$GGML_RS_SYS2_INSTALL_STOCK CMAKE_BUILD_PARALLEL_LEVEL=${GGML_RS_JOBS:-$(nproc)} \
        LLAMA_LIB_PROFILE=Debug CMAKE_C_FLAGS_DEBUG=-O0 CMAKE_CXX_FLAGS_DEBUG=-O0 \
        cargo build --release --locked -j "${GGML_RS_JOBS:-$(nproc)}" --manifest-path "$EXAMPLE/Cargo.toml" > "$T/cargo.log" 2>&1 &
    local pid=$! t0=$SECONDS shown=$SECONDS
    while kill -0 "$pid" 2> /dev/null; do
        sleep 1
        [ $((SECONDS - shown)) -lt 30 ] && continue
        shown=$SECONDS
        printf '[llama-cpp-2] building (%s s): %s objects of llama.cpp compiled; %s\n' "$((SECONDS - t0))" \
            "$(find "$EXAMPLE"/target/release/build/llama-cpp-sys-2-*/out/build -name '*.o' 2> /dev/null | wc -l)" \
            "$(grep -a 'Compiling' "$T/cargo.log" | tail -n 1 | sed 's/^ *//')" >&2
    done
    wait "$pid" || { tail -n 30 "$T/cargo.log"; return 1; }
    tail -n 1 "$T/cargo.log"
    [ -x "$EXE" ]
}

cmd_abi() {
    local obj=$STOCK/ggml/src/CMakeFiles/ggml-base.dir base=$OURS/ggml/src/libggml-base.so fail=0
    nm --defined-only -g "$obj/ggml-backend.cpp.o" "$obj/ggml-alloc.c.o" | awk '$2=="T"{print $3}' | sort -u > "$T/expected"
    nm -D --defined-only "$LIB" | awk '$2=="T"{print $3}' | grep '^ggml' | sort -u > "$T/exported"
    local missing extra defined
    missing=$(comm -23 "$T/expected" "$T/exported" | tr '\n' ' ')
    extra=$(comm -13 "$T/expected" "$T/exported" | grep -v '^ggml_rs_' | tr '\n' ' ')
    [ -z "$missing" ] || { echo "FAIL: not exported: $missing"; fail=1; }
    [ -z "$extra" ] || { echo "FAIL: undocumented extra exports: $extra"; fail=1; }
    defined=$(nm -D --defined-only "$base" | awk '$2=="T"{print $3}' | sort -u | comm -12 - "$T/expected" | wc -l)
    [ "$defined" -eq 0 ] || { echo "FAIL: ggml-base (ours) still defines $defined of them"; fail=1; }
    readelf -d "$base" | grep 'NEEDED.*libggml_rs.so' > /dev/null || { echo "FAIL: ggml-base (ours) does not need libggml_rs.so"; fail=1; }
    for so in "$base" "$OURS"/ggml/src/libggml-cpu.so "$OURS"/ggml/src/libggml.so; do
        if ldd -r "$so" 2>&1 | grep 'undefined symbol' > /dev/null; then
            echo "FAIL: $(basename "$so") has unresolved symbols against libggml_rs.so"
            fail=1
        fi
    done
    echo "symbols of 0.26.0's ggml-backend.cpp + ggml-alloc.c: $(wc -l < "$T/expected") expected, $(comm -12 "$T/expected" "$T/exported" | wc -l) exported"
    "$OURS/c_tests/abi_layout" | head -n 1 || fail=1
    local ggml_dir inc=$ROOT/include/0.26.0
    ggml_dir=$(sed -n 's/^GGML_RS_GGML_DIR:PATH=//p' "$OURS/CMakeCache.txt")
    # signatures: the declarations of the profile's headers (include/0.26.0) next to 0.26.0's
    python3 "$ROOT/tests/abi/prototypes.py" decls "$inc/ggml-alloc.h" "$inc/ggml-backend.h" "$inc/ggml-backend-impl.h" > "$T/ours.h"
    printf '#include "ggml.h"\n#include "ggml-alloc.h"\n#include "ggml-backend.h"\n#include "ggml-backend-impl.h"\n#include "ggml-impl.h"\n' > "$T/signatures.c"
    cat "$T/ours.h" >> "$T/signatures.c"
    if gcc -std=c11 -Wall -Wextra -Werror -Wno-unused-function -I"$ggml_dir/include" -I"$ggml_dir/src" -c "$T/signatures.c" -o "$T/signatures.o" 2> "$T/signatures.err"; then
        echo "declarations: $(wc -l < "$T/ours.h") in include/0.26.0, all compatible with 0.26.0's"
    else
        head -n 20 "$T/signatures.err"
        echo "FAIL: the declarations of include/0.26.0 disagree with 0.26.0's"
        fail=1
    fi
    python3 "$ROOT/tests/abi/prototypes.py" names "$inc/ggml-alloc.h" "$inc/ggml-backend.h" "$inc/ggml-backend-impl.h" | sort -u > "$T/declared"
    missing=$(comm -23 "$T/expected" "$T/declared" | tr '\n' ' ')
    [ -z "$missing" ] || { echo "FAIL: not declared in include/0.26.0: $missing"; fail=1; }
    # the mirrors' compile-time proof (crates/ggml-abi/src/pinned_0_26_0.rs) is what bindgen makes
    # of this tree's headers (ggml-abi-gen's drift test, this profile's tree given)
    (cd "$ROOT" && GGML_RS_UPSTREAM_GGML_0_26_0="$ggml_dir" cargo test -q -p ggml-abi-gen --test drift -- --nocapture > "$T/drift.log" 2>&1)
    if grep -q 'profiles checked: [1-9]' "$T/drift.log"; then
        echo "pinned_0_26_0.rs: bindgen's translation of $ggml_dir"
    else
        echo "FAIL: crates/ggml-abi/src/pinned_0_26_0.rs differs from bindgen's translation of $ggml_dir"
        fail=1
    fi
    return $fail
}

cmd_ctest() { # build regex
    (cd "$1" && ctest --output-on-failure -R "$2" 2>&1 | tail -n 4)
}

cmd_upstream_fails() {
    local prog=$1 bad=0 t
    shift
    for t in "$@"; do
        if timeout 120 "$STOCK/c_tests/$prog" "$t" > "$T/u.log" 2>&1; then
            echo "stock 0.26.0 passes $prog $t: the scenario does not reproduce the bug"
            bad=1
        fi
    done
    [ $bad = 0 ] && echo "stock 0.26.0 fails all $# scenarios of $prog"
    return $bad
}

cmd_test_alloc() {
    local v n rc=0
    for v in stock ours; do
        local b=$GGML_RS_SYS2_BUILD_STOCK
        [ $v = ours ] && b=$OURS
        "$b/bin/test-alloc" > "$T/test-alloc-$v.log" 2>&1 || { tail -n 5 "$T/test-alloc-$v.log"; rc=1; }
        n=$(grep -c PASSED "$T/test-alloc-$v.log")
        printf '%s: %s PASSED, %s FAILED; ' "$v" "$n" "$(grep -c FAILED "$T/test-alloc-$v.log")"
    done
    echo
    return $rc
}

cmd_compare() {
    local model=${1:-${GGML_RS_CACHE:-$ROOT/.upstream}/models/tiny-f32.gguf}
    shift || true
    local args=("$model" -n 24 -t 2 "$@")
    [ -x "$EXE" ] || { echo "the example is not built (scripts/llama_cpp_2.sh build)"; return 1; }
    GENERATE_VERBOSE=1 GGML_RS_LOG=1 LD_LIBRARY_PATH=$GGML_RS_SYS2_INSTALL_STOCK/lib "$EXE" "${args[@]}" --logits "$T/stock.bin" > "$T/stock.txt" 2> "$T/stock.err" \
        || { tail -n 5 "$T/stock.err"; return 1; }
    GENERATE_VERBOSE=1 GGML_RS_LOG=1 LD_LIBRARY_PATH=$GGML_RS_SYS2_INSTALL_OURS/lib "$EXE" "${args[@]}" --logits "$T/ours.bin" > "$T/ours.txt" 2> "$T/ours.err" \
        || { tail -n 5 "$T/ours.err"; return 1; }
    GENERATE_VERBOSE=1 GGML_RS_LOG=1 LD_LIBRARY_PATH=$GGML_RS_SYS2_INSTALL_STOCK/lib LD_PRELOAD=$LIB "$EXE" "${args[@]}" --logits "$T/preload.bin" > "$T/preload.txt" 2> "$T/preload.err" \
        || { tail -n 5 "$T/preload.err"; return 1; }
    local rows same_link same_preload marker_link marker_preload
    rows=$(grep -c '^pos' "$T/stock.txt")
    # rows equal at the same position (token, logits fingerprint, pick)
    same() { paste <(grep '^pos' "$T/stock.txt") <(grep '^pos' "$1") | awk -F'\t' '$1 == $2' | wc -l; }
    same_link=$(same "$T/ours.txt")
    same_preload=$(same "$T/preload.txt")
    # each run on our library says so (GGML_RS_LOG=1, with llama.cpp's log on: GENERATE_VERBOSE):
    # the marker proves the library was in use
    marker_link=$(grep -c 'ggml-rs [0-9.]*: scheduler' "$T/ours.err")
    marker_preload=$(grep -c 'ggml-rs [0-9.]*: scheduler' "$T/preload.err")
    local buf_stock buf_ours
    buf_stock=$(grep -m1 -o 'CPU compute buffer size = *[0-9.]* MiB' "$T/stock.err" | grep -o '[0-9.]* MiB')
    buf_ours=$(grep -m1 -o 'CPU compute buffer size = *[0-9.]* MiB' "$T/ours.err" | grep -o '[0-9.]* MiB')
    printf '%s rows, identical: %s (link-time), %s (LD_PRELOAD); compute buffer %s stock, %s ours; text "%s"\n' \
        "$rows" "$same_link" "$same_preload" "$buf_stock" "$buf_ours" "$(grep '^text:' "$T/stock.txt" | cut -c7- | tr -cd '[:print:]' | cut -c1-40)"
    [ "$marker_link" -gt 0 ] && [ "$marker_preload" -gt 0 ] || { echo "a run on ggml-rs did not log ggml-rs's marker"; return 1; }
    # and the stock run, with the same setting, has none: the marker tells the builds apart
    ! grep -q 'ggml-rs [0-9.]*: scheduler' "$T/stock.err" || { echo "the stock run logged ggml-rs's marker"; return 1; }
    cmp -s "$T/stock.txt" "$T/ours.txt" && cmp -s "$T/stock.txt" "$T/preload.txt" \
        && cmp -s "$T/stock.bin" "$T/ours.bin" && cmp -s "$T/stock.bin" "$T/preload.bin" && return 0
    echo "OUTPUTS DIFFER"
    diff "$T/stock.txt" "$T/ours.txt" | head -n 6
    return 1
}

case "${1:-}" in
    build) cmd_build ;;
    abi) cmd_abi ;;
    ctest-ours) cmd_ctest "$OURS" '^(test_|abi_)' ;;
    ctest-stock) cmd_ctest "$STOCK" '^(test_backend_core|test_alloc_list)$' ;;
    upstream-fails) shift; cmd_upstream_fails "$@" ;;
    test-alloc) cmd_test_alloc ;;
    compare) shift; cmd_compare "$@" ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
esac
