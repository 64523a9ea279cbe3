#!/usr/bin/env bash
# The picture in docs/memory-report.md: the medium llama model (medium-q8_0.gguf) evaluating
# a 12-token prompt through the stock llama.cpp build with this library preloaded and
# GGML_RS_ALLOC_REPORT set (c_tests/report_llama.c: one llama_decode, 2 threads). The report of
# that allocation (the scheduler's, kind sched-alloc) is copied to docs/memory-plan-medium.svg and
# rendered by headless Chromium to docs/memory-plan-medium.png.
#
#   scripts/report_picture.sh        (after scripts/main.sh or scripts/test.sh built everything)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

model=$MODELS/medium-q8_0.gguf
[ -f "$model" ] || make_models medium
[ -f "$LIB" ] || build_library
"$ROOT/scripts/upstream.sh" deps-browser
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -o "$tmp/report_llama" "$ROOT/c_tests/report_llama.c" -I"$TREE/include" -I"$TREE/ggml/include" \
    -L"$BUILD_STOCK/bin" -lllama -lggml-base -Wl,-rpath,"$BUILD_STOCK/bin"
GGML_RS_ALLOC_REPORT="$tmp/reports" LD_PRELOAD="$LIB" "$tmp/report_llama" "$model" \
    "Once upon a time there was a little model" "$tmp/places.tsv" 2> "$tmp/llama.log"
svg=$(ls "$tmp"/reports/*-sched-alloc.svg | tail -n1)
mkdir -p "$ROOT/docs"
cp "$svg" "$ROOT/docs/memory-plan-medium.svg"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1800,620 \
    --screenshot="$ROOT/docs/memory-plan-medium.png" "file://$ROOT/docs/memory-plan-medium.svg" > "$tmp/chromium.log" 2>&1
echo "docs/memory-plan-medium.svg and .png from $(basename "$svg")"
