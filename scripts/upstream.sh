#!/usr/bin/env bash
# The pinned upstream tree (scripts/pin.env): fetch it, check it, build it. Nothing here is
# committed: everything lands in a git-ignored cache keyed by the pin, so a second run is fast.
#
#   scripts/upstream.sh deps          install the system tools the builds need (cmake, ninja, ccache)
#   scripts/upstream.sh deps-browser  install Chromium (headless: the memory plan report's SVG check)
#   scripts/upstream.sh fetch         download the sdist with pip, verify sha256, unpack
#   scripts/upstream.sh build stock   upstream as it is (the reference)
#   scripts/upstream.sh build ours    ggml-base without ggml-backend.cpp/ggml-alloc.c + this library
#   scripts/upstream.sh build native  stock with GGML_NATIVE=ON: the opponent for CPU kernels
#   scripts/upstream.sh build rscpu   "ours only": ours, and ggml linked to the Rust CPU backend
#                                     (libggml_rs_cpu.so) instead of ggml-cpu; no upstream backend
#   scripts/upstream.sh build sys2-stock  ggml 0.26.0 (llama-cpp-sys-2's tree) alone, as it is, installed
#   scripts/upstream.sh build sys2-ours   the same without ggml-backend.cpp/ggml-alloc.c + this library
#                                     built with --features abi-0-26-0 (its own cargo target dir)
#   scripts/upstream.sh paths         print the paths other scripts use (sourceable)
#
# GGML_RS_CACHE overrides the cache folder (default: <repo>/.upstream).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=pin.env
source "$ROOT/scripts/pin.env"

PIN="$GGML_RS_PIN_PACKAGE-$GGML_RS_PIN_VERSION"
CACHE=${GGML_RS_CACHE:-$ROOT/.upstream}/$PIN
SRC=$CACHE/src
TREE=$SRC/vendor/llama.cpp
JOBS=${GGML_RS_JOBS:-$(nproc)}

