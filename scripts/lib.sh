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

step() { printf '\n=== %s\n' "$*"; }

# check NAME COMMAND...: runs the command, records PASS/FAIL with its duration
check() {
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

summary() {
    printf '\n=== summary\n'
    printf '%s\n' "${SUMMARY[@]}"
    if [ "$FAILED" -ne 0 ]; then
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
