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
#   scripts/upstream.sh fetch-sd      the same for stable-diffusion.cpp's sdist (GGML_RS_SD_PIN_*)
#   scripts/upstream.sh build sd-stock  stable-diffusion.cpp's sd-cli as it is, ggml as shared
#                                     libraries (the image job's reference)
#   scripts/upstream.sh build sd-ours   sd-cli with ggml-base without the two files, linked to this
#                                     library built with ggml 0.9.8's ABI profile (GGML_RS_SD_PIN_PROFILE)
#   scripts/upstream.sh sd-lib        build only that library (cargo); prints its path
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
# stable-diffusion.cpp: its own pin, cache and ggml (0.9.8), and our library built for that ABI
# into a target folder of its own (target/release stays the default profile's)
SD_PIN="$GGML_RS_SD_PIN_PACKAGE-$GGML_RS_SD_PIN_VERSION"
SD_CACHE=${GGML_RS_CACHE:-$ROOT/.upstream}/$SD_PIN
SD_SRC=$SD_CACHE/src
SD_TREE=$SD_SRC/vendor/stable-diffusion.cpp
SD_TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/$GGML_RS_SD_PIN_PROFILE
SD_LIB=$SD_TARGET/release/libggml_rs.so

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
    ldconfig -p 2>/dev/null | grep 'libclang[-.0-9]*\.so' > /dev/null || missing+=(libclang-dev)
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

# fetch_sdist PACKAGE VERSION SDIST SHA256 CACHE TREE GGML_VERSION: downloads the sdist with pip
# into CACHE/sdist (once), checks its sha256, unpacks it into CACHE/src and checks that TREE's
# ggml is GGML_VERSION
fetch_sdist() {
    local package=$1 version=$2 file=$3 want=$4 cache=$5 tree=$6 ggml_version=$7
    local src=$cache/src
    if [ -f "$src/.ggml-rs-unpacked" ]; then
        return 0
    fi
    mkdir -p "$cache/sdist"
    local sdist="$cache/sdist/$file"
    if [ ! -f "$sdist" ]; then
        log "downloading $package==$version (sdist)"
        python3 -m pip download --quiet --no-deps --no-binary "$package" "$package==$version" -d "$cache/sdist"
    fi
    local sum
    sum=$(sha256sum "$sdist" | cut -d' ' -f1)
    if [ "$sum" != "$want" ]; then
        log "checksum mismatch for $sdist: got $sum, want $want"
        rm -f "$sdist"
        exit 1
    fi
    log "sha256 ok ($sum)"
    rm -rf "$src" "$cache/unpack"
    mkdir -p "$cache/unpack"
    tar -xzf "$sdist" -C "$cache/unpack"
    mv "$cache/unpack/${file%.tar.gz}" "$src"
    rmdir "$cache/unpack"
    local found
    found=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' "$tree/ggml/CMakeLists.txt" | paste -sd.)
    if [ "$found" != "$ggml_version" ]; then
        log "the tree is ggml $found, the pin says $ggml_version"
        exit 1
    fi
    touch "$src/.ggml-rs-unpacked"
    log "unpacked ggml $found into $tree"
}

cmd_fetch() {
    fetch_sdist "$GGML_RS_PIN_PACKAGE" "$GGML_RS_PIN_VERSION" "$GGML_RS_PIN_SDIST" "$GGML_RS_PIN_SHA256" \
        "$CACHE" "$TREE" "$GGML_RS_PIN_GGML_VERSION"
}

cmd_fetch_sd() {
    fetch_sdist "$GGML_RS_SD_PIN_PACKAGE" "$GGML_RS_SD_PIN_VERSION" "$GGML_RS_SD_PIN_SDIST" "$GGML_RS_SD_PIN_SHA256" \
        "$SD_CACHE" "$SD_TREE" "$GGML_RS_SD_PIN_GGML_VERSION"
}

# shellcheck source=progress.sh
source "$(dirname "${BASH_SOURCE[0]}")/progress.sh"

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

