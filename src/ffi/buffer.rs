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
    ffi_boundary!("ggml_backend_buft_name", { arg!("ggml_backend_buft_name", BufferType, buft).name_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_alloc_buffer(buft: ggml_backend_buffer_type_t, size: usize) -> ggml_backend_buffer_t {
    ffi_boundary!("ggml_backend_buft_alloc_buffer", { out(imp::buft_alloc_buffer(arg!("ggml_backend_buft_alloc_buffer", BufferType, buft), size)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_alignment(buft: ggml_backend_buffer_type_t) -> usize {
    ffi_boundary!("ggml_backend_buft_get_alignment", { arg!("ggml_backend_buft_get_alignment", BufferType, buft).alignment() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_max_size(buft: ggml_backend_buffer_type_t) -> usize {
    ffi_boundary!("ggml_backend_buft_get_max_size", { imp::buft_max_size(arg!("ggml_backend_buft_get_max_size", BufferType, buft)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_alloc_size(buft: ggml_backend_buffer_type_t, tensor: *const ggml_tensor) -> usize {
    ffi_boundary!("ggml_backend_buft_get_alloc_size", {
        let buft = arg!("ggml_backend_buft_get_alloc_size", BufferType, buft);
        imp::buft_alloc_size(buft, tensor_arg!("ggml_backend_buft_get_alloc_size", tensor))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_is_host(buft: ggml_backend_buffer_type_t) -> bool {
    ffi_boundary!("ggml_backend_buft_is_host", { imp::buft_is_host(arg!("ggml_backend_buft_is_host", BufferType, buft)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buft_get_device(buft: ggml_backend_buffer_type_t) -> ggml_backend_dev_t {
    ffi_boundary!("ggml_backend_buft_get_device", { arg!("ggml_backend_buft_get_device", BufferType, buft).device_ptr() })
}

//
// buffer
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_name(buffer: ggml_backend_buffer_t) -> *const c_char {
    ffi_boundary!("ggml_backend_buffer_name", {
        let buffer = arg!("ggml_backend_buffer_name", Buffer, buffer);
        arg!("ggml_backend_buffer_name", BufferType, buffer.buft_ptr()).name_ptr()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_free(buffer: ggml_backend_buffer_t) {
    ffi_boundary!("ggml_backend_buffer_free", {
        // SAFETY: NULL or a buffer made by ggml_backend_buffer_init that the caller gives up.
        if let Some(b) = unsafe { crate::ggml::handles::Buffer::from_raw(buffer) } {
            unsafe { imp::buffer_free(b) };
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_base(buffer: ggml_backend_buffer_t) -> *mut c_void {
    ffi_boundary!("ggml_backend_buffer_get_base", { imp::buffer_base(arg!("ggml_backend_buffer_get_base", Buffer, buffer)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_size(buffer: ggml_backend_buffer_t) -> usize {
    ffi_boundary!("ggml_backend_buffer_get_size", { arg!("ggml_backend_buffer_get_size", Buffer, buffer).size() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_init_tensor(buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor) -> ggml_status {
    ffi_boundary!("ggml_backend_buffer_init_tensor", {
        let buffer = arg!("ggml_backend_buffer_init_tensor", Buffer, buffer);
        imp::buffer_init_tensor(buffer, tensor_arg!("ggml_backend_buffer_init_tensor", tensor))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_alignment(buffer: ggml_backend_buffer_t) -> usize {
    ffi_boundary!("ggml_backend_buffer_get_alignment", {
        let buffer = arg!("ggml_backend_buffer_get_alignment", Buffer, buffer);
        arg!("ggml_backend_buffer_get_alignment", BufferType, buffer.buft_ptr()).alignment()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_max_size(buffer: ggml_backend_buffer_t) -> usize {
    ffi_boundary!("ggml_backend_buffer_get_max_size", {
        let buffer = arg!("ggml_backend_buffer_get_max_size", Buffer, buffer);
        imp::buft_max_size(arg!("ggml_backend_buffer_get_max_size", BufferType, buffer.buft_ptr()))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_alloc_size(buffer: ggml_backend_buffer_t, tensor: *const ggml_tensor) -> usize {
    ffi_boundary!("ggml_backend_buffer_get_alloc_size", {
        let buffer = arg!("ggml_backend_buffer_get_alloc_size", Buffer, buffer);
        let buft = arg!("ggml_backend_buffer_get_alloc_size", BufferType, buffer.buft_ptr());
        imp::buft_alloc_size(buft, tensor_arg!("ggml_backend_buffer_get_alloc_size", tensor))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_clear(buffer: ggml_backend_buffer_t, value: u8) {
    ffi_boundary!("ggml_backend_buffer_clear", { imp::buffer_clear(arg!("ggml_backend_buffer_clear", Buffer, buffer), value) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_is_host(buffer: ggml_backend_buffer_t) -> bool {
    ffi_boundary!("ggml_backend_buffer_is_host", { imp::buffer_is_host(arg!("ggml_backend_buffer_is_host", Buffer, buffer)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_set_usage(buffer: ggml_backend_buffer_t, usage: BufferUsage) {
    ffi_boundary!("ggml_backend_buffer_set_usage", { imp::buffer_set_usage(arg!("ggml_backend_buffer_set_usage", Buffer, buffer), usage) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_usage(buffer: ggml_backend_buffer_t) -> BufferUsage {
    ffi_boundary!("ggml_backend_buffer_get_usage", { arg!("ggml_backend_buffer_get_usage", Buffer, buffer).usage() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_get_type(buffer: ggml_backend_buffer_t) -> ggml_backend_buffer_type_t {
    ffi_boundary!("ggml_backend_buffer_get_type", { arg!("ggml_backend_buffer_get_type", Buffer, buffer).buft_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_reset(buffer: ggml_backend_buffer_t) {
    ffi_boundary!("ggml_backend_buffer_reset", { arg!("ggml_backend_buffer_reset", Buffer, buffer).reset() })
}
