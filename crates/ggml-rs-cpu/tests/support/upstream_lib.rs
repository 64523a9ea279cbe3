//! Upstream's stock libggml-base / libggml-cpu, dlopened, for the comparisons in
//! `tests/upstream.rs` and the microbenchmark (`examples/dot_bench.rs`). The directory comes from
//! `GGML_RS_UPSTREAM_LIB_DIR`; when it is unset or the libraries are missing, `load` says why and
//! the callers skip.
//!
//! Only the fields read are declared, in upstream's order (ggml.h / ggml-cpu.h at the pin):
//!
//! ```text
//! struct ggml_type_traits {            // offset (x86_64)
//!     const char * type_name;          //  0
//!     int64_t      blck_size;          //  8
//!     int64_t      blck_size_interleave; // 16
//!     size_t       type_size;          // 24
//!     bool         is_quantized;       // 32 (+7 padding)
//!     ggml_to_float_t   to_float;      // 40
//!     ggml_from_float_t from_float_ref;// 48
//! };
//! struct ggml_type_traits_cpu {
//!     ggml_from_float_t from_float;    //  0
//!     ggml_vec_dot_t    vec_dot;       //  8
//!     enum ggml_type    vec_dot_type;  // 16 (+4 padding)
//!     int64_t           nrows;         // 24
//! };
//! ```
//!
//! For whole ops (`flash_attn_ext_is_upstreams_bit_for_bit`), [`Context`] builds a one-node graph
//! with upstream's ggml-base (`ggml_init`, `ggml_new_tensor_4d`, the op's constructor,
//! `ggml_new_graph`, `ggml_build_forward_expand`) and computes it with upstream's libggml-cpu
//! (`ggml_graph_compute_with_ctx`, its work buffer taken from the context). The tensors and the
//! graph are upstream's structs, which ours mirror (`ggml_abi::sys`, checked against the pinned
//! headers), so our backend can compute the very same graph afterwards.

#![allow(dead_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::PathBuf;

use ggml_abi::sys::{ggml_cgraph, ggml_tensor};
use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};

pub type ToFloat = unsafe extern "C" fn(x: *const c_void, y: *mut f32, k: i64);
pub type FromFloat = unsafe extern "C" fn(x: *const f32, y: *mut c_void, k: i64);
pub type VecDot = unsafe extern "C" fn(n: c_int, s: *mut f32, bs: usize, x: *const c_void, bx: usize, y: *const c_void, by: usize, nrc: c_int);
type QuantizeChunk = unsafe extern "C" fn(ty: u32, src: *const f32, dst: *mut c_void, start: i64, nrows: i64, n_per_row: i64, imatrix: *const f32) -> usize;

/// `struct ggml_init_params` of ggml.h
#[repr(C)]
struct InitParams {
    mem_size: usize,
    mem_buffer: *mut c_void,
    no_alloc: bool,
}

/// the graph-building functions of ggml.h and `ggml_graph_compute_with_ctx` of ggml-cpu.h
struct GraphFns {
    init: unsafe extern "C" fn(InitParams) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void),
    tensor_overhead: unsafe extern "C" fn() -> usize,
    graph_overhead: unsafe extern "C" fn() -> usize,
    new_tensor_4d: unsafe extern "C" fn(*mut c_void, c_int, i64, i64, i64, i64) -> *mut ggml_tensor,
    flash_attn_ext:
        unsafe extern "C" fn(*mut c_void, *mut ggml_tensor, *mut ggml_tensor, *mut ggml_tensor, *mut ggml_tensor, f32, f32, f32) -> *mut ggml_tensor,
    flash_attn_ext_set_prec: unsafe extern "C" fn(*mut ggml_tensor, c_int),
    flash_attn_ext_add_sinks: unsafe extern "C" fn(*mut ggml_tensor, *mut ggml_tensor),
    silu: unsafe extern "C" fn(*mut c_void, *mut ggml_tensor) -> *mut ggml_tensor,
    mul_mat: unsafe extern "C" fn(*mut c_void, *mut ggml_tensor, *mut ggml_tensor) -> *mut ggml_tensor,
    mul_mat_id: unsafe extern "C" fn(*mut c_void, *mut ggml_tensor, *mut ggml_tensor, *mut ggml_tensor) -> *mut ggml_tensor,
    swiglu_split: unsafe extern "C" fn(*mut c_void, *mut ggml_tensor, *mut ggml_tensor) -> *mut ggml_tensor,
    new_graph: unsafe extern "C" fn(*mut c_void) -> *mut ggml_cgraph,
    build_forward_expand: unsafe extern "C" fn(*mut ggml_cgraph, *mut ggml_tensor),
    graph_compute_with_ctx: unsafe extern "C" fn(*mut c_void, *mut ggml_cgraph, c_int) -> c_int,
}

