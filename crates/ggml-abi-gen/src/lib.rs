//! Generates `crates/ggml-abi/src/pinned.rs` (and one `pinned_<profile>.rs` per other ABI
//! profile, see [`pinned_file`]): bindgen's translation of the C structs and typedefs ggml-abi
//! mirrors, from the headers of the profile's tree (`ggml.h`, `ggml-impl.h`, `ggml-alloc.h`,
//! `ggml-backend.h`, `ggml-backend-impl.h`), compiled with the profile's `GGML_MAX_NAME`
//! (scripts/pin.env). The output is committed; `tests/drift.rs` regenerates it and fails when the
//! headers and the committed file differ.
//!
//! The generated items are named `<name>_pinned`, and every type they name is ggml-abi's own
//! mirror (the enums ggml passes as `int` included): so the file can prove, at compile time, that
//! each hand-documented mirror (the source of the cbindgen headers) is the same as bindgen's
//! translation — the same fields in the same order with the same types (every function-pointer
//! signature), size and alignment — and each typedef the same type. A mirror that drifts from
//! the pinned headers does not compile.

use std::path::Path;

/// scripts/pin.env, the one place that names the profiles and their facts
pub fn pin_env() -> Result<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pin.env");
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// `KEY=value` of scripts/pin.env
pub fn pin_value(pin: &str, key: &str) -> Option<String> {
    pin.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('='))).map(|v| v.trim().trim_matches('"').to_string())
}

/// The ggml version of the tree at `ggml_dir` (its CMakeLists.txt's GGML_VERSION_MAJOR/MINOR/PATCH).
pub fn tree_version(ggml_dir: &Path) -> Result<String, String> {
    let cmake = ggml_dir.join("CMakeLists.txt");
    let text = std::fs::read_to_string(&cmake).map_err(|e| format!("cannot read {}: {e}", cmake.display()))?;
    let part = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("set(GGML_VERSION_{name} ")).and_then(|v| v.strip_suffix(')')).map(str::to_string))
            .ok_or_else(|| format!("{}: no GGML_VERSION_{name}", cmake.display()))
    };
    Ok(format!("{}.{}.{}", part("MAJOR")?, part("MINOR")?, part("PATCH")?))
}

/// The committed file of a profile, under crates/ggml-abi/src: `pinned.rs` for the default pin,
/// `pinned_<version with underscores>.rs` for the others.
pub fn pinned_file(version: &str) -> Result<String, String> {
    let pin = pin_env()?;
    let default = pin_value(&pin, "GGML_RS_PIN_GGML_VERSION").ok_or("scripts/pin.env: no GGML_RS_PIN_GGML_VERSION")?;
    Ok(if version == default { "pinned.rs".to_string() } else { format!("pinned_{}.rs", version.replace('.', "_")) })
}

/// the structs and typedefs generated (everything else they name is imported from `crate::sys`)
pub const ITEMS: &[&str] = &[
    // ggml.h
    "ggml_tensor",
    "ggml_init_params",
    "ggml_guid",
    "ggml_guid_t",
    // ggml-impl.h
    "ggml_hash_set",
    "ggml_cgraph",
    // ggml-alloc.h
    "ggml_tallocr",
    "ggml_backend_buffer_type_t",
    "ggml_backend_buffer_t",
    "ggml_backend_t",
    // ggml-backend.h
    "ggml_backend_event_t",
    "ggml_backend_graph_plan_t",
    "ggml_backend_reg_t",
    "ggml_backend_dev_t",
    "ggml_backend_dev_caps",
    "ggml_backend_dev_props",
    "ggml_backend_feature",
    // ggml-backend-impl.h
    "ggml_backend_buffer_type_i",
    "ggml_backend_buffer_type",
    "ggml_backend_buffer_i",
    "ggml_backend_buffer",
    "ggml_backend_graph_optimize_params",
    "ggml_backend_i",
    "ggml_backend",
    "ggml_backend_event",
    "ggml_backend_device_i",
    "ggml_backend_device",
    "ggml_backend_reg_i",
    "ggml_backend_reg",
];

/// the C enums passed as `int`, and opaque structs: imported, not generated
pub const IMPORTED: &[&str] =
    &["ggml_type", "ggml_op", "ggml_status", "ggml_backend_buffer_usage", "ggml_backend_dev_type", "ggml_cgraph_eval_order", "ggml_bitset_t", "ggml_context"];

