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
GGML_API const char * ggml_backend_meta_split_axis_name(enum ggml_backend_meta_split_axis split_axis);
GGML_API ggml_backend_dev_t ggml_backend_meta_device(
    ggml_backend_dev_t * devs, size_t n_devs, ggml_backend_meta_get_split_state_t get_split_state, void * get_split_state_ud);
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

/* Implemented by ggml-backend-meta.cpp (ggml-base), not by this library. */
GGML_API void ggml_backend_meta_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);
GGML_API bool ggml_backend_is_meta       (ggml_backend_t backend);
GGML_API bool ggml_backend_buffer_is_meta(ggml_backend_buffer_t buf);
GGML_API bool ggml_backend_buft_is_meta  (ggml_backend_buffer_type_t buft);
GGML_API size_t         ggml_backend_meta_n_backends    (ggml_backend_t meta_backend);
GGML_API ggml_backend_t ggml_backend_meta_simple_backend(ggml_backend_t meta_backend, size_t index);
GGML_API struct ggml_backend_buffer * ggml_backend_meta_alloc_ctx_tensors_from_buft(struct ggml_context * ctx, ggml_backend_buffer_type_t buft);

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
    let ggml_version =
        pin.lines().find_map(|l| l.strip_prefix("GGML_RS_PIN_GGML_VERSION=")).expect("GGML_RS_PIN_GGML_VERSION in scripts/pin.env").trim().to_string();
    println!("cargo:rerun-if-changed=scripts/pin.env");
    fs::write(
        out.join("config.rs"),
        format!(
            "/// GGML_SCHED_MAX_COPIES (pipeline parallelism), as upstream's CMake option.\n\
             pub const SCHED_MAX_COPIES: usize = {copies};\n\
             /// The ggml version whose ABI this build implements.\n\
             pub const GGML_VERSION: &str = \"{ggml_version}\";\n\
             pub const VERSION_STRING: &std::ffi::CStr = c\"ggml-rs {version} (ggml {ggml_version})\";\n"
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
    for h in HEADERS {
        let text = generate(&root, h);
        fs::write(gen_dir.join(h.file), &text).unwrap();
        if bless {
            fs::write(root.join("include").join(h.file), &text).unwrap();
        }
    }
}

fn generate(root: &Path, h: &Header) -> String {
    let mut config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    config.sys_includes = h.includes.iter().map(|s| s.to_string()).collect();
    config.no_includes = true;
    config.after_includes = Some(h.after_includes.to_string());
    config.trailer = if h.trailer.is_empty() { None } else { Some(h.trailer.to_string()) };
    for s in h.foreign_structs {
        config.export.rename.insert(s.to_string(), format!("struct {s}"));
    }
    config.export.exclude.extend(h.exclude.iter().map(|s| s.to_string()));
    config.export.include.extend(h.export.iter().map(|s| s.to_string()));
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
