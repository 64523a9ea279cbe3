#!/usr/bin/env bash
# The main job, from a fresh machine with the Rust toolchain:
#   1. build the library (cargo) and the pinned llama.cpp twice: as it is, and with ggml-base
#      built without ggml-backend.cpp/ggml-alloc.c and linked to this library;
#   2. generate the tiny llama model (random weights, working tokenizer, from a seed);
#   3. run the same prompt on both builds and print the two runs side by side: generated text,
#      logits of every position (FNV-1a of the raw floats), compute buffer sizes;
#   4. run the stock shared build again with this library in LD_PRELOAD;
#   5. run it on our core + our Rust CPU backend, no upstream backend library in the process
#      (the rscpu build): same text expected; its logits differ in the last bits (other kernels),
#      so the row shows how many generated tokens and positions' top tokens are the same and the
#      logits' normalised error (scripts/compare_logits.py; against upstream's native CPU, every
#      model and perplexity too: scripts/cpu_compare.sh, suite step 13).
#   6. the image job: stable-diffusion.cpp (its own ggml, 0.9.8) makes a 64x64 image from a
#      random-weight Flux.2-klein (scripts/gen_sd_model.py) as it is, with ggml-base linked to our
#      library built with the 0.9.8 ABI profile, and as it is with that library in LD_PRELOAD:
#      the three PNGs must be byte-identical; the compute buffer sizes side by side.
#   7. a Rust program using llama-cpp-2 (ggml 0.26.0 of llama-cpp-sys-2 0.1.161: the abi-0-26-0
#      profile, scripts/llama_cpp_2.sh) on stock ggml 0.26.0, on ours and with LD_PRELOAD: one row.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

step "build"
setup_tools && build_library && build_upstream && make_models || { echo "build failed"; exit 1; }
(cd "$ROOT" && cargo build --release -p ggml-rs-cpu 2>&1 | tail -n 1) && "$ROOT/scripts/upstream.sh" build rscpu \
    || { echo "build of the Rust CPU backend configuration failed"; exit 1; }
BUILD_RSCPU=$GGML_RS_BUILD_RSCPU

PROMPT=${1:-"Once upon a time there was a little model that generated random text"}
ARGS=(-m "$MODELS/tiny-f32.gguf" -n 32 -c 256 -b 32 -ub 8 -v -p "$PROMPT")
"$BUILD_STOCK/bin/llama-compare" "${ARGS[@]}" --logits "$T/stock.bin" > "$T/stock.txt" 2> "$T/stock.err" || { tail "$T/stock.err"; exit 1; }
"$BUILD_OURS/bin/llama-compare" "${ARGS[@]}" > "$T/ours.txt" 2> "$T/ours.err" || { tail "$T/ours.err"; exit 1; }
GGML_RS_LOG=1 LD_PRELOAD="$LIB" "$BUILD_STOCK/bin/llama-compare" "${ARGS[@]}" > "$T/preload.txt" 2> "$T/preload.err" || exit 1
"$BUILD_RSCPU/bin/llama-compare" "${ARGS[@]}" --logits "$T/rscpu.bin" > "$T/rscpu.txt" 2> "$T/rscpu.err" || { tail "$T/rscpu.err"; exit 1; }

show() { # label file
    printf '%-28s %s\n' "$1" "$(grep '^text:' "$2" | cut -c7- | cut -c1-110)"
}
step "llama.cpp (tiny model, prompt \"$PROMPT\")"
show "upstream ggml-base:" "$T/stock.txt"
show "ggml-rs (link-time):" "$T/ours.txt"
show "ggml-rs (LD_PRELOAD):" "$T/preload.txt"
show "ggml-rs + Rust CPU backend:" "$T/rscpu.txt"
echo
rows=$(grep -c logits_fnv1a64 "$T/stock.txt")
same_rows=$(diff <(grep logits_fnv1a64 "$T/stock.txt") <(grep logits_fnv1a64 "$T/ours.txt") > /dev/null && echo "$rows" || echo 0)
printf '%-28s %s\n' "logits rows identical:" "$same_rows of $rows (link-time), $(cmp -s "$T/stock.txt" "$T/preload.txt" && echo "$rows" || echo 0) of $rows (LD_PRELOAD)"
printf '%-28s %s\n' "Rust CPU backend:" "$(python3 "$ROOT/scripts/compare_logits.py" "$T/stock.txt" "$T/stock.bin" "$T/rscpu.txt" "$T/rscpu.bin")"
# the Rust program (its first build compiles llama.cpp's own part: minutes; cached afterwards)
rust_row=$("$ROOT/scripts/llama_cpp_2.sh" build > "$T/l2-build.log" 2>&1 && "$ROOT/scripts/llama_cpp_2.sh" compare "$MODELS/tiny-f32.gguf")
rust_rc=$?
[ -n "$rust_row" ] || rust_row="build failed: $(tail -n 3 "$T/l2-build.log" | tr '\n' ' ')"
printf '%-28s %s\n' "llama-cpp-2 (ggml 0.26.0):" "$(head -n 1 <<< "$rust_row")"
printf '%-28s %s\n' "LD_PRELOAD marker:" "$(grep -m1 -o 'ggml-rs [0-9.]*: scheduler.*' "$T/preload.err" || echo MISSING)"
echo
printf '%-44s | %s\n' "upstream compute buffers" "ggml-rs compute buffers"
paste -d'|' <(grep 'compute buffer size =' "$T/stock.err" | sed 's/.*: *//' | cut -c1-44) \
            <(grep 'compute buffer size =' "$T/ours.err" | sed 's/.*: *//') | sed 's/|/ | /'
