# step 3 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 3 runs this step alone)

step "3. ABI"
check "ABI: symbols, signatures, layouts, headers" "$ROOT/scripts/check_abi.sh"
# the mirrors of ggml's structs (crates/ggml-abi) are proven equal, at compile time, to bindgen's
# translation of the pinned headers (crates/ggml-abi/src/pinned.rs); this regenerates that file
check "ABI: the bindgen translation of the pinned headers is the committed one" bash -o pipefail -c \
    "cd '$ROOT' && GGML_RS_UPSTREAM_TREE='$TREE' GGML_RS_UPSTREAM_REQUIRED=1 cargo test -p ggml-abi-gen --test drift 2>&1 | grep -E '^test result|differs|panicked|SKIPPED'"
