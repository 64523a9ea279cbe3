//! ggml-rs's CUDA backend (issue 16): `libggml_rs_cuda.so`, a drop-in for upstream's
//! libggml-cuda and a loadable backend module (`GGML_BACKEND_PATH`, `ggml_backend_load`).
//!
//! * `kernels`: the CUDA C of `kernels/` (embedded) and the compiled-image cache (memory + disk,
//!   keyed by source hash + arch + NVRTC version).
//! * `nvrtc`: compiling a module to a CUBIN for the device (PTX when that fails) and the init
//!   check that NVRTC (and its builtins library) can compile at all.
//! * `dispatch`: which kernel computes a node (one plan for `supports_op` and `graph_compute`).
//! * `launch`: grids and blocks.
//! * `runtime`: the driver (through cudarc's dynamic loading: nothing CUDA is linked), devices,
//!   module loading, the stream that runs plans, cuBLAS GEMM.
//! * `backend`: ggml's C tables (registry, devices, device and pinned-host buffer types, buffers,
//!   backends with async copies and events).
//! * `host`: the pinned host buffer type (`CUDA_Host`).
//! * `exports`: the functions of `ggml-cuda.h` and the module entry points.
//!
//! Without a driver (no libcuda, or cuInit failing) the registry has zero devices and says so in
//! one log line; nothing crashes. `unsafe` is the C boundary's and the CUDA calls'.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::missing_safety_doc)]

pub mod backend;
pub mod dispatch;
pub mod exports;
#[cfg(test)]
mod gpu_tests;
pub mod host;
pub mod kernels;
pub mod launch;
pub mod nvrtc;
pub mod runtime;

/// One line to ggml's logger, or to stderr in a process without ggml-base (a unit test).
pub fn log_line(level: ggml_abi::log::Level, text: &str) {
    if ggml_abi::imports::lookup(c"ggml_log_internal").is_some() {
        ggml_abi::log::log(level, text);
    } else {
        eprint!("{text}");
    }
}
