//! Facts of the profile's ggml (`ggml.h`, `ggml-impl.h`; 0.25.3 by default, see README
//! "Profiles") that this library reads: the layout of `struct ggml_tensor` and `struct
//! ggml_cgraph`, the enum values it tests, and the functions of the rest of ggml-base it calls.
//! Layouts and values are checked against the pinned headers by the ABI test
//! (`c_tests/abi_layout.c`) and by `pinned.rs`, never assumed.
//!
//! Nothing here is exported; the header generator does not read this file.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

pub const GGML_MAX_DIMS: usize = 4;
pub const GGML_MAX_SRC: usize = 10;
/// Not fixed by ggml.h (`#ifndef GGML_MAX_NAME`): programs compile ggml with their own value
/// (stable-diffusion.cpp with 128), so it is the profile's (scripts/pin.env, via build.rs).
pub const GGML_MAX_NAME: usize = crate::config::GGML_MAX_NAME;
pub const GGML_MAX_OP_PARAMS: usize = 64;
/// `TENSOR_ALIGNMENT` of ggml-impl.h: alignment of the CPU buffer type.
pub const TENSOR_ALIGNMENT: usize = 32;

pub type ggml_type = c_int;
pub type ggml_op = c_int;
pub type ggml_status = c_int;
pub type ggml_log_level = c_int;

pub const GGML_STATUS_ALLOC_FAILED: ggml_status = -2;
pub const GGML_STATUS_FAILED: ggml_status = -1;
pub const GGML_STATUS_SUCCESS: ggml_status = 0;
pub const GGML_STATUS_ABORTED: ggml_status = 1;

pub const GGML_LOG_LEVEL_DEBUG: ggml_log_level = 1;
pub const GGML_LOG_LEVEL_INFO: ggml_log_level = 2;
pub const GGML_LOG_LEVEL_WARN: ggml_log_level = 3;
pub const GGML_LOG_LEVEL_ERROR: ggml_log_level = 4;
pub const GGML_LOG_LEVEL_CONT: ggml_log_level = 5;

pub const GGML_TENSOR_FLAG_INPUT: i32 = 1;
pub const GGML_TENSOR_FLAG_OUTPUT: i32 = 2;
pub const GGML_TENSOR_FLAG_PARAM: i32 = 4;
pub const GGML_TENSOR_FLAG_LOSS: i32 = 8;
pub const GGML_TENSOR_FLAG_COMPUTE: i32 = 16;

/// The `enum ggml_op` values this library tests, at the pin. ggml 0.9.8 has neither
/// `GGML_OP_COL2IM_1D` (after `CLAMP`) nor the four ops before `UNARY` that 0.25.3 adds, so
/// from `ARGSORT` on its values are smaller.
pub mod op {
    use super::ggml_op;
    pub const NONE: ggml_op = 0;
    pub const DUP: ggml_op = 1;
    pub const ADD: ggml_op = 2;
    pub const ADD_ID: ggml_op = 3;
    pub const ADD1: ggml_op = 4;
    pub const SUB: ggml_op = 6;
    pub const MUL: ggml_op = 7;
    pub const DIV: ggml_op = 8;
    pub const SQR: ggml_op = 9;
    pub const SQRT: ggml_op = 10;
    pub const LOG: ggml_op = 11;
    pub const CUMSUM: ggml_op = 16;
    pub const SILU_BACK: ggml_op = 23;
    pub const NORM: ggml_op = 24;
    pub const RMS_NORM: ggml_op = 25;
    pub const RMS_NORM_BACK: ggml_op = 26;
    pub const MUL_MAT: ggml_op = 29;
    pub const MUL_MAT_ID: ggml_op = 30;
    pub const SCALE: ggml_op = 32;
    pub const CPY: ggml_op = 34;
    pub const CONT: ggml_op = 35;
    pub const RESHAPE: ggml_op = 36;
    pub const VIEW: ggml_op = 37;
    pub const PERMUTE: ggml_op = 38;
    pub const TRANSPOSE: ggml_op = 39;
    pub const GET_ROWS: ggml_op = 40;
    pub const SET_ROWS: ggml_op = 42;
    pub const DIAG_MASK_INF: ggml_op = 44;
    pub const DIAG_MASK_ZERO: ggml_op = 45;
    pub const SOFT_MAX: ggml_op = 46;
    pub const SOFT_MAX_BACK: ggml_op = 47;
    pub const ROPE: ggml_op = 48;
    pub const ROPE_BACK: ggml_op = 49;
    pub const CLAMP: ggml_op = 50;
    pub use super::op_shifted::*;
    // GLU is the last op in every profile's `enum ggml_op` (0.25.3: 100, 0.9.8: 95)
    const _: () = assert!(GLU == COUNT - 1);
    /// Ops whose destination only re-describes its source's memory.
    pub fn is_view(op: ggml_op) -> bool {
        matches!(op, VIEW | RESHAPE | PERMUTE | TRANSPOSE)
    }

