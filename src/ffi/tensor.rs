//! Exports: tensor data access, copies, and placement (`ggml-backend.h`).

use std::ffi::c_void;

use crate::backend::tensor_io as imp;
use crate::ggml::abi_alloc::{ggml_backend_buffer_t, ggml_backend_t};
use crate::ggml::sys::{ggml_status, ggml_tensor};
use crate::{arg, ffi_boundary, tensor_arg};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_set(tensor: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    ffi_boundary!({ imp::tensor_set(tensor_arg!(tensor), data, offset, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_get(tensor: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    ffi_boundary!({ imp::tensor_get(tensor_arg!(tensor), data, offset, size) })
}

/// (newer than ggml 0.9.8)
#[cfg(not(feature = "abi-0-9-8"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_set_2d(
    tensor: *mut ggml_tensor,
    data: *const c_void,
    offset: usize,
    size: usize,
    n_copies: usize,
    stride_tensor: usize,
    stride_data: usize,
) {
    ffi_boundary!({
        let t = tensor_arg!(tensor);
        imp::tensor_set_2d(t, data, offset, size, n_copies, stride_tensor, stride_data)
    })
}

/// (newer than ggml 0.9.8)
#[cfg(not(feature = "abi-0-9-8"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_get_2d(
    tensor: *const ggml_tensor,
    data: *mut c_void,
    offset: usize,
    size: usize,
    n_copies: usize,
    stride_tensor: usize,
    stride_data: usize,
) {
    ffi_boundary!({
        let t = tensor_arg!(tensor);
        imp::tensor_get_2d(t, data, offset, size, n_copies, stride_tensor, stride_data)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_memset(tensor: *mut ggml_tensor, value: u8, offset: usize, size: usize) {
    ffi_boundary!({ imp::tensor_memset(tensor_arg!(tensor), value, offset, size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_set_async(backend: ggml_backend_t, tensor: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        imp::tensor_set_async(backend, tensor_arg!(tensor), data, offset, size)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_get_async(backend: ggml_backend_t, tensor: *const ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        imp::tensor_get_async(backend, tensor_arg!(tensor), data, offset, size)
    })
}

/// (newer than ggml 0.9.8)
#[cfg(not(feature = "abi-0-9-8"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_set_2d_async(
    backend: ggml_backend_t,
    tensor: *mut ggml_tensor,
    data: *const c_void,
    offset: usize,
    size: usize,
    n_copies: usize,
    stride_tensor: usize,
    stride_data: usize,
) {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        let t = tensor_arg!(tensor);
        imp::tensor_set_2d_async(backend, t, data, offset, size, n_copies, stride_tensor, stride_data)
    })
}

/// (newer than ggml 0.9.8)
#[cfg(not(feature = "abi-0-9-8"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_get_2d_async(
    backend: ggml_backend_t,
    tensor: *const ggml_tensor,
    data: *mut c_void,
    offset: usize,
    size: usize,
    n_copies: usize,
    stride_tensor: usize,
    stride_data: usize,
) {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        let t = tensor_arg!(tensor);
        imp::tensor_get_2d_async(backend, t, data, offset, size, n_copies, stride_tensor, stride_data)
    })
}

/// Tensor copy between different backends.
#[cfg(not(feature = "abi-0-9-8"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_copy(src: *const ggml_tensor, dst: *mut ggml_tensor) {
    ffi_boundary!({ imp::tensor_copy(tensor_arg!(src), tensor_arg!(dst)) })
}

/// (ggml 0.9.8 declares `src` without const; the copy only reads it)
#[cfg(feature = "abi-0-9-8")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_copy(src: *mut ggml_tensor, dst: *mut ggml_tensor) {
    ffi_boundary!({ imp::tensor_copy(tensor_arg!(src), tensor_arg!(dst)) })
}

/// Asynchronous copy: runs after the work queued on `backend_src`; `backend_dst` waits for it.
/// Falls back to a synchronous copy when the backends cannot do it asynchronously.
#[cfg(not(feature = "abi-0-9-8"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_copy_async(
    backend_src: ggml_backend_t,
    backend_dst: ggml_backend_t,
    src: *const ggml_tensor,
    dst: *mut ggml_tensor,
) {
    ffi_boundary!({
        let (src_t, dst_t) = (tensor_arg!(src), tensor_arg!(dst));
        if src_t == dst_t {
            return;
        }
        imp::tensor_copy_async(backend_src, arg!(Backend, backend_dst), src_t, dst_t)
    })
}

/// Asynchronous copy (see above; ggml 0.9.8 declares `src` without const).
#[cfg(feature = "abi-0-9-8")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_copy_async(
    backend_src: ggml_backend_t,
    backend_dst: ggml_backend_t,
    src: *mut ggml_tensor,
    dst: *mut ggml_tensor,
) {
    ffi_boundary!({
        let (src_t, dst_t) = (tensor_arg!(src), tensor_arg!(dst));
        if src_t == dst_t {
            return;
        }
        imp::tensor_copy_async(backend_src, arg!(Backend, backend_dst), src_t, dst_t)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_tensor_alloc(buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor, addr: *mut c_void) -> ggml_status {
    ffi_boundary!({
        let t = tensor_arg!(tensor);
        imp::tensor_alloc(arg!(Buffer, buffer), t, addr)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_view_init(tensor: *mut ggml_tensor) -> ggml_status {
    ffi_boundary!({ imp::view_init(tensor_arg!(tensor)) })
}
