//! `CPU_REPACK`: the extra buffer type of our CPU device (`ggml_backend_dev_get_extra_bufts`),
//! where llama.cpp puts weight matrices unless `-nr` / `--no-repack`, as with upstream's CPU.
//!
//! A weight matrix of a type the tiled int8 GEMM takes ([`crate::qgemm`]: Q8_0, Q4_0, Q4_K,
//! Q6_K; 2-D, dense rows) is repacked into the tile layout once, when its bytes are set, instead
//! of on every prompt-sized MUL_MAT (the qgemm path of `ops/mat.rs` then reads it in place).
//!
//! **Layout of a tensor here** ([`Layout`]): its original bytes at `data` (ggml's layout, as in
//! a plain CPU buffer), then, 64-aligned, the repacked row blocks ([`crate::qgemm::repack`]:
//! `ceil(rows / 16)` blocks of `k / block_len` repacked blocks). So, unlike upstream's repack
//! (which replaces the bytes in place and has no `get_tensor`):
//! - `ggml_backend_tensor_get` gives back the bytes that were set;
//! - MUL_MAT with few activation rows (token generation), or without AVX-512 VNNI at the node's
//!   level (use_ref), runs the row kernels on the original bytes, exactly as for a plain buffer;
//! - a tensor takes more memory: `get_alloc_size` is the original size plus the repacked size
//!   (Q8_0 ≈ 2.1×, Q4_0 ≈ 3×, Q4_K ≈ 3.2×, Q6_K ≈ 2.4× the original in all).
//!
//! Writes (`set_tensor`, `memset_tensor`, also partial ones and through views) update the
//! original bytes and then repack the 16-row blocks they touched. `cpy_tensor` is left out (as
//! upstream), so a copy into a tensor here goes through `set_tensor`. `clear` memsets the whole
//! buffer (the CPU buffer's): for 0 (what ggml clears with) the repacked blocks are zero too and
//! multiply to 0 as the zero bytes do.
//!
//! **Which ops** ([`supports_op`]): like upstream, only MUL_MAT whose src0 is a repackable
//! tensor here (not a view) and src1 F32 in host memory; every other op on a tensor here is
//! refused by the device's supports_op, so the scheduler never hands one to our kernels (and
//! llama.cpp keeps such weights out of this buffer type). Tensors that are not repackable may be
//! allocated here (their bytes are stored as in a CPU buffer) but no op takes them.
//!
//! The buffer type is listed only when asked for with `GGML_RS_CPU_REPACK=1` (the memory above
//! makes it opt-in until the tiles replace the original bytes) and the CPU runs the tiled GEMM
//! (AVX-512 VNNI, the process's SIMD level, so `GGML_RS_CPU_SIMD=scalar` lists none); it is not
//! host memory (`is_host` false, as upstream's).

use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

use ggml_abi::abi_alloc::{ggml_backend_buffer_t, ggml_backend_buffer_type_t};
use ggml_abi::abi_impl::{ggml_backend_buffer_type, ggml_backend_buffer_type_i};
use ggml_abi::imports::Import;
use ggml_abi::rust_backend::guard;
use ggml_abi::sys::ggml_tensor;
use ggml_abi::tensor::TensorRef;

use crate::GgmlType;
use crate::qgemm::{self, Kind, ROWS};

/// the buffer type's name, as upstream's
pub const NAME: &CStr = c"CPU_REPACK";
/// tensor alignment (and of the repacked area after the original bytes): a cache line
const ALIGN: usize = 64;

/// Where a repackable tensor's parts lie (offsets from its `data`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub ty: GgmlType,
    pub kind: Kind,
    /// elements per row (ne0)
    pub k: usize,
    /// rows (ne1)
    pub rows: usize,
    /// bytes of one original row
    pub row_size: usize,
    /// offset of the repacked area (the original bytes, rounded up to [`ALIGN`])
    pub packed_at: usize,
    /// bytes of one repacked block of 16 rows (all of k)
    pub block_row_bytes: usize,
}

