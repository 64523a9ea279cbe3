//! Exports: backends (streams), events, devices and registry accessors (`ggml-backend.h`).

use std::ffi::{c_char, c_void};

use crate::backend::buffer::{buft_alloc_buffer, buft_max_size};
use crate::backend::stream as imp;
use crate::ggml::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t, ggml_backend_t};
use crate::ggml::abi_backend::{ggml_backend_dev_props, ggml_backend_dev_t, ggml_backend_event_t, ggml_backend_graph_plan_t, ggml_backend_reg_t};
use crate::ggml::handles::{Device, Event};
use crate::ggml::sys::{DevType, GGML_STATUS_FAILED, ggml_cgraph, ggml_guid_t, ggml_status, ggml_tensor};
use crate::{arg, ffi_boundary};

//
// backend (stream)
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_guid(backend: ggml_backend_t) -> ggml_guid_t {
    ffi_boundary!({
        // SAFETY: NULL or a live backend.
        match unsafe { crate::ggml::handles::Backend::from_raw(backend) } {
            Some(b) => b.guid(),
            None => std::ptr::null_mut(),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_name(backend: ggml_backend_t) -> *const c_char {
    ffi_boundary!({
        // SAFETY: NULL or a live backend.
        match unsafe { crate::ggml::handles::Backend::from_raw(backend) } {
            Some(b) => b.name_ptr(),
            None => c"NULL".as_ptr(),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_free(backend: ggml_backend_t) {
    ffi_boundary!({
        // SAFETY: NULL or a live backend the caller gives up.
        if let Some(b) = unsafe { crate::ggml::handles::Backend::from_raw(backend) } {
            b.free();
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_get_default_buffer_type(backend: ggml_backend_t) -> ggml_backend_buffer_type_t {
    ffi_boundary!({ imp::default_buffer_type(arg!(Backend, backend)).as_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_alloc_buffer(backend: ggml_backend_t, size: usize) -> ggml_backend_buffer_t {
    ffi_boundary!({
        let buft = imp::default_buffer_type(arg!(Backend, backend));
        buft_alloc_buffer(buft, size).map(|b| b.as_ptr()).unwrap_or(std::ptr::null_mut())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_get_alignment(backend: ggml_backend_t) -> usize {
    ffi_boundary!({ imp::default_buffer_type(arg!(Backend, backend)).alignment() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_get_max_size(backend: ggml_backend_t) -> usize {
    ffi_boundary!({ buft_max_size(imp::default_buffer_type(arg!(Backend, backend))) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_synchronize(backend: ggml_backend_t) {
    ffi_boundary!({ arg!(Backend, backend).synchronize() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_graph_plan_create(backend: ggml_backend_t, cgraph: *mut ggml_cgraph) -> ggml_backend_graph_plan_t {
    ffi_boundary!({ arg!(Backend, backend).graph_plan_create(cgraph) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_graph_plan_free(backend: ggml_backend_t, plan: ggml_backend_graph_plan_t) {
    ffi_boundary!({ arg!(Backend, backend).graph_plan_free(plan) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_graph_plan_compute(backend: ggml_backend_t, plan: ggml_backend_graph_plan_t) -> ggml_status {
    ffi_boundary!({ arg!(Backend, backend).graph_plan_compute(plan) })
}

/// Whether the caller's graph may be computed: not when it reads an input that lost its bytes
/// and was not set since (see `alloc::inputs`; one atomic load when there is none).
fn inputs_set(cgraph: *mut ggml_cgraph, function: &str) -> bool {
    if !crate::alloc::inputs::any() {
        return true;
    }
    // SAFETY: the caller's graph (C API contract); NULL gives None.
    match unsafe { crate::ggml::graph::GraphRef::from_raw(cgraph) } {
        Some(g) => crate::alloc::inputs::check(g.nodes(), function),
        None => true,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_graph_compute(backend: ggml_backend_t, cgraph: *mut ggml_cgraph) -> ggml_status {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        if !inputs_set(cgraph, crate::function_name!()) {
            return GGML_STATUS_FAILED;
        }
        imp::graph_compute(backend, cgraph)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_graph_compute_async(backend: ggml_backend_t, cgraph: *mut ggml_cgraph) -> ggml_status {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        if !inputs_set(cgraph, crate::function_name!()) {
            return GGML_STATUS_FAILED;
        }
        imp::graph_compute_async(backend, cgraph)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_supports_op(backend: ggml_backend_t, op: *const ggml_tensor) -> bool {
    ffi_boundary!({ imp::supports_op(arg!(Backend, backend), op) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_supports_buft(backend: ggml_backend_t, buft: ggml_backend_buffer_type_t) -> bool {
    ffi_boundary!({ imp::supports_buft(arg!(Backend, backend), buft) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_offload_op(backend: ggml_backend_t, op: *const ggml_tensor) -> bool {
    ffi_boundary!({ imp::offload_op(arg!(Backend, backend), op) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_get_device(backend: ggml_backend_t) -> ggml_backend_dev_t {
    ffi_boundary!({ arg!(Backend, backend).device_ptr() })
}

//
// events
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_event_new(device: ggml_backend_dev_t) -> ggml_backend_event_t {
    ffi_boundary!({
        // SAFETY: NULL or a live device.
        imp::event_new(unsafe { Device::from_raw(device) })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_event_free(event: ggml_backend_event_t) {
    ffi_boundary!({
        // SAFETY: NULL or a live event the caller gives up.
        if let Some(e) = unsafe { Event::from_raw(event) } {
            imp::event_free(e);
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_event_record(event: ggml_backend_event_t, backend: ggml_backend_t) {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        backend.event_record(arg!(Event, event))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_event_synchronize(event: ggml_backend_event_t) {
    ffi_boundary!({ imp::event_synchronize(arg!(Event, event)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_event_wait(backend: ggml_backend_t, event: ggml_backend_event_t) {
    ffi_boundary!({
        let backend = arg!(Backend, backend);
        backend.event_wait(arg!(Event, event))
    })
}

//
// device
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_name(device: ggml_backend_dev_t) -> *const c_char {
    ffi_boundary!({ arg!(Device, device).name_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_description(device: ggml_backend_dev_t) -> *const c_char {
    ffi_boundary!({ arg!(Device, device).description_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_memory(device: ggml_backend_dev_t, free: *mut usize, total: *mut usize) {
    ffi_boundary!({ arg!(Device, device).memory(free, total) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_type(device: ggml_backend_dev_t) -> DevType {
    ffi_boundary!({ arg!(Device, device).dev_type() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_get_props(device: ggml_backend_dev_t, props: *mut ggml_backend_dev_props) {
    ffi_boundary!({ imp::dev_get_props(arg!(Device, device), props) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_backend_reg(device: ggml_backend_dev_t) -> ggml_backend_reg_t {
    ffi_boundary!({ arg!(Device, device).reg_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_init(device: ggml_backend_dev_t, params: *const c_char) -> ggml_backend_t {
    ffi_boundary!({ arg!(Device, device).init_backend(params) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_buffer_type(device: ggml_backend_dev_t) -> ggml_backend_buffer_type_t {
    ffi_boundary!({ arg!(Device, device).buffer_type() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_host_buffer_type(device: ggml_backend_dev_t) -> ggml_backend_buffer_type_t {
    ffi_boundary!({ arg!(Device, device).host_buffer_type().unwrap_or(std::ptr::null_mut()) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_buffer_from_host_ptr(
    device: ggml_backend_dev_t,
    ptr: *mut c_void,
    size: usize,
    max_tensor_size: usize,
) -> ggml_backend_buffer_t {
    ffi_boundary!({ arg!(Device, device).buffer_from_host_ptr(ptr, size, max_tensor_size) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_supports_op(device: ggml_backend_dev_t, op: *const ggml_tensor) -> bool {
    ffi_boundary!({ arg!(Device, device).supports_op_raw(op) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_supports_buft(device: ggml_backend_dev_t, buft: ggml_backend_buffer_type_t) -> bool {
    ffi_boundary!({ arg!(Device, device).supports_buft(buft) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_dev_offload_op(device: ggml_backend_dev_t, op: *const ggml_tensor) -> bool {
    ffi_boundary!({ arg!(Device, device).offload_op(op).unwrap_or(false) })
}

//
// registry accessors (the registry itself is ggml-backend-reg.cpp, in libggml)
//

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_reg_name(reg: ggml_backend_reg_t) -> *const c_char {
    ffi_boundary!({ arg!(Reg, reg).name_ptr() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_reg_dev_count(reg: ggml_backend_reg_t) -> usize {
    ffi_boundary!({ arg!(Reg, reg).device_count() })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_reg_dev_get(reg: ggml_backend_reg_t, index: usize) -> ggml_backend_dev_t {
    ffi_boundary!({ arg!(Reg, reg).device(index) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_backend_reg_get_proc_address(reg: ggml_backend_reg_t, name: *const c_char) -> *mut c_void {
    ffi_boundary!({ imp::reg_proc_address(arg!(Reg, reg), name) })
}