#[repr(C)]
pub struct TypeTraits {
    pub type_name: *const c_char,
    pub blck_size: i64,
    pub blck_size_interleave: i64,
    pub type_size: usize,
    pub is_quantized: bool,
    pub to_float: Option<ToFloat>,
    pub from_float_ref: Option<FromFloat>,
}

#[repr(C)]
pub struct TypeTraitsCpu {
    pub from_float: Option<FromFloat>,
    pub vec_dot: Option<VecDot>,
    pub vec_dot_type: u32,
    pub nrows: i64,
}

const _: () = assert!(std::mem::offset_of!(TypeTraits, to_float) == 40);
const _: () = assert!(std::mem::offset_of!(TypeTraits, from_float_ref) == 48);
const _: () = assert!(std::mem::offset_of!(TypeTraitsCpu, vec_dot_type) == 16);
const _: () = assert!(std::mem::offset_of!(TypeTraitsCpu, nrows) == 24);

pub struct Upstream {
    quantize_chunk: QuantizeChunk,
    type_traits: unsafe extern "C" fn(u32) -> *const TypeTraits,
    type_traits_cpu: unsafe extern "C" fn(u32) -> *const TypeTraitsCpu,
    graph: GraphFns,
    /// libggml-cpu was compiled for AVX-512 F (`ggml_cpu_has_avx512`: a native build on such a
    /// CPU, not the stock one)
    pub avx512_build: bool,
    // kept open for the function pointers above
    _cpu: Library,
    _base: Library,
}

