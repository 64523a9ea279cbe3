//! Build script:
//! - writes the build-time configuration (`config.rs`: GGML_SCHED_MAX_COPIES, version string);
//! - gives the shared library its soname;
//! - generates the C headers from the Rust sources with cbindgen into `$OUT_DIR/include`
//!   (the committed copies in `include/` are compared with them by a test; run
//!   `GGML_RS_BLESS_HEADERS=1 cargo build` to update the committed copies).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// One generated header: the Rust files it is made from, what it includes, the names of types
/// defined in other headers (rendered as `struct X`), and declarations of functions that live
/// elsewhere in ggml (copied verbatim after the generated ones).
struct Header {
    file: &'static str,
    sources: &'static [&'static str],
    includes: &'static [&'static str],
    foreign_structs: &'static [&'static str],
    exclude: &'static [&'static str],
    /// types emitted even when no function uses them
    export: &'static [&'static str],
    after_includes: &'static str,
    trailer: &'static str,
}

const BACKEND_API_MACRO: &str = r#"
#ifdef GGML_BACKEND_SHARED
#    if defined(_WIN32) && !defined(__MINGW32__)
#        ifdef GGML_BACKEND_BUILD
#            define GGML_BACKEND_API __declspec(dllexport) extern
#        else
#            define GGML_BACKEND_API __declspec(dllimport) extern
#        endif
#    else
#        define GGML_BACKEND_API __attribute__ ((visibility ("default"))) extern
#    endif
#else
#    define GGML_BACKEND_API extern
#endif
"#;

const BACKEND_ELSEWHERE: &str = r#"
#ifdef __cplusplus
extern "C" {
#endif

/* Implemented by the rest of ggml (ggml-backend-reg.cpp in libggml, ggml-backend-meta.cpp in
   ggml-base), not by this library; declared here so this header replaces upstream's. */
#if !defined(GGML_RS_ABI_0_9_8)
GGML_API const char * ggml_backend_meta_split_axis_name(enum ggml_backend_meta_split_axis split_axis);
GGML_API ggml_backend_dev_t ggml_backend_meta_device(
    ggml_backend_dev_t * devs, size_t n_devs, ggml_backend_meta_get_split_state_t get_split_state, void * get_split_state_ud);
#endif
GGML_API void ggml_backend_register(ggml_backend_reg_t reg);
GGML_API void ggml_backend_device_register(ggml_backend_dev_t device);
GGML_API size_t             ggml_backend_reg_count(void);
GGML_API ggml_backend_reg_t ggml_backend_reg_get(size_t index);
GGML_API ggml_backend_reg_t ggml_backend_reg_by_name(const char * name);
GGML_API size_t             ggml_backend_dev_count(void);
GGML_API ggml_backend_dev_t ggml_backend_dev_get(size_t index);
GGML_API ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);
GGML_API ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type);
GGML_API ggml_backend_t ggml_backend_init_by_name(const char * name, const char * params);
GGML_API ggml_backend_t ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params);
GGML_API ggml_backend_t ggml_backend_init_best(void);
GGML_API ggml_backend_reg_t ggml_backend_load(const char * path);
GGML_API void               ggml_backend_unload(ggml_backend_reg_t reg);
GGML_API void               ggml_backend_load_all(void);
GGML_API void               ggml_backend_load_all_from_path(const char * dir_path);

#ifdef __cplusplus
}
#endif
"#;

const IMPL_ELSEWHERE: &str = r#"
#ifdef __cplusplus
extern "C" {
#endif

#if !defined(GGML_RS_ABI_0_9_8)
/* Implemented by ggml-backend-meta.cpp (ggml-base), not by this library. */
GGML_API void ggml_backend_meta_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);
GGML_API bool ggml_backend_is_meta       (ggml_backend_t backend);
GGML_API bool ggml_backend_buffer_is_meta(ggml_backend_buffer_t buf);
GGML_API bool ggml_backend_buft_is_meta  (ggml_backend_buffer_type_t buft);
GGML_API size_t         ggml_backend_meta_n_backends    (ggml_backend_t meta_backend);
GGML_API ggml_backend_t ggml_backend_meta_simple_backend(ggml_backend_t meta_backend, size_t index);
#endif
#if !defined(GGML_RS_ABI_0_9_8) && !defined(GGML_RS_ABI_0_26_0)
/* 0.25.3 only: 0.26.0's meta buffer type places a list of tensors itself (alloc_buffer_n). */
GGML_API struct ggml_backend_buffer * ggml_backend_meta_alloc_ctx_tensors_from_buft(struct ggml_context * ctx, ggml_backend_buffer_type_t buft);
#endif

