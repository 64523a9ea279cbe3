//! ggml contexts: iterating the tensors of a caller's context, and contexts the library creates
//! itself (graph copies).

use std::ptr::NonNull;

use crate::graph::GraphRef;
use crate::sys::{self, ggml_context, ggml_init_params};
use crate::tensor::TensorRef;

#[derive(Clone, Copy)]
pub struct ContextRef(NonNull<ggml_context>);

impl ContextRef {
    /// # Safety
    /// `ptr` is NULL or a live ggml context, valid while the value is used.
    pub unsafe fn from_raw(ptr: *mut ggml_context) -> Option<ContextRef> {
        NonNull::new(ptr).map(ContextRef)
    }

    pub fn as_ptr(self) -> *mut ggml_context {
        self.0.as_ptr()
    }

    pub fn no_alloc(self) -> bool {
        // SAFETY: a live context (from_raw's contract).
        unsafe { sys::ggml_get_no_alloc(self.as_ptr()) }
    }

    /// The tensors of the context in creation order.
    pub fn tensors(self) -> Vec<TensorRef> {
        let mut out = Vec::new();
        // SAFETY: a live context; ggml returns its own tensors or NULL.
        let mut t = unsafe { sys::ggml_get_first_tensor(self.as_ptr()) };
        while let Some(tensor) = unsafe { TensorRef::from_raw(t) } {
            out.push(tensor);
            // SAFETY: as above.
            t = unsafe { sys::ggml_get_next_tensor(self.as_ptr(), t) };
        }
        out
    }

    /// A new tensor with `src`'s type and shape (contiguous strides), no data.
    /// meta.cpp's placement of this context's tensors in its own buffer type: the buffer, or
    /// None when it could not allocate. (ggml 0.26.0 has no such function: its meta buffer type
    /// places a list of tensors through `alloc_buffer_n`.)
    #[cfg(not(feature = "abi-0-26-0"))]
    pub fn alloc_tensors_meta(self, buft: crate::handles::BufferType) -> Option<crate::handles::Buffer> {
        debug_assert!(buft.is_meta());
        // SAFETY: a live no_alloc context and meta.cpp's own buffer type, as its allocator expects.
        let raw = unsafe { crate::sys::ggml_backend_meta_alloc_ctx_tensors_from_buft(self.as_ptr(), buft.as_ptr()) };
        // SAFETY: NULL or the buffer meta.cpp just allocated.
        unsafe { crate::handles::Buffer::from_raw(raw) }
    }

    pub fn dup_tensor(self, src: TensorRef) -> TensorRef {
        // SAFETY: a live no_alloc context with room (sized by the creator).
        let t = unsafe { sys::ggml_dup_tensor(self.as_ptr(), src.as_ptr()) };
        // SAFETY: ggml_dup_tensor returns a tensor of the context, or aborts.
        unsafe { TensorRef::from_raw(t) }.unwrap_or_else(|| crate::fatal!("ggml_dup_tensor returned NULL"))
    }

    pub fn new_graph(self, size: usize) -> GraphRef {
        // SAFETY: a live context with room for the graph (sized by the creator).
        let g = unsafe { sys::ggml_new_graph_custom(self.as_ptr(), size, false) };
        // SAFETY: ggml returns a graph of the context, or aborts.
        unsafe { GraphRef::from_raw(g) }.unwrap_or_else(|| crate::fatal!("ggml_new_graph_custom returned NULL"))
    }
}

/// A context created by the library (no_alloc: metadata only).
pub fn new_context(mem_size: usize) -> Option<ContextRef> {
    let params = ggml_init_params { mem_size, mem_buffer: std::ptr::null_mut(), no_alloc: true };
    // SAFETY: ggml_init with a fresh buffer of its own; NULL on failure.
    unsafe { ContextRef::from_raw(sys::ggml_init(params)) }
}

pub fn free_context(ctx: *mut ggml_context) {
    // SAFETY: ggml_free accepts NULL and contexts created by ggml_init.
    unsafe { sys::ggml_free(ctx) }
}

pub fn tensor_overhead() -> usize {
    // SAFETY: a pure function of ggml.
    unsafe { sys::ggml_tensor_overhead() }
}

pub fn graph_overhead(size: usize) -> usize {
    // SAFETY: a pure function of ggml.
    unsafe { sys::ggml_graph_overhead_custom(size, false) }
}