LLAMA_RC=0
if ! grep '^text:' "$T/stock.txt" | cmp -s - <(grep '^text:' "$T/rscpu.txt"); then
    echo; echo "THE RUST CPU BACKEND GENERATED ANOTHER TEXT"; LLAMA_RC=1
elif [ "$rust_rc" != 0 ]; then
    echo; echo "THE LLAMA-CPP-2 PROGRAM DIFFERS ON GGML-RS (0.26.0)"; echo "$rust_row"; LLAMA_RC=1
elif cmp -s "$T/stock.txt" "$T/ours.txt" && cmp -s "$T/stock.txt" "$T/preload.txt"; then
    echo; echo "identical output (core, and the llama-cpp-2 program on 0.26.0); same text on the Rust CPU backend"
else
    echo; echo "OUTPUTS DIFFER"; diff "$T/stock.txt" "$T/ours.txt" | head; LLAMA_RC=1
fi

step "stable-diffusion.cpp (Flux.2-klein, random weights, 64x64, 1 step, seed 42, prompt \"$SD_PROMPT\")"
IMAGES=${GGML_RS_CACHE:-$ROOT/.upstream}/images
mkdir -p "$IMAGES"
"$ROOT/scripts/upstream.sh" build sd-stock && make_sd_model || { echo "build of stable-diffusion.cpp or the model failed"; exit 1; }
sd_image "$SD_BUILD_STOCK/bin" "$IMAGES/stock.png" || exit 1
IMAGE_RC=0
if why=$(sd_profile_missing); then
    printf '%-28s %s\n' "upstream ggml-base:" "$IMAGES/stock.png ($(sha256sum < "$IMAGES/stock.png" | cut -c1-16))"
    printf '%-28s %s\n' "ggml-rs (link-time):" "SKIP: $why"
    printf '%-28s %s\n' "ggml-rs (LD_PRELOAD):" "SKIP: $why"
    grep 'compute buffer size' "$IMAGES/stock.log" | sed 's/.*\] *//; s/.* - //'
else
    "$ROOT/scripts/upstream.sh" build sd-ours || { echo "build of sd-ours failed"; exit 1; }
    sd_image "$SD_BUILD_OURS/bin" "$IMAGES/ours.png" || exit 1
    # stable-diffusion.cpp uses ggml_gallocr directly (no scheduler): the memory plan reports our
    # allocator writes are the proof that the preloaded library is the one that ran
    rm -rf "$T/report"
    GGML_RS_ALLOC_REPORT="$T/report" LD_PRELOAD="$SD_LIB" sd_image "$SD_BUILD_STOCK/bin" "$IMAGES/preload.png" || exit 1
    same() { cmp -s "$IMAGES/stock.png" "$1" && echo "byte-identical" || echo "DIFFERS"; }
    cmp -s "$IMAGES/stock.png" "$IMAGES/ours.png" && cmp -s "$IMAGES/stock.png" "$IMAGES/preload.png" || IMAGE_RC=1
    printf '%-28s %s\n' "upstream ggml-base:" "$IMAGES/stock.png ($(sha256sum < "$IMAGES/stock.png" | cut -c1-16))"
    printf '%-28s %s\n' "ggml-rs (link-time):" "$IMAGES/ours.png: $(same "$IMAGES/ours.png")"
    printf '%-28s %s\n' "ggml-rs (LD_PRELOAD):" "$IMAGES/preload.png: $(same "$IMAGES/preload.png")"
    printf '%-28s %s\n' "LD_PRELOAD marker:" "$(ls "$T/report" 2>/dev/null | grep -c 'json$') plans reported by ggml-rs's allocator (GGML_RS_ALLOC_REPORT)"
    echo
    printf '%-44s | %s\n' "upstream compute buffers" "ggml-rs compute buffers"
    paste -d'|' <(grep 'compute buffer size' "$IMAGES/stock.log" | sed 's/.* - //') \
                <(grep 'compute buffer size' "$IMAGES/ours.log" | sed 's/.* - //') | awk -F'|' '{printf "%-44s | %s\n", $1, $2}'
    # how close each of our plans is to the least any placement can need (the most bytes live at once)
    echo
    python3 - "$T/report" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    plan = json.load(open(path))
    for buf in plan["buffers"]:
        print(f"ggml-rs plan {path.rsplit('/', 1)[1][:4]} ({plan['kind']}, {plan['n_steps']} nodes): "
              f"{buf['size'] / 2**20:.2f} MiB, lower bound {buf['lower_bound'] / 2**20:.2f} MiB")
PY
fi
exit $((LLAMA_RC | IMAGE_RC))
