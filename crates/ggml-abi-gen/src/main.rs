//! `ggml-abi-gen <tree>/ggml <out.rs>`: writes bindgen's translation of the pinned headers
//! (the tree's version picks the profile: crates/ggml-abi/src/pinned.rs for the default pin,
//! pinned_<version>.rs for the others; see `ggml_abi_gen::pinned_file`).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, ggml_dir, out] = args.as_slice() else {
        eprintln!("usage: ggml-abi-gen <upstream tree>/ggml <out.rs>");
        std::process::exit(2);
    };
    match ggml_abi_gen::generate(std::path::Path::new(ggml_dir)) {
        Ok(text) => std::fs::write(out, text).unwrap_or_else(|e| {
            eprintln!("ggml-abi-gen: cannot write {out}: {e}");
            std::process::exit(1)
        }),
        Err(why) => {
            eprintln!("ggml-abi-gen: {why}");
            std::process::exit(1)
        }
    }
}
