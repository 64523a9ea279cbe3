//! The ops of the CPU backend: what a graph node asks for, computed on plain memory.
//!
//! A kernel sees a [`Node`] (the op, its destination and sources as [`View`]s: ggml type, shape,
//! byte strides, data pointer; the 16 `op_params` words) and an [`Exec`] (the persistent thread
//! pool and a scratch buffer). It splits its work into chunks and hands them to
//! [`Exec::parallel`] (a chunk counter on the persistent pool, no fork-join per op); an op with
//! phases (quantize the activations, then multiply) calls it once per phase.
//!
//! Ops come in families, one module each. A family lists the [`Op`]s it owns (`OPS`), says per
//! node whether it computes it (`supports`: honest per op, type and layout, the backend's
//! `supports_op` answers with it), and computes it (`compute`). [`find`] maps an op to its family;
//! an op no family lists is unsupported. Every kernel has a scalar form the tests compare the
//! fast forms with.
//!
//! This module knows nothing of ggml's C structs: the backend builds `Node`s from `ggml_tensor`s,
//! and the tests build them from plain vectors.

pub mod enums;

mod attn;
mod binary;
mod copy;
mod mat;
mod norm;
mod reduce;
mod rope;
mod softmax;
mod train;
mod unary;

pub use attn::f16_native_len as flash_attn_f16_native_len;
pub use enums::{GluOp, Op, UnaryOp};
pub(crate) use norm::{rms_norm_mul, rms_norm_mul_fusable};

use crate::GgmlType;
use crate::block::AlignedBytes;
use crate::pool::ThreadPool;
use crate::simd::Level;
use std::fmt;

/// ggml's `GGML_MAX_SRC`
pub const MAX_SRC: usize = 10;
/// ggml's `GGML_MAX_OP_PARAMS` in 32-bit words
pub const OP_PARAMS: usize = 16;

/// One tensor as a kernel sees it.
#[derive(Clone, Copy, Debug)]
pub struct View {
    /// upstream's `enum ggml_type` value (also types this crate has no block format for: I32...)
    pub ty: i32,
    /// elements per dimension
    pub ne: [i64; 4],
    /// bytes between neighbours per dimension (`nb[0]`: the type size, or the block size)
    pub nb: [usize; 4],
    pub data: *mut u8,
}

// SAFETY: a View is a description of memory the backend hands to one graph computation; the
// kernels of that computation write disjoint chunks of the destination and only read the
// sources, and the backend does not return before every chunk has run (Exec::parallel joins).
unsafe impl Send for View {}
// SAFETY: as above.
unsafe impl Sync for View {}

/// upstream's values of the types that have no block format here but appear in graphs
pub mod raw_type {
    pub const F32: i32 = 0;
    pub const F16: i32 = 1;
    pub const I8: i32 = 24;
    pub const I16: i32 = 25;
    pub const I32: i32 = 26;
    pub const I64: i32 = 27;
    pub const F64: i32 = 28;
    pub const BF16: i32 = 30;
}

impl View {
    /// the block format of this view's type, if this crate has one
    pub fn block_type(&self) -> Option<GgmlType> {
        GgmlType::from_raw(self.ty)
    }

    pub fn nelements(&self) -> i64 {
        self.ne.iter().product()
    }

    /// rows: every dimension but the first
    pub fn nrows(&self) -> i64 {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// address of row (i1, i2, i3)
    pub fn row(&self, i1: i64, i2: i64, i3: i64) -> *mut u8 {
        self.data.wrapping_add(i1 as usize * self.nb[1] + i2 as usize * self.nb[2] + i3 as usize * self.nb[3])
    }
}

/// One node of a graph: what to compute, where from, where to.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    pub op: Op,
    pub dst: View,
    pub src: [Option<View>; MAX_SRC],
    pub params: [i32; OP_PARAMS],
    /// the tensor's name, for messages
    pub name: &'a str,
    /// src0 repacked for the tiled int8 GEMM at load time (a weight in the CPU_REPACK buffer
    /// type, `backend::repack`): MUL_MAT reads these tiles instead of repacking per call
    pub packed: Option<Packed>,
}

/// The address of a weight matrix's repacked row blocks ([`crate::qgemm::repack`]'s layout, one
/// block of 16 rows after the other).
#[derive(Clone, Copy, Debug)]
pub struct Packed(pub *const u8);

// SAFETY: read-only weights, alive while the graph computes (as a View's data).
unsafe impl Send for Packed {}
// SAFETY: as above.
unsafe impl Sync for Packed {}

impl Node<'_> {
    /// source `i`, or an error naming the node
    pub fn src(&self, i: usize) -> Result<&View, OpError> {
        self.src.get(i).and_then(Option::as_ref).ok_or_else(|| OpError::new(self, format!("source {i} is missing")))
    }

    pub fn param_i32(&self, i: usize) -> i32 {
        self.params[i]
    }

    /// op parameter `i` read as a float (ggml stores floats bit for bit in the i32 words)
    pub fn param_f32(&self, i: usize) -> f32 {
        f32::from_bits(self.params[i] as u32)
    }
}