#ifdef __cplusplus
}
#endif

/* Dynamic loading support for backends (see upstream's ggml-backend-impl.h). */
#ifdef GGML_BACKEND_DL
#    ifdef __cplusplus
#        define GGML_BACKEND_DL_IMPL(reg_fn)                             \
            extern "C" {                                                 \
            GGML_BACKEND_API ggml_backend_reg_t ggml_backend_init(void); \
            }                                                            \
            ggml_backend_reg_t ggml_backend_init(void) {                 \
                return reg_fn();                                         \
            }
#        define GGML_BACKEND_DL_SCORE_IMPL(score_fn)       \
            extern "C" {                                   \
            GGML_BACKEND_API int ggml_backend_score(void); \
            }                                              \
            int ggml_backend_score(void) {                 \
                return score_fn();                         \
            }
#    else
#        define GGML_BACKEND_DL_IMPL(reg_fn)                              \
            GGML_BACKEND_API ggml_backend_reg_t ggml_backend_init(void);  \
            ggml_backend_reg_t                  ggml_backend_init(void) { \
                return reg_fn();                                          \
            }
#        define GGML_BACKEND_DL_SCORE_IMPL(score_fn)        \
            GGML_BACKEND_API int ggml_backend_score(void);  \
            int                  ggml_backend_score(void) { \
                return score_fn();                          \
            }
#    endif
#else
#    define GGML_BACKEND_DL_IMPL(reg_fn)
#    define GGML_BACKEND_DL_SCORE_IMPL(score_fn)
#endif
"#;

const HEADERS: &[Header] = &[
    Header {
        file: "ggml-alloc.h",
        sources: &["crates/ggml-abi/src/abi_alloc.rs", "src/ffi/alloc.rs"],
        includes: &["ggml.h"],
        foreign_structs: &["ggml_backend_buffer_type", "ggml_backend_buffer", "ggml_backend"],
        exclude: &[],
        export: &["ggml_tallocr", "ggml_gallocr_t"],
        after_includes: "",
        trailer: "",
    },
    Header {
        file: "ggml-backend.h",
        sources: &[
            "crates/ggml-abi/src/abi_backend.rs",
            "src/ffi/buffer.rs",
            "src/ffi/tensor.rs",
            "src/ffi/backend.rs",
            "src/ffi/sched.rs",
            "src/ffi/graph_copy.rs",
        ],
        includes: &["ggml.h", "ggml-alloc.h"],
        foreign_structs: &["ggml_backend_event", "ggml_backend_reg", "ggml_backend_device", "ggml_backend_buffer_type", "ggml_backend_buffer", "ggml_backend"],
        exclude: &[],
        export: &[
            "ggml_backend_buffer_usage",
            "ggml_backend_dev_type",
            "ggml_backend_dev_caps",
            "ggml_backend_dev_props",
            "ggml_backend_comm_init_t",
            "ggml_backend_comm_free_t",
            "ggml_backend_comm_allreduce_tensor_t",
            "ggml_backend_split_buffer_type_t",
            "ggml_backend_set_n_threads_t",
            "ggml_backend_dev_get_extra_bufts_t",
            "ggml_backend_set_abort_callback_t",
            "ggml_backend_feature",
            "ggml_backend_get_features_t",
            "ggml_backend_meta_split_axis",
            "ggml_backend_meta_split_state",
            "ggml_backend_meta_get_split_state_t",
            "GGML_BACKEND_META_MAX_DEVICES",
        ],
        after_includes: BACKEND_API_MACRO,
        trailer: BACKEND_ELSEWHERE,
    },
    Header {
        file: "ggml-backend-impl.h",
        sources: &["crates/ggml-abi/src/abi_impl.rs", "src/ffi/impl_api.rs"],
        includes: &["ggml-backend.h"],
        foreign_structs: &["ggml_backend_dev_props"],
        exclude: &[],
        export: &[
            "GGML_BACKEND_API_VERSION",
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
            "ggml_backend_init_t",
            "ggml_backend_score_t",
        ],
        after_includes: "",
        trailer: IMPL_ELSEWHERE,
    },
    Header {
        file: "ggml-rs.h",
        sources: &["src/ffi/ext.rs"],
        includes: &["ggml-backend.h"],
        foreign_structs: &[],
        exclude: &[],
        export: &["ggml_rs_abi_entry"],
        after_includes: "",
        trailer: "",
    },
];

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    // configuration
    println!("cargo:rerun-if-env-changed=GGML_SCHED_MAX_COPIES");
    let copies: usize = env::var("GGML_SCHED_MAX_COPIES").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let version = env::var("CARGO_PKG_VERSION").unwrap();
    let pin = fs::read_to_string(root.join("scripts/pin.env")).expect("scripts/pin.env");
    let default_version =
        pin.lines().find_map(|l| l.strip_prefix("GGML_RS_PIN_GGML_VERSION=")).expect("GGML_RS_PIN_GGML_VERSION in scripts/pin.env").trim().to_string();
    println!("cargo:rerun-if-changed=scripts/pin.env");
    // the ABI profile (README "Profiles"): a cargo feature abi-<version> (ggml-abi rejects two),
    // else the default pin; its headers are committed under include/ (default) or include/<version>/
    let profile = PROFILES.iter().find(|p| env::var_os(format!("CARGO_FEATURE_{}", p.feature.to_uppercase().replace('-', "_"))).is_some());
    let ggml_version = profile.map_or(default_version, |p| p.version.to_string());
    let header_dir = profile.map_or("include".to_string(), |p| format!("include/{}", p.version));
    fs::write(
        out.join("config.rs"),
        format!(
            "/// GGML_SCHED_MAX_COPIES (pipeline parallelism), as upstream's CMake option.\n\
             pub const SCHED_MAX_COPIES: usize = {copies};\n\
             /// The ggml version whose ABI this build implements.\n\
             pub const GGML_VERSION: &str = \"{ggml_version}\";\n\
             pub const VERSION_STRING: &std::ffi::CStr = c\"ggml-rs {version} (ggml {ggml_version})\";\n\
             /// Where this profile's headers are committed (relative to the repository).\n\
             pub const HEADER_DIR: &str = \"{header_dir}\";\n"
        ),
    )
    .unwrap();

    // the shared library is libggml_rs.so for the dynamic linker too
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libggml_rs.so");

    // headers
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=GGML_RS_BLESS_HEADERS");
    let bless = env::var("GGML_RS_BLESS_HEADERS").is_ok_and(|v| v == "1");
    let gen_dir = out.join("include");
    fs::create_dir_all(&gen_dir).unwrap();
    let defined: Vec<&str> = profile.iter().map(|p| p.define).collect();
    for h in HEADERS {
        let not_exported = profile.map_or(&[][..], |p| p.not_exported);
        let text = resolve_profile_conditions(&generate(&root, h, not_exported), &defined);
        fs::write(gen_dir.join(h.file), &text).unwrap();
        if bless {
            fs::create_dir_all(root.join(&header_dir)).unwrap();
            fs::write(root.join(&header_dir).join(h.file), &text).unwrap();
        }
    }
}

