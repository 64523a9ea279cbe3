//! ggml's C ABI, the one place that knows ggml's C structs: `#[repr(C)]` mirrors (`sys`,
//! `abi_*`), checked handles over backend objects (`handles`), typed views over tensors and
//! graphs (`tensor`, `graph`), ggml's logger and abort path (`log`), and the lookup of
//! ggml-base's functions on first use (`imports`, with the weak table build.rs compiles), and the adapter from a
//! backend written in Rust (three traits) to ggml's backend tables (`rust_backend`). All
//! `unsafe` that touches C memory outside the export layer of ggml-rs lives here.
//!
//! ggml-rs (allocator, scheduler, exports) depends on this crate; so will the Rust backends
//! (they depend on it alone, never on the allocator or the scheduler). It links nothing of ggml
//! at build time.
#![allow(clippy::missing_safety_doc)]
// The handles hand raw data and graph pointers on to the backends' C functions, which read them;
// the contract on those pointers (valid for the size given) is the C caller's, checked where it
// enters, in ggml-rs's export layer. Marking every such method `unsafe` would only move the same
// promise into the safe layers above.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

#[cfg(all(feature = "abi-0-9-8", feature = "abi-0-26-0"))]
compile_error!("ggml-abi: the ABI profiles are exclusive: enable at most one of the features abi-0-9-8, abi-0-26-0 (README \"Profiles\")");

pub mod abi_alloc;
pub mod abi_backend;
pub mod abi_impl;
pub mod context;
pub mod graph;
pub mod handles;
pub mod imports;
pub mod log;
/// bindgen's translation of the pinned headers and the proofs that the mirrors equal it
/// (generated, one file per ABI profile)
#[rustfmt::skip]
#[cfg_attr(feature = "abi-0-9-8", path = "pinned_0_9_8.rs")]
#[cfg_attr(feature = "abi-0-26-0", path = "pinned_0_26_0.rs")]
mod pinned;
pub mod rust_backend;
pub mod snapshot;
pub mod sys;
pub mod tensor;

/// Build-time configuration (see build.rs).
pub mod config {
    include!(concat!(env!("OUT_DIR"), "/config.rs"));
}