/// Why a node was not computed; names the node and op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpError(pub String);

impl OpError {
    pub fn new(node: &Node, why: impl fmt::Display) -> OpError {
        OpError(format!("{} ({:?}): {why}", node.name, node.op))
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where kernels run: the persistent pool and the scratch buffer (kept between nodes and graphs,
/// so the hot path allocates nothing once it has grown).
pub struct Exec<'a> {
    pool: &'a mut ThreadPool,
    scratch: &'a mut AlignedBytes,
    /// the kernel table of this node: the process's active set, or the scalar one (the
    /// reference path) when the backend was told `ggml_backend_cpu_set_use_ref`
    kernels: &'static crate::kernels::Kernels,
}

/// A scratch area for one op's phases: chunks write disjoint parts of it.
#[derive(Clone, Copy, Debug)]
pub struct Scratch {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: as for View: chunks of one op write disjoint parts, and Exec::parallel joins before the
// next phase reads them.
unsafe impl Send for Scratch {}
// SAFETY: as above.
unsafe impl Sync for Scratch {}

impl<'a> Exec<'a> {
    /// kernels at the process's active SIMD level
    pub fn new(pool: &'a mut ThreadPool, scratch: &'a mut AlignedBytes) -> Exec<'a> {
        Exec::with_level(pool, scratch, crate::simd::active())
    }

    /// kernels of the set `level` (at most the detected one: [`crate::kernels::at`] asserts it)
    pub fn with_level(pool: &'a mut ThreadPool, scratch: &'a mut AlignedBytes, level: Level) -> Exec<'a> {
        Exec { pool, scratch, kernels: crate::kernels::at(level) }
    }

    /// the kernel table this node runs with
    pub fn kernels(&self) -> &'static crate::kernels::Kernels {
        self.kernels
    }

    /// the kernel set this node runs with
    pub fn level(&self) -> Level {
        self.kernels.set
    }

    pub fn n_threads(&self) -> usize {
        self.pool.n_threads()
    }

    /// runs `f(chunk)` for every chunk in `0..n_chunks` on the pool; returns when all have run
    pub fn parallel<F: Fn(usize) + Sync>(&mut self, n_chunks: usize, f: F) {
        self.pool.run(n_chunks, f)
    }

    /// a scratch area of at least `bytes` bytes, 8-byte aligned, valid until the next call
    pub fn scratch(&mut self, bytes: usize) -> Scratch {
        if self.scratch.len() < bytes {
            self.scratch.resize(bytes);
        }
        Scratch { ptr: self.scratch.as_mut_ptr(), len: self.scratch.len() }
    }
}

/// A kernel: computes one node (every phase, every chunk) before it returns.
pub type Kernel = fn(&Node, &mut Exec) -> Result<(), OpError>;

/// One family of ops (a module of this folder).
#[derive(Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub ops: &'static [Op],
    /// whether `compute` handles this node (its types, layout, parameters)
    pub supports: fn(&Node) -> bool,
    pub compute: Kernel,
}

/// every family; an op belongs to at most one
pub const FAMILIES: &[Family] =
    &[attn::FAMILY, binary::FAMILY, copy::FAMILY, mat::FAMILY, norm::FAMILY, reduce::FAMILY, rope::FAMILY, softmax::FAMILY, train::FAMILY, unary::FAMILY];

/// the family that owns `op`
pub fn find(op: Op) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.ops.contains(&op))
}

/// whether the node can be computed here
pub fn supports(node: &Node) -> bool {
    find(node.op).is_some_and(|f| (f.supports)(node))
}

/// computes the node, or says why not
pub fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    match find(node.op) {
        Some(f) if (f.supports)(node) => (f.compute)(node, exec),
        Some(f) => Err(OpError::new(node, format!("not supported by the {} kernels for these types or this layout", f.name))),
        None => Err(OpError::new(node, "no kernel for this op")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_at_most_one_family() {
        for op in Op::ALL {
            let owners: Vec<_> = FAMILIES.iter().filter(|f| f.ops.contains(&op)).map(|f| f.name).collect();
            assert!(owners.len() <= 1, "{op:?} is listed by {owners:?}");
        }
    }

    #[test]
    fn enums_number_as_upstream() {
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(Op::from_raw(i as i32), Some(*op));
        }
        assert_eq!(Op::from_raw(Op::ALL.len() as i32), None);
        assert_eq!(Op::from_raw(-1), None);
        assert_eq!(Op::Glu as usize, 100);
        assert_eq!(UnaryOp::Silu as usize, 10);
        assert_eq!(GluOp::Swiglu as usize, 2);
    }
}
