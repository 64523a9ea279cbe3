#!/usr/bin/env bash
# Whole models on the Rust CPU backend against upstream's CPU backend (the native build,
# GGML_NATIVE=ON): for each model, greedy generation of N tokens with every position's logits
# (llama-compare) and llama-perplexity on a fixed text, on both; one line per model.
#
#   scripts/cpu_compare.sh [-n N_GEN] [-c PPL_CTX] [--chunks N] [--max-error E] [--gen-report-only]
#                          [--fa on|off|auto] [--cache-type T] [--long-prompt] [--no-ppl] [--calibrate] MODEL.gguf...
#
#   -n N_GEN       tokens generated greedily (default 64)
#   -c PPL_CTX     llama-perplexity's context (default 128); --chunks caps its chunks (default all)
#   --max-error E  fail a model whose logits' normalised error is above E (default: not checked;
#                  the generated tokens and every position's top token must always be the same)
#   --gen-report-only  print the generation's comparison, fail on the perplexity only (the medium
#                  random-weight models: their top tokens are near ties, and upstream's own AVX2
#                  and AVX-512 builds already generate other tokens on them; see docs/cpu-backend.md)
#   --fa MODE      llama-compare's flash attention (default off; llama.cpp's own default is auto,
#                  which is on for the CPU; llama-perplexity always runs with its default)
#   --cache-type T the KV cache's K and V type (llama-compare -ctk T -ctv T; default f16)
#   --long-prompt  a prompt of 120 words of the text (over 64 tokens: the prompt's attention takes
#                  upstream's tiled path) instead of the one-line default
#   --no-ppl       generation only
#   --no-nodes     skip the per-node comparison: by default both builds also write every node of
#                  the prompt's graphs with the hash of its bytes (llama-compare --nodes), and the
#                  line says which node is the first whose bytes differ (where the two backends'
#                  arithmetic first parts: the op to make exact next) and how many differ
#   --calibrate    also run upstream's AVX2-only stock build against the native one, and ours
#                  with the scalar reference kernels (GGML_RS_CPU_SIMD=scalar) against ours: the
#                  error that the same ops summed in another order make on this model
#
# A model fails when a generated token or a top token differs, or the perplexity differs by more
# than 0.1% (or the error is above --max-error). The text is scripts/gen_text.py's (3000 words,
# seed 1); llama-perplexity-flush is upstream's llama-perplexity whose last lines are never lost
# (drivers/llama_perplexity.cpp). GGML_RS_CPU_REF_BIN / GGML_RS_CPU_OURS_BIN / GGML_RS_CPU_CALIB_BIN override the program
# folders (default: the native, rscpu and stock builds' bin/).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N_GEN=64 PPL_CTX=128 CHUNKS=-1 MAX_ERROR="" PPL=1 CALIBRATE=0 GATE_GEN=1 NODES=1 FA=off LONG=0 CACHE=()
MODEL_LIST=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) N_GEN=$2; shift 2 ;;
        -c) PPL_CTX=$2; shift 2 ;;
        --chunks) CHUNKS=$2; shift 2 ;;
        --max-error) MAX_ERROR=$2; shift 2 ;;
        --fa) FA=$2; shift 2 ;;
        --cache-type) CACHE=(-ctk "$2" -ctv "$2"); shift 2 ;;
        --long-prompt) LONG=1; shift ;;
        --no-ppl) PPL=0; shift ;;
        --no-nodes) NODES=0; shift ;;
        --gen-report-only) GATE_GEN=0; shift ;;
        --calibrate) CALIBRATE=1; shift ;;
        -*) sed -n '2,31p' "$0"; exit 2 ;;
        *) MODEL_LIST+=("$1"); shift ;;
    esac
