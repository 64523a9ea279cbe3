//! Each committed `crates/ggml-abi/src/pinned*.rs` is what bindgen makes of its profile's headers.
//! Needs the trees and libclang: the default pin's from `GGML_RS_UPSTREAM_TREE` (the llama.cpp
//! folder), another profile P's from `GGML_RS_UPSTREAM_GGML_<P>` (its ggml folder, P with
//! underscores: `GGML_RS_UPSTREAM_GGML_0_9_8`). Without them the test says why and passes,
//! unless `GGML_RS_UPSTREAM_REQUIRED=1` (the suite sets it; then the default tree is required).

use std::path::PathBuf;

#[test]
fn committed_pinned_mirrors_match_the_headers() {
    let required = std::env::var("GGML_RS_UPSTREAM_REQUIRED").is_ok_and(|v| v == "1");
    let pin = ggml_abi_gen::pin_env().expect("scripts/pin.env");
    let default = ggml_abi_gen::pin_value(&pin, "GGML_RS_PIN_GGML_VERSION").expect("GGML_RS_PIN_GGML_VERSION");
    let profiles = ggml_abi_gen::pin_value(&pin, "GGML_RS_PROFILES").expect("GGML_RS_PROFILES");
    let mut checked = 0;
    for profile in profiles.split_whitespace() {
        let ggml_dir = if profile == default {
            std::env::var_os("GGML_RS_UPSTREAM_TREE").map(|t| PathBuf::from(t).join("ggml"))
        } else {
            std::env::var_os(format!("GGML_RS_UPSTREAM_GGML_{}", profile.replace('.', "_"))).map(PathBuf::from)
        };
        let Some(ggml_dir) = ggml_dir else {
            assert!(!(required && profile == default), "GGML_RS_UPSTREAM_TREE is not set (GGML_RS_UPSTREAM_REQUIRED=1)");
            println!("SKIPPED: profile {profile}: its tree is not set");
            continue;
        };
        let file = ggml_abi_gen::pinned_file(profile).expect("the profile's file");
        let generated = match ggml_abi_gen::generate(&ggml_dir) {
            Ok(text) => text,
            Err(why) if !required => {
                println!("SKIPPED: profile {profile}: {why}");
                continue;
            }
            Err(why) => panic!("profile {profile}: {why}"),
        };
        let version = ggml_abi_gen::tree_version(&ggml_dir).expect("generate read it");
        assert_eq!(version, profile, "{} is ggml {version}, not the profile's {profile}", ggml_dir.display());
        let committed_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ggml-abi/src").join(&file);
        let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
        assert!(
            generated == committed,
            "crates/ggml-abi/src/{file} differs from bindgen's translation of {}: regenerate it with \
             `cargo run -p ggml-abi-gen -- {} crates/ggml-abi/src/{file}`, then make the mirrors match",
            ggml_dir.display(),
            ggml_dir.display()
        );
        checked += 1;
    }
    println!("profiles checked: {checked}");
}
