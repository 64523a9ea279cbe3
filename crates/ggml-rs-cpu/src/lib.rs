//! The numeric core of ggml-rs's CPU backend (issues 14 and 15): ggml's block formats, bit for bit
//! (`quants`), the dot products MUL_MAT is made of (`dot`, a scalar reference per kernel and
//! run-time selected AVX2 / AVX-512 versions), a persistent thread pool (`pool`) and a row-parallel
//! mat-vec / mat-mat on top (`matmul`).
//!
//! This crate knows nothing of ggml's C structs or the backend interface: it works on plain
//! slices, so `cargo test` exercises it without any upstream code; the adapter to ggml's C ABI
//! (tensors, graphs, the backend tables) belongs to the ABI crate and the backend built on it.
//! `unsafe` lives in three places only: the SIMD kernels (`dot/*`, intrinsics need it), the byte
//! view of blocks (`block`), and the one lifetime erasure of the pool (`pool`).

// the quantizers and references index as upstream's C does, which keeps them checkable against it
#![allow(clippy::needless_range_loop)]

pub mod backend;
pub mod block;
pub mod dot;
pub mod fp;
pub mod matmul;
pub mod ops;
pub mod pool;
pub mod quants;
#[doc(hidden)]
pub mod rng;
pub mod simd;
mod types;

pub use types::GgmlType;