/// An ABI profile other than the default pin: its cargo feature, ggml version, and the C macro
/// cbindgen writes for the feature's cfg (cbindgen.toml `[defines]`).
struct Profile {
    feature: &'static str,
    version: &'static str,
    define: &'static str,
    /// types the Rust side keeps for itself in this profile but its C headers do not have
    not_exported: &'static [&'static str],
}

const PROFILES: &[Profile] = &[
    // 0.9.8's graph_optimize takes no params (the scheduler still builds them for itself)
    Profile { feature: "abi-0-9-8", version: "0.9.8", define: "GGML_RS_ABI_0_9_8", not_exported: &["ggml_backend_graph_optimize_params"] },
    Profile { feature: "abi-0-26-0", version: "0.26.0", define: "GGML_RS_ABI_0_26_0", not_exported: &[] },
];

/// Resolves the `#if` blocks whose condition names a profile macro (cbindgen writes a profile
/// cfg as `#if defined(X)`, `#if !defined(X)`, or `&&`/`||` of them), keeping what the profile
/// being built (`defined`: its macro, none for the default) has: each profile's headers are
/// exactly its version's. Other preprocessor blocks pass through untouched.
fn resolve_profile_conditions(text: &str, defined: &[&str]) -> String {
    let is_ours = |cond: &str| PROFILES.iter().any(|p| cond.contains(p.define));
    // per open #if: None when it is not ours, Some(keep) for ours
    let mut stack: Vec<Option<bool>> = Vec::new();
    let mut out = String::new();
    // a blank line right after a dropped item, when one precedes the item too, is dropped as well
    let mut dropped = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        let visible = stack.iter().all(|s| s.unwrap_or(true));
        if visible && t.is_empty() && dropped && out.ends_with("\n\n") {
            dropped = false;
            continue;
        }
        if let Some(cond) = t.strip_prefix("#if ").filter(|c| is_ours(c)) {
            stack.push(Some(eval_condition(cond, defined)));
            continue;
        }
        if t.starts_with("#if") {
            stack.push(None);
        } else if t.starts_with("#else") || t.starts_with("#elif") {
            if let Some(Some(keep)) = stack.last_mut() {
                assert!(t.starts_with("#else"), "build.rs: #elif in a profile condition");
                *keep = !*keep;
                continue;
            }
        } else if t.starts_with("#endif") {
            if let Some(Some(_)) = stack.pop() {
                continue;
            }
        }
        if visible {
            out.push_str(line);
            dropped = false;
        } else {
            dropped = true;
        }
    }
    assert!(stack.is_empty(), "build.rs: unbalanced #if in a generated header");
    // cbindgen closes a field that has a cfg after the #endif (`#endif` / `;`): put the `;` back
    // on its field, or drop it with the field
    let mut tidy: Vec<String> = Vec::new();
    for line in out.lines() {
        if line.trim() == ";" {
            let prev = tidy.last_mut().expect("a field before its `;`");
            let p = prev.trim_end();
            if !(p.ends_with(';') || p.ends_with('{') || p.trim_start().starts_with("//") || p.is_empty()) {
                prev.push(';');
            }
            continue;
        }
        tidy.push(line.to_string());
    }
    let mut text = tidy.join("\n");
    if out.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Evaluates cbindgen's condition syntax: `defined(X)`, `!`, `&&`, `||`, parentheses.
