#!/usr/bin/env bash
# The ABI test of the Rust CPU backend (libggml_rs_cpu.so) against the pinned ggml-cpu.h:
#   - every GGML_BACKEND_API function the header declares is exported, and no other ggml_*
#     symbol is, except the loadable-module entries (ggml_backend_init, ggml_backend_score) and
#     documented ggml_rs_cpu_* extensions;
#   - each exported function's C declaration, taken from the pinned header, compiles against a
#     pointer of that type to the symbol (the declarations exist and are functions);
#   - struct layouts (ggml_cplan, ggml_type_traits_cpu, ggml_threadpool_params, ...) and the
#     constants the library relies on equal the pinned headers' (c_tests/test_rscpu_backend.c,
#     its layout test).
# Usage: scripts/check_cpu_abi.sh   (after cargo build --release -p ggml-rs-cpu; needs the native
# or stock upstream build for the layout program)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eval "$("$ROOT/scripts/upstream.sh" paths)"
LIB=${GGML_RS_CPU_LIB:-$ROOT/target/release/libggml_rs_cpu.so}
HDR=$GGML_RS_TREE/ggml/include/ggml-cpu.h
BIN=$GGML_RS_BUILD_NATIVE/bin
[ -d "$BIN" ] || BIN=$GGML_RS_BUILD_STOCK/bin
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
err() { echo "FAIL: $*"; fail=1; }

# the header's GGML_BACKEND_API functions: the name before the '(' of each declaration
grep -o 'GGML_BACKEND_API[^(]*(' "$HDR" | sed -E 's/.*[ *]([A-Za-z_0-9]+)[[:space:]]*\($/\1/' | sort -u > "$TMP/expected"
nm -D --defined-only "$LIB" | awk '$2=="T"{print $3}' | grep '^ggml' | sort -u > "$TMP/exported"
comm -23 "$TMP/expected" "$TMP/exported" > "$TMP/missing"
comm -13 "$TMP/expected" "$TMP/exported" | grep -v -e '^ggml_rs_cpu_' -e '^ggml_backend_init$' -e '^ggml_backend_score$' > "$TMP/extra" || true
[ -s "$TMP/missing" ] && err "not exported: $(tr '\n' ' ' < "$TMP/missing")"
[ -s "$TMP/extra" ] && err "undocumented extra exports: $(tr '\n' ' ' < "$TMP/extra")"
n_expected=$(wc -l < "$TMP/expected")
n_exported=$(comm -12 "$TMP/expected" "$TMP/exported" | wc -l)
modules=$(grep -c -e '^ggml_backend_init$' -e '^ggml_backend_score$' "$TMP/exported" || true)
[ "$modules" -eq 2 ] || err "the loadable-module entries ggml_backend_init / ggml_backend_score are not both exported"

# every expected name is a function of the header: take its address with the header's type
{
    echo '#include "ggml-cpu.h"'
    echo 'void * all[] = {'
    sed 's/.*/    (void *) \&&,/' "$TMP/expected"
    echo '};'
} > "$TMP/names.c"
gcc -std=c11 -Wall -Werror -I"$GGML_RS_TREE/ggml/include" -c "$TMP/names.c" -o "$TMP/names.o" || err "the header's names do not compile as functions"

# layouts, with the C test compiled against the pinned headers
gcc -O1 -Wall -Wextra -Wno-unused-function -I"$GGML_RS_TREE/ggml/include" -I"$GGML_RS_TREE/ggml/src" -o "$TMP/test_rscpu_backend" \
    "$ROOT/c_tests/test_rscpu_backend.c" -L"$BIN" -lggml -lggml-base -lggml-cpu -ldl -lm -Wl,-rpath,"$BIN"
layout=$("$TMP/test_rscpu_backend" "$LIB" test_layouts_match_the_pinned_headers 2>&1) || { echo "$layout"; err "layouts differ"; }

echo "ggml-cpu.h functions: $n_expected declared, $n_exported exported; module entries: $modules; extra: $(wc -l < "$TMP/extra")"
echo "layouts: $(echo "$layout" | grep -c ' ok$') layout test passed (ggml_cplan, ggml_type_traits_cpu, ggml_threadpool_params, dev caps/props, feature, constants)"
exit $fail