/// the generated Rust source for the ggml tree at `ggml_dir` (the folder with `include/` and
/// `src/`), whose version must be one of the profiles of scripts/pin.env
pub fn generate(ggml_dir: &Path) -> Result<String, String> {
    let include = ggml_dir.join("include");
    let src = ggml_dir.join("src");
    let version = tree_version(ggml_dir)?;
    let pin = pin_env()?;
    let profiles = pin_value(&pin, "GGML_RS_PROFILES").unwrap_or_default();
    if !profiles.split_whitespace().any(|p| p == version) {
        return Err(format!("{} is ggml {version}, not one of the profiles of scripts/pin.env ({profiles})", ggml_dir.display()));
    }
    let max_name_key = format!("GGML_RS_PIN_{}_MAX_NAME", version.replace('.', "_"));
    let max_name = pin_value(&pin, &max_name_key).ok_or_else(|| format!("scripts/pin.env: no {max_name_key}"))?;
    let out_file = pinned_file(&version)?;
    let mut builder = bindgen::Builder::default()
        .header_contents("pinned.h", "#include \"ggml-impl.h\"\n#include \"ggml-alloc.h\"\n#include \"ggml-backend-impl.h\"\n")
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg(format!("-I{}", src.display()))
        .clang_arg("-xc")
        // the tree's users compile ggml with the profile's value (ggml_tensor's size depends on it)
        .clang_arg(format!("-DGGML_MAX_NAME={max_name}"))
        .allowlist_recursively(false)
        // upstream's comments stay upstream's: ggml-abi documents its own re-exports
        .generate_comments(false)
        .layout_tests(true)
        .derive_debug(false)
        .derive_default(false)
        .size_t_is_usize(true)
        .use_core()
        // deterministic on every machine (rustfmt's output depends on its version and config)
        .formatter(bindgen::Formatter::Prettyplease)
        .raw_line(format!("//! bindgen's translation of ggml's C structs at the pin (ggml {version}, GGML_MAX_NAME={max_name}). Generated by"))
        .raw_line(format!("//! `cargo run -p ggml-abi-gen -- <tree>/ggml crates/ggml-abi/src/{out_file}`; do not edit."))
        .raw_line("#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code, clippy::all)]")
        .raw_line("")
        .raw_line("use crate::abi_alloc::*;")
        .raw_line("use crate::abi_backend::*;")
        .raw_line("use crate::abi_impl::*;")
        .raw_line("use crate::sys::*;")
        // the C enums cross the boundary as their integer type (ggml-abi's Rust enums of the same
        // names are for reading them)
        .raw_line("use crate::sys::{BufferUsage as ggml_backend_buffer_usage, DevType as ggml_backend_dev_type};");
    for item in ITEMS {
        builder = builder.allowlist_type(format!("^{item}$"));
    }
    for item in IMPORTED {
        builder = builder.blocklist_type(format!("^{item}$"));
    }
    let bindings = builder.generate().map_err(|e| format!("bindgen failed on {}: {e}", ggml_dir.display()))?;
    Ok(with_proofs(&bindings.to_string()))
}

/// Renames bindgen's items to `<name>_pinned` (so the types their fields name are ggml-abi's
/// mirrors) and appends the compile-time proofs that each mirror equals its pinned translation.
pub fn with_proofs(generated: &str) -> String {
    let mut structs: Vec<(String, Vec<String>)> = Vec::new();
    let mut aliases: Vec<String> = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in generated.lines() {
        if let Some(rest) = line.strip_prefix("pub struct ") {
            let name = rest.trim_end_matches(" {").trim().to_string();
            current = Some((name, Vec::new()));
        } else if let Some((_, fields)) = current.as_mut() {
            if line == "}" {
                structs.push(current.take().expect("inside a struct"));
            } else if let Some(field) = line.strip_prefix("    pub ").and_then(|f| f.split(':').next()) {
                fields.push(field.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("pub type ") {
            aliases.push(rest.split(' ').next().unwrap_or_default().to_string());
        }
    }
    let mut out = String::new();
    for line in generated.lines() {
        let mut line = line.to_string();
        for (name, _) in &structs {
            line = line
                .replace(&format!("pub struct {name} {{"), &format!("pub struct {name}_pinned {{"))
                .replace(&format!("size_of::<{name}>()"), &format!("size_of::<{name}_pinned>()"))
                .replace(&format!("align_of::<{name}>()"), &format!("align_of::<{name}_pinned>()"))
                .replace(&format!("offset_of!({name},"), &format!("offset_of!({name}_pinned,"));
        }
        for name in &aliases {
            line = line.replace(&format!("pub type {name} = "), &format!("pub type {name}_pinned = "));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("\n// Proofs: each mirror of ggml-abi is its pinned translation (fields, order, types, size, alignment).\n");
    for (name, fields) in &structs {
        let moves: Vec<String> = fields.iter().map(|f| format!("{f}: p.{f}")).collect();
        out.push_str(&format!(
            "const _: () = {{\n    fn same(p: &{name}_pinned) -> {name} {{\n        {name} {{ {} }}\n    }}\n    let _ = same;\n    \
             assert!(::core::mem::size_of::<{name}>() == ::core::mem::size_of::<{name}_pinned>());\n    \
             assert!(::core::mem::align_of::<{name}>() == ::core::mem::align_of::<{name}_pinned>());\n}};\n",
            moves.join(", ")
        ));
    }
    for name in &aliases {
        out.push_str(&format!("const _: fn({name}_pinned) -> {name} = |x| x;\n"));
    }
    out
}