    /// Ops that compute nothing (`ggml_op_is_empty` of ggml-impl.h).
    pub fn is_empty(op: ggml_op) -> bool {
        op == NONE || is_view(op)
    }
}

#[cfg(not(feature = "abi-0-9-8"))]
mod op_shifted {
    use super::ggml_op;
    pub const ARGSORT: ggml_op = 69;
    pub const TOP_K: ggml_op = 70;
    pub const FILL: ggml_op = 73;
    pub const FLASH_ATTN_EXT: ggml_op = 74;
    pub const UNARY: ggml_op = 91;
    pub const GLU: ggml_op = 100;
    pub const COUNT: ggml_op = 101;
}

#[cfg(feature = "abi-0-9-8")]
mod op_shifted {
    use super::ggml_op;
    pub const ARGSORT: ggml_op = 68;
    pub const TOP_K: ggml_op = 69;
    pub const FILL: ggml_op = 72;
    pub const FLASH_ATTN_EXT: ggml_op = 73;
    pub const UNARY: ggml_op = 86;
    pub const GLU: ggml_op = 95;
    pub const COUNT: ggml_op = 96;
}

#[repr(C)]
pub struct ggml_tensor {
    pub type_: ggml_type,
    pub buffer: *mut crate::abi_impl::ggml_backend_buffer,
    pub ne: [i64; GGML_MAX_DIMS],
    pub nb: [usize; GGML_MAX_DIMS],
    pub op: ggml_op,
    pub op_params: [i32; GGML_MAX_OP_PARAMS / 4],
    pub flags: i32,
    pub src: [*mut ggml_tensor; GGML_MAX_SRC],
    pub view_src: *mut ggml_tensor,
    pub view_offs: usize,
    pub data: *mut c_void,
    pub name: [c_char; GGML_MAX_NAME],
    pub extra: *mut c_void,
    pub padding: [c_char; 8],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_hash_set {
    pub size: usize,
    pub used: *mut ggml_bitset_t,
    pub keys: *mut *mut ggml_tensor,
}

#[repr(C)]
pub struct ggml_cgraph {
    pub size: c_int,
    pub n_nodes: c_int,
    pub n_leafs: c_int,
    pub nodes: *mut *mut ggml_tensor,
    pub grads: *mut *mut ggml_tensor,
    pub grad_accs: *mut *mut ggml_tensor,
    pub leafs: *mut *mut ggml_tensor,
    pub use_counts: *mut i32,
    pub visited_hash_set: ggml_hash_set,
    pub order: ggml_cgraph_eval_order,
    /// graph id (0: not set); ggml 0.9.8's graphs have none
    #[cfg(not(feature = "abi-0-9-8"))]
    pub uid: u64,
}

/// `struct ggml_context` is opaque to us.
#[repr(C)]
pub struct ggml_context {
    _private: [u8; 0],
}

#[repr(C)]
pub struct ggml_init_params {
    pub mem_size: usize,
    pub mem_buffer: *mut c_void,
    pub no_alloc: bool,
}

// The rest of ggml-base: Rust functions of the same names and signatures that find ggml-base's
// on their first call (see `imports`; build.rs reads this list for the weak table, one `fn` a line).
crate::imports::ggml_imports! {
    variadic fn ggml_abort(file: *const c_char, line: c_int, fmt: *const c_char; arg: *const c_char) -> !;
    variadic fn ggml_log_internal(level: ggml_log_level, format: *const c_char; arg: *const c_char);
    fn ggml_nbytes(tensor: *const ggml_tensor) -> usize;
    fn ggml_type_size(type_: ggml_type) -> usize;
    fn ggml_blck_size(type_: ggml_type) -> i64;
    fn ggml_nelements(tensor: *const ggml_tensor) -> i64;
    fn ggml_is_quantized(type_: ggml_type) -> bool;
    fn ggml_op_desc(tensor: *const ggml_tensor) -> *const c_char;
    fn ggml_aligned_malloc(size: usize) -> *mut c_void;
    fn ggml_aligned_free(ptr: *mut c_void, size: usize);
    fn ggml_init(params: ggml_init_params) -> *mut ggml_context;
    fn ggml_free(ctx: *mut ggml_context);
    fn ggml_get_no_alloc(ctx: *mut ggml_context) -> bool;
    fn ggml_get_first_tensor(ctx: *const ggml_context) -> *mut ggml_tensor;
    fn ggml_get_next_tensor(ctx: *const ggml_context, tensor: *mut ggml_tensor) -> *mut ggml_tensor;
    fn ggml_tensor_overhead() -> usize;
    fn ggml_graph_overhead_custom(size: usize, grads: bool) -> usize;
    fn ggml_new_graph_custom(ctx: *mut ggml_context, size: usize, grads: bool) -> *mut ggml_cgraph;
    fn ggml_dup_tensor(ctx: *mut ggml_context, src: *const ggml_tensor) -> *mut ggml_tensor;
}

// Graph ids and the meta device are newer than ggml 0.9.8 (see the profile's stand-ins below).
#[cfg(not(feature = "abi-0-9-8"))]
crate::imports::ggml_imports! {
    fn ggml_graph_next_uid() -> u64;

    // ggml-backend-meta.cpp (stays in ggml-base). Without its code in the process (a static link
    // that did not need it) there is no meta buffer or buffer type, so the predicates are false.
    #[if_absent(false)]
    fn ggml_backend_buffer_is_meta(buf: *mut crate::abi_impl::ggml_backend_buffer) -> bool;
    #[if_absent(false)]
    fn ggml_backend_buft_is_meta(buft: *mut crate::abi_impl::ggml_backend_buffer_type) -> bool;
    fn ggml_backend_meta_buffer_set_usage(buf: *mut crate::abi_impl::ggml_backend_buffer, usage: BufferUsage);
    fn ggml_backend_meta_alloc_ctx_tensors_from_buft(
        ctx: *mut ggml_context,
        buft: *mut crate::abi_impl::ggml_backend_buffer_type,
    ) -> *mut crate::abi_impl::ggml_backend_buffer;
}

// ggml 0.9.8 has no meta device (ggml-backend-meta.cpp is newer): no buffer or buffer type is
// one, so the paths that would use the meta functions are never taken.
#[cfg(feature = "abi-0-9-8")]
mod no_meta {
    use super::{BufferUsage, ggml_context};
    use crate::abi_impl::{ggml_backend_buffer, ggml_backend_buffer_type};

