//! Backends (streams), devices, registries and events: what the public functions add on top of
//! the interface entries (NULL handling, defaults of optional entries).

use std::ffi::c_void;

use crate::ggml::abi_backend::ggml_backend_dev_props;
use crate::ggml::abi_impl::{ggml_backend_buffer_type, ggml_backend_event};
use crate::ggml::handles::{Backend, BufferType, Device, Event};
use crate::ggml::sys::{ggml_cgraph, ggml_status};

pub fn default_buffer_type(backend: Backend) -> BufferType {
    let buft = backend.device().buffer_type();
    // SAFETY: a device returns one of its buffer types (or NULL).
    unsafe { BufferType::from_raw(buft) }.unwrap_or_else(|| crate::fatal!("backend '{}': its device has no buffer type", backend.name()))
}

pub fn graph_compute_async(backend: Backend, graph: *mut ggml_cgraph) -> ggml_status {
    backend.graph_compute(graph)
}

pub fn graph_compute(backend: Backend, graph: *mut ggml_cgraph) -> ggml_status {
    if crate::backend::poison::enabled() {
        // SAFETY: the caller's graph (C API contract).
        if let Some(g) = unsafe { crate::ggml::graph::GraphRef::from_raw(graph) } {
            let view = crate::ggml::graph::GraphView::new(g.node_ptrs().to_vec(), &g.view_context(), g.uid());
            return compute_checking_poison(backend, &view);
        }
    }
    let status = graph_compute_async(backend, graph);
    backend.synchronize();
    status
}

pub fn supports_op(backend: Backend, op: *const crate::ggml::sys::ggml_tensor) -> bool {
    backend.device().supports_op_raw(op)
}

pub fn supports_buft(backend: Backend, buft: *mut ggml_backend_buffer_type) -> bool {
    backend.device().supports_buft(buft)
}

pub fn offload_op(backend: Backend, op: *const crate::ggml::sys::ggml_tensor) -> bool {
    backend.device().offload_op(op).unwrap_or(false)
}

pub fn dev_get_props(device: Device, props: *mut ggml_backend_dev_props) {
    crate::ensure!(!props.is_null(), "ggml_backend_dev_get_props: props is NULL");
    // SAFETY: props points to a struct of the caller; zeroed before the device fills it.
    unsafe { std::ptr::write_bytes(props, 0, 1) };
    device.props(props);
}

pub fn event_new(device: Option<Device>) -> *mut ggml_backend_event {
    // a NULL device is allowed (transition period to the device interface)
    match device {
        Some(d) => d.event_new().unwrap_or(std::ptr::null_mut()),
        None => std::ptr::null_mut(),
    }
}

pub fn event_free(event: Event) {
    event.device().event_free(event);
}

pub fn event_synchronize(event: Event) {
    event.device().event_synchronize(event);
}

pub fn reg_proc_address(reg: crate::ggml::handles::Reg, name: *const std::ffi::c_char) -> *mut c_void {
    reg.proc_address(name)
}

/// GGML_RS_ALLOC_POISON: node by node, checking each node's sources before it runs.
pub fn compute_checking_poison(backend: Backend, graph: &crate::ggml::graph::GraphView) -> ggml_status {
    for (j, node) in graph.nodes().enumerate() {
        crate::backend::poison::check_sources(node);
        let mut one = graph.sub_view(j, j + 1);
        let status = graph_compute_async(backend, one.as_ptr());
        backend.synchronize();
        if status != crate::ggml::sys::GGML_STATUS_SUCCESS {
            return status;
        }
    }
    crate::ggml::sys::GGML_STATUS_SUCCESS
}
