//! Extensions of this library (prefix `ggml_rs_`, declared in `include/ggml-rs.h`): the version,
//! a description of our struct layouts for the ABI test, allocator statistics for the
//! benchmarks, the scheduler's split plan as JSON or DOT, and the memory plan report.

use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

use crate::alloc::gallocr::Gallocr;
use crate::ffi::handle::BoxedHandle;
use crate::ffi_boundary;
use crate::ggml::abi_alloc::{ggml_gallocr_t, ggml_tallocr};
use crate::ggml::abi_backend::*;
use crate::ggml::abi_impl::*;
use crate::ggml::graph::GraphRef;
use crate::ggml::sys::{self, ggml_cgraph, ggml_hash_set, ggml_init_params, ggml_tensor};
use crate::sched::scheduler::Sched;

/// One fact of our ABI: a struct's size and alignment (`field` NULL), a field's offset, or a
/// constant's value (`type_name` "const").
#[repr(C)]
pub struct ggml_rs_abi_entry {
    pub type_name: *const c_char,
    pub field: *const c_char,
    /// field offset, struct size, or constant value
    pub value: i64,
    /// struct alignment (struct entries only)
    pub align: i64,
}

struct Table(Vec<ggml_rs_abi_entry>);
// SAFETY: the table holds pointers to static strings only and is never written after creation.
unsafe impl Send for Table {}
unsafe impl Sync for Table {}