# fetch_profile P: profile P's sdist, through fetch_sdist (pip, sha256, unpacked into
# <cache>/src; its ggml folder must be version P)
fetch_profile() {
    local p=$1 cache ggml
    cache=$(profile_cache "$p")
    ggml=$cache/src/$(pin_of "$p" GGML_DIR)
    fetch_sdist "$(pin_of "$p" PACKAGE)" "$(pin_of "$p" VERSION)" "$(pin_of "$p" SDIST)" "$(pin_of "$p" SHA256)" "$cache" "${ggml%/ggml}" "$p"
}

# build_profile P stock|ours: profile P's plain ggml tree (with its tests) through this project's
# CMakeLists.txt (GGML_RS_GGML_DIR, GGML_RS_PROFILE), into <cache>/build-ggml-<stock|ours>
build_profile() {
    local p=$1 kind=$2 cache build flags
    cache=$(profile_cache "$p")
    build=$cache/build-ggml-$kind
    flags=(-DGGML_RS_GGML_DIR="$cache/src/$(pin_of "$p" GGML_DIR)" -DGGML_RS_PROFILE="$p")
    case "$kind" in
        # upstream's defaults without GGML_NATIVE: ggml-cpu for SSE4.2 + AVX + AVX2 + BMI2 + FMA +
        # F16C, no AVX-512 (also the opponent of our avx2 kernel set: bench_cpu.sh --isa avx2)
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

# The extra compiler flags of the native build: none, or "-mno-amx-..." where the CPU advertises
# AMX but its tile instructions fault (some virtual machines: the kernel grants the tile state,
# the first LDTILECFG traps). GGML_NATIVE=ON compiles ggml-cpu's AMX kernels from the CPU's flags
# and ggml uses them once the kernel grants the state, so every quantized MUL_MAT of such a build
# crashes; without AMX it is still -march=native (AVX-512, VNNI, ...). scripts/amx_probe.c
# decides.
native_amx_flags() {
    grep -qw amx_tile /proc/cpuinfo 2>/dev/null || return 0
    local probe
    probe=$(mktemp -d)
    if cc -O1 -mamx-tile "$ROOT/scripts/amx_probe.c" -o "$probe/amx_probe" 2>/dev/null && (cd "$probe" && ./amx_probe) 2>/dev/null; then
        rm -rf "$probe"
        return 0
    fi
    rm -rf "$probe"
    log "this CPU advertises AMX but its tile instructions fault here (scripts/amx_probe.c): the native build leaves AMX out"
    printf '%s' "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
}

# build <variant>: variant is `stock`, `ours`, `native` (stock with GGML_NATIVE=ON), `rscpu`, or
# `ggml-<profile>-stock|ours` (another ABI profile's plain ggml tree)
cmd_build() {
    local variant=$1
    if [[ $variant =~ ^ggml-([0-9.]+)-(stock|ours)$ ]]; then
        build_profile "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
        return
    fi

    case "$variant" in sd-*) cmd_build_sd "${variant#sd-}"; return ;; esac
    local build=$CACHE/build-$variant
    local flags=(-DGGML_RS_LLAMA_CPP_DIR="$TREE")
    case "$variant" in
        # upstream's defaults without GGML_NATIVE: ggml-cpu for SSE4.2 + AVX + AVX2 + BMI2 + FMA +
        # F16C, no AVX-512 (also the opponent of our avx2 kernel set: bench_cpu.sh --isa avx2)
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
    if [ "$variant" = native ]; then
        local no_amx
        no_amx=$(native_amx_flags)
        flags+=(-DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx")
        # a tree configured with other flags (AMX on a machine where it faults, or the reverse)
        # is configured again: the flags decide which kernels upstream runs
        [ "$(cat "$build/ggml-rs-native-flags" 2>/dev/null)" = "$no_amx" ] || rm -f "$build/build.ninja"
    fi
    # the same objects are compiled for both variants: ccache makes the second one cheap
    if [ ! -f "$build/build.ninja" ]; then
        log "configuring $variant in $build"
        cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >"$CACHE/configure-$variant.log" 2>&1 \
            || { tail -40 "$CACHE/configure-$variant.log"; exit 1; }
        [ "$variant" = native ] && printf '%s' "$no_amx" > "$build/ggml-rs-native-flags"
    fi
    # rscpu: the programs that run on the CPU backend alone (the RPC ones need upstream's RPC backend)
    local targets=(ggml-rs-programs all)
    [ "$variant" = rscpu ] && targets=(llama-compare llama-perplexity-flush llama-simple llama-bench test-backend-ops test-opt test-llama-archs test-barrier test-rope test-quantize-fns)
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
        ours)  flags+=(-DGGML_RS_REPLACE=ON -DGGML_RS_PROFILE="$GGML_RS_SYS2_GGML_VERSION") ;;
        *) log "unknown variant sys2-$variant"; exit 2 ;;
    esac
    cmd_deps
    # the pinned tree's tests/test-alloc.cpp builds against 0.26.0 too (cmake/ggml-only)
    cmd_fetch
    flags+=(-DGGML_RS_TEST_ALLOC_SRC="$TREE/tests/test-alloc.cpp")
    tree=$(sys2_tree) || exit 1
    mkdir -p "$SYS2_CACHE"
    export CCACHE_DIR=${CCACHE_DIR:-$SYS2_CACHE/ccache}
    # the profile's library gets its own cargo target dir (target/abi-0-26-0): target/release stays
    # the default profile's
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