impl Upstream {
    /// the libraries in `GGML_RS_UPSTREAM_LIB_DIR`, or why not
    pub fn load() -> Result<Upstream, String> {
        let dir = std::env::var_os("GGML_RS_UPSTREAM_LIB_DIR").ok_or("GGML_RS_UPSTREAM_LIB_DIR is not set")?;
        let dir = PathBuf::from(dir);
        let base_path = dir.join("libggml-base.so");
        let cpu_path = dir.join("libggml-cpu.so");
        for p in [&base_path, &cpu_path] {
            if !p.exists() {
                return Err(format!("{} does not exist", p.display()));
            }
        }
        // SAFETY: loading upstream's libraries runs their initialisers, which only set up ggml's
        // tables; global so that libggml-cpu's reference to libggml-base resolves to this copy.
        let base = unsafe { Library::open(Some(&base_path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| format!("{}: {e}", base_path.display()))?;
        // SAFETY: as above
        let cpu = unsafe { Library::open(Some(&cpu_path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| format!("{}: {e}", cpu_path.display()))?;
        // SAFETY: the symbols have these C signatures in ggml.h / ggml-cpu.h at the pin
        unsafe {
            let quantize_chunk = *base.get::<QuantizeChunk>(b"ggml_quantize_chunk\0").map_err(|e| e.to_string())?;
            let type_traits = *base.get(b"ggml_get_type_traits\0").map_err(|e| e.to_string())?;
            let type_traits_cpu = *cpu.get(b"ggml_get_type_traits_cpu\0").map_err(|e| e.to_string())?;
            let cpu_init = *cpu.get::<unsafe extern "C" fn()>(b"ggml_cpu_init\0").map_err(|e| e.to_string())?;
            cpu_init();
            let has_avx512 = *cpu.get::<unsafe extern "C" fn() -> c_int>(b"ggml_cpu_has_avx512\0").map_err(|e| e.to_string())?;
            let avx512_build = has_avx512() != 0;
            let graph = GraphFns {
                init: *base.get(b"ggml_init\0").map_err(|e| e.to_string())?,
                free: *base.get(b"ggml_free\0").map_err(|e| e.to_string())?,
                tensor_overhead: *base.get(b"ggml_tensor_overhead\0").map_err(|e| e.to_string())?,
                graph_overhead: *base.get(b"ggml_graph_overhead\0").map_err(|e| e.to_string())?,
                new_tensor_4d: *base.get(b"ggml_new_tensor_4d\0").map_err(|e| e.to_string())?,
                flash_attn_ext: *base.get(b"ggml_flash_attn_ext\0").map_err(|e| e.to_string())?,
                flash_attn_ext_set_prec: *base.get(b"ggml_flash_attn_ext_set_prec\0").map_err(|e| e.to_string())?,
                flash_attn_ext_add_sinks: *base.get(b"ggml_flash_attn_ext_add_sinks\0").map_err(|e| e.to_string())?,
                silu: *base.get(b"ggml_silu\0").map_err(|e| e.to_string())?,
                mul_mat: *base.get(b"ggml_mul_mat\0").map_err(|e| e.to_string())?,
                mul_mat_id: *base.get(b"ggml_mul_mat_id\0").map_err(|e| e.to_string())?,
                swiglu_split: *base.get(b"ggml_swiglu_split\0").map_err(|e| e.to_string())?,
                new_graph: *base.get(b"ggml_new_graph\0").map_err(|e| e.to_string())?,
                build_forward_expand: *base.get(b"ggml_build_forward_expand\0").map_err(|e| e.to_string())?,
                graph_compute_with_ctx: *cpu.get(b"ggml_graph_compute_with_ctx\0").map_err(|e| e.to_string())?,
            };
            Ok(Upstream { quantize_chunk, type_traits, type_traits_cpu, graph, avx512_build, _cpu: cpu, _base: base })
        }
    }

    fn traits(&self, ty: u32) -> &TypeTraits {
        // SAFETY: ggml_get_type_traits returns a pointer into a static table for any valid type
        unsafe { &*(self.type_traits)(ty) }
    }

    fn traits_cpu(&self, ty: u32) -> &TypeTraitsCpu {
        // SAFETY: as above, ggml-cpu's static table
        unsafe { &*(self.type_traits_cpu)(ty) }
    }

    pub fn type_name(&self, ty: u32) -> String {
        // SAFETY: a static NUL-terminated name
        unsafe { CStr::from_ptr(self.traits(ty).type_name) }.to_string_lossy().into_owned()
    }

    pub fn type_size(&self, ty: u32) -> (i64, usize) {
        let t = self.traits(ty);
        (t.blck_size, t.type_size)
    }

    /// `ggml_quantize_chunk` of `rows` rows of `n_per_row`, no importance matrix
    pub fn quantize_chunk(&self, ty: u32, src: &[f32], n_per_row: usize, dst: &mut [u8]) -> usize {
        let rows = src.len() / n_per_row;
        let (blck, size) = self.type_size(ty);
        assert_eq!(dst.len(), rows * n_per_row / blck as usize * size, "quantize_chunk: destination size");
        // SAFETY: src holds rows*n_per_row floats and dst the bytes of that many elements (checked)
        unsafe { (self.quantize_chunk)(ty, src.as_ptr(), dst.as_mut_ptr().cast(), 0, rows as i64, n_per_row as i64, std::ptr::null()) }
    }

    /// `to_float` of the type's traits
    pub fn to_float(&self, ty: u32, src: &[u8], dst: &mut [f32]) {
        let (blck, size) = self.type_size(ty);
        assert_eq!(src.len(), dst.len() / blck as usize * size, "to_float: source size");
        let f = self.traits(ty).to_float.expect("type has to_float");
        // SAFETY: sizes checked above
        unsafe { f(src.as_ptr().cast(), dst.as_mut_ptr(), dst.len() as i64) }
    }

    /// ggml-cpu's `from_float` of the type (what MUL_MAT quantizes activations with)
    pub fn cpu_from_float(&self, ty: u32, src: &[f32], dst: &mut [u8]) {
        let (blck, size) = self.type_size(ty);
        assert_eq!(dst.len(), src.len() / blck as usize * size, "from_float: destination size");
        let f = self.traits_cpu(ty).from_float.expect("type has from_float");
        // SAFETY: sizes checked above
        unsafe { f(src.as_ptr(), dst.as_mut_ptr().cast(), src.len() as i64) }
    }

    /// ggml-cpu's `vec_dot` for weights of type `ty` (and its `vec_dot_type`)
    pub fn vec_dot_fn(&self, ty: u32) -> (VecDot, u32) {
        let t = self.traits_cpu(ty);
        (t.vec_dot.expect("type has vec_dot"), t.vec_dot_type)
    }

    /// a function libggml-cpu exports, by its (NUL-terminated) name, or None
    ///
    /// # Safety
    /// `T` is the function's true type.
    pub unsafe fn cpu_symbol<T: Copy>(&self, name: &[u8]) -> Option<T> {
        // SAFETY: the caller names the symbol's type
        unsafe { self._cpu.get::<T>(name).ok().map(|s| *s) }
    }

    /// one call of `vec_dot` on `n` elements (nrc 1)
    pub fn vec_dot(&self, ty: u32, n: usize, x: &[u8], y: &[u8]) -> f32 {
        let (f, _) = self.vec_dot_fn(ty);
        let mut s = 0.0f32;
        let (blck, size) = self.type_size(ty);
        assert_eq!(x.len(), n / blck as usize * size, "vec_dot: weight row size");
        // SAFETY: x holds n elements of ty; y holds n of the vec_dot type (callers make it so);
        // one result
        unsafe { f(n as c_int, &mut s, 0, x.as_ptr().cast(), 0, y.as_ptr().cast(), 0, 1) };
        s
    }
}

impl Upstream {
    /// a ggml context of upstream's with `data_bytes` for tensor data and work buffers (the
    /// per-tensor and graph overheads are added here), or None when ggml_init fails
    pub fn context(&self, data_bytes: usize, n_tensors: usize) -> Option<Context<'_>> {
        // SAFETY: plain functions of ggml-base without arguments
        let overhead = unsafe { (self.graph.tensor_overhead)() * (n_tensors + 1) + (self.graph.graph_overhead)() };
        let params = InitParams { mem_size: data_bytes + overhead + 4096, mem_buffer: std::ptr::null_mut(), no_alloc: false };
        // SAFETY: ggml_init allocates its own buffer (mem_buffer NULL)
        let ctx = unsafe { (self.graph.init)(params) };
        (!ctx.is_null()).then_some(Context { u: self, ctx })
    }
}

/// A context of upstream's ggml-base: the tensors and graphs made in it live as long as it does.
/// Upstream's functions assert (abort) on misuse; the callers keep to ggml.h's rules.
pub struct Context<'a> {
    u: &'a Upstream,
    ctx: *mut c_void,
}

impl Context<'_> {
    /// the `struct ggml_context *`
    pub fn as_ptr(&self) -> *mut c_void {
        self.ctx
    }

    /// `ggml_new_tensor_4d`: a contiguous tensor with its data in the context
    pub fn new_tensor(&self, ty: u32, ne: [i64; 4]) -> *mut ggml_tensor {
        // SAFETY: a live context; ggml asserts the type and that the context has room
        let t = unsafe { (self.u.graph.new_tensor_4d)(self.ctx, ty as c_int, ne[0], ne[1], ne[2], ne[3]) };
        assert!(!t.is_null(), "ggml_new_tensor_4d returned NULL");
        t
    }

    /// `ggml_flash_attn_ext(ctx, q, k, v, mask, scale, max_bias, logit_softcap)`, then
    /// `ggml_flash_attn_ext_add_sinks` when `sinks` is not NULL and
    /// `ggml_flash_attn_ext_set_prec` when `prec` is not 0 (GGML_PREC_DEFAULT)
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attn_ext(
        &self,
        q: *mut ggml_tensor,
        k: *mut ggml_tensor,
        v: *mut ggml_tensor,
        mask: *mut ggml_tensor,
        sinks: *mut ggml_tensor,
        params: [f32; 3],
        prec: i32,
    ) -> *mut ggml_tensor {
        // SAFETY: tensors of this context (ggml asserts the shapes and types)
        unsafe {
            let t = (self.u.graph.flash_attn_ext)(self.ctx, q, k, v, mask, params[0], params[1], params[2]);
            if !sinks.is_null() {
                (self.u.graph.flash_attn_ext_add_sinks)(t, sinks);
            }
            if prec != 0 {
                (self.u.graph.flash_attn_ext_set_prec)(t, prec);
            }
            t
        }
    }

    /// `ggml_silu(ctx, a)`, or with a gate `ggml_swiglu_split(ctx, a, g)`
    pub fn silu(&self, a: *mut ggml_tensor, g: Option<*mut ggml_tensor>) -> *mut ggml_tensor {
        // SAFETY: tensors of this context (ggml asserts the shapes and types)
        unsafe {
            match g {
                Some(g) => (self.u.graph.swiglu_split)(self.ctx, a, g),
                None => (self.u.graph.silu)(self.ctx, a),
            }
        }
    }

    /// `ggml_mul_mat(ctx, a, b)`
    pub fn mul_mat(&self, a: *mut ggml_tensor, b: *mut ggml_tensor) -> *mut ggml_tensor {
        // SAFETY: tensors of this context (ggml asserts the shapes and types)
        unsafe { (self.u.graph.mul_mat)(self.ctx, a, b) }
    }

    /// `ggml_mul_mat_id(ctx, experts, b, ids)`
    pub fn mul_mat_id(&self, experts: *mut ggml_tensor, b: *mut ggml_tensor, ids: *mut ggml_tensor) -> *mut ggml_tensor {
        // SAFETY: tensors of this context (ggml asserts the shapes and types)
        unsafe { (self.u.graph.mul_mat_id)(self.ctx, experts, b, ids) }
    }

    /// `ggml_new_graph` + `ggml_build_forward_expand(out)`
    pub fn graph(&self, out: *mut ggml_tensor) -> *mut ggml_cgraph {
        // SAFETY: a live context and a tensor of it
        unsafe {
            let g = (self.u.graph.new_graph)(self.ctx);
            (self.u.graph.build_forward_expand)(g, out);
            g
        }
    }

    /// upstream's `ggml_graph_compute_with_ctx` (its `enum ggml_status`)
    pub fn compute(&self, graph: *mut ggml_cgraph, n_threads: usize) -> c_int {
        // SAFETY: a graph of this context; the work buffer comes from the context
        unsafe { (self.u.graph.graph_compute_with_ctx)(self.ctx, graph, n_threads as c_int) }
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        // SAFETY: made by ggml_init, freed once
        unsafe { (self.u.graph.free)(self.ctx) }
    }
}

/// the F32 output `out` of `graph` computed by upstream's libggml-cpu, then by our backend
/// (`ggml_graph_compute_with_ctx` on the same graph, the output filled with NaN first so an
/// element ours does not write cannot pass), with `n_threads` each
pub fn theirs_and_ours(ctx: &Context, graph: *mut ggml_cgraph, out: *mut ggml_tensor, n_threads: usize) -> (Vec<f32>, Vec<f32>) {
    let floats = || -> Vec<f32> {
        // SAFETY: the graph's contiguous F32 result
        unsafe { tensor_bytes(out) }.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect()
    };
    assert_eq!(ctx.compute(graph, n_threads), 0, "upstream's compute");
    let theirs = floats();
    // SAFETY: as above
    unsafe { tensor_bytes(out) }.fill(0xff);
    assert_eq!(ggml_rs_cpu::backend::exports::ggml_graph_compute_with_ctx(ctx.as_ptr().cast(), graph, n_threads as _), 0, "our compute");
    (theirs, floats())
}

/// MUL_MAT of weight rows `w` of type `ty` (`k` elements each) with the F32 activation rows `x`
/// (`k` each), in a graph of upstream's computed by its libggml-cpu and then by our backend
/// ([`theirs_and_ours`], `n_threads` each): the two `rows × cols` outputs
pub fn mul_mat_theirs_and_ours(u: &Upstream, ty: u32, w: &[u8], x: &[f32], k: usize, n_threads: usize) -> (Vec<f32>, Vec<f32>) {
    let (blck, size) = u.type_size(ty);
    let rs = k / blck as usize * size;
    let (rows, cols) = (w.len() / rs, x.len() / k);
    let ctx = u.context(w.len() + 4 * x.len() + 4 * rows * cols + (1 << 20), 4).expect("context");
    let (a, b) = (ctx.new_tensor(ty, [k as i64, rows as i64, 1, 1]), ctx.new_tensor(0 /* GGML_TYPE_F32 */, [k as i64, cols as i64, 1, 1]));
    // SAFETY: contiguous tensors of these sizes, not otherwise borrowed
    unsafe {
        tensor_bytes(a).copy_from_slice(w);
        tensor_bytes(b).copy_from_slice(ggml_rs_cpu::block::as_bytes(x));
    }
    let out = ctx.mul_mat(a, b);
    theirs_and_ours(&ctx, ctx.graph(out), out, n_threads)
}

/// the bytes of a contiguous tensor (`nb[3] · ne[3]`)
///
/// # Safety
/// `t` is a live contiguous tensor with its data allocated, not otherwise borrowed meanwhile.
pub unsafe fn tensor_bytes<'a>(t: *mut ggml_tensor) -> &'a mut [u8] {
    // SAFETY: the caller's contract
    unsafe { std::slice::from_raw_parts_mut((*t).data as *mut u8, (*t).nb[3] * (*t).ne[3] as usize) }
}

/// the libraries, or None (the test skips) — unless GGML_RS_UPSTREAM_REQUIRED=1 (the suite sets
/// it), where a missing library fails the test
pub fn load_or_skip() -> Option<Upstream> {
    match Upstream::load() {
        Ok(u) => Some(u),
        Err(why) if std::env::var("GGML_RS_UPSTREAM_REQUIRED").is_ok_and(|v| v == "1") => {
            panic!("upstream's libraries are required (GGML_RS_UPSTREAM_REQUIRED=1) and not loaded: {why}")
        }
        Err(why) => {
            println!("SKIPPED: upstream's libraries not loaded: {why}");
            None
        }
    }
}