done
[ ${#MODEL_LIST[@]} -gt 0 ] || { sed -n '2,31p' "$0"; exit 2; }
REF=${GGML_RS_CPU_REF_BIN:-$GGML_RS_BUILD_NATIVE/bin}
OURS=${GGML_RS_CPU_OURS_BIN:-$GGML_RS_BUILD_RSCPU/bin}
CALIB=${GGML_RS_CPU_CALIB_BIN:-$BUILD_STOCK/bin}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 "$ROOT/scripts/gen_text.py" --words 3000 --seed 1 --out "$T/text.txt"
PROMPT="Once upon a time there was a little model that generated random text"
[ "$LONG" = 1 ] && PROMPT=$(tr -s ' \n' ' ' < "$T/text.txt" | cut -d' ' -f1-120)

# gen BIN LABEL MODEL: llama-compare's tokens and logits into $T/LABEL.{txt,bin} (and with
# --nodes, the prompt's graph nodes into $T/LABEL.nodes)
gen() {
    local nodes=()
    [ "$NODES" = 1 ] && [[ "$2" =~ ^(ref|ours)$ ]] && nodes=(--nodes "$T/$2.nodes")
    "$1/llama-compare" -m "$3" -n "$N_GEN" -t 2 -fa "$FA" "${CACHE[@]}" -p "$PROMPT" --logits "$T/$2.bin" "${nodes[@]}" > "$T/$2.txt" 2> "$T/$2.err" \
        || { echo "llama-compare ($2) failed:"; tail -n 3 "$T/$2.err"; return 1; }
}

# the first node of the prompt's graphs whose bytes differ between the two builds' dumps
first_node() {
    python3 - "$1" "$2" <<'PY'
import sys
ref, ours = (open(p).read().splitlines() for p in sys.argv[1:3])
if len(ref) != len(ours):
    print(f"the graphs differ: {len(ref)} nodes upstream, {len(ours)} ours")
    sys.exit()
diff = [i for i, (a, b) in enumerate(zip(ref, ours)) if a.split()[-1] != b.split()[-1]]
if not diff:
    print(f"all {len(ref)} nodes of the prompt's graphs identical, bit for bit")
else:
    node = " ".join(ref[diff[0]].split()[1:-1])
    print(f"first node that differs: #{diff[0]} {node}; {len(diff)} of {len(ref)} nodes differ")
PY
}

# ppl BIN MODEL: the final perplexity estimate
ppl() {
    "$1/llama-perplexity-flush" -m "$2" -f "$T/text.txt" -c "$PPL_CTX" --chunks "$CHUNKS" -t 2 > "$T/ppl.log" 2>&1 \
        && grep -o 'Final estimate: PPL = [0-9.]*' "$T/ppl.log" | awk '{print $NF}' \
        || { tail -n 3 "$T/ppl.log" >&2; return 1; }
}

status=0
for model in "${MODEL_LIST[@]}"; do
    name=$(basename "$model" .gguf)
    ok=1
    if gen "$REF" ref "$model" && gen "$OURS" ours "$model"; then
        line=$(python3 "$ROOT/scripts/compare_logits.py" ${MAX_ERROR:+--max-error "$MAX_ERROR"} "$T/ref.txt" "$T/ref.bin" "$T/ours.txt" "$T/ours.bin") || ok=$((1 - GATE_GEN))
        printf '%-14s generation: %s\n' "$name" "$line"
        [ "$NODES" = 1 ] && printf '%-14s %s\n' "" "$(first_node "$T/ref.nodes" "$T/ours.nodes")"
        if [ "$CALIBRATE" = 1 ] && gen "$CALIB" calib "$model"; then
            printf '%-14s upstream AVX2 vs native: %s\n' "" "$(python3 "$ROOT/scripts/compare_logits.py" "$T/ref.txt" "$T/ref.bin" "$T/calib.txt" "$T/calib.bin")"
        fi
        if [ "$CALIBRATE" = 1 ] && GGML_RS_CPU_SIMD=scalar gen "$OURS" scalar "$model"; then
            printf '%-14s ours scalar vs SIMD:      %s\n' "" "$(python3 "$ROOT/scripts/compare_logits.py" "$T/ours.txt" "$T/ours.bin" "$T/scalar.txt" "$T/scalar.bin")"
        fi
    else
        ok=0
    fi
    if [ "$PPL" = 1 ]; then
        if up=$(ppl "$REF" "$model") && ours=$(ppl "$OURS" "$model") && [ -n "$up" ] && [ -n "$ours" ]; then
            rel=$(python3 -c "print(f'{($ours / $up - 1) * 100:+.4f}')")
            printf '%-14s perplexity (-c %s): ours %s, upstream %s (%s%%)\n' "" "$PPL_CTX" "$ours" "$up" "$rel"
            python3 -c "import sys; sys.exit(abs($ours / $up - 1) > 0.001)" || { echo "perplexity differs by more than 0.1%"; ok=0; }
        else
            echo "llama-perplexity failed"
            ok=0
        fi
    fi
    [ "$ok" = 1 ] || { status=1; printf '%-14s FAILED\n' "$name"; }
done
exit $status