fn eval_condition(cond: &str, defined: &[&str]) -> bool {
    fn expr(s: &mut &str, d: &[&str]) -> bool {
        let mut v = term(s, d);
        loop {
            *s = s.trim_start();
            if let Some(r) = s.strip_prefix("||") {
                *s = r;
                let w = term(s, d);
                v = v || w;
            } else {
                return v;
            }
        }
    }
    fn term(s: &mut &str, d: &[&str]) -> bool {
        let mut v = atom(s, d);
        loop {
            *s = s.trim_start();
            if let Some(r) = s.strip_prefix("&&") {
                *s = r;
                let w = atom(s, d);
                v = v && w;
            } else {
                return v;
            }
        }
    }
    fn atom(s: &mut &str, d: &[&str]) -> bool {
        *s = s.trim_start();
        if let Some(r) = s.strip_prefix('!') {
            *s = r;
            return !atom(s, d);
        }
        if let Some(r) = s.strip_prefix("defined(") {
            let end = r.find(')').expect("defined(X)");
            let name = &r[..end];
            *s = &r[end + 1..];
            return d.contains(&name);
        }
        let r = s.strip_prefix('(').unwrap_or_else(|| panic!("build.rs: cannot read the condition at `{s}`"));
        *s = r;
        let v = expr(s, d);
        *s = s.trim_start().strip_prefix(')').expect("a closing parenthesis");
        v
    }
    let mut s = cond;
    let v = expr(&mut s, defined);
    assert!(s.trim().is_empty(), "build.rs: trailing text in the condition `{cond}`");
    v
}

fn generate(root: &Path, h: &Header, not_exported: &[&str]) -> String {
    let mut config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    config.sys_includes = h.includes.iter().map(|s| s.to_string()).collect();
    config.no_includes = true;
    config.after_includes = Some(h.after_includes.to_string());
    config.trailer = if h.trailer.is_empty() { None } else { Some(h.trailer.to_string()) };
    for s in h.foreign_structs {
        config.export.rename.insert(s.to_string(), format!("struct {s}"));
    }
    config.export.exclude.extend(h.exclude.iter().map(|s| s.to_string()));
    config.export.include.extend(h.export.iter().filter(|s| !not_exported.contains(s)).map(|s| s.to_string()));
    config.export.exclude.extend(not_exported.iter().map(|s| s.to_string()));
    let mut builder = cbindgen::Builder::new().with_config(config);
    for src in h.sources {
        println!("cargo:rerun-if-changed={src}");
        builder = builder.with_src(root.join(src));
    }
    let bindings = builder.generate().unwrap_or_else(|e| panic!("cbindgen failed for {}: {e}", h.file));
    let mut buf = Vec::new();
    bindings.write(&mut buf);
    // includes of our own headers use quotes, as upstream does
    String::from_utf8(buf)
        .unwrap()
        .replace("#include <ggml.h>", "#include \"ggml.h\"")
        .replace("#include <ggml-alloc.h>", "#include \"ggml-alloc.h\"")
        .replace("#include <ggml-backend.h>", "#include \"ggml-backend.h\"")
}
