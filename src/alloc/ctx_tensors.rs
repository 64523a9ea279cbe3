//! `ggml_backend_alloc_ctx_tensors*`: one buffer (or a multi-buffer, when the buffer type's max
//! size is exceeded) holding every unallocated tensor of a context, in creation order.
//!
//! ggml 0.26.0 (the abi-0-26-0 profile) plans a list of tensors instead of a context:
//! `ggml_backend_buft_alloc_buffer_n` / `ggml_backend_buft_get_alloc_size_n` call the buffer
//! type's own entries when it has them (the meta device's does) and else the plan below; the
//! context functions hand their tensors to those two.

use std::ffi::c_void;

use crate::alloc::tallocr::{tallocr_alloc, tallocr_new};
use crate::backend::buffer::{OwnedBuffer, buft_alloc_owned, buft_alloc_size, buft_max_size, multi_buffer_alloc};
use crate::backend::tensor_io::view_init;
use crate::ggml::context::ContextRef;
use crate::ggml::handles::{Buffer, BufferType};
use crate::ggml::sys::GGML_STATUS_SUCCESS;
use crate::ggml::tensor::TensorRef;

/// Consecutive tensors of the context that share one buffer (`first..end`), and its size.
struct BufferRange {
    first: usize,
    end: usize,
    size: usize,
}

/// The buffers a context's tensors need, each within the buffer type's largest size.
fn ranges(tensors: &[TensorRef], buft: BufferType) -> Vec<BufferRange> {
    let alignment = buft.alignment().max(1);
    let max_size = buft_max_size(buft);
    let mut out = Vec::new();
    let (mut first, mut cur) = (0usize, 0usize);
    for (i, &t) in tensors.iter().enumerate() {
        let this = if t.data().is_null() && !t.is_view() { buft_alloc_size(buft, t).next_multiple_of(alignment) } else { 0 };
        if cur > 0 && cur + this > max_size {
            out.push(BufferRange { first, end: i, size: cur });
            first = i;
            cur = this;
        } else {
            cur += this;
        }
    }
    if cur > 0 {
        out.push(BufferRange { first, end: tensors.len(), size: cur });
    }
    out
}

pub fn ctx_tensors_size(ctx: ContextRef, buft: BufferType) -> usize {
    crate::ensure!(ctx.no_alloc(), "ggml_backend_alloc_ctx_tensors_from_buft_size: the context must be no_alloc");
    #[cfg(feature = "abi-0-26-0")]
    {
        let tensors = ctx.tensors();
        if tensors.is_empty() {
            return 0;
        }
        buft_alloc_size_n(buft, &tensors)
    }
    #[cfg(not(feature = "abi-0-26-0"))]
    list_size(&ctx.tensors(), buft)
}

/// The default of `get_alloc_size_n`: the bytes the default `alloc_buffer_n` would allocate.
fn list_size(tensors: &[TensorRef], buft: BufferType) -> usize {
    ranges(tensors, buft).iter().map(|r| r.size).sum()
}

/// `ggml_backend_buft_get_alloc_size_n` (ggml 0.26.0): the buffer type's own entry, else the
/// default plan's total.
#[cfg(feature = "abi-0-26-0")]
pub fn buft_alloc_size_n(buft: BufferType, tensors: &[TensorRef]) -> usize {
    let mut raw: Vec<_> = tensors.iter().map(|t| t.as_ptr()).collect();
    buft.alloc_size_n(&mut raw).unwrap_or_else(|| list_size(tensors, buft))
}

/// `ggml_backend_buft_alloc_buffer_n` (ggml 0.26.0): the buffer type's own entry, else the
/// default plan ([`alloc_list`]).
#[cfg(feature = "abi-0-26-0")]
pub fn buft_alloc_buffer_n(buft: BufferType, tensors: &[TensorRef]) -> Option<Buffer> {
    let mut raw: Vec<_> = tensors.iter().map(|t| t.as_ptr()).collect();
    match buft.alloc_buffer_n_raw(&mut raw) {
        // SAFETY: the buffer type returns NULL or a buffer it made with buffer_init.
        Some(b) => unsafe { Buffer::from_raw(b) },
        None => alloc_list(tensors, buft, "ggml_backend_buft_alloc_buffer_n"),
    }
}