macro_rules! layout {
    ($out:ident, $t:ident { $($(#[$m:meta])* $f:ident => $cname:literal),* $(,)? }) => {
        $out.push(ggml_rs_abi_entry {
            type_name: concat!(stringify!($t), "\0").as_ptr() as *const c_char,
            field: std::ptr::null(),
            value: std::mem::size_of::<$t>() as i64,
            align: std::mem::align_of::<$t>() as i64,
        });
        $(
            $(#[$m])*
            $out.push(ggml_rs_abi_entry {
                type_name: concat!(stringify!($t), "\0").as_ptr() as *const c_char,
                field: concat!($cname, "\0").as_ptr() as *const c_char,
                value: std::mem::offset_of!($t, $f) as i64,
                align: 0,
            });
        )*
    };
}

macro_rules! constants {
    ($out:ident, $($name:literal => $value:expr),* $(,)?) => {
        $(
            $out.push(ggml_rs_abi_entry {
                type_name: c"const".as_ptr(),
                field: concat!($name, "\0").as_ptr() as *const c_char,
                value: $value as i64,
                align: 0,
            });
        )*
    };
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut v = Vec::new();
        layout!(v, ggml_tallocr { buffer => "buffer", base => "base", alignment => "alignment", offset => "offset" });
        layout!(v, ggml_backend_graph_copy { buffer => "buffer", ctx_allocated => "ctx_allocated", ctx_unallocated => "ctx_unallocated", graph => "graph" });
        layout!(v, ggml_backend_dev_caps { async_ => "async", host_buffer => "host_buffer", buffer_from_host_ptr => "buffer_from_host_ptr", events => "events", #[cfg(not(feature = "abi-0-9-8"))] mmap_support => "mmap_support" });
        layout!(v, ggml_backend_dev_props {
            name => "name", description => "description", memory_free => "memory_free", memory_total => "memory_total",
            type_ => "type", device_id => "device_id", caps => "caps"
        });
        layout!(v, ggml_backend_feature { name => "name", value => "value" });
        #[cfg(not(feature = "abi-0-9-8"))]
        layout!(v, ggml_backend_meta_split_state { axis => "axis", ne => "ne", nr => "nr", n_segments => "n_segments" });
        layout!(v, ggml_backend_buffer_type_i {
            get_name => "get_name", alloc_buffer => "alloc_buffer", get_alignment => "get_alignment",
            get_max_size => "get_max_size", get_alloc_size => "get_alloc_size", is_host => "is_host"
        });
        // ggml 0.26.0's two list entries (the abi-0-26-0 profile)
        #[cfg(feature = "abi-0-26-0")]
        for (field, offset) in [
            (c"alloc_buffer_n", std::mem::offset_of!(ggml_backend_buffer_type_i, alloc_buffer_n)),
            (c"get_alloc_size_n", std::mem::offset_of!(ggml_backend_buffer_type_i, get_alloc_size_n)),
        ] {
            v.push(ggml_rs_abi_entry { type_name: c"ggml_backend_buffer_type_i".as_ptr(), field: field.as_ptr(), value: offset as i64, align: 0 });
        }
        layout!(v, ggml_backend_buffer_type { iface => "iface", device => "device", context => "context" });
        layout!(v, ggml_backend_buffer_i {
            free_buffer => "free_buffer", get_base => "get_base", init_tensor => "init_tensor", memset_tensor => "memset_tensor",
            set_tensor => "set_tensor", get_tensor => "get_tensor", #[cfg(not(feature = "abi-0-9-8"))] set_tensor_2d => "set_tensor_2d", #[cfg(not(feature = "abi-0-9-8"))] get_tensor_2d => "get_tensor_2d",
            cpy_tensor => "cpy_tensor", clear => "clear", reset => "reset"
        });
        layout!(v, ggml_backend_buffer { iface => "iface", buft => "buft", context => "context", size => "size", usage => "usage" });
        #[cfg(not(feature = "abi-0-9-8"))]
        layout!(v, ggml_backend_graph_optimize_params { add_alloc_dep => "add_alloc_dep", user_data => "user_data" });
        layout!(v, ggml_backend_i {
            get_name => "get_name", free => "free", set_tensor_async => "set_tensor_async", get_tensor_async => "get_tensor_async",
            #[cfg(not(feature = "abi-0-9-8"))] set_tensor_2d_async => "set_tensor_2d_async", #[cfg(not(feature = "abi-0-9-8"))] get_tensor_2d_async => "get_tensor_2d_async",
            cpy_tensor_async => "cpy_tensor_async", synchronize => "synchronize", graph_plan_create => "graph_plan_create",
            graph_plan_free => "graph_plan_free", graph_plan_update => "graph_plan_update", graph_plan_compute => "graph_plan_compute",
            graph_compute => "graph_compute", event_record => "event_record", event_wait => "event_wait", graph_optimize => "graph_optimize"
        });
        layout!(v, ggml_backend { guid => "guid", iface => "iface", device => "device", context => "context" });
        layout!(v, ggml_backend_event { device => "device", context => "context" });
        layout!(v, ggml_backend_device_i {
            get_name => "get_name", get_description => "get_description", get_memory => "get_memory", get_type => "get_type",
            get_props => "get_props", init_backend => "init_backend", get_buffer_type => "get_buffer_type",
            get_host_buffer_type => "get_host_buffer_type", buffer_from_host_ptr => "buffer_from_host_ptr",
            supports_op => "supports_op", supports_buft => "supports_buft", offload_op => "offload_op",
            event_new => "event_new", event_free => "event_free", event_synchronize => "event_synchronize"
        });
        layout!(v, ggml_backend_device { iface => "iface", reg => "reg", context => "context" });
        layout!(v, ggml_backend_reg_i { get_name => "get_name", get_device_count => "get_device_count", get_device => "get_device", get_proc_address => "get_proc_address" });
        layout!(v, ggml_backend_reg { api_version => "api_version", iface => "iface", context => "context" });
        layout!(v, ggml_tensor {
            type_ => "type", buffer => "buffer", ne => "ne", nb => "nb", op => "op", op_params => "op_params", flags => "flags",
            src => "src", view_src => "view_src", view_offs => "view_offs", data => "data", name => "name", extra => "extra", padding => "padding"
        });
        layout!(v, ggml_cgraph {
            size => "size", n_nodes => "n_nodes", n_leafs => "n_leafs", nodes => "nodes", grads => "grads", grad_accs => "grad_accs",
            leafs => "leafs", use_counts => "use_counts", visited_hash_set => "visited_hash_set", order => "order", #[cfg(not(feature = "abi-0-9-8"))] uid => "uid"
        });
        layout!(v, ggml_hash_set { size => "size", used => "used", keys => "keys" });
        layout!(v, ggml_init_params { mem_size => "mem_size", mem_buffer => "mem_buffer", no_alloc => "no_alloc" });
        constants!(v,
            "GGML_BACKEND_API_VERSION" => GGML_BACKEND_API_VERSION,
            "GGML_OP_NONE" => sys::op::NONE, "GGML_OP_ADD" => sys::op::ADD, "GGML_OP_ADD_ID" => sys::op::ADD_ID,
            "GGML_OP_ADD1" => sys::op::ADD1, "GGML_OP_SUB" => sys::op::SUB, "GGML_OP_MUL" => sys::op::MUL, "GGML_OP_DIV" => sys::op::DIV,
            "GGML_OP_SQR" => sys::op::SQR, "GGML_OP_SQRT" => sys::op::SQRT, "GGML_OP_LOG" => sys::op::LOG, "GGML_OP_CUMSUM" => sys::op::CUMSUM,
            "GGML_OP_SILU_BACK" => sys::op::SILU_BACK, "GGML_OP_RMS_NORM" => sys::op::RMS_NORM, "GGML_OP_RMS_NORM_BACK" => sys::op::RMS_NORM_BACK,
            "GGML_OP_MUL_MAT" => sys::op::MUL_MAT, "GGML_OP_MUL_MAT_ID" => sys::op::MUL_MAT_ID, "GGML_OP_SCALE" => sys::op::SCALE,
            "GGML_OP_RESHAPE" => sys::op::RESHAPE, "GGML_OP_VIEW" => sys::op::VIEW, "GGML_OP_PERMUTE" => sys::op::PERMUTE,
            "GGML_OP_TRANSPOSE" => sys::op::TRANSPOSE, "GGML_OP_DIAG_MASK_INF" => sys::op::DIAG_MASK_INF,
            "GGML_OP_DIAG_MASK_ZERO" => sys::op::DIAG_MASK_ZERO, "GGML_OP_SOFT_MAX" => sys::op::SOFT_MAX,
            "GGML_OP_SOFT_MAX_BACK" => sys::op::SOFT_MAX_BACK, "GGML_OP_ROPE" => sys::op::ROPE, "GGML_OP_ROPE_BACK" => sys::op::ROPE_BACK,
            "GGML_OP_CLAMP" => sys::op::CLAMP, "GGML_OP_ARGSORT" => sys::op::ARGSORT, "GGML_OP_TOP_K" => sys::op::TOP_K,
            "GGML_OP_FILL" => sys::op::FILL, "GGML_OP_FLASH_ATTN_EXT" => sys::op::FLASH_ATTN_EXT, "GGML_OP_UNARY" => sys::op::UNARY,
            "GGML_OP_COUNT" => sys::op::COUNT,
            "GGML_TENSOR_FLAG_INPUT" => sys::GGML_TENSOR_FLAG_INPUT, "GGML_TENSOR_FLAG_OUTPUT" => sys::GGML_TENSOR_FLAG_OUTPUT,
            "GGML_TENSOR_FLAG_PARAM" => sys::GGML_TENSOR_FLAG_PARAM, "GGML_TENSOR_FLAG_LOSS" => sys::GGML_TENSOR_FLAG_LOSS,
            "GGML_TENSOR_FLAG_COMPUTE" => sys::GGML_TENSOR_FLAG_COMPUTE,
            "GGML_STATUS_ALLOC_FAILED" => sys::GGML_STATUS_ALLOC_FAILED, "GGML_STATUS_FAILED" => sys::GGML_STATUS_FAILED,
            "GGML_STATUS_SUCCESS" => sys::GGML_STATUS_SUCCESS, "GGML_STATUS_ABORTED" => sys::GGML_STATUS_ABORTED,
            "GGML_LOG_LEVEL_DEBUG" => sys::GGML_LOG_LEVEL_DEBUG, "GGML_LOG_LEVEL_INFO" => sys::GGML_LOG_LEVEL_INFO,
            "GGML_LOG_LEVEL_WARN" => sys::GGML_LOG_LEVEL_WARN, "GGML_LOG_LEVEL_ERROR" => sys::GGML_LOG_LEVEL_ERROR,
            "GGML_LOG_LEVEL_CONT" => sys::GGML_LOG_LEVEL_CONT,
            "GGML_BACKEND_BUFFER_USAGE_ANY" => sys::USAGE_ANY, "GGML_BACKEND_BUFFER_USAGE_WEIGHTS" => sys::USAGE_WEIGHTS,
            "GGML_BACKEND_BUFFER_USAGE_COMPUTE" => sys::USAGE_COMPUTE, "GGML_BACKEND_DEVICE_TYPE_CPU" => sys::DEV_TYPE_CPU,
            "GGML_MAX_DIMS" => sys::GGML_MAX_DIMS, "GGML_MAX_SRC" => sys::GGML_MAX_SRC, "GGML_MAX_NAME" => sys::GGML_MAX_NAME,
            "GGML_MAX_OP_PARAMS" => sys::GGML_MAX_OP_PARAMS, "TENSOR_ALIGNMENT" => sys::TENSOR_ALIGNMENT,
            "GGML_SCHED_MAX_COPIES" => crate::config::SCHED_MAX_COPIES, "GGML_SCHED_MAX_BACKENDS" => crate::sched::scheduler::MAX_BACKENDS,
        );
        Table(v)
    })
}

/// The library's version, e.g. "ggml-rs 0.1.0 (ggml 0.25.3)".
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_version() -> *const c_char {
    ffi_boundary!({ crate::config::VERSION_STRING.as_ptr() })
}

/// Describes the layouts and constants this library was built with; `*n` receives the count.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_abi_describe(n: *mut usize) -> *const ggml_rs_abi_entry {
    ffi_boundary!({
        let t = table();
        if !n.is_null() {
            // SAFETY: the caller's out-pointer.
            unsafe { *n = t.0.len() };
        }
        t.0.as_ptr()
    })
}

/// For the last plan of buffer id `buffer_id`: the bytes it needs, and the lower bound (the most
/// bytes live at once). Returns false when nothing was planned yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_gallocr_plan_stats(galloc: ggml_gallocr_t, buffer_id: c_int, planned: *mut usize, lower_bound: *mut usize) -> bool {
    ffi_boundary!({
        let function = crate::function_name!();
        crate::ensure!(!galloc.is_null(), "{}: argument `galloc` is NULL", function);
        // SAFETY: a ggml_gallocr_t is a Box<Gallocr> (see ggml_gallocr_new_n).
        let g = unsafe { &*(galloc as *const Gallocr) };
        crate::ensure!(buffer_id >= 0 && (buffer_id as usize) < g.n_buffers(), "{}: buffer id {buffer_id} out of range", function);
        let sizes = g.planned_sizes();
        if !planned.is_null() {
            unsafe { *planned = sizes[buffer_id as usize] };
        }
        if !lower_bound.is_null() {
            unsafe { *lower_bound = g.planned_lower_bound(buffer_id as usize) };
        }
        sizes.iter().any(|&s| s > 0) || g.seq() > 0
    })
}

/// Writes the scheduler's current split plan (`format` 0: JSON, 1: Graphviz DOT) into `buf`
/// (NUL-terminated, truncated to `size`); returns the full length. `graph` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_sched_dump_plan(sched: ggml_backend_sched_t, graph: *mut ggml_cgraph, format: c_int, buf: *mut c_char, size: usize) -> usize {
    ffi_boundary!({
        let s = Sched::arg(crate::function_name!(), sched);
        // SAFETY: NULL or the caller's graph.
        let graph = unsafe { GraphRef::from_raw(graph) };
        let text = s.dump_plan(graph, format == 1);
        if !buf.is_null() && size > 0 {
            let n = text.len().min(size - 1);
            // SAFETY: the caller's buffer of `size` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
                *buf.add(n) = 0;
            }
        }
        text.len()
    })
}

