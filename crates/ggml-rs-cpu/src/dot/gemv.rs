//! Several weight rows against one activation row at once: the mat-vec of token generation.
//!
//! [`Gemv::rows`] takes `rows` weight rows `stride` bytes apart and writes their dot products
//! with one activation row. The SIMD forms run 4 rows per pass: the activation block is loaded
//! (and, for Q4_0, its `8·Σy` correction computed, its scale widened) once for the 4 rows, the 4
//! weight streams are read side by side (more loads in flight), and there is one call per chunk
//! of rows instead of one per row (the per-row dispatch through [`RowDot`] was ~10% of a token).
//! Q4_0 / Q8_0 / F16 rows are read through raw pointers with unaligned loads, so they need no
//! alignment; the K-quant forms view the rows as blocks ([`Gemv::row_align`]).
//!
//! Each row is summed exactly as its single-row kernel sums it (same accumulators, same order,
//! same final reduction), so the result is the row kernel's bit for bit: MUL_MAT gives the same
//! numbers whichever path a row takes (tests.rs checks it).
//!
//! | weight | activation | 4-row form at            |
//! |--------|------------|--------------------------|
//! | Q4_0   | Q8_0       | AVX-512 VNNI (vpdpbusd)  |
//! | Q8_0   | Q8_0       | AVX-512 VNNI (vpdpbusd)  |
//! | F16    | F16        | AVX-512 (and VNNI level) |
//! | Q4_K   | Q8_K       | AVX2, AVX-512 VNNI (aligned rows)|
//! | Q6_K   | Q8_K       | AVX2, AVX-512 (aligned rows)|
//! | others | ...        | the row kernel per row   |

use super::{Order, RowDot};
use crate::GgmlType;
use crate::kernels::Kernels;

/// a multi-row kernel (the row kernel's bits, several rows per pass)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// the row kernel, row by row
    Rows,
    #[cfg(target_arch = "x86_64")]
    Q4_0Vnni,
    /// Q4_0 in upstream's repacked order ([`crate::dot::Order`]), 4 rows' chains in 4 lanes
    #[cfg(target_arch = "x86_64")]
    Q4_0RepackVnni,
    #[cfg(target_arch = "x86_64")]
    Q4_0RepackAvx2,
    /// Q4_K in upstream's repacked GEMV order (rows aligned for the blocks)
    #[cfg(target_arch = "x86_64")]
    Q4KGemvAvx2,
    /// as Q4KGemvAvx2, the integers by 512-bit vectors and vpdpwssd
    #[cfg(target_arch = "x86_64")]
    Q4KGemvVnni,
    /// as Q4KAvx2, the integers by 512-bit vectors and vpdpwssd
    #[cfg(target_arch = "x86_64")]
    Q4KVnni,
    #[cfg(target_arch = "x86_64")]
    Q8_0Vnni,
    #[cfg(target_arch = "x86_64")]
    F16Avx512,
    /// rows side by side, superblock by superblock (rows aligned for the blocks)
    #[cfg(target_arch = "x86_64")]
    Q4KAvx2,
    #[cfg(target_arch = "x86_64")]
    Q6KAvx2,
    /// as Q6KAvx2, both halves of a super-block in 512-bit vectors
    #[cfg(target_arch = "x86_64")]
    Q6KAvx512,
}

/// the mat-vec kernel for one weight type and level, chosen once
#[derive(Clone, Copy)]
pub struct Gemv {
    ty: GgmlType,
    kind: Kind,
    row: RowDot,
    /// [`GemvKinds::one_stream_from`]
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    one_stream_from: usize,
}

/// The multi-row kernels of one kernel set ([`crate::kernels::Kernels::gemv`]), per weight type
/// (`ggml_vec_dot_*`'s order) and per repacked order; `Kind::Rows` where the set has none.
#[derive(Clone, Copy)]
pub struct GemvKinds {
    pub(crate) q4_0: Kind,
    pub(crate) q8_0: Kind,
    pub(crate) f16: Kind,
    pub(crate) q4_k: Kind,
    pub(crate) q6_k: Kind,
    /// Q4_0 in upstream's repacked order (GEMV and GEMM rows)
    pub(crate) q4_0_repack: Kind,
    /// Q4_K in upstream's repacked GEMV order
    pub(crate) q4_k_gemv: Kind,
    /// Rows of at least this many bytes go through the row kernel one at a time rather than 4
    /// side by side (Q8_0, F16, Q4_K, Q6_K; Q4_0's repacked-order spans read well either way):
    /// 512 on AMD CPUs, where 4 interleaved streams of such rows from memory ran at half the
    /// speed of one sequential stream or less (an AMD EPYC, Zen 4, `gemv_bench mem`: Q8_0 rows
    /// of 512 58.6 → 25.4 ns a row, F16 113.6 → 46.0, rows of 2048 Q4_K 108 → 67, Q6_K 167 → 70;
    /// llama-bench medium-f16 tg128 0.55-0.58× upstream native there), and from cache rows of
    /// 1536 gained nothing by them (Q6_K 50 vs 48 ns); rows under 512 bytes (Q4_K / Q6_K of 512:
    /// 288 / 420) keep the 4-row kernels (1.1-1.4× the row kernel). Elsewhere (Intel, where issue
    /// 15 measured the 4-row kernels with their prefetches at 1.2-1.35× on memory-bound models)
    /// never (`usize::MAX`).
    pub(crate) one_stream_from: usize,
}