impl Layout {
    /// bytes of the repacked area
    pub fn packed_len(&self) -> usize {
        self.rows.div_ceil(ROWS) * self.block_row_bytes
    }

    /// bytes of the whole tensor here: original, padding, repacked
    pub fn alloc_size(&self) -> usize {
        self.packed_at + self.packed_len()
    }
}

/// The layout of a tensor of type `ty` (upstream's value), shape `ne` and strides `nb`, if it is
/// repackable: a qgemm weight type, 2-D, dense rows of whole blocks.
pub fn layout(ty: i32, ne: [i64; 4], nb: [usize; 4]) -> Option<Layout> {
    let ty = GgmlType::from_raw(ty)?;
    let kind = qgemm::kind(ty)?;
    if ne[0] <= 0 || ne[1] <= 0 || ne[2] != 1 || ne[3] != 1 {
        return None;
    }
    let (k, rows) = (ne[0] as usize, ne[1] as usize);
    if !k.is_multiple_of(ty.block_size()) || nb[0] != ty.type_size() || nb[1] != ty.row_size(k) {
        return None;
    }
    let row_size = ty.row_size(k);
    let packed_at = (rows * row_size).next_multiple_of(ALIGN);
    Some(Layout { ty, kind, k, rows, row_size, packed_at, block_row_bytes: k / kind.block_len() * kind.block_bytes() })
}

/// the layout of `t` when it is a repackable tensor of its own (not a view)
fn tensor_layout(t: TensorRef) -> Option<Layout> {
    if t.is_view() {
        return None;
    }
    layout(t.type_(), t.ne(), t.nb())
}

struct BuftPtr(ggml_backend_buffer_type_t);
// SAFETY: the buffer type is made once and never written after; ggml reads it from any thread.
unsafe impl Send for BuftPtr {}
// SAFETY: as above.
unsafe impl Sync for BuftPtr {}

static BUFT: OnceLock<BuftPtr> = OnceLock::new();

/// the buffer type (made on first use, its device our CPU device)
pub fn buffer_type() -> ggml_backend_buffer_type_t {
    BUFT.get_or_init(|| {
        let device = super::adapter().device(0).unwrap_or(std::ptr::null_mut());
        // SAFETY: the interface is a struct of optional function pointers, all-zero is every one
        // None (the ABI version's other entries, e.g. 0.26.0's `_n` ones, stay at their defaults)
        let mut iface: ggml_backend_buffer_type_i = unsafe { std::mem::zeroed() };
        iface.get_name = Some(buft_get_name);
        iface.alloc_buffer = Some(buft_alloc_buffer);
        iface.get_alignment = Some(buft_get_alignment);
        iface.get_alloc_size = Some(buft_get_alloc_size);
        let buft = ggml_backend_buffer_type { iface, device, context: std::ptr::null_mut() };
        BuftPtr(Box::into_raw(Box::new(buft)))
    })
    .0
}

/// whether the CPU offers the buffer type: asked for (`GGML_RS_CPU_REPACK=1`: the tiles come on top
/// of the original bytes, 2-3x the weights' memory, so it is not the default) and the tiled GEMM
/// runs at the process's SIMD level
pub fn offered() -> bool {
    requested(std::env::var("GGML_RS_CPU_REPACK").ok().as_deref()) && qgemm::available(crate::simd::active())
}

/// `GGML_RS_CPU_REPACK`'s value asks for the buffer type: 1 / on / true (any case); unset, 0 or
/// anything else: no
fn requested(v: Option<&str>) -> bool {
    v.is_some_and(|v| ["1", "on", "true", "yes"].iter().any(|y| v.trim().eq_ignore_ascii_case(y)))
}

/// whether `buft` is this buffer type (false while it has not been made: then no buffer is of it)
pub fn is_repack(buft: ggml_backend_buffer_type_t) -> bool {
    !buft.is_null() && BUFT.get().is_some_and(|b| b.0 == buft)
}

/// whether `t`'s memory is in a buffer of this type
pub fn in_buffer(t: TensorRef) -> bool {
    let b = t.view_src().map_or(t.buffer_ptr(), |v| v.buffer_ptr());
    // SAFETY: a tensor's buffer is NULL or a live buffer.
    !b.is_null() && is_repack(unsafe { (*b).buft })
}

