//! Exports of `ggml-alloc.h`.

use std::ffi::c_int;

use crate::alloc::ctx_tensors;
use crate::alloc::gallocr::{AllocError, Gallocr, GraphInput};
use crate::alloc::tallocr;
use crate::ffi::boundary::graph_arg;
use crate::ffi::handle::BoxedHandle;
use crate::ggml::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t, ggml_gallocr_t, ggml_tallocr};
use crate::ggml::context::ContextRef;
use crate::ggml::handles::BufferType;
use crate::ggml::sys::{ggml_cgraph, ggml_context, ggml_status, ggml_tensor};
use crate::{arg, ffi_boundary, tensor_arg};

fn context_arg(function: &str, ctx: *mut ggml_context) -> ContextRef {
    // SAFETY: the C API contract: a non-NULL context argument is a live context.
    match unsafe { ContextRef::from_raw(ctx) } {
        Some(c) => c,
        None => crate::fatal!("{function}: argument `ctx` is NULL"),
    }
}

fn ids<'a>(function: &str, ids: *const c_int, n: usize) -> Option<&'a [i32]> {
    if ids.is_null() || n == 0 {
        return None;
    }
    let _ = function;
    // SAFETY: the caller passes one buffer id per node (per leaf).
    Some(unsafe { std::slice::from_raw_parts(ids, n) })
}

