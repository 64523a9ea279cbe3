//! The C API of upstream's `libggml-cpu` at the pin (the `GGML_BACKEND_API` functions of
//! `ggml-cpu.h`), the loadable-module entry points (`ggml_backend_init`, `ggml_backend_score`),
//! and the functions handed out through `get_proc_address` (upstream's set, from ggml-cpu.cpp).
//!
//! Every function is a thin shell: arguments checked (a NULL or foreign backend is upstream's
//! assertion, here a message naming the function and an abort through ggml), the work done by the
//! Rust functions of this crate, panics stopped at the boundary ([`guard`]). Nothing in this crate
//! calls these exported symbols itself (in a process that also has upstream's libggml-cpu they
//! could be bound to upstream's), and the cdylib is linked with `-Bsymbolic` (build.rs).
#![allow(non_camel_case_types)]

use std::ffi::{CStr, c_int, c_void};
use std::sync::Mutex;

use ggml_abi::abi_alloc::{ggml_backend_buffer_type_t, ggml_backend_t};
use ggml_abi::abi_backend::{ggml_backend_dev_t, ggml_backend_feature, ggml_backend_reg_t};
use ggml_abi::graph::GraphRef;
use ggml_abi::imports::Import;
use ggml_abi::rust_backend::guard;
use ggml_abi::sys::{GGML_STATUS_ALLOC_FAILED, GGML_STATUS_FAILED, ggml_cgraph, ggml_context, ggml_status, ggml_tensor};
use ggml_abi::{ensure, fatal};

use super::compute::{AbortCallback, Engine};
use super::{CpuStream, DEFAULT_N_THREADS, adapter, features};
use crate::GgmlType;

/// upstream's `GGML_MAX_N_THREADS`
pub const GGML_MAX_N_THREADS: usize = 512;

/// `struct ggml_cplan` of ggml-cpu.h
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ggml_cplan {
    pub work_size: usize,
    pub work_data: *mut u8,
    pub n_threads: c_int,
    pub threadpool: *mut ggml_threadpool,
    pub abort_callback: AbortCallback,
    pub abort_callback_data: *mut c_void,
    pub use_ref: bool,
}

/// `struct ggml_threadpool_params` of ggml.h
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_threadpool_params {
    pub cpumask: [bool; GGML_MAX_N_THREADS],
    pub n_threads: c_int,
    /// `enum ggml_sched_priority`
    pub prio: c_int,
    pub poll: u32,
    pub strict_cpu: bool,
    pub paused: bool,
}

/// `ggml_vec_dot_t`
pub type ggml_vec_dot_t = Option<unsafe extern "C" fn(n: c_int, s: *mut f32, bs: usize, x: *const c_void, bx: usize, y: *const c_void, by: usize, nrc: c_int)>;
/// `ggml_from_float_t`
pub type ggml_from_float_t = Option<unsafe extern "C" fn(x: *const f32, y: *mut c_void, k: i64)>;

/// `struct ggml_type_traits_cpu` of ggml-cpu.h
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ggml_type_traits_cpu {
    pub from_float: ggml_from_float_t,
    pub vec_dot: ggml_vec_dot_t,
    /// `enum ggml_type`
    pub vec_dot_type: c_int,
    pub nrows: i64,
}

/// Our `struct ggml_threadpool` (opaque to C): a persistent pool the application owns. Graphs
/// computed on it run one at a time (the lock); pause/resume are recorded (our workers park by
/// themselves when idle, so a paused pool costs nothing either way).
pub struct ggml_threadpool {
    engine: Mutex<Engine>,
    n_threads: usize,
    paused: std::sync::atomic::AtomicBool,
}

impl ggml_threadpool {
    pub fn compute(&self, graph: GraphRef, abort: AbortCallback, abort_data: *mut c_void, use_ref: bool) -> ggml_status {
        self.engine.lock().unwrap_or_else(|e| e.into_inner()).compute(graph, abort, abort_data, use_ref)
    }
}

/// the pool behind a `ggml_threadpool_t` (None for NULL)
///
/// # Safety
/// `tp` is NULL or a live pool of `ggml_threadpool_new`.
pub unsafe fn threadpool_engine<'a>(tp: *mut ggml_threadpool) -> Option<&'a ggml_threadpool> {
    // SAFETY: the caller's contract.
    unsafe { tp.as_ref() }
}

/// the stream of a backend of ours, or an abort naming `function` (upstream asserts
/// `ggml_backend_is_cpu`)
fn stream_arg<'a>(function: &str, backend: ggml_backend_t) -> &'a mut CpuStream {
    // SAFETY: the C API contract: a backend argument is NULL or live, used by one thread at a time.
    match unsafe { adapter().stream(backend) } {
        Some(s) => s,
        None => fatal!("{function}: the backend is not a CPU backend of ggml-rs-cpu (NULL, another backend, or upstream's CPU backend)"),
    }
}

