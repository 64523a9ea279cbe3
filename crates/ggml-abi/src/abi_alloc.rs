//! The types of `ggml-alloc.h`, as C sees them. The header generator reads this file.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

use crate::abi_impl::{ggml_backend, ggml_backend_buffer, ggml_backend_buffer_type};

pub type ggml_backend_buffer_type_t = *mut ggml_backend_buffer_type;
pub type ggml_backend_buffer_t = *mut ggml_backend_buffer;
pub type ggml_backend_t = *mut ggml_backend;

/// Tensor allocator: hands out consecutive, aligned addresses of one buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ggml_tallocr {
    pub buffer: ggml_backend_buffer_t,
    pub base: *mut c_void,
    pub alignment: usize,
    pub offset: usize,
}

/// Graph allocator (opaque).
pub struct ggml_gallocr {
    _opaque: [u8; 0],
}

pub type ggml_gallocr_t = *mut ggml_gallocr;