log() { printf '[upstream] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

cmd_deps() {
    local missing=()
    command -v cmake  >/dev/null || missing+=(cmake)
    command -v ninja  >/dev/null || missing+=(ninja-build)
    command -v ccache >/dev/null || missing+=(ccache)
    command -v g++    >/dev/null || missing+=(g++)
    command -v pkg-config >/dev/null || missing+=(pkg-config)
    # libclang, for bindgen (crates/ggml-abi-gen, the Rust API's drift test); loaded at run time
    ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' || missing+=(libclang-dev)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing: ${missing[*]}"
        as_root apt-get update -qq || true
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# the headless browser scripts/test.sh renders the memory plan report's SVG with (Debian's package)
cmd_deps_browser() {
    command -v chromium >/dev/null && return 0
    log "installing: chromium"
    as_root apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
}

cmd_fetch() {
    if [ -f "$SRC/.ggml-rs-unpacked" ]; then
        return 0
    fi
    mkdir -p "$CACHE/sdist"
    local sdist="$CACHE/sdist/$GGML_RS_PIN_SDIST"
    if [ ! -f "$sdist" ]; then
        log "downloading $GGML_RS_PIN_PACKAGE==$GGML_RS_PIN_VERSION (sdist)"
        python3 -m pip download --quiet --no-deps --no-binary "$GGML_RS_PIN_PACKAGE" \
            "$GGML_RS_PIN_PACKAGE==$GGML_RS_PIN_VERSION" -d "$CACHE/sdist"
    fi
    local sum
    sum=$(sha256sum "$sdist" | cut -d' ' -f1)
    if [ "$sum" != "$GGML_RS_PIN_SHA256" ]; then
        log "checksum mismatch for $sdist: got $sum, want $GGML_RS_PIN_SHA256"
        rm -f "$sdist"
        exit 1
    fi
    log "sha256 ok ($sum)"
    rm -rf "$SRC" "$CACHE/unpack"
    mkdir -p "$CACHE/unpack"
    tar -xzf "$sdist" -C "$CACHE/unpack"
    mv "$CACHE/unpack/${GGML_RS_PIN_SDIST%.tar.gz}" "$SRC"
    rmdir "$CACHE/unpack"
    local version
    version=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' "$TREE/ggml/CMakeLists.txt" | paste -sd.)
    if [ "$version" != "$GGML_RS_PIN_GGML_VERSION" ]; then
        log "the tree is ggml $version, the pin says $GGML_RS_PIN_GGML_VERSION"
        exit 1
    fi
    touch "$SRC/.ggml-rs-unpacked"
    log "unpacked ggml $version into $TREE"
}

# with_progress LABEL LOG COMMAND...: runs COMMAND with its output in LOG and, every 15 s while it
# runs, prints ninja's progress ([done/total] lines): the percentage, the current target and an
# estimate of the time left (from the pace so far; ccache hits make early estimates pessimistic)
with_progress() {
    local label=$1 out=$2 pid t0=$SECONDS shown=$SECONDS line done total left
    shift 2
    "$@" >"$out" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        [ $((SECONDS - shown)) -lt 15 ] && continue
        shown=$SECONDS
        line=$(grep -a '^\[[0-9]*/[0-9]*\]' "$out" | tail -n 1)
        [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]] || { log "$label: configuring ($((SECONDS - t0)) s)"; continue; }
        done=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
        left=$(( (SECONDS - t0) * (total - done) / (done > 0 ? done : 1) ))
        log "$label: $done/$total ($((100 * done / total))%), about $((left / 60)) min $((left % 60)) s left; $(cut -c1-90 <<< "${BASH_REMATCH[3]}")"
    done
    wait "$pid"
}

# build <variant>: variant is `stock`, `ours`, `native` (stock with GGML_NATIVE=ON) or `rscpu`
cmd_build() {
    local variant=$1
    local build=$CACHE/build-$variant
    local flags=(-DGGML_RS_LLAMA_CPP_DIR="$TREE")
    case "$variant" in
        stock) flags+=(-DGGML_RS_REPLACE=OFF -DGGML_RS_BUILD_RUST=OFF) ;;
        ours)  flags+=(-DGGML_RS_REPLACE=ON  -DGGML_RS_BUILD_RUST=ON) ;;
        # the fair opponent for a CPU backend: upstream's ggml-cpu built for this machine
        native) flags+=(-DGGML_RS_REPLACE=OFF -DGGML_RS_BUILD_RUST=OFF -DGGML_NATIVE=ON) ;;
        # our core and our CPU backend, no upstream backend library (not even RPC)
        rscpu) flags+=(-DGGML_RS_REPLACE=ON -DGGML_RS_BUILD_RUST=ON -DGGML_RS_CPU_RUST=ON -DGGML_RS_C_TESTS=OFF) ;;
        *) log "unknown variant $variant"; exit 2 ;;
    esac
    cmd_deps
    cmd_fetch
    export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
    export CCACHE_BASEDIR=$CACHE
    # the same objects are compiled for both variants: ccache makes the second one cheap
    if [ ! -f "$build/build.ninja" ]; then
        log "configuring $variant in $build"
        cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >"$CACHE/configure-$variant.log" 2>&1 \
            || { tail -40 "$CACHE/configure-$variant.log"; exit 1; }
    fi
    # rscpu: the programs that run on the CPU backend alone (the RPC ones need upstream's RPC backend)
    local targets=(ggml-rs-programs all)
    [ "$variant" = rscpu ] && targets=(llama-compare llama-simple llama-bench test-backend-ops test-opt test-llama-archs test-barrier test-rope test-quantize-fns)
    log "building $variant (${targets[*]}; full log: $CACHE/build-$variant.log)"
    with_progress "$variant" "$CACHE/build-$variant.log" \
        cmake --build "$build" --parallel "$JOBS" --target "${targets[@]}" \
        || { grep -E "error|Error" "$CACHE/build-$variant.log" | head -40; tail -20 "$CACHE/build-$variant.log"; exit 1; }
    log "built $variant: $build/bin"
}

# the ggml tree of llama-cpp-sys-2 (GGML_RS_SYS2_*): cargo fetches the crate for the example
# (its Cargo.lock pins the checksum); the tree is read where cargo unpacked it
SYS2_EXAMPLE=$ROOT/examples/llama-cpp-2-generate
SYS2_CACHE=${GGML_RS_CACHE:-$ROOT/.upstream}/$GGML_RS_SYS2_CRATE-$GGML_RS_SYS2_VERSION
SYS2_TARGET=$ROOT/target/$GGML_RS_SYS2_FEATURE
sys2_tree() {
    cargo fetch --locked --manifest-path "$SYS2_EXAMPLE/Cargo.toml" >&2 || return 1
    local manifest version
    manifest=$(cargo metadata --locked --format-version 1 --manifest-path "$SYS2_EXAMPLE/Cargo.toml" \
        | python3 -c 'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == sys.argv[1] and p["version"] == sys.argv[2]))' \
            "$GGML_RS_SYS2_CRATE" "$GGML_RS_SYS2_VERSION") || return 1
    local tree
    tree=$(dirname "$manifest")/llama.cpp
    version=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' "$tree/ggml/CMakeLists.txt" | paste -sd.)
    if [ "$version" != "$GGML_RS_SYS2_GGML_VERSION" ]; then
        log "$tree is ggml $version, the pin says $GGML_RS_SYS2_GGML_VERSION"
        return 1
    fi
    echo "$tree"
}

