#!/usr/bin/env bash
# NVRTC for the CUDA backend's kernel test on machines without a CUDA toolkit or GPU: NVIDIA's
# wheel of libnvrtc for CUDA 13.0 (the GPU machine's version), pinned by version and sha256,
# downloaded once with pip and unpacked into the cache. NVRTC compiles to PTX without a driver, so
# `cargo test -p ggml-rs-cuda` can check that every kernel of kernels/ compiles for sm_90.
#
#   scripts/cuda-nvrtc.sh     ensure it, print the folder holding libnvrtc.so.13 (last line)
#
# GGML_RS_CACHE overrides the cache folder (default: <repo>/.upstream). Progress goes to stderr.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${GGML_RS_CACHE:-$ROOT/.upstream}
VERSION=13.0.88
WHEEL=nvidia_cuda_nvrtc-$VERSION-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl
SHA256=ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575
DIR=$CACHE/cuda-nvrtc-$VERSION
LIBDIR=$DIR/nvidia/cu13/lib

log() { printf '[cuda-nvrtc] %s\n' "$*" >&2; }

if [ ! -f "$LIBDIR/libnvrtc.so.13" ]; then
    [ "$(uname -m)" = x86_64 ] || { log "the pinned wheel is for x86_64 only"; exit 1; }
    mkdir -p "$CACHE/cuda-wheels"
    if [ ! -f "$CACHE/cuda-wheels/$WHEEL" ]; then
        log "downloading nvidia-cuda-nvrtc==$VERSION"
        python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_12_x86_64 \
            --python-version 3 --implementation py "nvidia-cuda-nvrtc==$VERSION" -d "$CACHE/cuda-wheels" >&2
    fi
    echo "$SHA256  $CACHE/cuda-wheels/$WHEEL" | sha256sum -c --quiet - >&2 || { log "sha256 mismatch: $WHEEL"; exit 1; }
    rm -rf "$DIR.tmp"
    mkdir -p "$DIR.tmp"
    # the libraries only (the .alt variants are not needed)
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith("nvidia/cu13/lib/lib") and ".alt." not in n]' \
        "$CACHE/cuda-wheels/$WHEEL" "$DIR.tmp"
    rm -rf "$DIR"
    mv "$DIR.tmp" "$DIR"
    log "unpacked into $DIR"
fi
echo "$LIBDIR"