//
// The backend
//

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cpu_reg() -> ggml_backend_reg_t {
    guard("ggml_backend_cpu_reg", std::ptr::null_mut(), || adapter().reg())
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cpu_init() -> ggml_backend_t {
    guard("ggml_backend_cpu_init", std::ptr::null_mut(), || adapter().new_backend(0, CpuStream::new()))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_is_cpu(backend: ggml_backend_t) -> bool {
    // SAFETY: NULL or a live backend (C API contract); only read.
    guard("ggml_backend_is_cpu", false, || unsafe { adapter().stream(backend) }.is_some())
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cpu_set_n_threads(backend: ggml_backend_t, n_threads: c_int) {
    guard("ggml_backend_cpu_set_n_threads", (), || {
        ensure!(n_threads > 0, "ggml_backend_cpu_set_n_threads: n_threads = {n_threads}, must be at least 1");
        stream_arg("ggml_backend_cpu_set_n_threads", backend).set_n_threads(n_threads as usize)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cpu_set_threadpool(backend: ggml_backend_t, threadpool: *mut ggml_threadpool) {
    guard("ggml_backend_cpu_set_threadpool", (), || stream_arg("ggml_backend_cpu_set_threadpool", backend).set_threadpool(threadpool))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cpu_set_abort_callback(backend: ggml_backend_t, cb: AbortCallback, data: *mut c_void) {
    guard("ggml_backend_cpu_set_abort_callback", (), || stream_arg("ggml_backend_cpu_set_abort_callback", backend).set_abort_callback(cb, data))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_cpu_set_use_ref(backend: ggml_backend_t, use_ref: bool) {
    guard("ggml_backend_cpu_set_use_ref", (), || stream_arg("ggml_backend_cpu_set_use_ref", backend).use_ref = use_ref)
}

/// The loadable-module entry (`GGML_BACKEND_DL_IMPL`): ggml's registry calls it after `dlopen`.
#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_init() -> ggml_backend_reg_t {
    guard("ggml_backend_init", std::ptr::null_mut(), || adapter().reg())
}

/// The loadable-module score (`GGML_BACKEND_DL_SCORE_IMPL`): 0 would mean "cannot run here"; the
/// kernels run on any x86-64 (scalar paths), and score higher the wider the SIMD they can use,
/// as upstream's CPU variants do.
#[unsafe(no_mangle)]
pub extern "C" fn ggml_backend_score() -> c_int {
    guard("ggml_backend_score", 0, || {
        // 1 + the detected set's rank among this architecture's (x86-64: 1..=4, aarch64: 1..=3)
        let top = crate::simd::detected();
        1 + crate::simd::Level::of_this_arch().iter().position(|l| *l == top).unwrap_or(0) as c_int
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_cpu_init() {
    // detection is lazy and cached; doing it now keeps it off the first graph (as upstream's)
    guard("ggml_cpu_init", (), || {
        features::all();
        crate::simd::active();
    })
}

/// `ggml_backend_dev_get_extra_bufts`: the NULL-terminated list of extra buffer types, our
/// CPU_REPACK ([`super::repack`]) unless `GGML_RS_CPU_REPACK=0`, else none
unsafe extern "C" fn dev_get_extra_bufts(_dev: ggml_backend_dev_t) -> *mut ggml_backend_buffer_type_t {
    struct List([ggml_backend_buffer_type_t; 2]);
    // SAFETY: pointers to the static buffer type (or NULL), never written after creation.
    unsafe impl Sync for List {}
    // SAFETY: as above.
    unsafe impl Send for List {}
    static LIST: std::sync::OnceLock<List> = std::sync::OnceLock::new();
    guard("ggml_backend_dev_get_extra_bufts", std::ptr::null_mut(), || {
        let l = LIST.get_or_init(|| {
            let first = if super::repack::offered() { super::repack::buffer_type() } else { std::ptr::null_mut() };
            List([first, std::ptr::null_mut()])
        });
        l.0.as_ptr() as *mut ggml_backend_buffer_type_t
    })
}

unsafe extern "C" fn get_features(_reg: ggml_backend_reg_t) -> *const ggml_backend_feature {
    guard("ggml_backend_get_features", std::ptr::null(), features::list)
}

/// The functions of upstream's CPU `get_proc_address`, by the same names (ggml-cpu.cpp at the pin).
pub fn proc_address(name: &CStr) -> *mut c_void {
    let f: *const () = match name.to_bytes() {
        b"ggml_backend_set_n_threads" => ggml_backend_cpu_set_n_threads as *const (),
        b"ggml_backend_dev_get_extra_bufts" => dev_get_extra_bufts as *const (),
        b"ggml_backend_get_features" => get_features as *const (),
        b"ggml_backend_set_abort_callback" => ggml_backend_cpu_set_abort_callback as *const (),
        b"ggml_backend_cpu_numa_init" => ggml_numa_init as *const (),
        b"ggml_backend_cpu_is_numa" => ggml_is_numa as *const (),
        b"ggml_backend_cpu_set_use_ref" => ggml_backend_cpu_set_use_ref as *const (),
        b"ggml_threadpool_new" => ggml_threadpool_new as *const (),
        b"ggml_threadpool_free" => ggml_threadpool_free as *const (),
        b"ggml_backend_cpu_set_threadpool" => ggml_backend_cpu_set_threadpool as *const (),
        _ => std::ptr::null(),
    };
    f as *mut c_void
}

/// the names `proc_address` answers, for tests and the README
pub const PROC_NAMES: [&CStr; 10] = [
    c"ggml_backend_set_n_threads",
    c"ggml_backend_dev_get_extra_bufts",
    c"ggml_backend_get_features",
    c"ggml_backend_set_abort_callback",
    c"ggml_backend_cpu_numa_init",
    c"ggml_backend_cpu_is_numa",
    c"ggml_backend_cpu_set_use_ref",
    c"ggml_threadpool_new",
    c"ggml_threadpool_free",
    c"ggml_backend_cpu_set_threadpool",
];

//
// NUMA: the strategy is recorded; the pool does not pin threads to nodes
//

static NUMA: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

#[unsafe(no_mangle)]
pub extern "C" fn ggml_numa_init(numa: c_int) {
    guard("ggml_numa_init", (), || {
        if NUMA.swap(numa, std::sync::atomic::Ordering::Relaxed) != 0 {
            ggml_abi::log_info!("ggml_numa_init: NUMA already initialized\n");
        }
    })
}

/// true when the system has more than one NUMA node (as upstream: counted in sysfs)
#[unsafe(no_mangle)]
pub extern "C" fn ggml_is_numa() -> bool {
    guard("ggml_is_numa", false, || {
        let nodes = std::fs::read_dir("/sys/devices/system/node")
            .map(|d| d.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.strip_prefix("node").is_some_and(|k| k.parse::<u32>().is_ok()))).count());
        nodes.unwrap_or(1) > 1
    })
}

//
// Thread pools and graph plans
//

#[unsafe(no_mangle)]
pub extern "C" fn ggml_threadpool_new(params: *mut ggml_threadpool_params) -> *mut ggml_threadpool {
    guard("ggml_threadpool_new", std::ptr::null_mut(), || {
        ensure!(!params.is_null(), "ggml_threadpool_new: params is NULL");
        // SAFETY: a params struct (C API contract).
        let p = unsafe { &*params };
        ensure!(p.n_threads > 0 && p.n_threads as usize <= GGML_MAX_N_THREADS, "ggml_threadpool_new: n_threads = {}", p.n_threads);
        let n = p.n_threads as usize;
        Box::into_raw(Box::new(ggml_threadpool { engine: Mutex::new(Engine::new(n)), n_threads: n, paused: p.paused.into() }))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_threadpool_free(threadpool: *mut ggml_threadpool) {
    guard("ggml_threadpool_free", (), || {
        if !threadpool.is_null() {
            // SAFETY: made by ggml_threadpool_new, freed once (C API contract).
            drop(unsafe { Box::from_raw(threadpool) })
        }
    })
}

fn threadpool_arg<'a>(function: &str, tp: *mut ggml_threadpool) -> &'a ggml_threadpool {
    // SAFETY: NULL or a live pool (C API contract).
    unsafe { tp.as_ref() }.unwrap_or_else(|| fatal!("{function}: threadpool is NULL"))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_threadpool_get_n_threads(threadpool: *mut ggml_threadpool) -> c_int {
    guard("ggml_threadpool_get_n_threads", 0, || threadpool_arg("ggml_threadpool_get_n_threads", threadpool).n_threads as c_int)
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_threadpool_pause(threadpool: *mut ggml_threadpool) {
    guard("ggml_threadpool_pause", (), || threadpool_arg("ggml_threadpool_pause", threadpool).paused.store(true, std::sync::atomic::Ordering::Relaxed))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_threadpool_resume(threadpool: *mut ggml_threadpool) {
    guard("ggml_threadpool_resume", (), || threadpool_arg("ggml_threadpool_resume", threadpool).paused.store(false, std::sync::atomic::Ordering::Relaxed))
}

/// `ggml_graph_plan`: our kernels keep their scratch in the pool's engine, so no work buffer is
/// asked of the caller (work_size 0).
#[unsafe(no_mangle)]
pub extern "C" fn ggml_graph_plan(graph: *const ggml_cgraph, n_threads: c_int, threadpool: *mut ggml_threadpool) -> ggml_cplan {
    let plan = |n: c_int| ggml_cplan {
        work_size: 0,
        work_data: std::ptr::null_mut(),
        n_threads: n,
        threadpool,
        abort_callback: None,
        abort_callback_data: std::ptr::null_mut(),
        use_ref: false,
    };
    guard("ggml_graph_plan", plan(1), || {
        ensure!(!graph.is_null(), "ggml_graph_plan: graph is NULL");
        let n = if n_threads > 0 {
            n_threads
        } else {
            // SAFETY: NULL or a live pool (C API contract).
            unsafe { threadpool.as_ref() }.map_or(DEFAULT_N_THREADS as c_int, |tp| tp.n_threads as c_int)
        };
        plan(n)
    })
}

/// Engines for plans without a thread pool, one per thread count (upstream makes a disposable
/// pool per call; keeping them is what makes our pool persistent).
static ENGINES: Mutex<Vec<Engine>> = Mutex::new(Vec::new());

#[unsafe(no_mangle)]
pub extern "C" fn ggml_graph_compute(graph: *mut ggml_cgraph, cplan: *mut ggml_cplan) -> ggml_status {
    guard("ggml_graph_compute", GGML_STATUS_FAILED, || {
        ensure!(!cplan.is_null(), "ggml_graph_compute: cplan is NULL");
        // SAFETY: a plan of ggml_graph_plan, maybe edited by the caller (C API contract).
        let plan = unsafe { *cplan };
        ensure!(plan.n_threads > 0, "ggml_graph_compute: cplan->n_threads = {}, must be at least 1", plan.n_threads);
        // SAFETY: a live graph (C API contract).
        let Some(g) = (unsafe { GraphRef::from_raw(graph) }) else { fatal!("ggml_graph_compute: graph is NULL") };
        // SAFETY: NULL or a live pool.
        if let Some(tp) = unsafe { threadpool_engine(plan.threadpool) } {
            return tp.compute(g, plan.abort_callback, plan.abort_callback_data, plan.use_ref);
        }
        let n = plan.n_threads as usize;
        // take the engine out of the list while computing, so other threads can compute too
        let taken = {
            let mut list = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
            list.iter().position(|e| e.n_threads() == n).map(|i| list.swap_remove(i))
        };
        let mut engine = taken.unwrap_or_else(|| Engine::new(n));
        let status = engine.compute(g, plan.abort_callback, plan.abort_callback_data, plan.use_ref);
        ENGINES.lock().unwrap_or_else(|e| e.into_inner()).push(engine);
        status
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_graph_compute_with_ctx(ctx: *mut ggml_context, graph: *mut ggml_cgraph, n_threads: c_int) -> ggml_status {
    guard("ggml_graph_compute_with_ctx", GGML_STATUS_ALLOC_FAILED, || {
        let _ = ctx; // upstream takes its work buffer from the context; ours needs none
        let mut plan = ggml_graph_plan(graph, n_threads, std::ptr::null_mut());
        ggml_graph_compute(graph, &mut plan)
    })
}

//
// Feature queries (run time, see features.rs)
//

macro_rules! has_queries {
    ($($fn:ident => $q:literal),* $(,)?) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $fn() -> c_int {
            guard(stringify!($fn), 0, || features::has($q))
        }
    )*};
}

has_queries! {
    ggml_cpu_has_sse3 => "sse3", ggml_cpu_has_ssse3 => "ssse3", ggml_cpu_has_avx => "avx", ggml_cpu_has_avx_vnni => "avx_vnni",
    ggml_cpu_has_avx2 => "avx2", ggml_cpu_has_bmi2 => "bmi2", ggml_cpu_has_f16c => "f16c", ggml_cpu_has_fma => "fma",
    ggml_cpu_has_avx512 => "avx512", ggml_cpu_has_avx512_vbmi => "avx512_vbmi", ggml_cpu_has_avx512_vnni => "avx512_vnni",
    ggml_cpu_has_avx512_bf16 => "avx512_bf16", ggml_cpu_has_amx_int8 => "amx_int8", ggml_cpu_has_neon => "neon",
    ggml_cpu_has_arm_fma => "arm_fma", ggml_cpu_has_fp16_va => "fp16_va", ggml_cpu_has_dotprod => "dotprod",
    ggml_cpu_has_matmul_int8 => "matmul_int8", ggml_cpu_has_sve => "sve", ggml_cpu_has_sme => "sme", ggml_cpu_has_sme2 => "sme2",
    ggml_cpu_has_riscv_v => "riscv_v", ggml_cpu_has_vsx => "vsx", ggml_cpu_has_vxe => "vxe", ggml_cpu_has_wasm_simd => "wasm_simd",
    // upstream's llamafile sgemm: not in this backend
    ggml_cpu_has_llamafile => "llamafile",
}

/// SVE vector length in bytes: 0, no SVE on the CPUs this crate builds for
#[unsafe(no_mangle)]
pub extern "C" fn ggml_cpu_get_sve_cnt() -> c_int {
    0
}

/// RISC-V vector length in bytes: 0, as above
#[unsafe(no_mangle)]
pub extern "C" fn ggml_cpu_get_rvv_vlen() -> c_int {
    0
}

//
// Conversions
//

/// the two slices of a conversion, or None for n <= 0
///
/// # Safety
/// `x` holds `n` elements of A, `y` room for `n` of B (C API contract), not overlapping.
unsafe fn rows<'a, A, B>(x: *const A, y: *mut B, n: i64) -> Option<(&'a [A], &'a mut [B])> {
    if n <= 0 {
        return None;
    }
    // SAFETY: the caller's contract.
    Some(unsafe { (std::slice::from_raw_parts(x, n as usize), std::slice::from_raw_parts_mut(y, n as usize)) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_cpu_fp32_to_fp32(x: *const f32, y: *mut f32, n: i64) {
    // SAFETY: see `rows`.
    guard("ggml_cpu_fp32_to_fp32", (), || unsafe { rows(x, y, n) }.map_or((), |(x, y)| y.copy_from_slice(x)))
}

/// f32 → i32 as C's conversion does (truncation toward zero; out of range saturates here where C
/// is undefined)
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_cpu_fp32_to_i32(x: *const f32, y: *mut i32, n: i64) {
    // SAFETY: see `rows`.
    guard("ggml_cpu_fp32_to_i32", (), || unsafe { rows(x, y, n) }.map_or((), |(x, y)| y.iter_mut().zip(x).for_each(|(d, s)| *d = *s as i32)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_cpu_fp32_to_fp16(x: *const f32, y: *mut half::f16, n: i64) {
    // SAFETY: see `rows`.
    guard("ggml_cpu_fp32_to_fp16", (), || unsafe { rows(x, y, n) }.map_or((), |(x, y)| crate::fp::f32_to_f16_row(x, y)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_cpu_fp16_to_fp32(x: *const half::f16, y: *mut f32, n: i64) {
    // SAFETY: see `rows`.
    guard("ggml_cpu_fp16_to_fp32", (), || unsafe { rows(x, y, n) }.map_or((), |(x, y)| crate::fp::f16_to_f32_row(x, y)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_cpu_fp32_to_bf16(x: *const f32, y: *mut half::bf16, n: i64) {
    // SAFETY: see `rows`.
    guard("ggml_cpu_fp32_to_bf16", (), || unsafe { rows(x, y, n) }.map_or((), |(x, y)| crate::fp::f32_to_bf16_row(x, y)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ggml_cpu_bf16_to_fp32(x: *const half::bf16, y: *mut f32, n: i64) {
    // SAFETY: see `rows`.
    guard("ggml_cpu_bf16_to_fp32", (), || unsafe { rows(x, y, n) }.map_or((), |(x, y)| crate::fp::bf16_to_f32_row(x, y)))
}

//
// Type traits: from_float and vec_dot of the types this crate has block formats for
//

unsafe extern "C" fn from_float<const T: u32>(x: *const f32, y: *mut c_void, k: i64) {
    guard("from_float", (), || {
        let ty = GgmlType::from_raw(T as i32).expect("a type of the table");
        if k <= 0 {
            return;
        }
        let k = k as usize;
        // SAFETY: `x` holds k floats and `y` a row of k elements of the type (ggml's contract).
        let (x, y) = unsafe { (std::slice::from_raw_parts(x, k), std::slice::from_raw_parts_mut(y as *mut u8, ty.row_size(k))) };
        crate::quants::quantize_row(ty, x, y)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn vec_dot<const T: u32>(n: c_int, s: *mut f32, _bs: usize, x: *const c_void, _bx: usize, y: *const c_void, _by: usize, nrc: c_int) {
    guard("vec_dot", (), || {
        let ty = GgmlType::from_raw(T as i32).expect("a type of the table");
        ensure!(nrc == 1, "vec_dot {}: nrc = {nrc}, this backend's traits have nrows = 1", ty.name());
        let yt = ty.vec_dot_type().expect("a weight type");
        let n = n.max(0) as usize;
        // SAFETY: x is a row of n elements of the type, y of its vec_dot_type (ggml's contract).
        let (xr, yr) = unsafe { (std::slice::from_raw_parts(x as *const u8, ty.row_size(n)), std::slice::from_raw_parts(y as *const u8, yt.row_size(n))) };
        let d = crate::kernels::active().row_dot(ty).dot(xr, yr);
        // SAFETY: s points to one float.
        unsafe { *s = d }
    })
}

macro_rules! traits {
    ($t:expr, dot) => {
        ggml_type_traits_cpu {
            from_float: Some(from_float::<{ $t as u32 }>),
            vec_dot: Some(vec_dot::<{ $t as u32 }>),
            vec_dot_type: match $t.vec_dot_type() {
                Some(v) => v as c_int,
                None => $t as c_int,
            },
            nrows: 1,
        }
    };
    ($t:expr, dot_only) => {
        ggml_type_traits_cpu { from_float: None, vec_dot: Some(vec_dot::<{ $t as u32 }>), vec_dot_type: GgmlType::Q8K as c_int, nrows: 1 }
    };
    ($t:expr) => {
        ggml_type_traits_cpu { from_float: Some(from_float::<{ $t as u32 }>), vec_dot: None, vec_dot_type: GgmlType::F32 as c_int, nrows: 1 }
    };
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_get_type_traits_cpu(ty: c_int) -> *const ggml_type_traits_cpu {
    struct Table([(GgmlType, ggml_type_traits_cpu); GgmlType::ALL.len()]);
    // SAFETY: function pointers and integers only, never written.
    unsafe impl Sync for Table {}
    static TABLE: Table = Table([
        (GgmlType::F32, traits!(GgmlType::F32, dot)),
        (GgmlType::F16, traits!(GgmlType::F16, dot)),
        (GgmlType::BF16, traits!(GgmlType::BF16, dot)),
        (GgmlType::Q8_0, traits!(GgmlType::Q8_0, dot)),
        (GgmlType::Q4_0, traits!(GgmlType::Q4_0, dot)),
        (GgmlType::Q4_1, traits!(GgmlType::Q4_1, dot)),
        (GgmlType::Q5_0, traits!(GgmlType::Q5_0, dot)),
        (GgmlType::Q5_1, traits!(GgmlType::Q5_1, dot)),
        (GgmlType::Q2K, traits!(GgmlType::Q2K, dot)),
        (GgmlType::Q3K, traits!(GgmlType::Q3K, dot)),
        (GgmlType::Q4K, traits!(GgmlType::Q4K, dot)),
        (GgmlType::Q5K, traits!(GgmlType::Q5K, dot)),
        (GgmlType::Q6K, traits!(GgmlType::Q6K, dot)),
        (GgmlType::Iq4Nl, traits!(GgmlType::Iq4Nl, dot)),
        (GgmlType::Iq4Xs, traits!(GgmlType::Iq4Xs, dot)),
        (GgmlType::Tq1_0, traits!(GgmlType::Tq1_0, dot)),
        (GgmlType::Tq2_0, traits!(GgmlType::Tq2_0, dot)),
        (GgmlType::Mxfp4, traits!(GgmlType::Mxfp4, dot)),
        (GgmlType::Q1_0, traits!(GgmlType::Q1_0, dot)),
        (GgmlType::Q2_0, traits!(GgmlType::Q2_0, dot)),
        (GgmlType::Nvfp4, traits!(GgmlType::Nvfp4, dot)),
        // the grid types: no from_float, as upstream's
        (GgmlType::Iq2Xxs, traits!(GgmlType::Iq2Xxs, dot_only)),
        (GgmlType::Iq2Xs, traits!(GgmlType::Iq2Xs, dot_only)),
        (GgmlType::Iq2S, traits!(GgmlType::Iq2S, dot_only)),
        (GgmlType::Iq3Xxs, traits!(GgmlType::Iq3Xxs, dot_only)),
        (GgmlType::Iq3S, traits!(GgmlType::Iq3S, dot_only)),
        (GgmlType::Iq1S, traits!(GgmlType::Iq1S, dot_only)),
        (GgmlType::Iq1M, traits!(GgmlType::Iq1M, dot_only)),
        (GgmlType::Q8K, traits!(GgmlType::Q8K)),
        (GgmlType::Q8_1, traits!(GgmlType::Q8_1)),
    ]);
    /// every other type: no conversion, no dot product (upstream's zero entries)
    static NONE: ggml_type_traits_cpu = ggml_type_traits_cpu { from_float: None, vec_dot: None, vec_dot_type: 0, nrows: 0 };
    guard("ggml_get_type_traits_cpu", &NONE, || match TABLE.0.iter().find(|(t, _)| *t as c_int == ty) {
        Some((_, traits)) => traits,
        None => &NONE,
    })
}

//
// Element access and scalar tensors
//

/// The scalar types the element functions read and write (upstream: I8, I16, I32, F16, BF16, F32).
#[derive(Clone, Copy)]
enum Scalar {
    I8,
    I16,
    I32,
    F16,
    Bf16,
    F32,
}

fn scalar_of(function: &str, t: *const ggml_tensor) -> Scalar {
    ensure!(!t.is_null(), "{function}: tensor is NULL");
    // SAFETY: a live tensor (C API contract).
    let ty = unsafe { (*t).type_ };
    match ty {
        24 => Scalar::I8,
        25 => Scalar::I16,
        26 => Scalar::I32,
        1 => Scalar::F16,
        30 => Scalar::Bf16,
        0 => Scalar::F32,
        // SAFETY: as above.
        _ => fatal!("{function}: tensor '{}' has type {ty}, not one of i8, i16, i32, f16, bf16, f32", unsafe { name(t) }),
    }
}

/// # Safety
/// `t` is a live tensor.
unsafe fn name(t: *const ggml_tensor) -> String {
    // SAFETY: the caller's contract.
    unsafe { ggml_abi::tensor::TensorRef::from_raw(t) }.map(|r| r.name()).unwrap_or_default()
}

/// the address of element (i0, i1, i2, i3), checked against the shape
fn element(function: &str, t: *const ggml_tensor, i: [i64; 4]) -> *mut u8 {
    // SAFETY: a live tensor (checked non-NULL by scalar_of, called first by every user).
    let (ne, nb, data) = unsafe { ((*t).ne, (*t).nb, (*t).data as *mut u8) };
    ensure!(!data.is_null(), "{function}: tensor '{}' has no data", unsafe { name(t) });
    ensure!((0..4).all(|d| i[d] >= 0 && i[d] < ne[d]), "{function}: index {i:?} is outside tensor '{}' of shape {ne:?}", unsafe { name(t) });
    data.wrapping_add((0..4).map(|d| i[d] as usize * nb[d]).sum())
}

/// the 4-d index of flat element `i` (ggml_unravel_index)
fn unravel(function: &str, t: *const ggml_tensor, i: c_int) -> [i64; 4] {
    // SAFETY: a live tensor.
    let ne = unsafe { (*t).ne };
    let n: i64 = ne.iter().product();
    ensure!(i >= 0 && (i as i64) < n, "{function}: index {i} is outside tensor '{}' of {n} elements", unsafe { name(t) });
    let i = i as i64;
    [i % ne[0], (i / ne[0]) % ne[1], (i / (ne[0] * ne[1])) % ne[2], i / (ne[0] * ne[1] * ne[2])]
}

/// # Safety
/// `p` is the address of an element of type `s`.
unsafe fn read(s: Scalar, p: *const u8) -> f64 {
    // SAFETY: the caller's contract; tensors may be unaligned views, so read_unaligned.
    unsafe {
        match s {
            Scalar::I8 => (p as *const i8).read_unaligned() as f64,
            Scalar::I16 => (p as *const i16).read_unaligned() as f64,
            Scalar::I32 => (p as *const i32).read_unaligned() as f64,
            Scalar::F16 => (p as *const half::f16).read_unaligned().to_f64(),
            Scalar::Bf16 => (p as *const half::bf16).read_unaligned().to_f64(),
            Scalar::F32 => (p as *const f32).read_unaligned() as f64,
        }
    }
}

/// # Safety
/// as `read`, writable. Integers are stored as C's conversion from the int32/float argument.
unsafe fn write(s: Scalar, p: *mut u8, v: Value) {
    // SAFETY: the caller's contract.
    unsafe {
        match s {
            Scalar::I8 => (p as *mut i8).write_unaligned(v.int() as i8),
            Scalar::I16 => (p as *mut i16).write_unaligned(v.int() as i16),
            Scalar::I32 => (p as *mut i32).write_unaligned(v.int()),
            Scalar::F16 => (p as *mut half::f16).write_unaligned(half::f16::from_f32(v.float())),
            Scalar::Bf16 => (p as *mut half::bf16).write_unaligned(half::bf16::from_f32(v.float())),
            Scalar::F32 => (p as *mut f32).write_unaligned(v.float()),
        }
    }
}

/// the argument of a setter: upstream's i32 setters convert an int32, its f32 setters a float
#[derive(Clone, Copy)]
enum Value {
    Int(i32),
    Float(f32),
}

impl Value {
    fn int(self) -> i32 {
        match self {
            Value::Int(v) => v,
            Value::Float(v) => v as i32,
        }
    }
    fn float(self) -> f32 {
        match self {
            Value::Int(v) => v as f32,
            Value::Float(v) => v,
        }
    }
}

fn set_all(function: &str, t: *mut ggml_tensor, v: Value) -> *mut ggml_tensor {
    let s = scalar_of(function, t);
    // SAFETY: a live tensor.
    let ne = unsafe { (*t).ne };
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    // SAFETY: an element of the tensor (checked by `element`).
                    unsafe { write(s, element(function, t, [i0, i1, i2, i3]), v) }
                }
            }
        }
    }
    t
}

fn get_nd(function: &str, t: *const ggml_tensor, i: [i64; 4]) -> f64 {
    let s = scalar_of(function, t);
    // SAFETY: an element of the tensor.
    unsafe { read(s, element(function, t, i)) }
}

fn set_nd(function: &str, t: *const ggml_tensor, i: [i64; 4], v: Value) {
    let s = scalar_of(function, t);
    // SAFETY: an element of the tensor.
    unsafe { write(s, element(function, t, i), v) }
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_set_i32(t: *mut ggml_tensor, value: i32) -> *mut ggml_tensor {
    guard("ggml_set_i32", t, || set_all("ggml_set_i32", t, Value::Int(value)))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_set_f32(t: *mut ggml_tensor, value: f32) -> *mut ggml_tensor {
    guard("ggml_set_f32", t, || set_all("ggml_set_f32", t, Value::Float(value)))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_get_i32_1d(t: *const ggml_tensor, i: c_int) -> i32 {
    guard("ggml_get_i32_1d", 0, || {
        scalar_of("ggml_get_i32_1d", t);
        get_nd("ggml_get_i32_1d", t, unravel("ggml_get_i32_1d", t, i)) as i32
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_set_i32_1d(t: *const ggml_tensor, i: c_int, value: i32) {
    guard("ggml_set_i32_1d", (), || {
        scalar_of("ggml_set_i32_1d", t);
        set_nd("ggml_set_i32_1d", t, unravel("ggml_set_i32_1d", t, i), Value::Int(value))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_get_i32_nd(t: *const ggml_tensor, i0: c_int, i1: c_int, i2: c_int, i3: c_int) -> i32 {
    guard("ggml_get_i32_nd", 0, || get_nd("ggml_get_i32_nd", t, [i0 as i64, i1 as i64, i2 as i64, i3 as i64]) as i32)
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_set_i32_nd(t: *const ggml_tensor, i0: c_int, i1: c_int, i2: c_int, i3: c_int, value: i32) {
    guard("ggml_set_i32_nd", (), || set_nd("ggml_set_i32_nd", t, [i0 as i64, i1 as i64, i2 as i64, i3 as i64], Value::Int(value)))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_get_f32_1d(t: *const ggml_tensor, i: c_int) -> f32 {
    guard("ggml_get_f32_1d", 0.0, || {
        scalar_of("ggml_get_f32_1d", t);
        get_nd("ggml_get_f32_1d", t, unravel("ggml_get_f32_1d", t, i)) as f32
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_set_f32_1d(t: *const ggml_tensor, i: c_int, value: f32) {
    guard("ggml_set_f32_1d", (), || {
        scalar_of("ggml_set_f32_1d", t);
        set_nd("ggml_set_f32_1d", t, unravel("ggml_set_f32_1d", t, i), Value::Float(value))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_get_f32_nd(t: *const ggml_tensor, i0: c_int, i1: c_int, i2: c_int, i3: c_int) -> f32 {
    guard("ggml_get_f32_nd", 0.0, || get_nd("ggml_get_f32_nd", t, [i0 as i64, i1 as i64, i2 as i64, i3 as i64]) as f32)
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_set_f32_nd(t: *const ggml_tensor, i0: c_int, i1: c_int, i2: c_int, i3: c_int, value: f32) {
    guard("ggml_set_f32_nd", (), || set_nd("ggml_set_f32_nd", t, [i0 as i64, i1 as i64, i2 as i64, i3 as i64], Value::Float(value)))
}

/// a one-element tensor of `ty` in `ctx` (ggml-base's `ggml_new_tensor_1d`), which must allocate
fn new_scalar(function: &str, ctx: *mut ggml_context, ty: c_int) -> *mut ggml_tensor {
    static NEW_1D: Import = Import::new(c"ggml_new_tensor_1d");
    ensure!(!ctx.is_null(), "{function}: ctx is NULL");
    // SAFETY: a live context (C API contract).
    ensure!(!unsafe { ggml_abi::sys::ggml_get_no_alloc(ctx) }, "{function}: the context is no_alloc: the value has nowhere to go");
    // SAFETY: ggml-base's `struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context *, enum ggml_type, int64_t)`.
    unsafe {
        let f: unsafe extern "C" fn(*mut ggml_context, c_int, i64) -> *mut ggml_tensor = std::mem::transmute(NEW_1D.get());
        f(ctx, ty, 1)
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_new_i32(ctx: *mut ggml_context, value: i32) -> *mut ggml_tensor {
    guard("ggml_new_i32", std::ptr::null_mut(), || set_all("ggml_new_i32", new_scalar("ggml_new_i32", ctx, 26), Value::Int(value)))
}

#[unsafe(no_mangle)]
pub extern "C" fn ggml_new_f32(ctx: *mut ggml_context, value: f32) -> *mut ggml_tensor {
    guard("ggml_new_f32", std::ptr::null_mut(), || set_all("ggml_new_f32", new_scalar("ggml_new_f32", ctx, 0), Value::Float(value)))
}