/// How many plans the allocator made and how many times it replayed a plan for the same graph.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_gallocr_counters(galloc: ggml_gallocr_t, n_plans: *mut u64, n_replays: *mut u64) {
    ffi_boundary!({
        crate::ensure!(!galloc.is_null(), "{}: argument `galloc` is NULL", crate::function_name!());
        // SAFETY: a ggml_gallocr_t is a Box<Gallocr> (see ggml_gallocr_new_n).
        let g = unsafe { &*(galloc as *const Gallocr) };
        if !n_plans.is_null() {
            unsafe { *n_plans = g.n_plans };
        }
        if !n_replays.is_null() {
            unsafe { *n_replays = g.n_replays };
        }
    })
}

/// How many times the scheduler assigned and split a graph, and how many allocations repeated the
/// last one because nothing had changed (see `sched::memo`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_sched_counters(sched: ggml_backend_sched_t, n_splits: *mut u64, n_repeats: *mut u64) {
    ffi_boundary!({
        let s = Sched::arg(crate::function_name!(), sched);
        if !n_splits.is_null() {
            // SAFETY: the caller's u64.
            unsafe { *n_splits = s.n_split_graphs };
        }
        if !n_repeats.is_null() {
            // SAFETY: the caller's u64.
            unsafe { *n_repeats = s.n_repeats };
        }
    })
}

