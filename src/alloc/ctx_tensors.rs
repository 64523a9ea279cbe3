//! `ggml_backend_alloc_ctx_tensors*`: one buffer (or a multi-buffer, when the buffer type's max
//! size is exceeded) holding every unallocated tensor of a context, in creation order.

use std::ffi::c_void;

use crate::alloc::tallocr::{tallocr_alloc, tallocr_new};
use crate::backend::buffer::{OwnedBuffer, buft_alloc_owned, buft_alloc_size, buft_max_size, multi_buffer_alloc};
use crate::backend::tensor_io::view_init;
use crate::ggml::context::ContextRef;
use crate::ggml::handles::{Buffer, BufferType};
use crate::ggml::sys::GGML_STATUS_SUCCESS;
use crate::ggml::tensor::TensorRef;

/// Consecutive tensors of the context that share one buffer, and that buffer's size.
fn ranges(tensors: &[TensorRef], buft: BufferType) -> Vec<(usize, usize, usize)> {
    let alignment = buft.alignment().max(1);
    let max_size = buft_max_size(buft);
    let mut out = Vec::new();
    let (mut first, mut cur) = (0usize, 0usize);
    for (i, &t) in tensors.iter().enumerate() {
        let this = if t.data().is_null() && !t.is_view() { buft_alloc_size(buft, t).next_multiple_of(alignment) } else { 0 };
        if cur > 0 && cur + this > max_size {
            out.push((first, i, cur));
            first = i;
            cur = this;
        } else {
            cur += this;
        }
    }
    if cur > 0 {
        out.push((first, tensors.len(), cur));
    }
    out
}

pub fn ctx_tensors_size(ctx: ContextRef, buft: BufferType) -> usize {
    crate::ensure!(ctx.no_alloc(), "ggml_backend_alloc_ctx_tensors_from_buft_size: the context must be no_alloc");
    ranges(&ctx.tensors(), buft).iter().map(|r| r.2).sum()
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
    if buft.is_meta() {
        // the meta device splits tensors over its devices and places them itself
        return ctx.alloc_tensors_meta(buft);
    }
    crate::ensure!(ctx.no_alloc(), "ggml_backend_alloc_ctx_tensors_from_buft: the context must be no_alloc");
    let tensors = ctx.tensors();
    let mut buffers = Vec::new();
    let mut placed = Vec::new();
    for (first, last, size) in ranges(&tensors, buft) {
        let Some(owned) = buft_alloc_owned(buft, size) else {
            crate::log_error!(
                "ggml_backend_alloc_ctx_tensors_from_buft: failed to allocate {} buffer {} of size {size} (tensors {} to {}); \
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
                crate::log_error!("ggml_backend_alloc_ctx_tensors_from_buft: the {} buffer refused tensor {}\n", buft.name(), t);
                undo(&placed, buffers);
                return None;
            }
        }
    }
    match buffers.len() {
        0 => {
            crate::log_debug!("ggml_backend_alloc_ctx_tensors_from_buft: all tensors in the context are already allocated\n");
            None
        }
        1 => buffers.pop().map(OwnedBuffer::release),
        _ => Some(multi_buffer_alloc(buffers.into_iter().map(OwnedBuffer::release).collect())),
    }
}