/// A tensor this call gave memory (or pointed at memory, for views), and the fields it had
/// before: what a failure must undo.
struct Placed {
    tensor: TensorRef,
    data: *mut c_void,
    extra: *mut c_void,
}

/// Undoes a failed call: the tensors it placed get their fields back (every one of them had no
/// buffer before), so none points into the buffers it made and a retry places them again instead
/// of skipping them as allocated; then those buffers are freed.
/// Upstream frees the buffers and leaves the tensors pointing into them.
fn undo(placed: &[Placed], buffers: Vec<OwnedBuffer>) {
    for p in placed {
        p.tensor.set_data(p.data);
        p.tensor.set_buffer(std::ptr::null_mut());
        p.tensor.set_extra(p.extra);
    }
    drop(buffers); // freed: no tensor points into them now
}

pub fn alloc_ctx_tensors(ctx: ContextRef, buft: BufferType) -> Option<Buffer> {
    #[cfg(not(feature = "abi-0-26-0"))]
    if buft.is_meta() {
        // the meta device splits tensors over its devices and places them itself
        return ctx.alloc_tensors_meta(buft);
    }
    crate::ensure!(ctx.no_alloc(), "ggml_backend_alloc_ctx_tensors_from_buft: the context must be no_alloc");
    let tensors = ctx.tensors();
    // ggml 0.26.0: through the buffer type's alloc_buffer_n (the meta device places its tensors
    // itself there), the default plan when it has none
    #[cfg(feature = "abi-0-26-0")]
    {
        if tensors.is_empty() {
            return None;
        }
        buft_alloc_buffer_n(buft, &tensors)
    }
    #[cfg(not(feature = "abi-0-26-0"))]
    alloc_list(&tensors, buft, "ggml_backend_alloc_ctx_tensors_from_buft")
}

/// Places every unallocated tensor of `tensors` (in order) in buffers of `buft`, each within its
/// largest size: one buffer, a multi-buffer over several, or None when there was nothing to place
/// or a buffer could not be made (then every tensor placed is unallocated again). `function`
/// names the C entry point in messages.
fn alloc_list(tensors: &[TensorRef], buft: BufferType, function: &str) -> Option<Buffer> {
    let mut buffers = Vec::new();
    let mut placed = Vec::new();
    for BufferRange { first, end: last, size } in ranges(tensors, buft) {
        let Some(owned) = buft_alloc_owned(buft, size) else {
            crate::log_error!(
                "{function}: failed to allocate {} buffer {} of size {size} (tensors {} to {}); \
                 the {} tensors placed in the buffers before it are unallocated again\n",
                buft.name(),
                buffers.len() + 1,
                tensors[first],
                tensors[last - 1],
                placed.len()
            );
            undo(&placed, buffers);
            return None;
        };
        let buffer = *owned;
        buffers.push(owned);
        let mut talloc = tallocr_new(buffer);
        for &t in &tensors[first..last] {
            let is_view = match (t.data().is_null(), t.is_view(), t.buffer_ptr().is_null()) {
                (true, false, _) => false,
                (_, true, true) => true,
                _ => continue, // allocated already, by someone else
            };
            placed.push(Placed { tensor: t, data: t.data(), extra: t.extra() });
            let status = if is_view { view_init(t) } else { tallocr_alloc(&mut talloc, t) };
            if status != GGML_STATUS_SUCCESS {
                crate::log_error!("{function}: the {} buffer refused tensor {}\n", buft.name(), t);
                undo(&placed, buffers);
                return None;
            }
        }
    }
    match buffers.len() {
        0 => {
            crate::log_debug!("{function}: all tensors are already allocated\n");
            None
        }
        1 => buffers.pop().map(OwnedBuffer::release),
        _ => Some(multi_buffer_alloc(buffers.into_iter().map(OwnedBuffer::release).collect())),
    }
}