//
// tensor allocator
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_tallocr_new(buffer: ggml_backend_buffer_t) -> ggml_tallocr {
    ffi_boundary!("ggml_tallocr_new", { tallocr::tallocr_new(arg!("ggml_tallocr_new", Buffer, buffer)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_tallocr_alloc(talloc: *mut ggml_tallocr, tensor: *mut ggml_tensor) -> ggml_status {
    ffi_boundary!("ggml_tallocr_alloc", {
        crate::ensure!(!talloc.is_null(), "ggml_tallocr_alloc: argument `talloc` is NULL");
        // SAFETY: the caller's allocator struct, exclusively ours during the call.
        let talloc = unsafe { &mut *talloc };
        tallocr::tallocr_alloc(talloc, tensor_arg!("ggml_tallocr_alloc", tensor))
    })
}

//
// graph allocator
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_new(buft: ggml_backend_buffer_type_t) -> ggml_gallocr_t {
    ffi_boundary!("ggml_gallocr_new", {
        let buft = arg!("ggml_gallocr_new", BufferType, buft);
        Gallocr::new(&[buft]).into_c()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_new_n(bufts: *mut ggml_backend_buffer_type_t, n_bufs: c_int) -> ggml_gallocr_t {
    ffi_boundary!("ggml_gallocr_new_n", {
        const F: &str = "ggml_gallocr_new_n";
        crate::ensure!(n_bufs > 0, "{F}: n_bufs is {n_bufs}; need at least one buffer type");
        crate::ensure!(!bufts.is_null(), "{F}: argument `bufts` is NULL (n_bufs = {n_bufs}); pass an array of n_bufs buffer types");
        // SAFETY: the caller passes n_bufs buffer types.
        let raw = unsafe { std::slice::from_raw_parts(bufts, n_bufs as usize) };
        let bufts: Vec<BufferType> = raw
            .iter()
            .enumerate()
            // SAFETY: the C API contract: a non-NULL buffer type is a live buffer type.
            .map(|(i, &b)| unsafe { BufferType::from_raw(b) }.unwrap_or_else(|| crate::fatal!("{F}: bufts[{i}] is NULL (n_bufs = {n_bufs})")))
            .collect();
        Gallocr::new(&bufts).into_c()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_free(galloc: ggml_gallocr_t) {
    ffi_boundary!("ggml_gallocr_free", {
        // SAFETY: made by ggml_gallocr_new_n (or NULL); the caller gives it up.
        unsafe { Gallocr::free(galloc) }
    })
}

/// Plans a worst-case graph and allocates the buffers, without placing the graph's tensors.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_reserve(galloc: ggml_gallocr_t, graph: *mut ggml_cgraph) -> bool {
    ffi_boundary!("ggml_gallocr_reserve", {
        // SAFETY: same arguments, same contract.
        unsafe { ggml_gallocr_reserve_n(galloc, graph, std::ptr::null(), std::ptr::null()) }
    })
}

/// Writes to `sizes` (one per buffer id) the bytes `ggml_gallocr_reserve_n` would allocate.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_reserve_n_size(
    galloc: ggml_gallocr_t,
    graph: *mut ggml_cgraph,
    node_buffer_ids: *const c_int,
    leaf_buffer_ids: *const c_int,
    sizes: *mut usize,
) {
    ffi_boundary!("ggml_gallocr_reserve_n_size", {
        let mut g = Gallocr::arg("ggml_gallocr_reserve_n_size", galloc);
        let graph = graph_arg("ggml_gallocr_reserve_n_size", graph);
        crate::ensure!(!sizes.is_null(), "ggml_gallocr_reserve_n_size: argument `sizes` is NULL");
        let (nodes, leafs) = (graph.node_slice(), graph.leaf_slice());
        let input = GraphInput {
            nodes,
            node_ids: ids("ggml_gallocr_reserve_n_size", node_buffer_ids, nodes.len()),
            leafs,
            leaf_ids: ids("ggml_gallocr_reserve_n_size", leaf_buffer_ids, leafs.len()),
            extra_flags: None,
        };
        if let Err(e) = g.reserve(&input, true) {
            crate::fatal!("ggml_gallocr_reserve_n_size: {e:?}");
        }
        // SAFETY: the caller passes one size slot per buffer id.
        let out = unsafe { std::slice::from_raw_parts_mut(sizes, g.n_buffers()) };
        out.copy_from_slice(&g.planned_sizes());
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_reserve_n(
    galloc: ggml_gallocr_t,
    graph: *mut ggml_cgraph,
    node_buffer_ids: *const c_int,
    leaf_buffer_ids: *const c_int,
) -> bool {
    ffi_boundary!("ggml_gallocr_reserve_n", {
        let mut g = Gallocr::arg("ggml_gallocr_reserve_n", galloc);
        let graph = graph_arg("ggml_gallocr_reserve_n", graph);
        let (nodes, leafs) = (graph.node_slice(), graph.leaf_slice());
        let input = GraphInput {
            nodes,
            node_ids: ids("ggml_gallocr_reserve_n", node_buffer_ids, nodes.len()),
            leafs,
            leaf_ids: ids("ggml_gallocr_reserve_n", leaf_buffer_ids, leafs.len()),
            extra_flags: None,
        };
        g.reserve(&input, false).is_ok()
    })
}

/// Places the graph's tensors. With one buffer type a graph that needs a new plan is planned
/// automatically; with several, false is returned and `ggml_gallocr_reserve_n` must come first.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_alloc_graph(galloc: ggml_gallocr_t, graph: *mut ggml_cgraph) -> bool {
    ffi_boundary!("ggml_gallocr_alloc_graph", {
        let mut g = Gallocr::arg("ggml_gallocr_alloc_graph", galloc);
        let graph = graph_arg("ggml_gallocr_alloc_graph", graph);
        let (nodes, leafs) = (graph.node_slice(), graph.leaf_slice());
        let (node_ids, leaf_ids) = g.last_ids(nodes.len(), leafs.len());
        let input = GraphInput { nodes, node_ids: node_ids.as_deref(), leafs, leaf_ids: leaf_ids.as_deref(), extra_flags: None };
        let single = g.n_buffers() == 1;
        match g.alloc_graph(&input, single) {
            Ok(_) => true,
            Err(AllocError::NeedsReserve) => false,
            Err(_) => false,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_get_buffer_size(galloc: ggml_gallocr_t, buffer_id: c_int) -> usize {
    ffi_boundary!("ggml_gallocr_get_buffer_size", {
        let g = Gallocr::arg("ggml_gallocr_get_buffer_size", galloc);
        crate::ensure!(buffer_id >= 0, "ggml_gallocr_get_buffer_size: buffer id {buffer_id} is negative");
        g.buffer_size(buffer_id as usize)
    })
}

//
// context allocation
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_alloc_ctx_tensors_from_buft_size(ctx: *mut ggml_context, buft: ggml_backend_buffer_type_t) -> usize {
    ffi_boundary!("ggml_backend_alloc_ctx_tensors_from_buft_size", {
        let buft = arg!("ggml_backend_alloc_ctx_tensors_from_buft_size", BufferType, buft);
        ctx_tensors::ctx_tensors_size(context_arg("ggml_backend_alloc_ctx_tensors_from_buft_size", ctx), buft)
    })
}

/// A buffer holding every tensor of `ctx` that has no data yet; NULL on failure or when there
/// is nothing to allocate.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_alloc_ctx_tensors_from_buft(ctx: *mut ggml_context, buft: ggml_backend_buffer_type_t) -> ggml_backend_buffer_t {
    ffi_boundary!("ggml_backend_alloc_ctx_tensors_from_buft", {
        let ctx = context_arg("ggml_backend_alloc_ctx_tensors_from_buft", ctx);
        let buft = arg!("ggml_backend_alloc_ctx_tensors_from_buft", BufferType, buft);
        // SAFETY: meta.cpp's predicate and allocator for its own buffer type.
        if unsafe { crate::ggml::sys::ggml_backend_buft_is_meta(buft.as_ptr()) } {
            return unsafe { crate::ggml::sys::ggml_backend_meta_alloc_ctx_tensors_from_buft(ctx.as_ptr(), buft.as_ptr()) };
        }
        ctx_tensors::alloc_ctx_tensors(ctx, buft).map(|b| b.as_ptr()).unwrap_or(std::ptr::null_mut())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_alloc_ctx_tensors(ctx: *mut ggml_context, backend: ggml_backend_t) -> ggml_backend_buffer_t {
    ffi_boundary!("ggml_backend_alloc_ctx_tensors", {
        let buft = crate::backend::stream::default_buffer_type(arg!("ggml_backend_alloc_ctx_tensors", Backend, backend));
        // SAFETY: same arguments, same contract.
        unsafe { ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft.as_ptr()) }
    })
}