/// The repacked weights of `t` (src0 of a MUL_MAT) when it is a repackable tensor in this buffer
/// type with its memory allocated.
pub fn packed_of(t: TensorRef) -> Option<*const u8> {
    if t.data().is_null() || !in_buffer(t) {
        return None;
    }
    tensor_layout(t).map(|l| t.data().cast::<u8>().wrapping_add(l.packed_at).cast_const())
}

/// The device's answer for `op` when source `i` is in this buffer type: upstream's rule (MUL_MAT,
/// src0 here and repackable, src1 F32 and not in device memory, nothing else here); the
/// kernels' own checks come on top (the caller's).
pub fn supports_op(op: TensorRef) -> bool {
    let srcs = op.srcs();
    let (Some(a), Some(b)) = (srcs[0], srcs[1]) else { return false };
    if op.op() != ggml_abi::sys::op::MUL_MAT || !in_buffer(a) || tensor_layout(a).is_none() || b.type_() != 0 {
        return false;
    }
    let b_host = {
        let buf = b.view_src().map_or(b.buffer_ptr(), |v| v.buffer_ptr());
        // SAFETY: a tensor's buffer is NULL or a live buffer.
        buf.is_null() || super::buft_is_host(unsafe { (*buf).buft })
    };
    b_host && srcs.iter().skip(2).flatten().all(|s| !in_buffer(*s))
}

unsafe extern "C" fn buft_get_name(_buft: ggml_backend_buffer_type_t) -> *const c_char {
    NAME.as_ptr()
}

unsafe extern "C" fn buft_get_alignment(_buft: ggml_backend_buffer_type_t) -> usize {
    ALIGN
}

unsafe extern "C" fn buft_get_alloc_size(_buft: ggml_backend_buffer_type_t, tensor: *const ggml_tensor) -> usize {
    guard("CPU_REPACK get_alloc_size", 0, || {
        // SAFETY: ggml passes a live tensor.
        let t = unsafe { TensorRef::from_raw(tensor) }.expect("CPU_REPACK get_alloc_size: tensor is NULL");
        tensor_layout(t).map_or(t.nbytes(), |l| l.alloc_size())
    })
}

/// a CPU buffer (ggml's CPU buffer type) whose type is this one and whose writes repack
unsafe extern "C" fn buft_alloc_buffer(buft: ggml_backend_buffer_type_t, size: usize) -> ggml_backend_buffer_t {
    static ALLOC: Import = Import::new(c"ggml_backend_buft_alloc_buffer");
    guard("CPU_REPACK alloc_buffer", std::ptr::null_mut(), || {
        // SAFETY: ggml-base's `ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(buft, size)`
        // on the CPU buffer type; the buffer it returns (NULL on failure) is ours to adapt.
        unsafe {
            let f: unsafe extern "C" fn(ggml_backend_buffer_type_t, usize) -> ggml_backend_buffer_t = std::mem::transmute(ALLOC.get());
            let buf = f(super::cpu_buffer_type(), size);
            if buf.is_null() {
                return buf;
            }
            (*buf).buft = buft;
            (*buf).iface.set_tensor = Some(buffer_set_tensor);
            (*buf).iface.memset_tensor = Some(buffer_memset_tensor);
            // a copy would bypass the repacking: ggml then copies through set_tensor
            (*buf).iface.cpy_tensor = None;
            buf
        }
    })
}

/// the tensor owning `t`'s memory and the offset of `t`'s data in it
fn owner(t: TensorRef) -> (TensorRef, usize) {
    match t.view_src() {
        Some(v) => (v, t.data() as usize - v.data() as usize),
        None => (t, 0),
    }
}