impl GemvKinds {
    /// no multi-row kernel: every row through the row kernel (the scalar set)
    pub const ROWS: GemvKinds = GemvKinds {
        q4_0: Kind::Rows,
        q8_0: Kind::Rows,
        f16: Kind::Rows,
        q4_k: Kind::Rows,
        q6_k: Kind::Rows,
        q4_0_repack: Kind::Rows,
        q4_k_gemv: Kind::Rows,
        one_stream_from: usize::MAX,
    };
}

impl Gemv {
    /// for weights of `ty` in the table `k`, summing in `order` (the repack orders: Q4_0 and Q4_K;
    /// Q4_K's GEMM order runs row by row, the row kernel [`crate::dot::Dots::row`])
    pub fn new(ty: GgmlType, k: &Kernels, order: Order) -> Gemv {
        let row = k.dot.row(ty, order);
        let g = &k.gemv;
        let kind = match (ty, order) {
            (GgmlType::Q4_0, Order::VecDot) => g.q4_0,
            (GgmlType::Q8_0, Order::VecDot) => g.q8_0,
            (GgmlType::F16, Order::VecDot) => g.f16,
            (GgmlType::Q4K, Order::VecDot) => g.q4_k,
            (GgmlType::Q6K, Order::VecDot) => g.q6_k,
            (GgmlType::Q4_0, _) => g.q4_0_repack,
            (GgmlType::Q4K, Order::RepackGemv) => g.q4_k_gemv,
            _ => Kind::Rows,
        };
        Gemv { ty, kind, row, one_stream_from: g.one_stream_from }
    }

    /// whether rows go through a multi-row kernel (else [`Gemv::rows`] loops the row kernel)
    pub fn is_multi_row(&self) -> bool {
        self.kind != Kind::Rows
    }

    /// the alignment [`Gemv::rows`] needs of the rows' addresses (and strides): 1 for the
    /// multi-row forms that read with unaligned loads, else the block view's
    pub fn row_align(&self) -> usize {
        match self.kind {
            #[cfg(target_arch = "x86_64")]
            Kind::Q4_0Vnni | Kind::Q8_0Vnni | Kind::F16Avx512 | Kind::Q4_0RepackVnni | Kind::Q4_0RepackAvx2 => 1,
            // the blocks' widest field: f32 (F32 weights) or f16 (every other block type)
            _ if self.ty == GgmlType::F32 => 4,
            _ => 2,
        }
    }

    /// the row kernel this was built on
    pub fn row_kernel(&self) -> &RowDot {
        &self.row
    }

    /// `out[r] = dot(weight row r, x)` for `r < rows`, weight row r at `w + r · stride`
    ///
    /// # Safety
    /// `w + r · stride` is readable for `ty.row_size(k)` bytes for every `r < rows`, where `k` is
    /// the element count of `x` (`x` whole blocks of the vec-dot type); `out` writable for `rows`
    /// floats; `w` and `stride` multiples of [`Gemv::row_align`].
    #[cfg_attr(not(target_arch = "x86_64"), allow(unreachable_patterns))]
    pub unsafe fn rows(&self, w: *const u8, stride: usize, rows: usize, x: &[u8], out: *mut f32) {
        let w_len = self.ty.row_size(self.ty.vec_dot_type().map_or(0, |v| x.len() / v.type_size() * v.block_size()));
        match self.kind {
            // SAFETY: the caller's contract
            Kind::Rows => unsafe { self.each_row(w, stride, rows, x, out, w_len) },
            #[cfg(target_arch = "x86_64")]
            Kind::Q4KAvx2 | Kind::Q4KGemvAvx2 | Kind::Q4KGemvVnni | Kind::Q4KVnni | Kind::Q6KAvx2 | Kind::Q6KAvx512 | Kind::Q8_0Vnni | Kind::F16Avx512
                if w_len >= self.one_stream_from && (w as usize | stride).is_multiple_of(if self.ty == GgmlType::F32 { 4 } else { 2 }) =>
            {
                // SAFETY: the caller's contract
                unsafe { self.each_row(w, stride, rows, x, out, w_len) }
            }
            _ => {
                // SAFETY: the caller's contract
                unsafe { self.multi(w, stride, rows, x, out) }
            }
        }
    }

