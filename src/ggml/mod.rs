//! The one place that knows ggml's C structs: `#[repr(C)]` mirrors (`sys`, `abi_*`), checked
//! handles over backend objects (`handles`), typed views over tensors and graphs (`tensor`,
//! `graph`), ggml's logger and abort path (`log`), and the lookup of ggml-base's functions on
//! first use (`imports`). All `unsafe` that touches C memory outside the export layer lives here.

pub mod abi_alloc;
pub mod abi_backend;
pub mod abi_impl;
pub mod context;
pub mod graph;
pub mod handles;
pub mod imports;
pub mod log;
pub mod snapshot;
pub mod sys;
pub mod tensor;
