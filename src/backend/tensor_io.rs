//! Reading and writing tensor data: set/get/memset (plain, 2-d, async), copies between tensors
//! and backends, and placing a tensor in a buffer (`tensor_alloc`, `view_init`).
//!
//! Every access is bounds-checked against the tensor before the buffer is called, and a failed
//! check aborts with a message naming the tensor (upstream asserts the same conditions).

use std::ffi::c_void;

use crate::backend::buffer::{buffer_base, buffer_init_tensor, buffer_is_host, buffer_name};
use crate::ggml::abi_impl::ggml_backend;
use crate::ggml::handles::{Backend, Buffer};
use crate::ggml::sys::ggml_status;
use crate::ggml::tensor::TensorRef;

/// The buffer holding the tensor's bytes; aborts when it has none.
fn storage(function: &str, tensor: TensorRef) -> Buffer {
    match tensor.storage_buffer() {
        Some(b) => b,
        None => crate::fatal!("{function}: tensor {tensor} has no buffer (it was never allocated)"),
    }
}

fn check_range(function: &str, tensor: TensorRef, offset: usize, size: usize, n_copies: usize, stride: usize, write: bool) {
    crate::ensure!(!tensor.data().is_null(), "{function}: tensor {tensor} is not allocated (data is NULL)");
    let nbytes = tensor.nbytes();
    let end = n_copies.checked_sub(1).and_then(|k| k.checked_mul(stride)).and_then(|x| x.checked_add(offset)).and_then(|x| x.checked_add(size));
    let ok = matches!(end, Some(end) if end <= nbytes);
    crate::ensure!(
        ok,
        "{function}: tensor {} {} out of bounds: offset {offset} + size {size} (copies {n_copies}, stride {stride}) exceeds its {nbytes} bytes",
        tensor,
        if write { "write" } else { "read" }
    );
}

pub fn tensor_set(tensor: TensorRef, data: *const c_void, offset: usize, size: usize) {
    let buf = storage("ggml_backend_tensor_set", tensor);
    if size == 0 {
        return;
    }
    check_range("ggml_backend_tensor_set", tensor, offset, size, 1, 0, true);
    buf.set_tensor(tensor, data, offset, size);
}

pub fn tensor_get(tensor: TensorRef, data: *mut c_void, offset: usize, size: usize) {
    let buf = storage("ggml_backend_tensor_get", tensor);
    if size == 0 {
        return;
    }
    check_range("ggml_backend_tensor_get", tensor, offset, size, 1, 0, false);
    buf.get_tensor(tensor, data, offset, size);
}

pub fn tensor_memset(tensor: TensorRef, value: u8, offset: usize, size: usize) {
    if size == 0 {
        return;
    }
    let buf = storage("ggml_backend_tensor_memset", tensor);
    check_range("ggml_backend_tensor_memset", tensor, offset, size, 1, 0, true);
    crate::ensure!(buf.has_memset_tensor(), "ggml_backend_tensor_memset: buffer type '{}' of tensor {tensor} does not implement memset", buffer_name(buf));
    buf.memset_tensor(tensor, value, offset, size);
}

