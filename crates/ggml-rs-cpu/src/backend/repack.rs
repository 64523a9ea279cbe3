//! `CPU_REPACK`: the extra buffer type of our CPU device (`ggml_backend_dev_get_extra_bufts`),
//! where llama.cpp puts weight matrices unless `-nr` / `--no-repack`, as with upstream's CPU.
//! Two modes ([`Mode`], from `GGML_RS_CPU_REPACK`):
//!
//! - **Plain (the default).** It takes the weights upstream's CPU repacks on an x86 CPU with
//!   AVX2 (`ggml_repack_get_optimal_repack_type` at the pin: Q4_0 and Q4_K, 2-D, rows a multiple
//!   of 8) and holds their own bytes, nothing more: the same tensors leave the model file's
//!   mapping for anonymous memory as with upstream, at the same size. The memory is advised for
//!   huge pages (`MADV_HUGEPAGE`, see [`advise_huge_pages`]): token generation reads every weight
//!   once per token, and with 4 KiB pages (a file mapping's, or anonymous memory where THP is
//!   `madvise`) the mat-vec spends its time on TLB misses; 2 MiB pages made the Q4_0 / Q8_0
//!   mat-vec over 18-34 MB of weights 10-14% faster here. The kernels read the bytes as in a
//!   plain CPU buffer; MUL_MAT sums them in the order of upstream's repacked kernels
//!   (`ops/mat.rs`), as upstream's CPU does for a weight in its CPU_REPACK.
//! - **Tiles (`GGML_RS_CPU_REPACK=1`).** Every weight type the tiled int8 GEMM takes
//!   ([`crate::qgemm`]: Q8_0, Q4_0, Q4_K, Q6_K; 2-D, dense rows) is also repacked into the tile
//!   layout once, when its bytes are set, instead of on every prompt-sized MUL_MAT (the qgemm
//!   path of `ops/mat.rs` then reads it in place), in the form of the process's kernel set
//!   ([`crate::qgemm::kind`]). Only where the CPU runs the tiles (AVX2 or above at the process's
//!   kernel set; elsewhere the mode is Plain).
//! - `GGML_RS_CPU_REPACK=0`: the buffer type is not listed (weights stay where llama.cpp maps
//!   them, as with `-nr`).
//!
//! **Layout of a tensor here** ([`Layout`]): its original bytes at `data` (ggml's layout, as in
//! a plain CPU buffer), then in Tiles mode, 64-aligned, the repacked row blocks
//! ([`crate::qgemm::repack`]: `ceil(rows / 16)` blocks of `k / block_len` repacked blocks). So,
//! unlike upstream's repack (which replaces the bytes in place and has no `get_tensor`):
//! - `ggml_backend_tensor_get` gives back the bytes that were set;
//! - MUL_MAT with few activation rows (token generation), or without the tiles at the node's
//!   level (use_ref), runs the row kernels on the original bytes, exactly as for a plain buffer;
//! - in Tiles mode a tensor takes more memory: `get_alloc_size` is the original size plus the
//!   repacked size (Q8_0 ≈ 2.1×, Q4_0 ≈ 3×, Q4_K ≈ 3.2×, Q6_K ≈ 2.4× the original in all).
//!
//! Writes (`set_tensor`, `memset_tensor`, also partial ones and through views) update the
//! original bytes and then (Tiles) repack the 16-row blocks they touched. `cpy_tensor` is left
//! out (as upstream), so a copy into a tensor here goes through `set_tensor`. `clear` memsets the
//! whole buffer (the CPU buffer's): for 0 (what ggml clears with) the repacked blocks are zero too
//! and multiply to 0 as the zero bytes do.
//!
//! **Which ops** ([`supports_op`]): like upstream, only MUL_MAT whose src0 is a repackable
//! tensor here (not a view) and src1 F32 in host memory; every other op on a tensor here is
//! refused by the device's supports_op, so the scheduler never hands one to our kernels (and
//! llama.cpp keeps such weights out of this buffer type). Tensors that are not repackable may be
//! allocated here (their bytes are stored as in a CPU buffer) but no op takes them. It is not
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
    /// bytes of one repacked block of 16 rows (all of k); 0 in Plain mode (no tiles)
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

/// What the buffer type holds (see the module's text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// the weights upstream repacks (Q4_0 / Q4_K, 2-D, rows % 8 == 0), their own bytes only
    Plain,
    /// every qgemm weight type, its bytes and the int8 tiles after them
    Tiles,
}