    /// [`Gemv::rows`] by the row kernel, row by row
    ///
    /// # Safety
    /// as [`Gemv::rows`], `w_len` the bytes of a row
    unsafe fn each_row(&self, w: *const u8, stride: usize, rows: usize, x: &[u8], out: *mut f32, w_len: usize) {
        for r in 0..rows {
            // SAFETY: the caller's contract (readable, aligned rows; writable out)
            unsafe { out.add(r).write_unaligned(self.row.dot(std::slice::from_raw_parts(w.add(r * stride), w_len), x)) };
        }
    }

    /// [`Gemv::rows`] by the multi-row kernel of `self.kind`
    ///
    /// # Safety
    /// as [`Gemv::rows`]
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    unsafe fn multi(&self, w: *const u8, stride: usize, rows: usize, x: &[u8], out: *mut f32) {
        match self.kind {
            Kind::Rows => unreachable!("Gemv::multi of the row kind"),
            #[cfg(target_arch = "x86_64")]
            Kind::Q4_0Vnni => {
                let y = crate::block::as_blocks(x, "gemv q4_0 activations");
                // SAFETY: in the AVX-512 VNNI set's table only (built on a CPU that has
                // it); the rows are readable (caller)
                unsafe {
                    by_four(rows, stride, w, out, |w, o, four| if four { x86::q4_0_rows::<4>(w, stride, y, o) } else { x86::q4_0_rows::<1>(w, stride, y, o) })
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q4_0RepackVnni => {
                let y = crate::block::as_blocks(x, "gemv q4_0 activations");
                // SAFETY: in the AVX-512 VNNI set's table only (built on a CPU that has
                // it); the rows are readable (caller)
                unsafe {
                    let eights = rows / 8 * 8;
                    x86::q4_0_rows8_span_vnni(w, stride, rows / 8, y, out);
                    by_four(rows - eights, stride, w.wrapping_add(eights * stride), out.wrapping_add(eights), |w, o, four| {
                        if four { x86::q4_0_rows_repack_vnni::<4>(w, stride, y, o) } else { x86::q4_0_rows_repack_vnni::<1>(w, stride, y, o) }
                    })
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q4_0RepackAvx2 => {
                let y = crate::block::as_blocks(x, "gemv q4_0 activations");
                // SAFETY: in the tables from AVX2 only (built on a CPU that has it); rows readable
                unsafe {
                    by_four(rows, stride, w, out, |w, o, four| {
                        if four { x86::q4_0_rows_repack_avx2::<4>(w, stride, y, o) } else { x86::q4_0_rows_repack_avx2::<1>(w, stride, y, o) }
                    })
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q4KGemvAvx2 => {
                use super::q4_k::x86::q4_k_rows_gemv;
                let y = crate::block::as_blocks(x, "gemv q4_K activations");
                // SAFETY: only in the tables from AVX2 (built on a CPU with it); rows readable and aligned (caller)
                unsafe {
                    by_four(rows, stride, w, out, |w, o, four| if four { q4_k_rows_gemv::<4>(w, stride, y, o) } else { q4_k_rows_gemv::<1>(w, stride, y, o) })
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q4KGemvVnni => {
                use super::q4_k::x86::q4_k_rows_512 as f;
                let y = crate::block::as_blocks(x, "gemv q4_K activations");
                // SAFETY: only in the AVX-512 VNNI table (built on a CPU with it); rows readable and aligned (caller)
                unsafe { by_four(rows, stride, w, out, |w, o, four| if four { f::<4, true>(w, stride, y, o) } else { f::<1, true>(w, stride, y, o) }) }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q4KVnni => {
                use super::q4_k::x86::q4_k_rows_512 as f;
                let y = crate::block::as_blocks(x, "gemv q4_K activations");
                // SAFETY: as above
                unsafe { by_four(rows, stride, w, out, |w, o, four| if four { f::<4, false>(w, stride, y, o) } else { f::<1, false>(w, stride, y, o) }) }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q8_0Vnni => {
                let y = crate::block::as_blocks(x, "gemv q8_0 activations");
                // SAFETY: as above
                unsafe {
                    by_four(rows, stride, w, out, |w, o, four| if four { x86::q8_0_rows::<4>(w, stride, y, o) } else { x86::q8_0_rows::<1>(w, stride, y, o) })
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::F16Avx512 => {
                let y: &[half::f16] = crate::block::as_blocks(x, "gemv f16 activations");
                // SAFETY: in the AVX-512 tables only (built on a CPU that has it); as above
                unsafe {
                    by_four(rows, stride, w, out, |w, o, four| if four { x86::f16_rows::<4>(w, stride, y, o) } else { x86::f16_rows::<1>(w, stride, y, o) })
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q4KAvx2 => {
                use super::q4_k::x86::q4_k_rows;
                let y = crate::block::as_blocks(x, "gemv q4_K activations");
                // SAFETY: in the tables from AVX2 only (built on a CPU that has it); rows readable
                // and aligned (caller)
                unsafe { by_four(rows, stride, w, out, |w, o, four| if four { q4_k_rows::<4>(w, stride, y, o) } else { q4_k_rows::<1>(w, stride, y, o) }) }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q6KAvx2 => {
                use super::q6_k::x86::q6_k_rows_x86 as q6_k_rows;
                let y = crate::block::as_blocks(x, "gemv q6_K activations");
                // SAFETY: as above
                unsafe { by_four(rows, stride, w, out, |w, o, four| if four { q6_k_rows::<4>(w, stride, y, o) } else { q6_k_rows::<1>(w, stride, y, o) }) }
            }
            #[cfg(target_arch = "x86_64")]
            Kind::Q6KAvx512 => {
                use super::q6_k::x86::q6_k_rows_x86_512 as q6_k_rows;
                let y = crate::block::as_blocks(x, "gemv q6_K activations");
                // SAFETY: only in the AVX-512 tables (built on a CPU with AVX-512 F/BW); as above
                unsafe { by_four(rows, stride, w, out, |w, o, four| if four { q6_k_rows::<4>(w, stride, y, o) } else { q6_k_rows::<1>(w, stride, y, o) }) }
            }
        }
    }
}

/// How far ahead of the 4 rows being read the next rows' bytes are prefetched. Token generation
/// reads every weight once per token, from memory (the medium model's 36 MB do not stay in this
/// machine's caches): one thread's hardware prefetchers then keep too few lines in flight (they
/// stop at each 4 KiB page), and the kernels wait on memory. Prefetching the bytes 1.5 KiB ahead
/// (about one memory latency at the rate a thread consumes them) raised one thread's mat-vec
/// over 128 MiB from 5.8-7.0 to 7.2-9.5 GB/s (`gemv_bench mem`: Q4_0, Q4_K, Q6_K, F16; 1-2 KiB
/// measured alike, 4 KiB and more gained less). Now only the first rows of a call are prefetched
/// so; after them each kernel's pass prefetches the next pass's rows as it goes
/// ([`prefetch_next`]: llama-bench tg128 on large-q4_0 +24%, large-q8_0 +35%, medium-f16 +17%).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const PREFETCH_AHEAD: usize = 1536;

/// runs `f(first row, its output, true)` per 4 rows, then `f(row, output, false)` per row left;
/// first the `4 · stride` bytes from [`PREFETCH_AHEAD`] are prefetched (the 4-row kernels
/// prefetch the rows after theirs: [`prefetch_next`])
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
unsafe fn by_four(rows: usize, stride: usize, w: *const u8, out: *mut f32, f: impl Fn(*const u8, *mut f32, bool)) {
    let mut r = 0;
    prefetch(w.wrapping_add(PREFETCH_AHEAD), 4 * stride);
    while r + 4 <= rows {
        f(w.wrapping_add(r * stride), out.wrapping_add(r), true);
        r += 4;
    }
    while r < rows {
        f(w.wrapping_add(r * stride), out.wrapping_add(r), false);
        r += 1;
    }
}

/// How many rows ahead a pass over rows that sit apart in memory prefetches (flash attention's
/// K and V rows of one head, a MUL_MAT over a permuted K view: a head's row every n_head_kv rows,
/// a miss each that the hardware prefetchers do not see coming). Medium-q8_0 token generation at
/// the avx2 set: the decode attention node went from 54 to 30-40 µs on 2 threads (2 to 16 rows
/// ahead measured within the noise of each other).
pub(crate) const STRIDED_AHEAD: usize = 4;

/// a prefetch hint for each cache line of `len` bytes from `p`; past the end of the weights it
/// fetches nothing useful, never faults (a prefetch is a hint: no access is made)
#[inline(always)]
pub(crate) fn prefetch(p: *const u8, len: usize) {
    let mut o = 0;
    while o < len {
        // SAFETY: PREFETCHT0 reads nothing architecturally and cannot fault, whatever the address
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(o).cast())
        };
        // SAFETY: PRFM is a hint as well: no access, no fault (`asm!`: the intrinsic is unstable)
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!("prfm pldl1keep, [{p}]", p = in(reg) p.wrapping_add(o), options(nostack, readonly, preserves_flags))
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let _ = p;
        o += 64;
    }
}

/// In a kernel's pass over `R > 1` rows from `w`: the hint for bytes `off..off + len` of each
/// of the `R` rows one pass ahead (`w + R·stride` on; two passes ahead where a pass reads under
/// [`PREFETCH_AHEAD`] bytes: short rows are summed too fast for one pass to hide the latency),
/// the part of them the pass reaches at this step. So later rows arrive while these are summed,
/// the prefetches spread over the pass (one burst before each pass left fewer lines in flight).
/// Past the last row it fetches nothing useful and never faults.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn prefetch_next<const R: usize>(w: *const u8, stride: usize, off: usize, len: usize) {
    if R > 1 {
        let first = if R * stride < PREFETCH_AHEAD { 2 * R } else { R };
        for r in first..first + R {
            prefetch(w.wrapping_add(r * stride + off), len);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::f16;

    use super::super::x86::{f16_pair, hsum_ps, load_i8x32, nibbles_32, reduce_add_ps_gcc};
    use crate::block::BlockQ8_0;

    /// bytes of a Q4_0 / Q8_0 block
    const Q4_0_BYTES: usize = 18;
    const Q8_0_BYTES: usize = 34;

    /// the f16 at `p` (any alignment)
    #[inline(always)]
    unsafe fn f16_at(p: *const u8) -> f16 {
        // SAFETY: two readable bytes (caller)
        f16::from_bits(unsafe { p.cast::<u16>().read_unaligned() })
    }

    /// `R ≤ 4` Q4_0 rows · Q8_0 `y` in upstream's repacked order ([`crate::dot::q8_0::q4_0_q8_0_repack`]
    /// bit for bit). Per block: each row's 8 lanes of `Σ nibble · y` (`$dot`: vpdpbusd, or
    /// vpmaddubsw + vpmaddwd) less the activation's `8 · Σ y` lanes, the R rows' lanes summed
    /// by one tree of 3 `vphaddd` into lanes 0..R of a 128-bit vector (exact integers), the R
    /// scale products `f32(dw) · f32(dy)` from one conversion and one multiplication, then one
    /// fma for the R rows: the rows' chains run side by side in the lanes, one fma per block.
    macro_rules! q4_0_repack_rows {
        ($w:ident, $stride:ident, $y:ident, $out:ident, $R:ident, $dot:expr) => {{
            const { assert!($R <= 4, "q4_0 repack rows: at most 4 rows per pass") };
            let mut acc = _mm_setzero_ps();
            let zero = _mm256_setzero_si256();
            let eight = _mm256_set1_epi8(8);
            // SAFETY (for the block reads below): block b of row r is at w + r·stride + 18·b,
            // inside the row (caller); nibbles at +2 are 16 bytes
            let block = |r: usize, b: usize| $w.wrapping_add(r * $stride + b * Q4_0_BYTES);
            for (b, yb) in $y.iter().enumerate() {
                if b % 3 == 0 {
                    super::prefetch_next::<$R>($w, $stride, b * Q4_0_BYTES, Q4_0_BYTES);
                }
                let qy = load_i8x32(&yb.qs);
                let sy = $dot(eight, qy);
                let mut dws = 0u64;
                for r in 0..$R {
                    // SAFETY: the scale of block b of row r (caller)
                    dws |= (unsafe { f16_at(block(r, b)) }.to_bits() as u64) << (16 * r);
                }
                let ds = _mm256_cvtph_ps(_mm_set_epi64x(yb.d.to_bits() as i64, dws as i64));
                let dy = _mm256_extractf128_ps(ds, 1);
                let prods = _mm_mul_ps(_mm256_castps256_ps128(ds), _mm_shuffle_ps(dy, dy, 0));
                let mut v = [zero; 4];
                for (r, v) in v.iter_mut().enumerate().take($R) {
                    // SAFETY: the 16 nibble bytes of block b of row r (caller)
                    let n = unsafe { nibbles_32(&*block(r, b).add(2).cast::<[u8; 16]>()) };
                    *v = _mm256_sub_epi32($dot(n, qy), sy);
                }
                let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
                let isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), prods, acc);
            }
            let mut o = [0f32; 4];
            // SAFETY: 4 floats
            unsafe { _mm_storeu_ps(o.as_mut_ptr(), acc) };
            for (r, v) in o.iter().enumerate().take($R) {
                // SAFETY: R writable floats (caller)
                unsafe { $out.add(r).write_unaligned(*v) };
            }
        }};
    }

    /// 8 Q4_0 rows · Q8_0 `y` in upstream's repacked order ([`q4_0_repack_rows`]' per-row
    /// chains, the same bits), four rows per 512-bit vector, one in each 128-bit lane: per block
    /// rows 0-3 and 4-7 each as their 16 nibble bytes (one load, three inserts from memory: no
    /// shuffle-port work), their low nibbles by the activation's first 16 bytes and their high
    /// nibbles by its last 16 (both broadcast to the four lanes), two `vpdpbusd` onto `-8·Σy`'s
    /// lanes, so that each row's 4 lanes sum to its exact integer; those sums by one unpack-and-
    /// add, one in-lane swap and one permute into an 8-lane vector of the rows in order (4
    /// shuffle-port operations a block where two rows per vector took 8 more), the scale
    /// products taken in that order, one 8-lane fma per block
    ///
    /// # Safety
    /// as [`q4_0_rows`] with R = 8; the CPU has AVX-512 F/BW/VL and VNNI
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn q4_0_rows8_repack_vnni(w: *const u8, stride: usize, y: &[BlockQ8_0], out: *mut f32) {
        // SAFETY: the caller's contract
        unsafe { q4_0_rows8_core(w, stride, y, out, |_, yb| q4_0_block_acts(yb)) }
    }

    /// the activation block's part of [`q4_0_rows8_repack_vnni`], the same for every 8 rows:
    /// `-8·Σy` on each dword lane's 4 + 4 values (lane `l` of each 128-bit lane: quants 4l..4l + 4
    /// and 16 + 4l..16 + 4l + 4) and its scale as f32
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    fn q4_0_block_acts(yb: &BlockQ8_0) -> (__m512i, f32) {
        let eight = _mm512_set1_epi8(8);
        // SAFETY: the block's 32 quant bytes, 16 and 16
        let (qlo, qhi) =
            unsafe { (_mm512_broadcast_i32x4(_mm_loadu_si128(yb.qs.as_ptr().cast())), _mm512_broadcast_i32x4(_mm_loadu_si128(yb.qs.as_ptr().add(16).cast()))) };
        let sy = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, qlo), eight, qhi);
        (_mm512_sub_epi32(_mm512_setzero_si512(), sy), yb.d.to_f32())
    }

    /// [`q4_0_rows8_repack_vnni`] over `groups` · 8 rows (the first 8 prefetched at the start,
    /// each group prefetching the next: [`super::prefetch_next`]); with 2 groups or more (and at
    /// most 256 blocks) each activation block's part ([`q4_0_block_acts`]) is taken once for all
    /// of them
    ///
    /// # Safety
    /// as [`q4_0_rows`] for `8 · groups` rows; the CPU has AVX-512 F/BW/VL and VNNI
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn q4_0_rows8_span_vnni(w: *const u8, stride: usize, groups: usize, y: &[BlockQ8_0], out: *mut f32) {
        const MAX: usize = 256;
        if groups < 2 || y.len() > MAX {
            super::prefetch(w.wrapping_add(super::PREFETCH_AHEAD), 8 * stride);
            for g in 0..groups {
                // SAFETY: rows 8g..8g + 8 (caller)
                unsafe { q4_0_rows8_repack_vnni(w.wrapping_add(8 * g * stride), stride, y, out.wrapping_add(8 * g)) };
            }
            return;
        }
        // written before read: the first y.len() entries only (no 17 KB cleared per call)
        let mut neg_sy = [const { std::mem::MaybeUninit::<__m512i>::uninit() }; MAX];
        let mut dy = [const { std::mem::MaybeUninit::<f32>::uninit() }; MAX];
        for (b, yb) in y.iter().enumerate() {
            let (n, d) = q4_0_block_acts(yb);
            neg_sy[b].write(n);
            dy[b].write(d);
        }
        // SAFETY: entries 0..y.len() were written just above
        let (neg_sy, dy) = unsafe {
            (
                std::mem::transmute::<&[std::mem::MaybeUninit<__m512i>], &[__m512i]>(&neg_sy[..y.len()]),
                std::mem::transmute::<&[std::mem::MaybeUninit<f32>], &[f32]>(&dy[..y.len()]),
            )
        };
        super::prefetch(w.wrapping_add(super::PREFETCH_AHEAD), 8 * stride);
        for g in 0..groups {
            // SAFETY: rows 8g..8g + 8 (caller); b < y.len(), the length of both tables
            unsafe {
                q4_0_rows8_core(w.wrapping_add(8 * g * stride), stride, y, out.wrapping_add(8 * g), |b, _| (*neg_sy.get_unchecked(b), *dy.get_unchecked(b)))
            };
        }
    }

    /// [`q4_0_rows8_repack_vnni`]'s loop, `acts(b, block)` giving block b's [`q4_0_block_acts`]
    ///
    /// # Safety
    /// as [`q4_0_rows8_repack_vnni`]
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn q4_0_rows8_core(w: *const u8, stride: usize, y: &[BlockQ8_0], out: *mut f32, acts: impl Fn(usize, &BlockQ8_0) -> (__m512i, f32)) {
        let mut acc = _mm256_setzero_ps();
        let m4 = _mm512_set1_epi8(0x0f);
        // after the reduction row j < 4 is at dword 4j, row 4 + j at dword 4j + 1
        let rows_in_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
        let block = |r: usize, b: usize| w.wrapping_add(r * stride + b * Q4_0_BYTES);
        for (b, yb) in y.iter().enumerate() {
            if b % 3 == 0 {
                super::prefetch_next::<8>(w, stride, b * Q4_0_BYTES, Q4_0_BYTES);
            }
            // SAFETY: the block's 32 quant bytes, 16 and 16
            let (qlo, qhi) = unsafe {
                (_mm512_broadcast_i32x4(_mm_loadu_si128(yb.qs.as_ptr().cast())), _mm512_broadcast_i32x4(_mm_loadu_si128(yb.qs.as_ptr().add(16).cast())))
            };
            let (neg_sy, dy) = acts(b, yb);
            let (mut lo, mut hi) = (0u64, 0u64);
            for r in 0..8 {
                // SAFETY: the scale of block b of row r (caller)
                let bits = unsafe { f16_at(block(r, b)) }.to_bits() as u64;
                if r < 4 { lo |= bits << (16 * r) } else { hi |= bits << (16 * (r - 4)) }
            }
            let prods = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set_epi64x(hi as i64, lo as i64)), _mm256_set1_ps(dy));
            let four = |r0: usize| {
                // SAFETY: the 16 nibble bytes of block b of rows r0..r0 + 4 (caller)
                let x = unsafe {
                    let x = _mm512_castsi128_si512(_mm_loadu_si128(block(r0, b).add(2).cast()));
                    let x = _mm512_inserti32x4::<1>(x, _mm_loadu_si128(block(r0 + 1, b).add(2).cast()));
                    let x = _mm512_inserti32x4::<2>(x, _mm_loadu_si128(block(r0 + 2, b).add(2).cast()));
                    _mm512_inserti32x4::<3>(x, _mm_loadu_si128(block(r0 + 3, b).add(2).cast()))
                };
                let (xl, xh) = (_mm512_and_si512(x, m4), _mm512_and_si512(_mm512_srli_epi16(x, 4), m4));
                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg_sy, xl, qlo), xh, qhi)
            };
            let (a, c) = (four(0), four(4));
            // lane j: [a0 + a2, c0 + c2, a1 + a3, c1 + c3], then + its 64-bit halves swapped
            let s = _mm512_add_epi32(_mm512_unpacklo_epi32(a, c), _mm512_unpackhi_epi32(a, c));
            let s = _mm512_add_epi32(s, _mm512_shuffle_epi32::<0b01_00_11_10>(s));
            let isum = _mm512_castsi512_si256(_mm512_permutexvar_epi32(rows_in_order, s));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), prods, acc);
        }
        // SAFETY: 8 writable floats (caller)
        unsafe { _mm256_storeu_ps(out, acc) };
    }

    /// [`q4_0_repack_rows`] with vpdpbusd
    ///
    /// # Safety
    /// as [`q4_0_rows`]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub(super) unsafe fn q4_0_rows_repack_vnni<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8_0], out: *mut f32) {
        q4_0_repack_rows!(w, stride, y, out, R, |a, b| _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b))
    }

    /// [`q4_0_repack_rows`] with vpmaddubsw + vpmaddwd (nibble · byte pairs fit i16)
    ///
    /// # Safety
    /// as [`q4_0_rows`]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q4_0_rows_repack_avx2<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8_0], out: *mut f32) {
        q4_0_repack_rows!(w, stride, y, out, R, |a, b| _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)))
    }

    /// `R` Q4_0 rows · Q8_0 `y`, each row as `q8_0::x86::q4_0_q8_0_vnni` sums it (upstream's
    /// x86 order: one 8-lane accumulator per row, blocks in order, the scale `f32(dw) · f32(dy)`
    /// rounded once)
    ///
    /// # Safety
    /// rows `w + r · stride` (r < R) readable for `y.len()` Q4_0 blocks; `out` writable for R
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub(super) unsafe fn q4_0_rows<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8_0], out: *mut f32) {
        let mut acc = [_mm256_setzero_ps(); R];
        let (zero, eight) = (_mm256_setzero_si256(), _mm256_set1_epi8(8));
        // SAFETY (for the block reads below): block b of row r is at w + r·stride + 18·b, inside
        // the row (caller); nibbles at +2 are 16 bytes
        let block = |r: usize, b: usize| w.wrapping_add(r * stride + b * Q4_0_BYTES);
        for (b, y0) in y.iter().enumerate() {
            if b % 3 == 0 {
                super::prefetch_next::<R>(w, stride, b * Q4_0_BYTES, Q4_0_BYTES);
            }
            let qy0 = load_i8x32(&y0.qs);
            let sy0 = _mm256_dpbusd_epi32(zero, eight, qy0);
            for (r, acc) in acc.iter_mut().enumerate() {
                let p0 = block(r, b);
                let (dw0, dy0) = unsafe { f16_pair(f16_at(p0), y0.d) };
                let n0 = unsafe { nibbles_32(&*p0.add(2).cast::<[u8; 16]>()) };
                let i0 = _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, n0, qy0), sy0);
                *acc = _mm256_fmadd_ps(_mm256_set1_ps(dw0 * dy0), _mm256_cvtepi32_ps(i0), *acc);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(hsum_ps(*acc)) };
        }
    }

    /// `R` Q8_0 rows · Q8_0 `y`, each row as `q8_0::x86::q8_0_q8_0_vnni` sums it (upstream's
    /// order: one accumulator per row, blocks in order; the 4 rows are 4 independent chains)
    ///
    /// # Safety
    /// as [`q4_0_rows`], rows of Q8_0 blocks
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    pub(super) unsafe fn q8_0_rows<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8_0], out: *mut f32) {
        let mut acc = [_mm256_setzero_ps(); R];
        let zero = _mm256_setzero_si256();
        let block = |r: usize, b: usize| w.wrapping_add(r * stride + b * Q8_0_BYTES);
        // vpdpbusd takes unsigned × signed bytes: the weights + 128 (the sign bit flipped) times
        // the activations, each lane started at 0x4B40_0000 - 128 · (its 4 activations' sum),
        // once per block for the R rows: the lane's bits are then those of the float
        // 1.5 · 2²³ + (its integer sum), exact, and one subtraction gives the sum as a float (one
        // xor for two vpsignb; the same bits as converting the sum)
        let (flip, magic) = (_mm256_set1_epi8(-128), _mm256_set1_epi32(0x4B40_0000));
        let magic_f = _mm256_castsi256_ps(magic);
        const { assert!(R <= 4, "q8_0_rows: the scales of at most 4 rows go in one conversion") };
        let lane = |i: i32| _mm256_set1_epi32(i);
        for (b, yb) in y.iter().enumerate() {
            super::prefetch_next::<R>(w, stride, b * Q8_0_BYTES, Q8_0_BYTES);
            let qy = load_i8x32(&yb.qs);
            let start = _mm256_sub_epi32(magic, _mm256_dpbusd_epi32(zero, flip, qy));
            // the R weight scales (f16 lanes 0..R) and the activation's (lane 4) converted by one
            // vcvtph2ps, the R products f32(dw) · f32(dy) by one multiplication, each row's
            // broadcast by one permutation (one conversion, product and broadcast per row and
            // block was ~5 instructions of the ~12 a row's block takes)
            let mut dws = 0u64;
            for r in 0..R {
                // SAFETY: the scale of block b of row r (caller)
                dws |= (unsafe { f16_at(block(r, b)) }.to_bits() as u64) << (16 * r);
            }
            let ds = _mm256_cvtph_ps(_mm_set_epi64x(yb.d.to_bits() as i64, dws as i64));
            let prods = _mm256_mul_ps(ds, _mm256_permutevar8x32_ps(ds, lane(4)));
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: block b of row r (caller): 2 scale bytes, then 32 quants
                let q = unsafe { _mm256_loadu_si256(block(r, b).add(2).cast()) };
                let d = _mm256_permutevar8x32_ps(prods, lane(r as i32));
                let sum = _mm256_dpbusd_epi32(start, _mm256_xor_si256(q, flip), qy);
                *acc = _mm256_fmadd_ps(d, _mm256_sub_ps(_mm256_castsi256_ps(sum), magic_f), *acc);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(hsum_ps(*acc)) };
        }
    }

    /// `R` F16 rows · F16 `y`, each row as `float::x86::f16_avx512` sums it (upstream's order,
    /// `float::f16_avx512_order`: 4 accumulators of 16 lanes over 64 elements per step, reduced
    /// as `(a0 + a2) + (a1 + a3)` and in GCC's order into f64, then the tail's f32 products in f64)
    ///
    /// # Safety
    /// rows `w + r · stride` (r < R) readable for `y.len()` f16 values; `out` writable for R
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
    pub(super) unsafe fn f16_rows<const R: usize>(w: *const u8, stride: usize, y: &[f16], out: *mut f32) {
        let n = y.len();
        let done = n - n % 64;
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        let ld = |p: *const u8| _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(p.cast()) });
        let mut i = 0;
        while i < done {
            let yp = y[i..].as_ptr().cast::<u8>();
            // SAFETY: 64 values of y from i (i + 64 <= done <= n)
            let yv = [ld(yp), ld(yp.wrapping_add(32)), ld(yp.wrapping_add(64)), ld(yp.wrapping_add(96))];
            super::prefetch_next::<R>(w, stride, 2 * i, 128);
            for r in 0..R {
                // SAFETY: values i..i + 64 of row r (caller)
                let p = w.wrapping_add(r * stride + 2 * i);
                for q in 0..4 {
                    acc[r][q] = _mm512_fmadd_ps(ld(p.wrapping_add(32 * q)), yv[q], acc[r][q]);
                }
            }
            i += 64;
        }
        for r in 0..R {
            let a = &acc[r];
            let s = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
            let mut sum = f64::from(reduce_add_ps_gcc(s));
            for j in done..n {
                // SAFETY: value j of row r (caller)
                let wj = unsafe { f16_at(w.wrapping_add(r * stride + 2 * j)) };
                sum += f64::from(wj.to_f32() * y[j].to_f32());
            }
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(sum as f32) };
        }
    }
}