# our library with stable-diffusion.cpp's ABI profile (cargo is incremental: cheap when unchanged)
cmd_sd_lib() {
    log "building libggml_rs with --features $GGML_RS_SD_PIN_PROFILE into $SD_TARGET"
    # cargo's own progress (a crate a line) goes to stderr; stdout is the library's path
    (cd "$ROOT" && CARGO_TARGET_DIR=$SD_TARGET nice cargo build --release --lib --jobs "$JOBS" --features "$GGML_RS_SD_PIN_PROFILE" >&2) \
        && [ -f "$SD_LIB" ] || { log "cargo build --features $GGML_RS_SD_PIN_PROFILE failed"; exit 1; }
    echo "$SD_LIB"
}

# build_sd <stock|ours>: stable-diffusion.cpp's sd-cli (cmake/sd/CMakeLists.txt wraps the tree)
cmd_build_sd() {
    local variant=$1
    local build=$SD_CACHE/build-$variant
    local flags=(-DGGML_RS_SD_DIR="$SD_TREE")
    case "$variant" in
        stock) flags+=(-DGGML_RS_REPLACE=OFF) ;;
        ours)  flags+=(-DGGML_RS_REPLACE=ON -DGGML_RS_LIB="$SD_LIB") ;;
        *) log "unknown variant sd-$variant"; exit 2 ;;
    esac
    cmd_deps
    cmd_fetch_sd
    [ "$variant" = ours ] && cmd_sd_lib >/dev/null
    export CCACHE_DIR=${CCACHE_DIR:-$SD_CACHE/ccache}
    export CCACHE_BASEDIR=$SD_CACHE
    if [ ! -f "$build/build.ninja" ]; then
        log "configuring sd-$variant in $build"
        cmake -S "$ROOT/cmake/sd" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >"$SD_CACHE/configure-$variant.log" 2>&1 \
            || { tail -40 "$SD_CACHE/configure-$variant.log"; exit 1; }
    fi
    log "building sd-$variant (sd-cli; full log: $SD_CACHE/build-$variant.log)"
    with_progress "sd-$variant" "$SD_CACHE/build-$variant.log" \
        cmake --build "$build" --parallel "$JOBS" --target sd-cli \
        || { grep -E "error|Error" "$SD_CACHE/build-$variant.log" | head -40; tail -20 "$SD_CACHE/build-$variant.log"; exit 1; }
    log "built sd-$variant: $build/bin"
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
GGML_RS_SD_TREE=$SD_TREE
GGML_RS_SD_BUILD_STOCK=$SD_CACHE/build-stock
GGML_RS_SD_BUILD_OURS=$SD_CACHE/build-ours
GGML_RS_SD_LIB=$SD_LIB
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
    fetch-sd) cmd_fetch_sd ;;
    build)
        case "${2:-}" in
            sys2-*) cmd_build_sys2 "${2#sys2-}" ;;
            *) cmd_build "${2:?variant: stock, ours, native, rscpu, sd-stock, sd-ours, ggml-<profile>-stock, ggml-<profile>-ours, sys2-stock or sys2-ours}" ;;
        esac ;;
    sd-lib) cmd_sd_lib ;;
    paths) cmd_paths ;;
    *) sed -n '2,26p' "$0"; exit 2 ;;
esac