    pub unsafe fn ggml_backend_buffer_is_meta(_buf: *mut ggml_backend_buffer) -> bool {
        false
    }
    pub unsafe fn ggml_backend_buft_is_meta(_buft: *mut ggml_backend_buffer_type) -> bool {
        false
    }
    pub unsafe fn ggml_backend_meta_buffer_set_usage(_buf: *mut ggml_backend_buffer, _usage: BufferUsage) {
        crate::fatal!("ggml_backend_meta_buffer_set_usage: ggml 0.9.8 has no meta buffers (this library's ABI profile)")
    }
    pub unsafe fn ggml_backend_meta_alloc_ctx_tensors_from_buft(_ctx: *mut ggml_context, _buft: *mut ggml_backend_buffer_type) -> *mut ggml_backend_buffer {
        crate::fatal!("ggml_backend_meta_alloc_ctx_tensors_from_buft: ggml 0.9.8 has no meta buffer types (this library's ABI profile)")
    }
}
#[cfg(feature = "abi-0-9-8")]
pub use no_meta::*;

/// `typedef uint8_t ggml_guid[16]; typedef ggml_guid * ggml_guid_t;`
pub type ggml_guid = [u8; 16];
pub type ggml_guid_t = *mut ggml_guid;

/// ggml-impl.h's word of the visited-set bitmap
pub type ggml_bitset_t = u32;
/// `enum ggml_cgraph_eval_order` as it crosses the C boundary
pub type ggml_cgraph_eval_order = c_int;

/// `enum ggml_backend_buffer_usage` as it crosses the C boundary: a plain integer, so a value C
/// wrote is never an invalid Rust enum. The header generator renders it as the enum.
pub type BufferUsage = u32;
pub const USAGE_ANY: BufferUsage = 0;
pub const USAGE_WEIGHTS: BufferUsage = 1;
pub const USAGE_COMPUTE: BufferUsage = 2;

/// `enum ggml_backend_dev_type` as it crosses the C boundary (see `BufferUsage`).
pub type DevType = u32;
pub const DEV_TYPE_CPU: DevType = 0;
