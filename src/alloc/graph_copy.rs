//! Copying a computed graph to another backend (`ggml_backend_graph_copy`) and comparing two
//! backends node by node (`ggml_backend_compare_graph_backend`, what test-backend-ops is built on).

use std::collections::HashMap;

use crate::alloc::ctx_tensors::alloc_ctx_tensors;
use crate::backend::stream::graph_compute;
use crate::backend::tensor_io::{tensor_copy, view_init};
use crate::ggml::abi_backend::{ggml_backend_eval_callback, ggml_backend_graph_copy};
use crate::ggml::context::{ContextRef, free_context, graph_overhead, new_context, tensor_overhead};
use crate::ggml::graph::{GraphRef, GraphView};
use crate::ggml::handles::{Backend, Buffer};
use crate::ggml::sys::{GGML_STATUS_SUCCESS, op};
use crate::ggml::tensor::TensorRef;

pub const EMPTY_COPY: ggml_backend_graph_copy = ggml_backend_graph_copy {
    buffer: std::ptr::null_mut(),
    ctx_allocated: std::ptr::null_mut(),
    ctx_unallocated: std::ptr::null_mut(),
    graph: std::ptr::null_mut(),
};

struct Copier {
    ctx_allocated: ContextRef,
    ctx_unallocated: ContextRef,
    copies: HashMap<TensorRef, TensorRef>,
    initialised: HashMap<TensorRef, bool>,
}

impl Copier {
    /// The copy of `src` (and, recursively, of its sources and view source).
    fn dup(&mut self, src: TensorRef) -> TensorRef {
        if let Some(&c) = self.copies.get(&src) {
            return c;
        }
        crate::ensure!(!src.data().is_null(), "ggml_backend_graph_copy: tensor {src} is not allocated (the graph must be allocated)");
        let ctx = if src.is_view() { self.ctx_unallocated } else { self.ctx_allocated };
        let dst = ctx.dup_tensor(src);
        dst.copy_description_from(src);
        if let Some(v) = src.view_src() {
            let v_copy = self.dup(v);
            dst.set_view(v_copy, src.view_offs());
        }
        for (i, s) in src.srcs().into_iter().enumerate() {
            if let Some(s) = s {
                let c = self.dup(s);
                dst.set_src(i, c.as_ptr());
            }
        }
        self.copies.insert(src, dst);
        dst
    }

    /// Copies the data of `src` into its copy (views: points them at their copied source).
    fn init(&mut self, src: TensorRef) {
        if self.initialised.insert(src, true).is_some() {
            return;
        }
        let dst = self.copies[&src];
        if let Some(v) = src.view_src() {
            self.init(v);
            let status = view_init(dst);
            crate::ensure!(status == GGML_STATUS_SUCCESS, "ggml_backend_graph_copy: view_init of {dst} failed");
        } else {
            tensor_copy(src, dst);
        }
        for s in src.srcs().into_iter().flatten() {
            self.init(s);
        }
    }
}

pub fn graph_copy(backend: Backend, graph: GraphRef) -> ggml_backend_graph_copy {
    let n_tensors = graph.n_nodes() * 11 + graph.n_leafs() + 16;
    let mem = tensor_overhead() * n_tensors + graph_overhead(graph.size().max(graph.n_nodes()));
    let (Some(ctx_allocated), Some(ctx_unallocated)) = (new_context(mem), new_context(mem)) else {
        crate::log_error!("ggml_backend_graph_copy: failed to allocate context for graph copy\n");
        return EMPTY_COPY;
    };
    let mut copier = Copier { ctx_allocated, ctx_unallocated, copies: HashMap::new(), initialised: HashMap::new() };
    for node in graph.nodes() {
        copier.dup(node);
    }
    let Some(buffer) = alloc_ctx_tensors(ctx_allocated, crate::backend::stream::default_buffer_type(backend)) else {
        crate::log_error!("ggml_backend_graph_copy: failed to allocate buffer for graph copy\n");
        free_context(ctx_allocated.as_ptr());
        free_context(ctx_unallocated.as_ptr());
        return EMPTY_COPY;
    };
    for node in graph.nodes() {
        copier.init(node);
    }
    let copy = ctx_allocated.new_graph(graph.size().max(graph.n_nodes()));
    for (i, node) in graph.nodes().enumerate() {
        copy.set_node(i, copier.copies[&node]);
    }
    copy.set_n_nodes(graph.n_nodes());
    ggml_backend_graph_copy { buffer: buffer.as_ptr(), ctx_allocated: ctx_allocated.as_ptr(), ctx_unallocated: ctx_unallocated.as_ptr(), graph: copy.as_ptr() }
}

pub fn graph_copy_free(copy: ggml_backend_graph_copy) {
    // SAFETY: the buffer of a graph copy was made by graph_copy (or is NULL).
    if let Some(b) = unsafe { Buffer::from_raw(copy.buffer) } {
        // SAFETY: the copy owns its buffer; the caller gives the copy up.
        unsafe { crate::backend::buffer::buffer_free(b) };
    }
    free_context(copy.ctx_allocated);
    free_context(copy.ctx_unallocated);
}

pub fn compare_graph_backend(
    backend1: Backend,
    backend2: Backend,
    graph: GraphRef,
    callback: ggml_backend_eval_callback,
    user_data: *mut std::ffi::c_void,
    test_nodes: &[TensorRef],
) -> bool {
    let copy = graph_copy(backend2, graph);
    // SAFETY: graph_copy returns a graph of its own context, or NULL.
    let Some(g2) = (unsafe { GraphRef::from_raw(copy.graph) }) else {
        return false;
    };
    let callback = callback.unwrap_or_else(|| crate::fatal!("ggml_backend_compare_graph_backend: callback is NULL"));
    let call = |i: usize, t1: TensorRef, t2: TensorRef| -> bool {
        // SAFETY: the caller's callback with the two computed tensors and its user data.
        unsafe { callback(i as i32, t1.as_ptr(), t2.as_ptr(), user_data) }
    };
    if !test_nodes.is_empty() {
        graph_compute(backend1, graph.as_ptr());
        graph_compute(backend2, g2.as_ptr());
        let mut verified = false;
        for (i, n1) in graph.nodes().enumerate() {
            if test_nodes.contains(&n1) {
                call(i, n1, g2.node(i));
                verified = true;
            }
        }
        crate::ensure!(verified, "ggml_backend_compare_graph_backend: none of the test nodes is in the graph");
    } else {
        let ctx1 = graph.view_context();
        let ctx2 = g2.view_context();
        for i in 0..graph.n_nodes() {
            let (t1, t2) = (graph.node(i), g2.node(i));
            let mut v1 = GraphView::new(vec![t1.as_ptr()], &ctx1, 0);
            let mut v2 = GraphView::new(vec![t2.as_ptr()], &ctx2, 0);
            graph_compute(backend1, v1.as_ptr());
            graph_compute(backend2, v2.as_ptr());
            if op::is_view(t1.op()) {
                continue;
            }
            if !call(i, t1, t2) {
                break;
            }
        }
    }
    graph_copy_free(copy);
    true
}