# build sys2-stock | sys2-ours: ggml alone (cmake/ggml-only), shared, GGML_NATIVE=OFF, installed
# into $SYS2_CACHE/install-<variant> (lib/cmake/ggml: find_package(ggml) for llama-cpp-sys-2)
cmd_build_sys2() {
    local variant=$1 tree build install flags=()
    build=$SYS2_CACHE/build-$variant
    install=$SYS2_CACHE/install-$variant
    case "$variant" in
        stock) flags+=(-DGGML_RS_REPLACE=OFF) ;;
        ours)  flags+=(-DGGML_RS_REPLACE=ON -DGGML_RS_CARGO_FEATURES="$GGML_RS_SYS2_FEATURE") ;;
        *) log "unknown variant sys2-$variant"; exit 2 ;;
    esac
    cmd_deps
    # the pinned tree's tests/test-alloc.cpp builds against 0.26.0 too (cmake/ggml-only)
    cmd_fetch
    flags+=(-DGGML_RS_TEST_ALLOC_SRC="$TREE/tests/test-alloc.cpp")
    tree=$(sys2_tree) || exit 1
    mkdir -p "$SYS2_CACHE"
    export CCACHE_DIR=${CCACHE_DIR:-$SYS2_CACHE/ccache}
    # the profile's library gets its own cargo target dir: target/release stays the default profile's
    export CARGO_TARGET_DIR=$SYS2_TARGET
    # configured every time (a second of cmake): the tree's path comes from cargo's cache
    log "configuring sys2-$variant (ggml $GGML_RS_SYS2_GGML_VERSION from $tree) in $build"
    cmake -S "$ROOT/cmake/ggml-only" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_RS_GGML_DIR="$tree/ggml" -DCMAKE_INSTALL_PREFIX="$install" "${flags[@]}" \
        >"$SYS2_CACHE/configure-$variant.log" 2>&1 || { tail -40 "$SYS2_CACHE/configure-$variant.log"; exit 1; }
    log "building sys2-$variant (full log: $SYS2_CACHE/build-$variant.log)"
    with_progress "sys2-$variant" "$SYS2_CACHE/build-$variant.log" cmake --build "$build" --parallel "$JOBS" \
        || { grep -E "error|Error" "$SYS2_CACHE/build-$variant.log" | head -40; tail -20 "$SYS2_CACHE/build-$variant.log"; exit 1; }
    cmake --install "$build" >/dev/null || exit 1
    log "built sys2-$variant: $install/lib"
}

cmd_paths() {
    cat <<EOF
GGML_RS_PIN=$PIN
GGML_RS_TREE=$TREE
GGML_RS_BUILD_STOCK=$CACHE/build-stock
GGML_RS_BUILD_OURS=$CACHE/build-ours
GGML_RS_BUILD_NATIVE=$CACHE/build-native
GGML_RS_BUILD_RSCPU=$CACHE/build-rscpu
GGML_RS_SYS2_BUILD_STOCK=$SYS2_CACHE/build-stock
GGML_RS_SYS2_BUILD_OURS=$SYS2_CACHE/build-ours
GGML_RS_SYS2_INSTALL_STOCK=$SYS2_CACHE/install-stock
GGML_RS_SYS2_INSTALL_OURS=$SYS2_CACHE/install-ours
GGML_RS_SYS2_LIB=$SYS2_TARGET/release/libggml_rs.so
EOF
}

case "${1:-}" in
    deps)  cmd_deps ;;
    deps-browser) cmd_deps_browser ;;
    fetch) cmd_fetch ;;
    build)
        case "${2:-}" in
            sys2-*) cmd_build_sys2 "${2#sys2-}" ;;
            *) cmd_build "${2:?variant: stock, ours, native, rscpu, sys2-stock or sys2-ours}" ;;
        esac ;;
    paths) cmd_paths ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
esac
