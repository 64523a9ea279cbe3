//! The numeric core of ggml-rs's CPU backend (issues 14 and 15): ggml's block formats, bit for bit
//! (`quants`), the dot products MUL_MAT is made of (`dot`, a scalar reference per kernel and
//! AVX2 / AVX-512 / NEON versions), the prompt tiles (`qgemm`, `sgemm`, `fgemm`), the element-wise
//! vectors (`vecf`, `expf`, `accum`), one kernel table per instruction set that picks among them
//! once (`kernels`), a persistent thread pool (`pool`) and a row-parallel mat-vec / mat-mat on top
//! (`matmul`).
//!
//! The kernels know nothing of ggml's C structs: they work on plain slices and `ops::Node`s, so
//! `cargo test` exercises them without any upstream code. `ops` computes graph nodes with the
//! table it is handed. `backend` is the CPU backend built on them: the registry, device and stream
//! (through ggml-abi's adapter from Rust traits to ggml's C tables), the graph walk, and the C API
//! of upstream's libggml-cpu that the cdylib `libggml_rs_cpu.so` exports (a drop-in for
//! libggml-cpu, and a module for `GGML_BACKEND_PATH`). `unsafe` lives in four places only: the
//! SIMD kernels and the table's function pointers to them (intrinsics need it), the byte view of
//! blocks (`block`), the one lifetime erasure of the pool (`pool`), and the C boundary of
//! `backend`.

// the quantizers and references index as upstream's C does, which keeps them checkable against it
#![allow(clippy::needless_range_loop)]

pub mod accum;
pub mod backend;
pub mod block;
pub mod config;
pub mod dot;
pub mod expf;
pub mod fgemm;
pub mod fp;
pub mod kernels;
pub mod matmul;
pub mod ops;
pub mod pool;
pub mod qgemm;
pub mod quants;
#[doc(hidden)]
pub mod rng;
pub mod sgemm;
pub mod simd;
mod types;
pub mod vecf;

pub use types::GgmlType;
