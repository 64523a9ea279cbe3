//! ggml-rs: ggml's backend layer (`ggml-backend.cpp`) and graph allocator (`ggml-alloc.c`)
//! rewritten in Rust, exporting the same C symbols with the same struct layouts as ggml 0.25.3,
//! so that upstream programs and backends link against it unchanged.
//!
//! Layers: `ffi` (the exports) -> `alloc`, `backend`, `sched` (the logic) -> `ggml` (the one
//! place that knows ggml's C structs).
#![allow(clippy::missing_safety_doc)]

pub mod alloc;
pub mod backend;
pub mod ffi;
pub mod ggml;
pub mod sched;

/// Build-time configuration (see build.rs).
pub mod config {
    include!(concat!(env!("OUT_DIR"), "/config.rs"));
}
