//! `ggml_rs_cpu_abi_describe`: the layouts of the C structs this library shares with its callers
//! and the constants it relies on, as it was built, so a C program compiled against the pinned
//! headers can compare them (c_tests/test_rscpu_backend.c, `scripts/check_cpu_abi.sh`).

use std::ffi::c_char;
use std::sync::OnceLock;

use ggml_abi::abi_backend::{ggml_backend_dev_caps, ggml_backend_dev_props, ggml_backend_feature};
use ggml_abi::abi_impl::GGML_BACKEND_API_VERSION;
use ggml_abi::sys;

use super::exports::{GGML_MAX_N_THREADS, ggml_cplan, ggml_threadpool_params, ggml_type_traits_cpu};

/// one entry: a struct's size and alignment (`field` NULL), a field's offset, or a constant
/// (`type_name` "const"); the same struct as ggml-rs's `ggml_rs_abi_describe`
#[repr(C)]
pub struct ggml_rs_abi_entry {
    pub type_name: *const c_char,
    pub field: *const c_char,
    pub value: i64,
    pub align: i64,
}

struct Table(Vec<ggml_rs_abi_entry>);
// SAFETY: pointers to static strings only, never written after creation.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

macro_rules! layout {
    ($out:ident, $t:ident { $($f:ident => $cname:literal),* $(,)? }) => {
        $out.push(ggml_rs_abi_entry {
            type_name: concat!(stringify!($t), "\0").as_ptr() as *const c_char,
            field: std::ptr::null(),
            value: std::mem::size_of::<$t>() as i64,
            align: std::mem::align_of::<$t>() as i64,
        });
        $(
            $out.push(ggml_rs_abi_entry {
                type_name: concat!(stringify!($t), "\0").as_ptr() as *const c_char,
                field: concat!($cname, "\0").as_ptr() as *const c_char,
                value: std::mem::offset_of!($t, $f) as i64,
                align: 0,
            });
        )*
    };
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut v = Vec::new();
        layout!(v, ggml_cplan {
            work_size => "work_size", work_data => "work_data", n_threads => "n_threads", threadpool => "threadpool",
            abort_callback => "abort_callback", abort_callback_data => "abort_callback_data", use_ref => "use_ref"
        });
        layout!(v, ggml_type_traits_cpu { from_float => "from_float", vec_dot => "vec_dot", vec_dot_type => "vec_dot_type", nrows => "nrows" });
        layout!(v, ggml_threadpool_params {
            cpumask => "cpumask", n_threads => "n_threads", prio => "prio", poll => "poll", strict_cpu => "strict_cpu", paused => "paused"
        });
        layout!(v, ggml_backend_dev_caps {
            async_ => "async", host_buffer => "host_buffer", buffer_from_host_ptr => "buffer_from_host_ptr", events => "events", mmap_support => "mmap_support"
        });
        layout!(v, ggml_backend_dev_props {
            name => "name", description => "description", memory_free => "memory_free", memory_total => "memory_total",
            type_ => "type", device_id => "device_id", caps => "caps"
        });
        layout!(v, ggml_backend_feature { name => "name", value => "value" });
        for (name, value) in [
            (c"GGML_MAX_N_THREADS", GGML_MAX_N_THREADS as i64),
            (c"GGML_DEFAULT_N_THREADS", super::DEFAULT_N_THREADS as i64),
            (c"GGML_BACKEND_API_VERSION", GGML_BACKEND_API_VERSION as i64),
            (c"GGML_TENSOR_FLAG_COMPUTE", sys::GGML_TENSOR_FLAG_COMPUTE as i64),
            (c"GGML_STATUS_FAILED", sys::GGML_STATUS_FAILED as i64),
            (c"GGML_STATUS_ABORTED", sys::GGML_STATUS_ABORTED as i64),
            (c"GGML_STATUS_ALLOC_FAILED", sys::GGML_STATUS_ALLOC_FAILED as i64),
            (c"GGML_MAX_OP_PARAMS", sys::GGML_MAX_OP_PARAMS as i64),
            (c"GGML_MAX_SRC", sys::GGML_MAX_SRC as i64),
        ] {
            v.push(ggml_rs_abi_entry { type_name: c"const".as_ptr(), field: name.as_ptr(), value, align: 0 });
        }
        Table(v)
    })
}

/// The layouts and constants this library was built with; `*n` receives the count.
#[unsafe(no_mangle)]
pub extern "C" fn ggml_rs_cpu_abi_describe(n: *mut usize) -> *const ggml_rs_abi_entry {
    ggml_abi::rust_backend::guard("ggml_rs_cpu_abi_describe", std::ptr::null(), || {
        let t = table();
        if !n.is_null() {
            // SAFETY: the caller's out-pointer.
            unsafe { *n = t.0.len() };
        }
        t.0.as_ptr()
    })
}
