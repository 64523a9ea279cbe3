//! `ggml_tallocr`: consecutive, aligned placement in one buffer (static tensors: weights, caches).

use std::ffi::c_void;

use crate::backend::buffer::{buffer_base, buft_alloc_size};
use crate::backend::tensor_io::tensor_alloc;
use crate::ggml::abi_alloc::ggml_tallocr;
use crate::ggml::handles::Buffer;
use crate::ggml::sys::ggml_status;
use crate::ggml::tensor::TensorRef;

pub fn tallocr_new(buffer: Buffer) -> ggml_tallocr {
    let base = buffer_base(buffer);
    let alignment = match buffer.buft() {
        Some(b) => b.alignment(),
        None => crate::fatal!("ggml_tallocr_new: buffer has no buffer type"),
    };
    crate::ensure!(alignment.is_power_of_two(), "ggml_tallocr_new: alignment {alignment} is not a power of two");
    let misalign = (base as usize) % alignment;
    let offset = if misalign == 0 { 0 } else { alignment - misalign };
    ggml_tallocr { buffer: buffer.as_ptr(), base, alignment, offset }
}

pub fn tallocr_alloc(talloc: &mut ggml_tallocr, tensor: TensorRef) -> ggml_status {
    // SAFETY: the tallocr was made by ggml_tallocr_new from a live buffer (C API contract).
    let buffer = match unsafe { Buffer::from_raw(talloc.buffer) } {
        Some(b) => b,
        None => crate::fatal!("ggml_tallocr_alloc: the allocator has no buffer"),
    };
    let buft = buffer.buft().unwrap_or_else(|| crate::fatal!("ggml_tallocr_alloc: buffer has no buffer type"));
    let size = buft_alloc_size(buft, tensor).next_multiple_of(talloc.alignment.max(1));
    let available = buffer.size().saturating_sub(talloc.offset);
    if size > available {
        crate::log_error!("ggml_tallocr_alloc: not enough space in the buffer to allocate {} (needed {size}, available {available})\n", tensor);
        crate::fatal!("not enough space in the buffer");
    }
    let addr = (buffer_base(buffer) as usize + talloc.offset) as *mut c_void;
    talloc.offset += size;
    tensor_alloc(buffer, tensor, addr)
}
