#!/usr/bin/env bash
# The project's Python environment (for scripts/gen_model.py and scripts/gen_sd_model.py): a virtualenv with the exact
# packages of scripts/requirements.txt. Idempotent and fast when nothing changed: a stamp file
# records the sha256 of the requirements (and the interpreter) it was installed from.
#
#   scripts/pyenv.sh        ensure the venv, print its python's path (last line of stdout)
#
# GGML_RS_CACHE overrides the cache folder (default: <repo>/.upstream); the venv is $CACHE/venv.
# All progress goes to stderr so that `PY=$(scripts/pyenv.sh | tail -n1)` is safe.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${GGML_RS_CACHE:-$ROOT/.upstream}
VENV=$CACHE/venv
PY=$VENV/bin/python
REQ=$ROOT/scripts/requirements.txt
STAMP=$VENV/.ggml-rs-requirements

log() { printf '[pyenv] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

pyver() { "$1" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null; }

# What the stamp must say for the venv to count as up to date: the requirements' content and the
# base interpreter (a venv does not survive an upgrade of the python it was made from).
want_stamp() {
    printf '%s %s\n' "$(sha256sum "$REQ" | cut -d' ' -f1)" "$(pyver python3)"
}

up_to_date() {
    [ -x "$PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(want_stamp)" ] && "$PY" -c '' 2>/dev/null
}

make_venv() {
    rm -rf "$VENV"  # a half-made venv (e.g. from a run without ensurepip) would get in the way
    log "creating $VENV"
    python3 -m venv "$VENV" >&2
}

# Debian's python3 has the venv module but not ensurepip (so `python3 -m venv` fails) unless
# python3-venv (python3.X-venv) is installed.
install_venv_package() {
    local ver
    ver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    if ! command -v apt-get >/dev/null; then
        log "python3 cannot make virtualenvs and there is no apt-get: install python$ver's venv module"
        exit 1
    fi
    log "python3 cannot make virtualenvs; installing python3-venv / python$ver-venv"
    # env inside as_root: sudo would drop DEBIAN_FRONTEND from the environment
    as_root apt-get update -qq >&2 || true
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2 \
        || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$ver-venv" >&2
}

install() {
    if [ ! -x "$PY" ] || [ "$(pyver "$PY")" != "$(pyver python3)" ]; then
        if ! { python3 -c 'import venv, ensurepip' 2>/dev/null && make_venv; }; then
            install_venv_package
            make_venv
        fi
    fi
    log "installing $(grep -cvE '^\s*(#|$)' "$REQ") pinned packages from scripts/requirements.txt"
    "$PY" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQ" >&2
    want_stamp >"$STAMP"
}

mkdir -p "$CACHE"
if ! up_to_date; then
    # serialise concurrent first runs (parallel test jobs); the loser re-checks and finds it done
    exec 9>"$CACHE/.venv.lock"
    command -v flock >/dev/null && flock 9
    up_to_date || install
fi
echo "$PY"
