# step 10 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 10 runs this step alone)

step "10. the Python package"
# a clean venv, the pinned test requirements from PyPI, then `pip install ./python` as a user
# would; pytest loads the ours build's ggml libraries and this checkout's libggml_rs
python_package() {
    local venv=$T/venv-ggml-rs rc
    python3 -m venv "$venv" \
        && "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$ROOT/python/requirements-test.txt" \
        && "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input "$ROOT/python" || return 1
    # from outside the source tree, so the installed package is the one imported
    # the Rust CPU backend, which the package loads as a module (Backend.rust_cpu)
    (cd "$ROOT" && cargo build --release -p ggml-rs-cpu 2>&1 | tail -n 1) || return 1
    (cd "$T" && GGML_RS_LIB_DIR="$BUILD_OURS/bin" GGML_RS_LIBRARY="$LIB" GGML_RS_CPU_LIBRARY="$ROOT/target/release/libggml_rs_cpu.so" \
        GGML_RS_CPU_REQUIRED=1 timeout 600 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        "$ROOT/python/tests" > "$T/pytest.log" 2>&1)
    rc=$?
    tail -n 15 "$T/pytest.log"
    # exit 5: no test was collected, which must not pass for a run
    [ $rc = 5 ] && echo "pytest collected no tests"
    return $rc
}
check "python: pip install ./python into a clean venv, pytest on our build" python_package
