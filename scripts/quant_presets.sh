#!/usr/bin/env bash
# Every llama-quantize preset the Rust CPU backend computes, on generated models, against
# upstream's native CPU: each preset is made once by the stock build's llama-quantize (kept in
# $MODELS/presets/), then scripts/cpu_compare.sh runs 16 greedy tokens and every position's
# logits on both backends (no perplexity). One line per preset: the tensor types llama-quantize
# chose, then cpu_compare's line.
#
#   scripts/quant_presets.sh [--max-error E | --report] [--fa on|off] [--ctk TYPE] [SOURCE:PRESET...]
#
#   SOURCE:PRESET  medium or moe (scripts/gen_model.py's sizes; rows of 512 / 768 / 1536, whole
#                  super-blocks, so llama-quantize keeps each preset's types) and a preset name of
#                  llama-quantize (default: the list below); a trailing ? prints without gating
#   --max-error E  fail a preset whose logits' normalised error is above E (default 1e-4), or whose
#                  generated or top tokens differ
#   --report       print the comparison, fail only when a run fails (a machine where upstream's
#                  native build runs other float code than ours)
#   --fa, --ctk    flash attention and the K / V cache type (both -ctk and -ctv) of the comparison
#
# IQ1_*, IQ2_*, IQ3_* presets are quantized with an importance matrix of the source model (imatrix_of). Not in
# the list: Q1_0, Q2_0 and NVFP4, which the Rust CPU backend does not compute yet (issue 31).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GATE=(--max-error 1e-4) FA=off CTK=""
LIST=()
while [ $# -gt 0 ]; do
    case "$1" in
        --max-error) GATE=(--max-error "$2"); shift 2 ;;
        --report) GATE=(--gen-report-only); shift ;;
        --fa) FA=$2; shift 2 ;;
        --ctk) CTK=$2; shift 2 ;;
        -*) sed -n '2,21p' "$0"; exit 2 ;;
        *) LIST+=("$1"); shift ;;
    esac
done
if [ ${#LIST[@]} -eq 0 ]; then
    # all gated: logits equal to upstream's on this project's machines (the kernels sum in its
    # orders: the mixture of experts' MUL_MAT_ID too, per expert repacked (Q4_K, MXFP4), tiled
    # (8 or more rows routed to it) or vec_dot's)
    LIST=(medium:Q4_1 medium:Q2_K medium:Q3_K_S medium:Q3_K_M medium:Q3_K_L medium:Q4_K_S medium:Q5_K_S medium:Q5_K_M
          medium:IQ4_NL medium:IQ4_XS medium:TQ1_0 medium:TQ2_0
          moe:Q8_0 moe:Q4_0 moe:Q2_K moe:Q4_K_M moe:Q5_K_M moe:IQ4_NL moe:IQ4_XS moe:MXFP4_MOE
          # the grid types, each at least once (with an importance matrix: imatrix_of)
          medium:IQ2_XXS medium:IQ2_XS medium:IQ2_M medium:IQ3_XXS medium:IQ1_S medium:IQ1_M moe:IQ2_XXS)
fi

# the source models: medium from make_cpu_models, moe generated here
py=$("$ROOT/scripts/pyenv.sh" | tail -n1) || exit 1
mkdir -p "$MODELS/presets"
[ -f "$MODELS/medium-f32.gguf" ] || "$py" "$ROOT/scripts/gen_model.py" --size medium --type f32 --seed 1 --out "$MODELS/medium-f32.gguf" || exit 1
[ -f "$MODELS/moe-f32.gguf" ] || "$py" "$ROOT/scripts/gen_model.py" --size moe --type f32 --seed 1 --out "$MODELS/moe-f32.gguf" || exit 1

# an importance matrix of a source model (the stock build's llama-imatrix over a fixed random
# text, kept beside the presets) for the grid presets (IQ1_*, IQ2_*, IQ3_*: some refuse to
# quantize without one)
imatrix_of() {
    local src=$1 im="$MODELS/presets/$1-imatrix.gguf"
    if [ ! -f "$im" ]; then
        "$py" -c "import random; random.seed(1); w='the quick brown fox jumps over the lazy dog once upon a time there was a little model that generated random text'.split(); print(' '.join(random.choice(w) for _ in range(2000)))" > "$im.txt"
        "$BUILD_STOCK/bin/llama-imatrix" -m "$MODELS/$src-f32.gguf" -f "$im.txt" -o "$im.tmp" -c 128 -t 2 > "$im.log" 2>&1 \
            || { echo "$src: llama-imatrix failed:" >&2; tail -n 3 "$im.log" >&2; return 1; }
        mv -f "$im.tmp" "$im"
    fi
    echo "$im"
}

rc=0 i=0 t0=$SECONDS
for entry in "${LIST[@]}"; do
    gate=("${GATE[@]}")
    [[ "$entry" == *'?' ]] && { entry=${entry%'?'}; gate=(--gen-report-only); }
    src=${entry%%:*} preset=${entry#*:}
    out="$MODELS/presets/$src-$preset.gguf"
    if [ ! -f "$out" ]; then
        im=()
        if [[ "$preset" == IQ[123]* ]]; then
            im=(--imatrix "$(imatrix_of "$src")") || { rc=1; continue; }
        fi
        if ! "$BUILD_STOCK/bin/llama-quantize" "${im[@]}" "$MODELS/$src-f32.gguf" "$out.tmp" "$preset" 2 > "$out.log" 2>&1; then
            echo "$src-$preset: llama-quantize failed:"; tail -n 5 "$out.log"; rc=1; continue
        fi
        mv -f "$out.tmp" "$out"
    fi
    # the types llama-quantize chose, most tensors first ("q4_K 22, q6_K 3, ...")
    types=$(grep -oE 'converting to [A-Za-z0-9_]+' "$out.log" | awk '{n[$3]++} END {for (t in n) print n[t], t}' | sort -rn | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')
    echo "$src-$preset ($types)"
    "$ROOT/scripts/cpu_compare.sh" --no-ppl -n 16 --fa "$FA" ${CTK:+--cache-type "$CTK"} "${gate[@]}" "$out" | sed 's/^/    /' || rc=1
    i=$((i + 1))
    progress presets "$i" "${#LIST[@]}" "$t0"
done
exit $rc
