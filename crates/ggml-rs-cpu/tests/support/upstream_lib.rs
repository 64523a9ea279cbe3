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

#![allow(dead_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::PathBuf;

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};

pub type ToFloat = unsafe extern "C" fn(x: *const c_void, y: *mut f32, k: i64);
pub type FromFloat = unsafe extern "C" fn(x: *const f32, y: *mut c_void, k: i64);
pub type VecDot = unsafe extern "C" fn(n: c_int, s: *mut f32, bs: usize, x: *const c_void, bx: usize, y: *const c_void, by: usize, nrc: c_int);
type QuantizeChunk = unsafe extern "C" fn(ty: u32, src: *const f32, dst: *mut c_void, start: i64, nrows: i64, n_per_row: i64, imatrix: *const f32) -> usize;

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
            Ok(Upstream { quantize_chunk, type_traits, type_traits_cpu, avx512_build, _cpu: cpu, _base: base })
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