/// Repacks the 16-row blocks of `t` (the owner of its memory) that bytes `at .. at + len` of its
/// original part touch, from the original part.
fn repack_range(t: TensorRef, at: usize, len: usize) {
    let Some(l) = tensor_layout(t) else { return };
    if len == 0 || at >= l.rows * l.row_size {
        return;
    }
    let r0 = at / l.row_size;
    let r1 = (at + len).div_ceil(l.row_size).min(l.rows);
    // an address, so the closure can go to a second thread
    let base = t.data() as usize;
    let (b0, b1) = (r0 / ROWS, r1.div_ceil(ROWS));
    let one = |rb: usize| {
        let rows: Vec<&[u8]> = (rb * ROWS..((rb + 1) * ROWS).min(l.rows))
            // SAFETY: whole original rows of the tensor (dense, `rows · row_size` bytes at data)
            .map(|r| unsafe { std::slice::from_raw_parts((base + r * l.row_size) as *const u8, l.row_size) })
            .collect();
        // SAFETY: repacked block rb, inside the repacked area that get_alloc_size reserved after
        // the original bytes; this call's alone
        let out = unsafe { std::slice::from_raw_parts_mut((base + l.packed_at + rb * l.block_row_bytes) as *mut u8, l.block_row_bytes) };
        qgemm::repack(l.ty, &rows, l.k, out);
    };
    // a whole model's weights are set at load: the blocks in two halves on two threads
    let n = b1 - b0;
    if n >= 64 {
        let mid = b0 + n / 2;
        std::thread::scope(|s| {
            s.spawn(|| (mid..b1).for_each(&one));
            (b0..mid).for_each(&one);
        });
    } else {
        (b0..b1).for_each(&one);
    }
}

unsafe extern "C" fn buffer_set_tensor(_buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    guard("CPU_REPACK set_tensor", (), || {
        // SAFETY: ggml passes a live, allocated tensor and `size` readable bytes at `data`, with
        // offset + size inside the tensor (ggml_backend_tensor_set checks it).
        unsafe {
            let t = TensorRef::from_raw(tensor).expect("CPU_REPACK set_tensor: tensor is NULL");
            std::ptr::copy_nonoverlapping(data.cast::<u8>(), t.data().cast::<u8>().add(offset), size);
            let (o, at) = owner(t);
            repack_range(o, at + offset, size);
        }
    })
}

unsafe extern "C" fn buffer_memset_tensor(_buffer: ggml_backend_buffer_t, tensor: *mut ggml_tensor, value: u8, offset: usize, size: usize) {
    guard("CPU_REPACK memset_tensor", (), || {
        // SAFETY: as set_tensor (ggml_backend_tensor_memset checks the range).
        unsafe {
            let t = TensorRef::from_raw(tensor).expect("CPU_REPACK memset_tensor: tensor is NULL");
            std::ptr::write_bytes(t.data().cast::<u8>().add(offset), value, size);
            let (o, at) = owner(t);
            repack_range(o, at + offset, size);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_of_repackable_tensors() {
        let q4 = GgmlType::Q4_0;
        let rs = q4.row_size(64);
        let l = layout(q4 as i32, [64, 20, 1, 1], [q4.type_size(), rs, rs * 20, rs * 20]).unwrap();
        // 20 rows of 36 bytes = 720, rounded to 768; 2 row blocks of 2 repacked blocks
        assert_eq!((l.packed_at, l.block_row_bytes, l.packed_len()), (768, 2 * l.kind.block_bytes(), 2 * 2 * l.kind.block_bytes()));
        // not repackable: 3-D, a type without tiles, rows not dense
        assert!(layout(q4 as i32, [64, 20, 2, 1], [q4.type_size(), rs, rs * 20, rs * 40]).is_none());
        assert!(layout(GgmlType::F16 as i32, [64, 20, 1, 1], [2, 128, 2560, 2560]).is_none());
        assert!(layout(q4 as i32, [64, 20, 1, 1], [q4.type_size(), rs + 4, 0, 0]).is_none());
    }

    #[test]
    fn the_buffer_type_is_asked_for_explicitly() {
        for v in ["1", "on", "TRUE", " yes "] {
            assert!(requested(Some(v)), "{v:?}");
        }
        for v in [None, Some(""), Some("0"), Some("off"), Some("no"), Some("2")] {
            assert!(!requested(v), "{v:?}");
        }
    }
}
