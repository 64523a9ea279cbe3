//! Exports: the backend scheduler (`ggml-backend.h`).

use std::ffi::{c_int, c_void};

use crate::ffi::boundary::graph_arg;
use crate::ffi::handle::BoxedHandle;
use crate::ggml::abi_alloc::{ggml_backend_buffer_type_t, ggml_backend_t};
use crate::ggml::abi_backend::{ggml_backend_sched_eval_callback, ggml_backend_sched_t};
use crate::ggml::handles::{Backend, BufferType};
use crate::ggml::sys::{GGML_STATUS_FAILED, ggml_cgraph, ggml_status, ggml_tensor};
use crate::sched::scheduler::Sched;
use crate::{ffi_boundary, tensor_arg};

/// Creates a scheduler; backends with a lower index have priority, the last one must be a CPU
/// backend. `bufts` may be NULL (each backend's default buffer type).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_new(
    backends: *mut ggml_backend_t,
    bufts: *mut ggml_backend_buffer_type_t,
    n_backends: c_int,
    graph_size: usize,
    parallel: bool,
    op_offload: bool,
) -> ggml_backend_sched_t {
    ffi_boundary!({
        let _ = graph_size; // the scheduler grows with the graph; kept for the ABI
        let function = crate::function_name!();
        const MAX: usize = crate::sched::scheduler::MAX_BACKENDS;
        crate::ensure!(n_backends > 0, "{function}: n_backends is {n_backends}; need at least one backend (the last one a CPU backend)");
        crate::ensure!(n_backends as usize <= MAX, "{function}: n_backends is {n_backends}; at most {MAX} backends are supported");
        crate::ensure!(!backends.is_null(), "{function}: argument `backends` is NULL (n_backends = {n_backends}); pass an array of n_backends backends");
        // SAFETY: the caller passes n_backends backends (and as many buffer types, or NULL).
        let raw = unsafe { std::slice::from_raw_parts(backends, n_backends as usize) };
        let list: Vec<Backend> = raw
            .iter()
            .enumerate()
            // SAFETY: the C API contract: a non-NULL backend is a live backend.
            .map(|(i, &b)| unsafe { Backend::from_raw(b) }.unwrap_or_else(|| crate::fatal!("{function}: backends[{i}] is NULL (n_backends = {n_backends})")))
            .collect();
        let bufts = if bufts.is_null() {
            None
        } else {
            // SAFETY: a non-NULL `bufts` has one buffer type per backend (the C API contract).
            let raw = unsafe { std::slice::from_raw_parts(bufts, n_backends as usize) };
            Some(
                raw.iter()
                    .enumerate()
                    // SAFETY: the C API contract: a non-NULL buffer type is a live buffer type.
                    .map(|(i, &b)| {
                        unsafe { BufferType::from_raw(b) }.unwrap_or_else(|| {
                            crate::fatal!(
                                "{function}: bufts[{i}] is NULL; pass a buffer type for every backend, or NULL for `bufts` to use each backend's default"
                            )
                        })
                    })
                    .collect(),
            )
        };
        Sched::new(list, bufts, parallel, op_offload).into_c()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_free(sched: ggml_backend_sched_t) {
    ffi_boundary!({
        // SAFETY: made by ggml_backend_sched_new (or NULL); the caller gives it up.
        unsafe { Sched::free(sched) }
    })
}

/// Writes the compute buffer size each backend would need for `measure_graph` to `sizes`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_reserve_size(sched: ggml_backend_sched_t, measure_graph: *mut ggml_cgraph, sizes: *mut usize) {
    ffi_boundary!({
        let function = crate::function_name!();
        let mut s = Sched::arg(function, sched);
        crate::ensure!(!sizes.is_null(), "{}: argument `sizes` is NULL", function);
        let got = s.reserve_size(graph_arg(function, measure_graph));
        // SAFETY: the caller passes one slot per backend.
        unsafe { std::slice::from_raw_parts_mut(sizes, got.len()) }.copy_from_slice(&got);
    })
}

/// Allocates the compute buffers for a worst-case graph.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_reserve(sched: ggml_backend_sched_t, measure_graph: *mut ggml_cgraph) -> bool {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).reserve(graph_arg(crate::function_name!(), measure_graph)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_get_n_backends(sched: ggml_backend_sched_t) -> c_int {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).n_backends() as i32 })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_get_backend(sched: ggml_backend_sched_t, i: c_int) -> ggml_backend_t {
    ffi_boundary!({
        let function = crate::function_name!();
        let s = Sched::arg(function, sched);
        crate::ensure!(i >= 0, "{}: index {i} is negative", function);
        s.backend(i as usize).as_ptr()
    })
}

/// The number of splits of the last graph.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_get_n_splits(sched: ggml_backend_sched_t) -> c_int {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).n_splits() as i32 })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_get_n_copies(sched: ggml_backend_sched_t) -> c_int {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).n_copies() as i32 })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_get_buffer_type(sched: ggml_backend_sched_t, backend: ggml_backend_t) -> ggml_backend_buffer_type_t {
    ffi_boundary!({
        let function = crate::function_name!();
        let s = Sched::arg(function, sched);
        let b = s.backend_index(backend, function);
        s.buffer_type(b).as_ptr()
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_get_buffer_size(sched: ggml_backend_sched_t, backend: ggml_backend_t) -> usize {
    ffi_boundary!({
        let function = crate::function_name!();
        let s = Sched::arg(function, sched);
        let b = s.backend_index(backend, function);
        s.buffer_size(b)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_set_tensor_backend(sched: ggml_backend_sched_t, node: *mut ggml_tensor, backend: ggml_backend_t) {
    ffi_boundary!({
        let function = crate::function_name!();
        let mut s = Sched::arg(function, sched);
        let b = s.backend_index(backend, function);
        s.set_tensor_backend(tensor_arg!(node), b)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_get_tensor_backend(sched: ggml_backend_sched_t, node: *mut ggml_tensor) -> ggml_backend_t {
    ffi_boundary!({
        let s = Sched::arg(crate::function_name!(), sched);
        match s.tensor_backend(tensor_arg!(node)) {
            Some(b) => b.as_ptr(),
            None => std::ptr::null_mut(),
        }
    })
}

/// Assigns backends and splits the graph without allocating it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_split_graph(sched: ggml_backend_sched_t, graph: *mut ggml_cgraph) {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).split_graph_only(graph_arg(crate::function_name!(), graph)) })
}

/// Allocates `graph` (its compute tensors and the copies between backends).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_alloc_graph(sched: ggml_backend_sched_t, graph: *mut ggml_cgraph) -> bool {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).alloc_graph(graph_arg(crate::function_name!(), graph)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_graph_compute(sched: ggml_backend_sched_t, graph: *mut ggml_cgraph) -> ggml_status {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).graph_compute(graph_arg(crate::function_name!(), graph)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_graph_compute_async(sched: ggml_backend_sched_t, graph: *mut ggml_cgraph) -> ggml_status {
    ffi_boundary!({
        let function = crate::function_name!();
        if graph.is_null() {
            crate::log_error!("{}: graph is NULL\n", function);
            return GGML_STATUS_FAILED;
        }
        Sched::arg(function, sched).graph_compute_async(graph_arg(function, graph))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_synchronize(sched: ggml_backend_sched_t) {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).synchronize() })
}

/// Clears the assignments and the allocation: needed before changing assignments or allocating
/// another graph. The caller's graph is left exactly as it was built.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_reset(sched: ggml_backend_sched_t) {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).reset() })
}

/// Calls `callback` for each node during compute (see `ggml_backend_sched_eval_callback`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_sched_set_eval_callback(sched: ggml_backend_sched_t, callback: ggml_backend_sched_eval_callback, user_data: *mut c_void) {
    ffi_boundary!({ Sched::arg(crate::function_name!(), sched).set_eval_callback(callback, user_data) })
}
