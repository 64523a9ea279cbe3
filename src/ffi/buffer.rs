//! Exports: buffer types, buffers, multi-buffers (`ggml-backend.h`, `ggml-backend-impl.h`).
//! Each export checks its arguments, converts them, and calls `crate::backend::buffer`.

use std::ffi::{c_char, c_void};

use crate::backend::buffer as imp;
use crate::ggml::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t};
use crate::ggml::abi_backend::ggml_backend_dev_t;
use crate::ggml::sys::{BufferUsage, ggml_status, ggml_tensor};
use crate::{arg, ffi_boundary, tensor_arg};

fn out(buffer: Option<crate::ggml::handles::Buffer>) -> ggml_backend_buffer_t {
    buffer.map(|b| b.as_ptr()).unwrap_or(std::ptr::null_mut())
}

//
// buffer type
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_name(buft: ggml_backend_buffer_type_t) -> *const c_char {
    ffi_boundary!({ arg!(BufferType, buft).name_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_alloc_buffer(buft: ggml_backend_buffer_type_t, size: usize) -> ggml_backend_buffer_t {
    ffi_boundary!({ out(imp::buft_alloc_buffer(arg!(BufferType, buft), size)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_alignment(buft: ggml_backend_buffer_type_t) -> usize {
    ffi_boundary!({ arg!(BufferType, buft).alignment() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_max_size(buft: ggml_backend_buffer_type_t) -> usize {
    ffi_boundary!({ imp::buft_max_size(arg!(BufferType, buft)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_alloc_size(buft: ggml_backend_buffer_type_t, tensor: *const ggml_tensor) -> usize {
    ffi_boundary!({
        let buft = arg!(BufferType, buft);
        imp::buft_alloc_size(buft, tensor_arg!(tensor))
    })
}

/// The tensors of a `(tensors, n_tensors)` list argument of `function`, each checked non-NULL
/// (ggml 0.26.0's list entry points).
#[cfg(feature = "abi-0-26-0")]
fn tensor_list(function: &str, tensors: *mut *mut ggml_tensor, n_tensors: std::ffi::c_int) -> Vec<crate::ggml::tensor::TensorRef> {
    crate::ensure!(n_tensors >= 0, "{function}: n_tensors is {n_tensors}");
    if n_tensors == 0 {
        return Vec::new();
    }
    crate::ensure!(!tensors.is_null(), "{function}: argument `tensors` is NULL with n_tensors = {n_tensors}");
    // SAFETY: the C API contract: `tensors` points to `n_tensors` tensor pointers.
    let list = unsafe { std::slice::from_raw_parts(tensors, n_tensors as usize) };
    list.iter()
        .enumerate()
        // SAFETY: a non-NULL entry is a live tensor (the contract); NULL is reported by index.
        .map(|(i, &t)| unsafe { crate::ggml::tensor::TensorRef::from_raw(t) }.unwrap_or_else(|| crate::fatal!("{function}: tensors[{i}] is NULL")))
        .collect()
}

/// One buffer (or a multi-buffer) of `buft` holding every unallocated tensor of the list, placed
/// by the buffer type's own `alloc_buffer_n` or else in order, each buffer within its largest
/// size; NULL when there is nothing to allocate or on failure (ggml 0.26.0).
#[cfg(feature = "abi-0-26-0")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_alloc_buffer_n(
    buft: ggml_backend_buffer_type_t,
    tensors: *mut *mut ggml_tensor,
    n_tensors: std::ffi::c_int,
) -> ggml_backend_buffer_t {
    ffi_boundary!({
        let buft = arg!(BufferType, buft);
        let list = tensor_list(crate::function_name!(), tensors, n_tensors);
        out(crate::alloc::ctx_tensors::buft_alloc_buffer_n(buft, &list))
    })
}

/// The bytes `ggml_backend_buft_alloc_buffer_n` would allocate for the list (ggml 0.26.0).
#[cfg(feature = "abi-0-26-0")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_alloc_size_n(
    buft: ggml_backend_buffer_type_t,
    tensors: *mut *mut ggml_tensor,
    n_tensors: std::ffi::c_int,
) -> usize {
    ffi_boundary!({
        let buft = arg!(BufferType, buft);
        let list = tensor_list(crate::function_name!(), tensors, n_tensors);
        crate::alloc::ctx_tensors::buft_alloc_size_n(buft, &list)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_is_host(buft: ggml_backend_buffer_type_t) -> bool {
    ffi_boundary!({ imp::buft_is_host(arg!(BufferType, buft)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_device(buft: ggml_backend_buffer_type_t) -> ggml_backend_dev_t {
    ffi_boundary!({ arg!(BufferType, buft).device_ptr() })
}

//
// buffer
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_name(buffer: ggml_backend_buffer_t) -> *const c_char {
    ffi_boundary!({
        let buffer = arg!(Buffer, buffer);
        arg!(BufferType, buffer.buft_ptr()).name_ptr()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_free(buffer: ggml_backend_buffer_t) {
    ffi_boundary!({
        // SAFETY: NULL or a buffer made by ggml_backend_buffer_init that the caller gives up.
        if let Some(b) = unsafe { crate::ggml::handles::Buffer::from_raw(buffer) } {
            unsafe { imp::buffer_free(b) };
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_base(buffer: ggml_backend_buffer_t) -> *mut c_void {
    ffi_boundary!({ imp::buffer_base(arg!(Buffer, buffer)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_size(buffer: ggml_backend_buffer_t) -> usize {
    ffi_boundary!({ arg!(Buffer, buffer).size() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_init_tensor(buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor) -> ggml_status {
    ffi_boundary!({
        let buffer = arg!(Buffer, buffer);
        imp::buffer_init_tensor(buffer, tensor_arg!(tensor))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_alignment(buffer: ggml_backend_buffer_t) -> usize {
    ffi_boundary!({
        let buffer = arg!(Buffer, buffer);
        arg!(BufferType, buffer.buft_ptr()).alignment()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_max_size(buffer: ggml_backend_buffer_t) -> usize {
    ffi_boundary!({
        let buffer = arg!(Buffer, buffer);
        imp::buft_max_size(arg!(BufferType, buffer.buft_ptr()))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_alloc_size(buffer: ggml_backend_buffer_t, tensor: *const ggml_tensor) -> usize {
    ffi_boundary!({
        let buffer = arg!(Buffer, buffer);
        let buft = arg!(BufferType, buffer.buft_ptr());
        imp::buft_alloc_size(buft, tensor_arg!(tensor))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_clear(buffer: ggml_backend_buffer_t, value: u8) {
    ffi_boundary!({ imp::buffer_clear(arg!(Buffer, buffer), value) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_is_host(buffer: ggml_backend_buffer_t) -> bool {
    ffi_boundary!({ imp::buffer_is_host(arg!(Buffer, buffer)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_set_usage(buffer: ggml_backend_buffer_t, usage: BufferUsage) {
    ffi_boundary!({ imp::buffer_set_usage(arg!(Buffer, buffer), usage) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_usage(buffer: ggml_backend_buffer_t) -> BufferUsage {
    ffi_boundary!({ arg!(Buffer, buffer).usage() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_type(buffer: ggml_backend_buffer_t) -> ggml_backend_buffer_type_t {
    ffi_boundary!({ arg!(Buffer, buffer).buft_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_reset(buffer: ggml_backend_buffer_t) {
    ffi_boundary!({ arg!(Buffer, buffer).reset() })
}
