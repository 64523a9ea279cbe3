//! Exports: graph copy and backend comparison, and the CPU buffer types (`ggml-backend.h`).

use std::ffi::c_void;

use crate::alloc::graph_copy as imp;
use crate::backend::cpu_buffer;
use crate::ffi::boundary::graph_arg;
use crate::ggml::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t};
use crate::ggml::abi_backend::{ggml_backend_eval_callback, ggml_backend_graph_copy};
use crate::ggml::sys::{ggml_cgraph, ggml_tensor};
use crate::ggml::tensor::TensorRef;
use crate::{arg, ffi_boundary};

/// Copies a graph to a different backend.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_graph_copy(backend: ggml_backend_t, graph: *mut ggml_cgraph) -> ggml_backend_graph_copy {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        imp::graph_copy(backend, graph_arg(crate::function_name!(), graph))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_graph_copy_free(copy: ggml_backend_graph_copy) {
    ffi_boundary!({ imp::graph_copy_free(copy) })
}

/// Computes `graph` on both backends and hands each pair of results to `callback`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_compare_graph_backend(
    backend1: ggml_backend_t,
    backend2: ggml_backend_t,
    graph: *mut ggml_cgraph,
    callback: ggml_backend_eval_callback,
    user_data: *mut c_void,
    test_nodes: *const *const ggml_tensor,
    num_test_nodes: usize,
) -> bool {
    ffi_boundary!({
        let function = crate::function_name!();
        let b1 = arg!(Backend, backend1);
        let b2 = arg!(Backend, backend2);
        let graph = graph_arg(function, graph);
        let tests: Vec<TensorRef> = if num_test_nodes == 0 {
            Vec::new()
        } else {
            crate::ensure!(!test_nodes.is_null(), "{}: test_nodes is NULL", function);
            // SAFETY: the caller passes num_test_nodes tensor pointers.
            unsafe { std::slice::from_raw_parts(test_nodes, num_test_nodes) }.iter().filter_map(|&p| unsafe { TensorRef::from_raw(p) }).collect()
        };
        imp::compare_graph_backend(b1, b2, graph, callback, user_data, &tests)
    })
}

/// A buffer over host memory the caller owns (32-byte aligned); freeing it leaves the memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_cpu_buffer_from_ptr(ptr: *mut c_void, size: usize) -> ggml_backend_buffer_t {
    ffi_boundary!({ cpu_buffer::cpu_buffer_from_ptr(ptr, size).as_ptr() })
}

/// The CPU buffer type: the same pointer for the life of the process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_cpu_buffer_type() -> ggml_backend_buffer_type_t {
    ffi_boundary!({ cpu_buffer::cpu_buffer_type() })
}
