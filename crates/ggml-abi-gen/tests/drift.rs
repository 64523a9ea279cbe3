//! The committed `crates/ggml-abi/src/pinned.rs` is what bindgen makes of the pinned headers.
//! Needs the pinned tree (`GGML_RS_UPSTREAM_TREE`: the llama.cpp folder) and libclang; without
//! them the test says why and passes, unless `GGML_RS_UPSTREAM_REQUIRED=1` (the suite sets it).

use std::path::PathBuf;

#[test]
fn committed_pinned_mirrors_match_the_headers() {
    let required = std::env::var("GGML_RS_UPSTREAM_REQUIRED").is_ok_and(|v| v == "1");
    let Some(tree) = std::env::var_os("GGML_RS_UPSTREAM_TREE").map(PathBuf::from) else {
        assert!(!required, "GGML_RS_UPSTREAM_TREE is not set (GGML_RS_UPSTREAM_REQUIRED=1)");
        println!("SKIPPED: GGML_RS_UPSTREAM_TREE (the pinned llama.cpp tree) is not set");
        return;
    };
    let generated = match ggml_abi_gen::generate(&tree.join("ggml")) {
        Ok(text) => text,
        Err(why) if !required => {
            println!("SKIPPED: {why}");
            return;
        }
        Err(why) => panic!("{why}"),
    };
    let committed_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ggml-abi/src/pinned.rs");
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        generated == committed,
        "crates/ggml-abi/src/pinned.rs differs from bindgen's translation of {}: regenerate it with \
         `cargo run -p ggml-abi-gen -- {}/ggml crates/ggml-abi/src/pinned.rs`, then make the mirrors match",
        tree.display(),
        tree.display()
    );
}
