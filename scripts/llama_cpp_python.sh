#!/usr/bin/env bash
# A virtualenv with llama-cpp-python, the pin's own package (scripts/pin.env), built from the
# verified sdist WITHOUT its llama.cpp (CMAKE_ARGS=-DLLAMA_BUILD=OFF: only the Python package,
# no compile): it loads libllama from LLAMA_CPP_LIB_PATH, e.g. the stock build's bin/. Run-time
# dependencies are pinned in scripts/requirements-llama-cpp-python.txt. Idempotent and fast when
# nothing changed (a stamp records the sdist's sha256, the requirements and the interpreter).
#
#   scripts/llama_cpp_python.sh    ensure the venv, print its python's path (last line of stdout)
#
# The venv is <cache>/<pin>/venv-python-client (GGML_RS_CACHE as for scripts/upstream.sh).
# Progress goes to stderr so that `PY=$(scripts/llama_cpp_python.sh | tail -n1)` is safe.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=pin.env
source "$ROOT/scripts/pin.env"
CACHE=${GGML_RS_CACHE:-$ROOT/.upstream}/$GGML_RS_PIN_PACKAGE-$GGML_RS_PIN_VERSION
SDIST=$CACHE/sdist/$GGML_RS_PIN_SDIST
VENV=$CACHE/venv-python-client
PY=$VENV/bin/python
REQ=$ROOT/scripts/requirements-llama-cpp-python.txt
STAMP=$VENV/.ggml-rs-stamp

log() { printf '[llama-cpp-python] %s\n' "$*" >&2; }

want_stamp() {
    printf '%s %s %s\n' "$GGML_RS_PIN_SHA256" "$(sha256sum "$REQ" | cut -d' ' -f1)" \
        "$(python3 -c 'import sys; print(sys.version.split()[0])')"
}

up_to_date() {
    [ -x "$PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(want_stamp)" ] && has_package
}

# (importing llama_cpp needs LLAMA_CPP_LIB_PATH: it loads libllama on import)
has_package() {
    "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llama_cpp") is None)' 2>/dev/null
}

install() {
    [ -f "$SDIST" ] || "$ROOT/scripts/upstream.sh" fetch >&2
    [ "$(sha256sum "$SDIST" | cut -d' ' -f1)" = "$GGML_RS_PIN_SHA256" ] || { log "checksum mismatch: $SDIST"; exit 1; }
    rm -rf "$VENV"
    log "creating $VENV"
    # scripts/pyenv.sh has made sure python3 can make virtualenvs (python3-venv)
    "$ROOT/scripts/pyenv.sh" > /dev/null
    python3 -m venv "$VENV" >&2
    "$PY" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQ" >&2
    log "building $GGML_RS_PIN_PACKAGE $GGML_RS_PIN_VERSION from its sdist (Python package only)"
    CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" \
        "$PY" -m pip install --quiet --disable-pip-version-check --no-input --no-deps "$SDIST" >&2
    has_package || { log "llama_cpp was not installed"; exit 1; }
    want_stamp > "$STAMP"
}

mkdir -p "$CACHE"
if ! up_to_date; then
    exec 9>"$CACHE/.venv-python-client.lock"
    command -v flock > /dev/null && flock 9
    up_to_date || install
fi
echo "$PY"
