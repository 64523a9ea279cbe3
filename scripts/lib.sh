# Shared by scripts/main.sh, scripts/test.sh and the benchmarks: paths, set-up steps, and a
# small step runner that keeps a summary. Source it; it sets ROOT, BUILD_STOCK, BUILD_OURS, BUILD_NATIVE,
# TREE, LIB, MODELS.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eval "$("$ROOT/scripts/upstream.sh" paths)"
BUILD_STOCK=$GGML_RS_BUILD_STOCK
BUILD_OURS=$GGML_RS_BUILD_OURS
BUILD_NATIVE=$GGML_RS_BUILD_NATIVE
TREE=$GGML_RS_TREE
LIB=$ROOT/target/release/libggml_rs.so
# GGML_RS_MODELS: where the generated models go (default: the cache's models/)
MODELS=${GGML_RS_MODELS:-${GGML_RS_CACHE:-$ROOT/.upstream}/models}
export CARGO_TERM_COLOR=never

SUMMARY=()
FAILED=0

# the steps a run was asked for (scripts/test.sh STEP...): numbers ("13") or words of their titles
# ("aarch64"); none: every step
STEPS_WANTED=()
STEP_TITLE=""
# selected: whether the current step is one of those asked for
selected() {
    [ ${#STEPS_WANTED[@]} -eq 0 ] && return 0
    local w
    for w in "${STEPS_WANTED[@]}"; do
        if [[ "$w" =~ ^[0-9]+$ ]]; then
            [[ "$STEP_TITLE" == "$w. "* ]] && return 0
        elif [[ "${STEP_TITLE,,}" == *"${w,,}"* ]]; then
            return 0
        fi
    done
    return 1
}

step() {
    STEP_TITLE=$*
    selected && printf '\n=== %s\n' "$*"
    return 0
}

# check [--always] NAME COMMAND...: runs the command, records PASS/FAIL with its duration; in a
# step that was not asked for it does nothing, unless --always (the builds other steps need)
check() {
    local always=0
    [ "$1" = --always ] && { always=1; shift; }
    [ $always = 1 ] || selected || return 0
    local name=$1
    shift
    local t0=$SECONDS
    if "$@"; then
        SUMMARY+=("PASS  $(printf '%4ss' $((SECONDS - t0)))  $name")
    else
        SUMMARY+=("FAIL  $(printf '%4ss' $((SECONDS - t0)))  $name")
        FAILED=1
    fi
}

# progress LABEL DONE TOTAL T0: one line on stderr for a long loop (benchmarks): the count, the
# percentage and the time left at the pace since T0 (a $SECONDS value taken before the loop)
progress() {
    local label=$1 done=$2 total=$3 t0=$4 left
    left=$(( (SECONDS - t0) * (total - done) / (done > 0 ? done : 1) ))
    printf '[%s] %d/%d (%d%%), about %d min %d s left\n' "$label" "$done" "$total" $((100 * done / total)) $((left / 60)) $((left % 60)) >&2
}

# skip NAME WHY: records a check that could not run yet, with the reason, in the summary (it does
# not fail the suite, and it is not a pass)
skip() {
    selected || return 0
    SUMMARY+=("SKIP     -  $1 ($2)")
    echo "SKIP: $1: $2"
}

summary() {
    printf '\n=== summary\n'
    printf '%s\n' "${SUMMARY[@]}"
    if [ "$FAILED" -ne 0 ]; then
        # the failed checks again, last: a view that keeps only the tail of the log still names them
        printf '%s\n' "${SUMMARY[@]}" | grep '^FAIL' | sed 's/^/failed: /'
        echo "FAILED"
        return 1
    fi
    echo "all passed"
}

setup_tools() {
    "$ROOT/scripts/upstream.sh" deps
    command -v cargo >/dev/null || { echo "the Rust toolchain (cargo) is required"; exit 1; }
}

build_library() {
    (cd "$ROOT" && cargo build --release --lib)
}

build_upstream() {
    "$ROOT/scripts/upstream.sh" build stock
    "$ROOT/scripts/upstream.sh" build ours
}

# make_models [medium]: the tiny models (and the medium ones, q4_0 too, for benchmarks), deterministic
make_models() {
    local py
    py=$("$ROOT/scripts/pyenv.sh" | tail -n1)
    mkdir -p "$MODELS"
    local sizes="tiny"
    [ "${1:-}" = medium ] && sizes="tiny medium"
    for size in $sizes; do
        for type in f32 f16 q8_0 q4_0; do
            [ "$size" = tiny ] && [ "$type" = q4_0 ] && continue
            [ "$size" = medium ] && [ "$type" = f32 ] && continue
            local out="$MODELS/$size-$type.gguf"
            [ -f "$out" ] || "$py" "$ROOT/scripts/gen_model.py" --size "$size" --type "$type" --seed 1 --out "$out" >&2
        done
    done
}

# stable-diffusion.cpp (the image job): its builds, our library with its ABI profile, the model
SD_BUILD_STOCK=$GGML_RS_SD_BUILD_STOCK
SD_BUILD_OURS=$GGML_RS_SD_BUILD_OURS
SD_LIB=$GGML_RS_SD_LIB
SD_MODEL=$MODELS/flux2-klein-tiny-s1.safetensors
SD_PROFILE=$(sed -n 's/^GGML_RS_SD_PIN_PROFILE=//p' "$ROOT/scripts/pin.env")

# sd_profile_missing: says why the library cannot be built for stable-diffusion.cpp's ggml yet
# (the cargo feature of its ABI profile is not declared); silent and false when it can
sd_profile_missing() {
    grep -q "^$SD_PROFILE *=" "$ROOT/Cargo.toml" && return 1
    echo "waiting for the ggml 0.9.8 ABI profile: Cargo.toml declares no feature $SD_PROFILE"
}

# make_sd_model: the random-weight Flux.2-klein (scripts/gen_sd_model.py, seed 1)
make_sd_model() {
    [ -f "$SD_MODEL" ] && return 0
    local py
    py=$("$ROOT/scripts/pyenv.sh" | tail -n1)
    mkdir -p "$MODELS"
    "$py" "$ROOT/scripts/gen_sd_model.py" --seed 1 --out "$SD_MODEL"
}

# sd_image BIN_DIR OUT.png [THREADS]: one 64x64 image, one step, seed 42, with stable-diffusion.cpp's
# debug log (compute buffer sizes) in OUT.log; further environment comes from the caller
SD_PROMPT="a lighthouse on a rocky coast at dusk"
sd_image() {
    "$1/sd-cli" -m "$SD_MODEL" -p "$SD_PROMPT" -W 64 -H 64 --steps 1 -s 42 -t "${3:-2}" -v -o "$2" > "${2%.png}.log" 2>&1 \
        || { echo "sd-cli ($1) failed:"; tail -n 5 "${2%.png}.log"; return 1; }
}

# make_cpu_models: the models the Rust CPU backend is compared on (scripts/cpu_compare.sh): tiny
# and medium in f32, f16 and q8_0 (gen_model.py), q4_0 and q4_K (llama-quantize of the stock build
# from the f32 one: Q4_0, and Q4_K_M, whose output and some attn_v/ffn_down tensors are Q6_K; on
# tiny, whose rows (64, 172) are no multiple of 256, Q4_K_M falls back to Q5_0 / Q8_0 / F16).
make_cpu_models() {
    local py size type out
    py=$("$ROOT/scripts/pyenv.sh" | tail -n1)
    mkdir -p "$MODELS"
    for size in tiny medium; do
        for type in f32 f16 q8_0; do
            out="$MODELS/$size-$type.gguf"
            [ -f "$out" ] || "$py" "$ROOT/scripts/gen_model.py" --size "$size" --type "$type" --seed 1 --out "$out" >&2 || return 1
        done
        quantize_model "$size-f32" "$size" 1 || return 1
    done
}

# quantize_model SOURCE SIZE THREADS: $MODELS/SIZE-q4_0 and SIZE-q4_K (Q4_K_M) from
# $MODELS/SOURCE.gguf by the stock build's llama-quantize, each once
quantize_model() {
    local type out ftype
    for type in q4_0 q4_K; do
        out="$MODELS/$2-$type.gguf"
        ftype=Q4_0
        [ "$type" = q4_K ] && ftype=Q4_K_M
        [ -f "$out" ] && continue
        echo "[models] quantizing $2-$type" >&2
        if "$BUILD_STOCK/bin/llama-quantize" "$MODELS/$1.gguf" "$out.tmp" "$ftype" "$3" > "$out.log" 2>&1; then
            mv -f "$out.tmp" "$out"
        else
            tail -n 5 "$out.log"
            return 1
        fi
    done
}

# make_large_models: the ~1B-shaped llama (gen_model.py's "large": n_embd 2048 and n_ff 5632 like
# a 1B llama, 8 layers, 510M parameters) whose weights do not fit in any cache, for memory-bound
# token generation: f16 and q8_0 generated, q4_0 and q4_K (Q4_K_M) by the stock build's llama-quantize
make_large_models() {
    local py type out
    py=$("$ROOT/scripts/pyenv.sh" | tail -n1)
    mkdir -p "$MODELS"
    for type in f16 q8_0; do
        out="$MODELS/large-$type.gguf"
        [ -f "$out" ] && continue
        echo "[models] generating large-$type (about a minute)" >&2
        "$py" "$ROOT/scripts/gen_model.py" --size large --type "$type" --seed 1 --out "$out.tmp" >&2 && mv -f "$out.tmp" "$out" || return 1
    done
    quantize_model large-f16 large 2
}

# a free TCP port on loopback
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_rpc_server BUILD: starts one more of BUILD's ggml-rpc-server on a free port; sets
# RPC_ENDPOINT to its host:port and adds it to RPC_PIDS
RPC_PIDS=()
start_rpc_server() {
    local port
    port=$(free_port)
    "$1/bin/ggml-rpc-server" -H 127.0.0.1 -p "$port" -t 1 > "${TMPDIR:-/tmp}/ggml-rs-rpc-$port.log" 2>&1 &
    RPC_PIDS+=($!)
    RPC_ENDPOINT=127.0.0.1:$port
    for _ in $(seq 50); do
        if (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "rpc-server did not start"
    return 1
}

# stop_rpc_server: stops every server start_rpc_server started
stop_rpc_server() {
    local pid
    for pid in "${RPC_PIDS[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    RPC_PIDS=()
}
