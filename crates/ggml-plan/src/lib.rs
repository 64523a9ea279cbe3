//! The planning layer of ggml-rs: what the allocator and the scheduler decide, as plain data,
//! with no ggml linked and no `unsafe`, so that all of it is tested by `cargo test -p ggml-plan`.
//!
//! - the graph as the planner sees it (`model`), the planner (`plan`: upstream's online
//!   placement, offset for offset, and the offline one of `offline` when smaller) over the
//!   chunked free-block bookkeeping of `dyn_tallocr`;
//! - what an allocator's memory holds after a sequence of plans (`residency`);
//! - which backend runs each node of the scheduler's graph (`assign`: upstream's passes over
//!   dense ids, asking an oracle about ops, buffers and backends) and where the graph is cut
//!   into splits, with the copies each split needs (`splits`);
//! - the memory plan report (`report`): every placed tensor's box in offset and node steps, as
//!   JSON and as an SVG timeline;
//! - the address-keyed map that the allocator and the scheduler use (`addr_map`), and the
//!   per-thread spare arrays that keep large allocations out of the planning loop (`spare`).
//!
//! `ggml-rs` reads ggml's graphs into these models and applies the results to the tensors; the
//! backend crates never see this one.
#![forbid(unsafe_code)]

pub mod addr_map;
pub mod assign;
pub mod dyn_tallocr;
pub mod model;
pub mod offline;
pub mod plan;
pub mod report;
pub mod residency;
pub mod spare;
pub mod splits;

#[cfg(test)]
mod assign_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod report_tests;
#[cfg(test)]
mod splits_tests;

/// `GGML_MAX_SRC` of ggml.h: sources per node (ggml-rs checks it equals its ABI mirror).
pub const MAX_SRC: usize = 10;
/// `GGML_MAX_NAME` of ggml.h: bytes of a tensor name, NUL included (ggml's default, or 128 where
/// the program compiles ggml with `-DGGML_MAX_NAME=128`, as stable-diffusion.cpp does).
#[cfg(not(feature = "max-name-128"))]
pub const MAX_NAME: usize = 64;
#[cfg(feature = "max-name-128")]
pub const MAX_NAME: usize = 128;
/// `GGML_MAX_DIMS` of ggml.h.
pub const MAX_DIMS: usize = 4;
