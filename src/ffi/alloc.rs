//! Exports of `ggml-alloc.h`.

use std::ffi::c_int;

use crate::alloc::ctx_tensors;
use crate::alloc::gallocr::{AllocError, Gallocr, GraphInput};
use crate::alloc::tallocr;
use crate::ffi::boundary::graph_arg;
use crate::ffi::handle::BoxedHandle;
use crate::ggml::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t, ggml_gallocr_t, ggml_tallocr};
use crate::ggml::context::ContextRef;
use crate::ggml::graph::GraphRef;
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

/// the graph with the buffer ids a caller gave per node and leaf (NULL: all 0)
fn input_with_ids<'a>(function: &str, graph: &'a GraphRef, node_buffer_ids: *const c_int, leaf_buffer_ids: *const c_int) -> GraphInput<'a> {
    let (nodes, leafs) = (graph.node_slice(), graph.leaf_slice());
    GraphInput { nodes, node_ids: ids(function, node_buffer_ids, nodes.len()), leafs, leaf_ids: ids(function, leaf_buffer_ids, leafs.len()), extra_flags: None }
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
    ffi_boundary!({ tallocr::tallocr_new(arg!(Buffer, buffer)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_tallocr_alloc(talloc: *mut ggml_tallocr, tensor: *mut ggml_tensor) -> ggml_status {
    ffi_boundary!({
        crate::ensure!(!talloc.is_null(), "{}: argument `talloc` is NULL", crate::function_name!());
        // SAFETY: the caller's allocator struct, exclusively ours during the call.
        let talloc = unsafe { &mut *talloc };
        tallocr::tallocr_alloc(talloc, tensor_arg!(tensor))
    })
}

//
// graph allocator
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_new(buft: ggml_backend_buffer_type_t) -> ggml_gallocr_t {
    ffi_boundary!({
        let buft = arg!(BufferType, buft);
        Gallocr::new(&[buft]).into_c()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_new_n(bufts: *mut ggml_backend_buffer_type_t, n_bufs: c_int) -> ggml_gallocr_t {
    ffi_boundary!({
        let function = crate::function_name!();
        crate::ensure!(n_bufs > 0, "{function}: n_bufs is {n_bufs}; need at least one buffer type");
        crate::ensure!(!bufts.is_null(), "{function}: argument `bufts` is NULL (n_bufs = {n_bufs}); pass an array of n_bufs buffer types");
        // SAFETY: the caller passes n_bufs buffer types.
        let raw = unsafe { std::slice::from_raw_parts(bufts, n_bufs as usize) };
        let bufts: Vec<BufferType> = raw
            .iter()
            .enumerate()
            // SAFETY: the C API contract: a non-NULL buffer type is a live buffer type.
            .map(|(i, &b)| unsafe { BufferType::from_raw(b) }.unwrap_or_else(|| crate::fatal!("{function}: bufts[{i}] is NULL (n_bufs = {n_bufs})")))
            .collect();
        Gallocr::new(&bufts).into_c()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_free(galloc: ggml_gallocr_t) {
    ffi_boundary!({
        // SAFETY: made by ggml_gallocr_new_n (or NULL); the caller gives it up.
        unsafe { Gallocr::free(galloc) }
    })
}

/// Plans a worst-case graph and allocates the buffers, without placing the graph's tensors.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_reserve(galloc: ggml_gallocr_t, graph: *mut ggml_cgraph) -> bool {
    ffi_boundary!({
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
    ffi_boundary!({
        let function = crate::function_name!();
        let mut g = Gallocr::arg(function, galloc);
        let graph = graph_arg(function, graph);
        crate::ensure!(!sizes.is_null(), "{}: argument `sizes` is NULL", function);
        let input = input_with_ids(function, &graph, node_buffer_ids, leaf_buffer_ids);
        if let Err(e) = g.reserve(&input, true) {
            crate::fatal!("{}: {e}", function);
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
    ffi_boundary!({
        let function = crate::function_name!();
        let mut g = Gallocr::arg(function, galloc);
        let graph = graph_arg(function, graph);
        let input = input_with_ids(function, &graph, node_buffer_ids, leaf_buffer_ids);
        g.reserve(&input, false).is_ok()
    })
}

/// Places the graph's tensors. With one buffer type a graph that needs a new plan is planned
/// automatically; with several, false is returned and `ggml_gallocr_reserve_n` must come first.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_gallocr_alloc_graph(galloc: ggml_gallocr_t, graph: *mut ggml_cgraph) -> bool {
    ffi_boundary!({
        let function = crate::function_name!();
        let mut g = Gallocr::arg(function, galloc);
        let graph = graph_arg(function, graph);
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
    ffi_boundary!({
        let function = crate::function_name!();
        let g = Gallocr::arg(function, galloc);
        crate::ensure!(buffer_id >= 0, "{}: buffer id {buffer_id} is negative", function);
        g.buffer_size(buffer_id as usize)
    })
}

//
// context allocation
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_alloc_ctx_tensors_from_buft_size(ctx: *mut ggml_context, buft: ggml_backend_buffer_type_t) -> usize {
    ffi_boundary!({
        let buft = arg!(BufferType, buft);
        ctx_tensors::ctx_tensors_size(context_arg(crate::function_name!(), ctx), buft)
    })
}

/// A buffer holding every tensor of `ctx` that has no data yet; NULL on failure or when there
/// is nothing to allocate.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_alloc_ctx_tensors_from_buft(ctx: *mut ggml_context, buft: ggml_backend_buffer_type_t) -> ggml_backend_buffer_t {
    ffi_boundary!({
        let ctx = context_arg(crate::function_name!(), ctx);
        let buft = arg!(BufferType, buft);
        ctx_tensors::alloc_ctx_tensors(ctx, buft).map(|b| b.as_ptr()).unwrap_or(std::ptr::null_mut())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_alloc_ctx_tensors(ctx: *mut ggml_context, backend: ggml_backend_t) -> ggml_backend_buffer_t {
    ffi_boundary!({
        let buft = crate::backend::stream::default_buffer_type(arg!(Backend, backend));
        // SAFETY: same arguments, same contract.
        unsafe { ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft.as_ptr()) }
    })
}