/// Writes `report` to `path` as JSON (`format` 0) or SVG (1); false, with the reason logged, when
/// there is no report or the file cannot be written.
fn write_report(function: &str, report: Option<ggml_plan::report::Report>, path: *const c_char, format: c_int) -> bool {
    crate::ensure!(!path.is_null(), "{function}: argument `path` is NULL");
    // SAFETY: a NUL-terminated string of the caller's.
    let path = unsafe { std::ffi::CStr::from_ptr(path) }.to_string_lossy().into_owned();
    let text = match (report, format) {
        (_, f) if f != 0 && f != 1 => {
            crate::log_error!("{function}: format {f} is neither 0 (JSON) nor 1 (SVG)\n");
            return false;
        }
        (None, _) => {
            crate::log_error!("{function}: nothing was planned yet\n");
            return false;
        }
        (Some(r), 0) => r.to_json(),
        (Some(r), _) => r.to_svg(),
    };
    match std::fs::write(&path, text) {
        Ok(()) => true,
        Err(e) => {
            crate::log_error!("{function}: cannot write {path}: {e}\n");
            false
        }
    }
}

/// Writes the memory plan report of the allocator's last plan (every tensor's buffer, offset,
/// size and node steps; see README "Memory plan report") to `path`: JSON (`format` 0) or SVG (1).
/// The tensors of the graph it planned must still exist (their names are read). Returns false,
/// with the reason logged, when nothing was planned yet or the file cannot be written.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_gallocr_write_report(galloc: ggml_gallocr_t, path: *const c_char, format: c_int) -> bool {
    ffi_boundary!({
        let function = crate::function_name!();
        crate::ensure!(!galloc.is_null(), "{function}: argument `galloc` is NULL");
        // SAFETY: a ggml_gallocr_t is a Box<Gallocr> (see ggml_gallocr_new_n).
        let g = unsafe { &*(galloc as *const Gallocr) };
        write_report(function, g.last_report(), path, format)
    })
}

/// `ggml_rs_gallocr_write_report` for the scheduler's allocator, with the scheduler's splits.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_rs_sched_write_report(sched: ggml_backend_sched_t, path: *const c_char, format: c_int) -> bool {
    ffi_boundary!({
        let function = crate::function_name!();
        let s = Sched::arg(function, sched);
        write_report(function, s.last_report(), path, format)
    })
}
