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
#   scripts/upstream.sh build ggml-<P>-stock   another ABI profile's plain ggml tree (P = 0.9.8:
#                                     stable-diffusion.cpp's ggml) as it is, with its tests
#   scripts/upstream.sh build ggml-<P>-ours    the same, ggml-base without the two files + this
#                                     library built for profile P (cargo feature abi-<P>)
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

# pin_of P KEY: GGML_RS_PIN_<P>_<KEY> of scripts/pin.env (P with dots)
pin_of() {
    local var="GGML_RS_PIN_${1//./_}_$2"
    [ -n "${!var:-}" ] || { log "scripts/pin.env has no $var (profiles: $GGML_RS_PROFILES)"; exit 2; }
    printf '%s' "${!var}"
}

# the cache folder of profile P's tree (keyed by its pin, like the default one)
profile_cache() {
    printf '%s/%s-%s' "${GGML_RS_CACHE:-$ROOT/.upstream}" "$(pin_of "$1" PACKAGE)" "$(pin_of "$1" VERSION)"
}

# fetch_profile P: profile P's sdist (pip; an sdist already in <cache>/sdist is used as it is),
# checked against its sha256 and unpacked into <cache>/src; its ggml folder must be version P
fetch_profile() {
    local p=$1 cache sdist_name sdist sum version ggml
    cache=$(profile_cache "$p")
    [ -f "$cache/src/.ggml-rs-unpacked" ] && return 0
    sdist_name=$(pin_of "$p" SDIST)
    sdist=$cache/sdist/$sdist_name
    mkdir -p "$cache/sdist"
    if [ ! -f "$sdist" ]; then
        case "$sdist_name" in
            *.tar.gz) log "downloading $(pin_of "$p" PACKAGE)==$(pin_of "$p" VERSION) (sdist)"
                python3 -m pip download --quiet --no-deps --no-binary "$(pin_of "$p" PACKAGE)" \
                    "$(pin_of "$p" PACKAGE)==$(pin_of "$p" VERSION)" -d "$cache/sdist" ;;
            *) log "put $sdist_name into $cache/sdist (no download route for it here)"; exit 1 ;;
        esac
    fi
    sum=$(sha256sum "$sdist" | cut -d' ' -f1)
    [ "$sum" = "$(pin_of "$p" SHA256)" ] || { log "checksum mismatch for $sdist: got $sum"; rm -f "$sdist"; exit 1; }
    rm -rf "$cache/src" "$cache/unpack"
    mkdir -p "$cache/unpack"
    tar -xzf "$sdist" -C "$cache/unpack"
    mv "$cache/unpack/"* "$cache/src"
    rmdir "$cache/unpack"
    ggml=$cache/src/$(pin_of "$p" GGML_DIR)
    version=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' "$ggml/CMakeLists.txt" | paste -sd.)
    [ "$version" = "$p" ] || { log "$ggml is ggml $version, the profile is $p"; exit 1; }
    touch "$cache/src/.ggml-rs-unpacked"
    log "unpacked ggml $version into $ggml"
}

# build_profile P stock|ours: profile P's plain ggml tree (with its tests) through this project's
# CMakeLists.txt (GGML_RS_GGML_DIR, GGML_RS_PROFILE), into <cache>/build-ggml-<stock|ours>
build_profile() {
    local p=$1 kind=$2 cache build flags
    cache=$(profile_cache "$p")
    build=$cache/build-ggml-$kind
    flags=(-DGGML_RS_GGML_DIR="$cache/src/$(pin_of "$p" GGML_DIR)" -DGGML_RS_PROFILE="$p")
    case "$kind" in
        stock) flags+=(-DGGML_RS_REPLACE=OFF -DGGML_RS_BUILD_RUST=OFF) ;;
        ours)  flags+=(-DGGML_RS_REPLACE=ON  -DGGML_RS_BUILD_RUST=ON) ;;
        *) log "unknown variant ggml-$p-$kind"; exit 2 ;;
    esac
    cmd_deps
    fetch_profile "$p"
    export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache}
    export CCACHE_BASEDIR=$cache
    if [ ! -f "$build/build.ninja" ]; then
        log "configuring ggml-$p-$kind in $build"
        cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >"$cache/configure-$kind.log" 2>&1 \
            || { tail -40 "$cache/configure-$kind.log"; exit 1; }
    fi
    log "building ggml-$p-$kind (full log: $cache/build-$kind.log)"
    with_progress "ggml-$p-$kind" "$cache/build-$kind.log" cmake --build "$build" --parallel "$JOBS" \
        || { grep -E "error|Error" "$cache/build-$kind.log" | head -40; tail -20 "$cache/build-$kind.log"; exit 1; }
    log "built ggml-$p-$kind: $build"
}

# build <variant>: variant is `stock`, `ours`, `native` (stock with GGML_NATIVE=ON), `rscpu`, or
# `ggml-<profile>-stock|ours` (another ABI profile's plain ggml tree)
cmd_build() {
    local variant=$1
    if [[ $variant =~ ^ggml-([0-9.]+)-(stock|ours)$ ]]; then
        build_profile "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
        return
    fi

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

cmd_paths() {
    cat <<EOF
GGML_RS_PIN=$PIN
GGML_RS_TREE=$TREE
GGML_RS_BUILD_STOCK=$CACHE/build-stock
GGML_RS_BUILD_OURS=$CACHE/build-ours
GGML_RS_BUILD_NATIVE=$CACHE/build-native
GGML_RS_BUILD_RSCPU=$CACHE/build-rscpu
EOF
    # the other profiles' trees and builds (GGML_RS_GGML_<P>, GGML_RS_BUILD_GGML_<P>_STOCK/_OURS)
    local p key cache
    for p in $GGML_RS_PROFILES; do
        [ "$p" = "$GGML_RS_PIN_GGML_VERSION" ] && continue
        key=${p//./_}
        cache=$(profile_cache "$p")
        echo "GGML_RS_GGML_$key=$cache/src/$(pin_of "$p" GGML_DIR)"
        echo "GGML_RS_BUILD_GGML_${key}_STOCK=$cache/build-ggml-stock"
        echo "GGML_RS_BUILD_GGML_${key}_OURS=$cache/build-ggml-ours"
    done
}

case "${1:-}" in
    deps)  cmd_deps ;;
    deps-browser) cmd_deps_browser ;;
    fetch) cmd_fetch ;;
    build) cmd_build "${2:?variant: stock, ours, native, rscpu, ggml-<profile>-stock or ggml-<profile>-ours}" ;;
    paths) cmd_paths ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
esac
