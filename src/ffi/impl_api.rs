//! Exports of `ggml-backend-impl.h`: what backends call to build buffers, and the multi-buffer.

use std::ffi::c_void;

use crate::backend::buffer as imp;
use crate::ggml::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t};
use crate::ggml::abi_impl::ggml_backend_buffer_i;
use crate::ggml::sys::{BufferUsage, ggml_op, ggml_tensor};
use crate::{arg, ffi_boundary, tensor_arg};

/// True for ops that may need more than `ggml_nbytes` for their result on some backends.
/// (newer than ggml 0.9.8)
#[cfg(not(feature = "abi-0-9-8"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_op_alloc_size_may_expand(op: ggml_op) -> bool {
    ffi_boundary!({ imp::op_alloc_size_may_expand(op) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_init(
    buft: ggml_backend_buffer_type_t,
    iface: ggml_backend_buffer_i,
    context: *mut c_void,
    size: usize,
) -> ggml_backend_buffer_t {
    ffi_boundary!({ imp::buffer_init(buft, iface, context, size).as_ptr() })
}

/// Do not use directly: use `ggml_backend_tensor_copy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_copy_tensor(src: *const ggml_tensor, dst: *mut ggml_tensor) -> bool {
    ffi_boundary!({
        let src = tensor_arg!(src);
        crate::backend::tensor_io::buffer_copy_tensor(src, tensor_arg!(dst))
    })
}

//
// multi-buffer
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_multi_buffer_alloc_buffer(buffers: *mut ggml_backend_buffer_t, n_buffers: usize) -> ggml_backend_buffer_t {
    ffi_boundary!({
        crate::ensure!(!buffers.is_null() && n_buffers > 0, "{}: no buffers given", crate::function_name!());
        // SAFETY: the caller passes n_buffers buffer pointers.
        let raw = unsafe { std::slice::from_raw_parts(buffers, n_buffers) };
        let parts = raw.iter().map(|&b| arg!(Buffer, b)).collect();
        imp::multi_buffer_alloc(parts).as_ptr()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_buffer_is_multi_buffer(buffer: ggml_backend_buffer_t) -> bool {
    ffi_boundary!({ imp::is_multi_buffer(arg!(Buffer, buffer)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_multi_buffer_set_usage(buffer: ggml_backend_buffer_t, usage: BufferUsage) {
    ffi_boundary!({ imp::multi_buffer_set_usage(arg!(Buffer, buffer), usage) })
}

/// Ops that may compute in place of an operand (backends must not use restrict pointers for
/// them). Upstream declares it in its private ggml-impl.h.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_op_can_inplace(op: ggml_op) -> bool {
    ffi_boundary!({ crate::alloc::inplace::op_can_inplace(op) })
}
