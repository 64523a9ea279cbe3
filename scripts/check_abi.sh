#!/usr/bin/env bash
# The ABI test: measures upstream's symbols and layouts at the pin and compares ours with them.
#   - every symbol ggml-backend.cpp and ggml-alloc.c export is exported by libggml_rs.so, and
#     no other ggml_* symbol is (ggml_rs_* extensions are documented in include/ggml-rs.h);
#   - ggml-base built without the two files defines none of them and resolves all of them;
#   - every function declared in our generated headers agrees with upstream's declaration
#     (one translation unit sees both: the compiler rejects any disagreement);
#   - struct layouts and constants equal upstream's (c_tests/abi_layout.c);
#   - a C program using only our headers (plus ggml.h) compiles with -Wall -Werror and runs,
#     from the source tree and from an installed copy found through pkg-config.
# Usage: scripts/check_abi.sh   (after scripts/upstream.sh build stock|ours and cargo build --release)
#        scripts/check_abi.sh 0.9.8   another ABI profile (README "Profiles"): after
#            scripts/upstream.sh build ggml-0.9.8-stock|ggml-0.9.8-ours, which builds its library
#            (cargo build --release --features abi-0-9-8 --target-dir target/abi-0-9-8)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eval "$("$ROOT/scripts/upstream.sh" paths)"
# shellcheck source=pin.env
source "$ROOT/scripts/pin.env"
PROFILE=${1:-$GGML_RS_PIN_GGML_VERSION}
if [ "$PROFILE" = "$GGML_RS_PIN_GGML_VERSION" ]; then
    LIB=${GGML_RS_LIB:-$ROOT/target/release/libggml_rs.so}
    OBJ=$GGML_RS_BUILD_STOCK/llama.cpp/ggml/src/CMakeFiles/ggml-base.dir
    HDR=$ROOT/include
    GGML=$GGML_RS_TREE/ggml
    BASE_DIR=$GGML_RS_BUILD_OURS/bin          # ggml's libraries, ours
    LAYOUT=$GGML_RS_BUILD_OURS/c_tests/abi_layout
    SOS="libggml-base.so libggml-cpu.so libggml.so libggml-rpc.so libllama.so"
    CFLAGS_PROFILE=()
    CMAKE_PROFILE=()