/// The mode `GGML_RS_CPU_REPACK`'s value asks for: 1 / on / true / yes (any case): Tiles where
/// `tiles_run` (the CPU runs the tiled GEMM), else Plain; 0 / off / false / no: none (the buffer
/// type is not listed); unset or anything else: Plain.
fn mode_for(v: Option<&str>, tiles_run: bool) -> Option<Mode> {
    let is = |set: &[&str]| v.is_some_and(|v| set.iter().any(|y| v.trim().eq_ignore_ascii_case(y)));
    if is(&["0", "off", "false", "no"]) {
        None
    } else if is(&["1", "on", "true", "yes"]) && tiles_run {
        Some(Mode::Tiles)
    } else {
        Some(Mode::Plain)
    }
}

/// this process's mode (read once), None when the buffer type is not offered
pub fn mode() -> Option<Mode> {
    static MODE: OnceLock<Option<Mode>> = OnceLock::new();
    *MODE.get_or_init(|| mode_for(crate::config::get().repack.as_deref(), crate::kernels::active().gemm.qgemm.is_some()))
}

/// Whether upstream's CPU (x86, AVX2 or better) repacks a weight of type `ty` and shape `ne`
/// (`ggml_repack_get_optimal_repack_type` at the pin): Q4_0 (q4_0_8x8) and Q4_K (q4_K_8x8) with
/// a row count that is a multiple of 8, 2-D.
pub fn upstream_repacks(ty: GgmlType, ne: [i64; 4]) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q4K) && ne[1] > 0 && ne[1] % 8 == 0 && ne[2] == 1 && ne[3] == 1
}

/// The layout of a tensor of type `ty` (upstream's value), shape `ne` and strides `nb` in this
/// process's mode, if it is repackable (see [`layout_in`]).
pub fn layout(ty: i32, ne: [i64; 4], nb: [usize; 4]) -> Option<Layout> {
    layout_in(mode().unwrap_or(Mode::Plain), ty, ne, nb)
}

/// The layout in `mode` of a tensor of type `ty`, shape `ne` and strides `nb`, if it is
/// repackable: a qgemm weight type, 2-D, dense rows of whole blocks; in Plain mode only what
/// upstream repacks ([`upstream_repacks`]), with no tiles.
pub fn layout_in(mode: Mode, ty: i32, ne: [i64; 4], nb: [usize; 4]) -> Option<Layout> {
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
    if mode == Mode::Plain {
        return upstream_repacks(ty, ne).then_some(Layout { ty, kind, k, rows, row_size, packed_at: rows * row_size, block_row_bytes: 0 });
    }
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

/// whether the CPU offers the buffer type (`GGML_RS_CPU_REPACK` not 0: see [`Mode`])
pub fn offered() -> bool {
    mode().is_some()
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
    tensor_layout(t).filter(|l| l.block_row_bytes > 0).map(|l| t.data().cast::<u8>().wrapping_add(l.packed_at).cast_const())
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
            if let Some(base) = (*buf).iface.get_base {
                advise_huge_pages(base(buf).cast::<u8>(), size);
            }
            (*buf).iface.set_tensor = Some(buffer_set_tensor);
            (*buf).iface.memset_tensor = Some(buffer_memset_tensor);
            // a copy would bypass the repacking: ggml then copies through set_tensor
            (*buf).iface.cpy_tensor = None;
            buf
        }
    })
}