#[cfg(not(feature = "abi-0-9-8"))]
#[allow(clippy::too_many_arguments)]
pub fn tensor_set_2d(tensor: TensorRef, data: *const c_void, offset: usize, size: usize, n_copies: usize, stride_tensor: usize, stride_data: usize) {
    let buf = storage("ggml_backend_tensor_set_2d", tensor);
    if n_copies <= 1 || !buf.has_tensor_2d().0 {
        for i in 0..n_copies {
            tensor_set(tensor, (data as *const u8).wrapping_add(i * stride_data) as *const c_void, offset + i * stride_tensor, size);
        }
        return;
    }
    if size == 0 {
        return;
    }
    check_range("ggml_backend_tensor_set_2d", tensor, offset, size, n_copies, stride_tensor, true);
    buf.set_tensor_2d(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

#[cfg(not(feature = "abi-0-9-8"))]
#[allow(clippy::too_many_arguments)]
pub fn tensor_get_2d(tensor: TensorRef, data: *mut c_void, offset: usize, size: usize, n_copies: usize, stride_tensor: usize, stride_data: usize) {
    let buf = storage("ggml_backend_tensor_get_2d", tensor);
    if n_copies <= 1 || !buf.has_tensor_2d().1 {
        for i in 0..n_copies {
            tensor_get(tensor, (data as *mut u8).wrapping_add(i * stride_data) as *mut c_void, offset + i * stride_tensor, size);
        }
        return;
    }
    if size == 0 {
        return;
    }
    check_range("ggml_backend_tensor_get_2d", tensor, offset, size, n_copies, stride_tensor, false);
    buf.get_tensor_2d(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

pub fn tensor_set_async(backend: Backend, tensor: TensorRef, data: *const c_void, offset: usize, size: usize) {
    check_range("ggml_backend_tensor_set_async", tensor, offset, size, 1, 0, true);
    if !backend.set_tensor_async(tensor, data, offset, size) {
        backend.synchronize();
        tensor_set(tensor, data, offset, size);
    }
}

pub fn tensor_get_async(backend: Backend, tensor: TensorRef, data: *mut c_void, offset: usize, size: usize) {
    check_range("ggml_backend_tensor_get_async", tensor, offset, size, 1, 0, false);
    if !backend.get_tensor_async(tensor, data, offset, size) {
        backend.synchronize();
        tensor_get(tensor, data, offset, size);
    }
}

#[cfg(not(feature = "abi-0-9-8"))]
#[allow(clippy::too_many_arguments)]
pub fn tensor_set_2d_async(
    backend: Backend,
    tensor: TensorRef,
    data: *const c_void,
    offset: usize,
    size: usize,
    n_copies: usize,
    stride_tensor: usize,
    stride_data: usize,
) {
    crate::ensure!(!tensor.data().is_null(), "ggml_backend_tensor_set_2d_async: tensor {tensor} is not allocated (data is NULL)");
    if n_copies <= 1 || !backend.has_2d_async().0 {
        for i in 0..n_copies {
            tensor_set_async(backend, tensor, (data as *const u8).wrapping_add(i * stride_data) as *const c_void, offset + i * stride_tensor, size);
        }
        return;
    }
    if size == 0 {
        return;
    }
    check_range("ggml_backend_tensor_set_2d_async", tensor, offset, size, n_copies, stride_tensor, true);
    backend.set_tensor_2d_async(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

#[cfg(not(feature = "abi-0-9-8"))]
#[allow(clippy::too_many_arguments)]
pub fn tensor_get_2d_async(
    backend: Backend,
    tensor: TensorRef,
    data: *mut c_void,
    offset: usize,
    size: usize,
    n_copies: usize,
    stride_tensor: usize,
    stride_data: usize,
) {
    crate::ensure!(!tensor.data().is_null(), "ggml_backend_tensor_get_2d_async: tensor {tensor} is not allocated (data is NULL)");
    if n_copies <= 1 || !backend.has_2d_async().1 {
        for i in 0..n_copies {
            tensor_get_async(backend, tensor, (data as *mut u8).wrapping_add(i * stride_data) as *mut c_void, offset + i * stride_tensor, size);
        }
        return;
    }
    if size == 0 {
        return;
    }
    check_range("ggml_backend_tensor_get_2d_async", tensor, offset, size, n_copies, stride_tensor, false);
    backend.get_tensor_2d_async(tensor, data, offset, size, n_copies, stride_tensor, stride_data);
}

/// `cpy_tensor` of the destination's buffer: false when it has none or declines.
pub fn buffer_copy_tensor(src: TensorRef, dst: TensorRef) -> bool {
    let dst_buf = storage("ggml_backend_buffer_copy_tensor", dst);
    dst_buf.cpy_tensor(src, dst).unwrap_or(false)
}

/// Copies between any two buffers: directly when one side is host memory, through the
/// destination buffer's `cpy_tensor` when it can, else through a host bounce buffer.
pub fn tensor_copy(src: TensorRef, dst: TensorRef) {
    crate::ensure!(src.same_layout(dst), "ggml_backend_tensor_copy: cannot copy tensor {src} to {dst}: the layouts differ");
    if src == dst {
        return;
    }
    let nbytes = src.nbytes();
    let src_buf = storage("ggml_backend_tensor_copy", src);
    let dst_buf = storage("ggml_backend_tensor_copy", dst);
    if buffer_is_host(src_buf) {
        tensor_set(dst, src.data(), 0, nbytes);
    } else if buffer_is_host(dst_buf) {
        tensor_get(src, dst.data(), 0, nbytes);
    } else if !buffer_copy_tensor(src, dst) {
        let mut bounce = vec![0u8; nbytes];
        tensor_get(src, bounce.as_mut_ptr() as *mut c_void, 0, nbytes);
        tensor_set(dst, bounce.as_ptr() as *const c_void, 0, nbytes);
    }
}

pub fn tensor_copy_async(backend_src: *mut ggml_backend, backend_dst: Backend, src: TensorRef, dst: TensorRef) {
    crate::ensure!(src.same_layout(dst), "ggml_backend_tensor_copy_async: cannot copy tensor {src} to {dst}: the layouts differ");
    if src == dst {
        return;
    }
    if backend_dst.cpy_tensor_async(backend_src, src, dst) == Some(true) {
        return;
    }
    // an async copy runs after everything queued on both backends: emulate it
    // SAFETY: the source backend pointer comes from the caller (C API contract).
    if let Some(b) = unsafe { Backend::from_raw(backend_src) } {
        b.synchronize();
    }
    backend_dst.synchronize();
    tensor_copy(src, dst);
}

/// Places a tensor at `addr` inside `buffer` and lets the buffer initialise it.
pub fn tensor_alloc(buffer: Buffer, tensor: TensorRef, addr: *mut c_void) -> ggml_status {
    crate::ensure!(tensor.buffer_ptr().is_null(), "ggml_backend_tensor_alloc: tensor {tensor} already has a buffer");
    crate::ensure!(tensor.data().is_null(), "ggml_backend_tensor_alloc: tensor {tensor} already has data");
    crate::ensure!(!tensor.is_view(), "ggml_backend_tensor_alloc: tensor {tensor} is a view (use ggml_backend_view_init)");
    check_address(buffer, tensor, addr);
    place(buffer, tensor, addr)
}

/// The address must lie inside the buffer, with room for the tensor (meta buffers are virtual).
pub fn check_address(buffer: Buffer, tensor: TensorRef, addr: *mut c_void) {
    let base = buffer_base(buffer) as usize;
    let addr = addr as usize;
    crate::ensure!(addr >= base, "ggml_backend_tensor_alloc: address {addr:#x} for tensor {tensor} is below the base {base:#x} of its buffer");
    // SAFETY: meta.cpp's predicate on a valid buffer.
    if unsafe { crate::ggml::sys::ggml_backend_buffer_is_meta(buffer.as_ptr()) } {
        return;
    }
    let size = match buffer.buft() {
        Some(buft) => crate::backend::buffer::buft_alloc_size(buft, tensor),
        None => tensor.nbytes(),
    };
    let fits = addr.checked_add(size).is_some_and(|end| end <= base + buffer.size());
    crate::ensure!(
        fits,
        "ggml_backend_tensor_alloc: tensor {tensor} ({size} bytes at offset {}) does not fit in its buffer of {} bytes",
        addr - base,
        buffer.size()
    );
}

/// Sets the placement without the "fresh tensor" checks: the allocators use it to move a tensor
/// they placed themselves in an earlier allocation.
pub fn place(buffer: Buffer, tensor: TensorRef, addr: *mut c_void) -> ggml_status {
    tensor.set_buffer(buffer.as_ptr());
    tensor.set_data(addr);
    buffer_init_tensor(buffer, tensor)
}

/// A view takes its bytes from its source: `data = view_src->data + view_offs`.
pub fn view_init(tensor: TensorRef) -> ggml_status {
    crate::ensure!(tensor.buffer_ptr().is_null(), "ggml_backend_view_init: view {tensor} already has a buffer");
    reinit_view(tensor)
}

/// `view_init` for a view whose source may have moved since it was last initialised.
pub fn reinit_view(tensor: TensorRef) -> ggml_status {
    let src = match tensor.view_src() {
        Some(s) => s,
        None => crate::fatal!("ggml_backend_view_init: tensor {tensor} is not a view"),
    };
    let buffer = match src.buffer() {
        Some(b) => b,
        None => crate::fatal!("ggml_backend_view_init: the source {src} of view {tensor} has no buffer"),
    };
    crate::ensure!(!src.data().is_null(), "ggml_backend_view_init: the source {src} of view {tensor} has no data");
    tensor.set_buffer(buffer.as_ptr());
    tensor.set_data((src.data() as *mut u8).wrapping_add(tensor.view_offs()) as *mut c_void);
    buffer_init_tensor(buffer, tensor)
}