else
    KEY=${PROFILE//./_}
    MAX_NAME_VAR=GGML_RS_PIN_${KEY}_MAX_NAME
    [ -n "${!MAX_NAME_VAR:-}" ] || { echo "no profile $PROFILE in scripts/pin.env ($GGML_RS_PROFILES)"; exit 2; }
    LIB=${GGML_RS_LIB:-$ROOT/target/abi-${PROFILE//./-}/release/libggml_rs.so}
    STOCK_VAR=GGML_RS_BUILD_GGML_${KEY}_STOCK OURS_VAR=GGML_RS_BUILD_GGML_${KEY}_OURS GGML_VAR=GGML_RS_GGML_${KEY}
    OBJ=${!STOCK_VAR}/ggml/src/CMakeFiles/ggml-base.dir
    HDR=$ROOT/include/$PROFILE
    GGML=${!GGML_VAR}
    BASE_DIR=${!OURS_VAR}/ggml/src
    LAYOUT=${!OURS_VAR}/c_tests/abi_layout
    SOS="libggml-base.so libggml-cpu.so libggml.so"
    # the profile's users compile ggml with its GGML_MAX_NAME (ggml_tensor's size depends on it)
    CFLAGS_PROFILE=(-DGGML_MAX_NAME="${!MAX_NAME_VAR}" -DGGML_RS_ABI_"$KEY")
    CMAKE_PROFILE=(-DGGML_RS_PROFILE="$PROFILE")
fi
echo "profile: ggml $PROFILE ($LIB)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
err() { echo "FAIL: $*"; fail=1; }

# symbols
nm --defined-only -g "$OBJ/ggml-backend.cpp.o" "$OBJ/ggml-alloc.c.o" | awk '$2=="T"{print $3}' | sort -u > "$TMP/expected"
nm -D --defined-only "$LIB" | awk '$2=="T"{print $3}' | grep '^ggml' | sort -u > "$TMP/exported"
comm -23 "$TMP/expected" "$TMP/exported" > "$TMP/missing"
comm -13 "$TMP/expected" "$TMP/exported" | grep -v '^ggml_rs_' > "$TMP/extra" || true
[ -s "$TMP/missing" ] && err "not exported: $(tr '\n' ' ' < "$TMP/missing")"
[ -s "$TMP/extra" ] && err "undocumented extra exports: $(tr '\n' ' ' < "$TMP/extra")"
n_expected=$(wc -l < "$TMP/expected")
n_exported=$(comm -12 "$TMP/expected" "$TMP/exported" | wc -l)
n_ext=$(grep -c '^ggml_rs_' "$TMP/exported" || true)
# an export is unimplemented when its body says so (none should be)
unimpl=$(grep -rl 'not implemented:' "$ROOT/src/ffi" 2>/dev/null | xargs -r grep -o 'fn ggml_[a-z0-9_]*' | sort -u || true)
n_unimpl=$(printf '%s' "$unimpl" | grep -c . || true)

# ggml-base without the two files
BASE=$BASE_DIR/libggml-base.so
defined_in_base=$(nm -D --defined-only "$BASE" | awk '$2=="T"{print $3}' | sort -u | comm -12 - "$TMP/expected" | wc -l)
[ "$defined_in_base" -eq 0 ] || err "ggml-base (ours) still defines $defined_in_base of the symbols"
readelf -d "$BASE" | grep 'NEEDED.*libggml_rs.so' > /dev/null || err "ggml-base (ours) does not depend on libggml_rs.so"
for so in $SOS; do
    if LD_LIBRARY_PATH="$BASE_DIR:$(dirname "$LIB")" ldd -r "$BASE_DIR/$so" 2>&1 | grep 'undefined symbol' > /dev/null; then
        err "$so has unresolved symbols against libggml_rs.so"
    fi
done

# signatures: our declarations next to upstream's
INC="-I$GGML/include -I$GGML/src"
python3 "$ROOT/tests/abi/prototypes.py" decls "$HDR/ggml-alloc.h" "$HDR/ggml-backend.h" "$HDR/ggml-backend-impl.h" > "$TMP/ours.h"
{
    echo '#include "ggml.h"'
    echo '#include "ggml-alloc.h"'
    echo '#include "ggml-backend.h"'
    echo '#include "ggml-backend-impl.h"'
    echo '#include "ggml-impl.h"'
    echo '/* the declarations of our generated headers: */'
    cat "$TMP/ours.h"
} > "$TMP/signatures.c"
gcc -std=c11 -Wall -Wextra -Werror -Wno-unused-function "${CFLAGS_PROFILE[@]}" $INC -c "$TMP/signatures.c" -o "$TMP/signatures.o" 2> "$TMP/signatures.err" \
    || { cat "$TMP/signatures.err"; err "our declarations disagree with upstream's"; }
n_decls=$(wc -l < "$TMP/ours.h")
python3 "$ROOT/tests/abi/prototypes.py" names "$HDR/ggml-alloc.h" "$HDR/ggml-backend.h" "$HDR/ggml-backend-impl.h" | sort -u > "$TMP/declared"
undeclared=$(comm -23 "$TMP/expected" "$TMP/declared" | tr '\n' ' ')
[ -z "$undeclared" ] || err "not declared in our headers: $undeclared"

# layouts
layout=$("$LAYOUT") || { echo "$layout"; err "layouts differ"; }

# our headers, used on their own
gcc -std=c11 -Wall -Wextra -Werror "${CFLAGS_PROFILE[@]}" -I"$HDR" -I"$GGML/include" "$ROOT/c_tests/header_consumer.c" \
    -L"$(dirname "$LIB")" -lggml_rs -L"$BASE_DIR" -lggml-base -lggml-cpu -lggml -o "$TMP/header_consumer" \
    || err "a program using our headers does not compile or link"
consumer=$(LD_LIBRARY_PATH="$BASE_DIR:$(dirname "$LIB")" "$TMP/header_consumer") || err "the header consumer failed"

# installed: the library, our headers and a pkg-config file; a program built with pkg-config
cmake -S "$ROOT" -B "$TMP/lib-build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${CMAKE_PROFILE[@]}" -DCMAKE_INSTALL_PREFIX="$TMP/inst" > "$TMP/install.log" 2>&1 \
    && cmake --build "$TMP/lib-build" >> "$TMP/install.log" 2>&1 && cmake --install "$TMP/lib-build" >> "$TMP/install.log" 2>&1 \
    || { tail -n 20 "$TMP/install.log"; err "cmake --install of the library failed"; }
pc_flags=$(PKG_CONFIG_PATH="$TMP/inst/lib/pkgconfig:$TMP/inst/lib64/pkgconfig" pkg-config --cflags --libs ggml-rs) || err "pkg-config does not find ggml-rs"
gcc -std=c11 -Wall -Wextra -Werror "${CFLAGS_PROFILE[@]}" $pc_flags -I"$GGML/include" "$ROOT/c_tests/header_consumer.c" $pc_flags \
    -L"$BASE_DIR" -lggml-base -lggml-cpu -lggml -o "$TMP/pc_consumer" \
    || err "a program built with pkg-config's flags does not compile or link"
installed_lib=$(dirname "$(find "$TMP/inst" -name 'libggml_rs.so*' | head -n1)")
installed=$(LD_LIBRARY_PATH="$BASE_DIR:$installed_lib" "$TMP/pc_consumer") || err "the pkg-config consumer failed"

echo "symbols expected $n_expected, exported $n_exported, unimplemented $n_unimpl (extensions: $n_ext ggml_rs_*)"
echo "declarations: $n_decls in our headers, all compatible with upstream's; none missing"
echo "$layout" | head -1
echo "header consumer: $consumer"
echo "installed (cmake --install, pkg-config ggml-rs): $installed"
[ "$n_unimpl" -eq 0 ] || echo "unimplemented: $unimpl"
exit $fail