/// the size of a huge page (x86-64's 2 MiB; where the kernel has another, the advice covers less)
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel for huge pages (`madvise(MADV_HUGEPAGE)`) on the whole 2 MiB pages inside
/// `len` bytes at `p`, memory not yet written: they are then backed by huge pages as they are
/// first written (where transparent huge pages are `madvise` or `always`; `never` ignores it).
/// Returns the advised range's length (0: the region holds no whole huge page, or the advice was
/// refused: the memory then stays in small pages, which only costs speed).
pub fn advise_huge_pages(p: *mut u8, len: usize) -> usize {
    let start = (p as usize).next_multiple_of(HUGE_PAGE);
    let end = (p as usize).saturating_add(len) / HUGE_PAGE * HUGE_PAGE;
    if p.is_null() || end <= start {
        return 0;
    }
    // SAFETY: madvise only gives the kernel a hint on pages of this process's own allocation
    // (whole pages inside [p, p + len)); it changes no contents.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    if rc == 0 { end - start } else { 0 }
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
    if l.block_row_bytes == 0 || len == 0 || at >= l.rows * l.row_size {
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
        let l = layout_in(Mode::Tiles, q4 as i32, [64, 20, 1, 1], [q4.type_size(), rs, rs * 20, rs * 20]).unwrap();
        // 20 rows of 36 bytes = 720, rounded to 768; 2 row blocks of 2 repacked blocks
        assert_eq!((l.packed_at, l.block_row_bytes, l.packed_len()), (768, 2 * l.kind.block_bytes(), 2 * 2 * l.kind.block_bytes()));
        // not repackable: 3-D, a type without tiles, rows not dense
        assert!(layout_in(Mode::Tiles, q4 as i32, [64, 20, 2, 1], [q4.type_size(), rs, rs * 20, rs * 40]).is_none());
        assert!(layout_in(Mode::Tiles, GgmlType::F16 as i32, [64, 20, 1, 1], [2, 128, 2560, 2560]).is_none());
        assert!(layout_in(Mode::Tiles, q4 as i32, [64, 20, 1, 1], [q4.type_size(), rs + 4, 0, 0]).is_none());
    }

    #[test]
    fn plain_mode_takes_what_upstream_repacks_at_its_size() {
        let dense = |ty: GgmlType, k: usize, rows: usize| {
            let rs = ty.row_size(k);
            [ty.type_size(), rs, rs * rows, rs * rows]
        };
        for ty in [GgmlType::Q4_0, GgmlType::Q4K] {
            let l = layout_in(Mode::Plain, ty as i32, [256, 24, 1, 1], dense(ty, 256, 24)).unwrap();
            assert_eq!((l.alloc_size(), l.packed_len()), (24 * ty.row_size(256), 0), "{ty:?}: its own bytes only");
            // rows not a multiple of 8: upstream keeps it in a plain buffer
            assert!(layout_in(Mode::Plain, ty as i32, [256, 20, 1, 1], dense(ty, 256, 20)).is_none(), "{ty:?}");
            // Tiles mode takes those as well
            assert!(layout_in(Mode::Tiles, ty as i32, [256, 20, 1, 1], dense(ty, 256, 20)).is_some(), "{ty:?}");
        }
        // upstream's x86 CPU repacks neither Q8_0 nor Q6_K; the tiles do
        for ty in [GgmlType::Q8_0, GgmlType::Q6K] {
            assert!(layout_in(Mode::Plain, ty as i32, [256, 24, 1, 1], dense(ty, 256, 24)).is_none(), "{ty:?}");
            assert!(layout_in(Mode::Tiles, ty as i32, [256, 24, 1, 1], dense(ty, 256, 24)).is_some(), "{ty:?}");
        }
        assert!(upstream_repacks(GgmlType::Q4_0, [4096, 4096, 1, 1]));
        assert!(!upstream_repacks(GgmlType::Q4_0, [4096, 4096, 2, 1]));
        assert!(!upstream_repacks(GgmlType::Q8_0, [4096, 4096, 1, 1]));
    }

    #[test]
    fn the_mode_follows_the_environment() {
        for v in ["1", "on", "TRUE", " yes "] {
            assert_eq!(mode_for(Some(v), true), Some(Mode::Tiles), "{v:?}");
            assert_eq!(mode_for(Some(v), false), Some(Mode::Plain), "{v:?}: no tiles on this CPU");
        }
        for v in ["0", "off", "No", "false"] {
            assert_eq!(mode_for(Some(v), true), None, "{v:?}");
        }
        for v in [None, Some(""), Some("2"), Some("plain")] {
            assert_eq!(mode_for(v, true), Some(Mode::Plain), "{v:?}");
        }
    }

    /// the VmFlags of the mapping holding `addr` (/proc/self/smaps)
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((a, b)) = range.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                inside = (a..b).contains(&addr);
            } else if inside && let Some(f) = line.strip_prefix("VmFlags:") {
                return f.trim().to_string();
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn buffers_are_advised_for_huge_pages() {
        let len = 3 * HUGE_PAGE + 12345;
        // SAFETY: a fresh private anonymous mapping, unmapped below
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(p, libc::MAP_FAILED);
        let p = p.cast::<u8>();
        let advised = advise_huge_pages(p, len);
        if crate::simd::emulated() {
            // qemu-user accepts the advice and drops it: the kernel's flags say nothing there
            eprintln!("SKIP buffers_are_advised_for_huge_pages: the advice is not checkable under user-mode emulation");
            // SAFETY: the mapping made above
            unsafe { libc::munmap(p.cast(), len) };
            return;
        }
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            // a kernel without transparent huge pages refuses the advice: small pages, no error
            assert_eq!(advised, 0);
            // SAFETY: the mapping made above
            unsafe { libc::munmap(p.cast(), len) };
            return;
        }
        // whole huge pages inside: 2 or 3, by where the mapping starts
        assert!(advised == 2 * HUGE_PAGE || advised == 3 * HUGE_PAGE, "{advised}");
        let first = (p as usize).next_multiple_of(HUGE_PAGE);
        assert!(vm_flags(first).split(' ').any(|f| f == "hg"), "MADV_HUGEPAGE is set: {}", vm_flags(first));
        // a region holding no whole huge page is left alone
        assert_eq!(advise_huge_pages(p.wrapping_add(first - p as usize + 1), HUGE_PAGE), 0);
        assert_eq!(advise_huge_pages(std::ptr::null_mut(), len), 0);
        // SAFETY: the mapping made above
        unsafe { libc::munmap(p.cast(), len) };
    }
}
