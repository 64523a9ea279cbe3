//! Q6_K · Q8_K. Per super-block one exact integer `Σ_e scales[e/16] · (q6[e] − 32) · q8[e]`, then
//! `sum += (d·dy)·sumi` in f32 in block order. The SIMD version sums the unsigned quants
//! (0..64) and takes `32 · Σ_j scales[j] · bsums[j]` off, the same integer, so it equals the
//! reference bit for bit.
//!
//! **Upstream's x86 order** ([`q6_k_q8_k_x86`], `ggml_vec_dot_q6_K_q8_K`'s AVX2 branch, which
//! upstream's native x86 builds run: Q6_K is not repacked on x86): per super-block 8 exact i32
//! lanes, lane m = `Σ_chunks sc · Σ q·y` over bytes 4m..4m+4 of each 32-element chunk (chunk c of
//! the super-block: elements 32c..32c + 32, scale `scales[2c + m / 4]`) minus
//! `32 · (scales[2m] · bsums[2m] + scales[2m+1] · bsums[2m+1])`; then per lane
//! `acc = fma(dy · f32(d), f32(lane), acc)`, super-blocks in order; at the end upstream's
//! horizontal sum of the 8 lanes ([`crate::dot::q8_0::hsum8`]). Our SIMD block already forms
//! exactly these lanes, so the x86 kernels only keep them apart until the end.

use crate::block::{BlockQ6K, BlockQ8K, QK_K};
use crate::quants::q6_get;

pub type Q6KDot = fn(&[BlockQ6K], &[BlockQ8K]) -> f32;

/// a super-block's exact integer sum `Σ scale · (q6 − 32) · q8`, which every order below shares
fn block_sumi(a: &BlockQ6K, b: &BlockQ8K) -> i32 {
    (0..QK_K).map(|e| a.scales[e / 16] as i32 * (q6_get(a, e) as i32 - 32) * b.qs[e] as i32).sum()
}

/// scalar reference (upstream's `ggml_vec_dot_q6_K_q8_K_generic`, integers kept exact)
pub fn q6_k_q8_k_reference(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let sumi = block_sumi(a, b);
        sum += (a.d.to_f32() * b.d) * sumi as f32;
    }
    sum
}

/// Q6_K · Q8_K in upstream's x86 order (the definition; module's text)
pub fn q6_k_q8_k_x86(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0f32; 8];
    for (a, b) in x.iter().zip(y) {
        let d = b.d * a.d.to_f32();
        for (m, lane) in acc.iter_mut().enumerate() {
            let mut l = -32 * (a.scales[2 * m] as i32 * b.bsums[2 * m] as i32 + a.scales[2 * m + 1] as i32 * b.bsums[2 * m + 1] as i32);
            for c in 0..8 {
                let sc = a.scales[2 * c + m / 4] as i32;
                let dot: i32 = (32 * c + 4 * m..32 * c + 4 * m + 4).map(|e| q6_get(a, e) as i32 * b.qs[e] as i32).sum();
                l += sc * dot;
            }
            *lane = d.mul_add(l as f32, *lane);
        }
    }
    crate::dot::q8_0::hsum8(acc)
}

/// Q6_K · Q8_K in the order of upstream's tiled K-quant path (`ggml-cpu/tiled`, AVX-512 VNNI
/// build), which takes MUL_MATs of Q6_K weights with 8 or more activation rows
/// ([`tiled_order_applies`]): per super-block the reference's exact integer `S`, then
/// `r = f32(S) · f32(d)` (rounded), `acc = fma(r, dy, acc)`, super-blocks in order (the
/// kernel's `acc + r · dy` is contracted into one fma by GCC; checked against the native
/// build's MUL_MAT bit for bit).
pub fn q6_k_q8_k_tiled(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let sumi = block_sumi(a, b);
        let r = sumi as f32 * a.d.to_f32();
        acc = r.mul_add(b.d, acc);
    }
    acc
}

/// whether upstream's native (AVX-512 VNNI) build runs a Q6_K MUL_MAT through its tiled K-quant
/// path ([`q6_k_q8_k_tiled`]'s order): `ne11 ≥ 8` activation rows (F32 or Q8_K), in a set whose
/// table says upstream's build of it does ([`super::Dots::q6_k_tiled_path`]: AVX-512 VNNI, not
/// use_ref); else `ggml_vec_dot_q6_K_q8_K` ([`super::Dots::q6_k`])
pub fn tiled_order_applies(ne11: i64, src1_ok: bool, dots: &super::Dots) -> bool {
    ne11 >= 8 && src1_ok && dots.q6_k_tiled_path
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{arr32, f16_product, hsum_epi32, hsum_ps, load_i8x32, load_u8x32};
    use crate::block::{BlockQ6K, BlockQ8K};

    /// one superblock: Σ scale · (q − 32) · y, an exact integer
    macro_rules! q6k_block {
        ($a:expr, $b:expr, $m4:expr) => {{ hsum_epi32(q6k_lanes!($a, $b, $m4)) }};
    }

    /// one superblock's 8 lanes of upstream's x86 order (module's text), exact integers
    macro_rules! q6k_lanes {
        ($a:expr, $b:expr, $m4:expr) => {{
            let (a, b, m4): (&BlockQ6K, &BlockQ8K, __m256i) = ($a, $b, $m4);
            // SAFETY: reads the 16 scale bytes and the 32 bytes of `bsums` (unaligned loads)
            let (sc8, bsums) = unsafe { (_mm_loadu_si128(a.scales.as_ptr().cast()), _mm256_loadu_si256(b.bsums.as_ptr().cast())) };
            let sc16 = _mm256_cvtepi8_epi16(sc8);
            // the offset: Σ_j scales[j] · bsums[j] (times 32, taken off below)
            let bias = _mm256_madd_epi16(sc16, bsums);
            let mut acc = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5));
            for h in 0..2 {
                // scales 8h..8h+8 as i16 in both halves; a byte shuffle picks one per half
                let sch = if h == 0 { _mm256_permute2x128_si256(sc16, sc16, 0x00) } else { _mm256_permute2x128_si256(sc16, sc16, 0x11) };
                let ql0 = load_u8x32(arr32(&a.ql, 64 * h));
                let ql1 = load_u8x32(arr32(&a.ql, 64 * h + 32));
                let qh = load_u8x32(arr32(&a.qh, 32 * h));
                // the four quarters of 32 elements: low/high nibbles of ql0/ql1, 2 bits of qh each
                let q = [
                    _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4)),
                    _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0c)), 2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, _mm256_set1_epi8(0x30))),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                        _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0xc0u8 as i8)), 2),
                    ),
                ];
                for (k, qk) in q.into_iter().enumerate() {
                    // 6-bit (≤ 63) · byte pairs fit i16 without saturating
                    let p = _mm256_maddubs_epi16(qk, load_i8x32(arr32(&b.qs, 128 * h + 32 * k)));
                    // elements 0..16 of the quarter use scale 2k of the half, 16..32 scale 2k + 1
                    let (j0, j1) = (4 * k as i16, 4 * k as i16 + 2);
                    let pick = _mm256_set_m128i(_mm_set1_epi16(j1 | ((j1 + 1) << 8)), _mm_set1_epi16(j0 | ((j0 + 1) << 8)));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, pick)));
                }
            }
            acc
        }};
    }

    /// [`super::q6_k_q8_k_tiled`] bit for bit
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q6_k_q8_k_tiled_avx2(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let mut acc = 0.0f32;
        let m4 = _mm256_set1_epi8(0x0f);
        for (a, b) in x.iter().zip(y) {
            let sumi = q6k_block!(a, b, m4);
            let r = sumi as f32 * f16_product(a.d, half::f16::ONE);
            acc = r.mul_add(b.d, acc);
        }
        acc
    }

    /// [`super::q6_k_q8_k_x86`] bit for bit: the block's 8 lanes, one fma each per block
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q6_k_q8_k_x86_avx2(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let m4 = _mm256_set1_epi8(0x0f);
        for (a, b) in x.iter().zip(y) {
            let lanes = q6k_lanes!(a, b, m4);
            let d = _mm256_set1_ps(b.d * f16_product(a.d, half::f16::ONE));
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc);
        }
        hsum_ps(acc)
    }

    /// `R` rows `stride` bytes apart from `w` · `y`, each summed as [`q6_k_q8_k_x86_avx2`] sums
    /// it (the rows side by side, super-block by super-block)
    ///
    /// # Safety
    /// rows `w + r · stride` (r < R) readable for `y.len()` blocks and aligned for them; `out`
    /// writable for R floats
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn q6_k_rows_x86<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8K], out: *mut f32) {
        let mut acc = [_mm256_setzero_ps(); R];
        let m4 = _mm256_set1_epi8(0x0f);
        for (i, b) in y.iter().enumerate() {
            crate::dot::gemv::prefetch_next::<R>(w, stride, i * size_of::<BlockQ6K>(), size_of::<BlockQ6K>());
            for r in 0..R {
                // SAFETY: block i of row r, aligned (caller)
                let a = unsafe { &*w.add(r * stride).cast::<BlockQ6K>().add(i) };
                let lanes = q6k_lanes!(a, b, m4);
                let d = _mm256_set1_ps(b.d * f16_product(a.d, half::f16::ONE));
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc[r]);
            }
        }
        for r in 0..R {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(hsum_ps(acc[r])) };
        }
    }

    /// `[lo, hi]` as one 512-bit vector
    #[inline(always)]
    fn join(lo: __m256i, hi: __m256i) -> __m512i {
        // SAFETY: AVX-512 F (every caller's target features)
        unsafe { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi) }
    }

    /// [`q6k_lanes`]'s 8 lanes (the same exact integers) with the super-block's two halves side
    /// by side in 512-bit vectors, then the two 256-bit halves added; `qs[k]` is quarter `k` of
    /// both halves of the activations (`b.qs[32k..]`, `b.qs[128 + 32k..]`)
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
    fn q6k_lanes_512(a: &BlockQ6K, bsums: __m256i, qs: &[__m512i; 4]) -> __m256i {
        // SAFETY: reads the 16 scale bytes (unaligned load)
        let sc16 = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(a.scales.as_ptr().cast()) });
        let bias = _mm256_madd_epi16(sc16, bsums);
        let acc = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5));
        // 128-bit lanes: scales 0..8 twice (half 0), then 8..16 twice (half 1)
        let scz = _mm512_castsi256_si512(sc16);
        let sch = _mm512_shuffle_i64x2::<0b01_01_00_00>(scz, scz);
        let ql0 = join(load_u8x32(arr32(&a.ql, 0)), load_u8x32(arr32(&a.ql, 64)));
        let ql1 = join(load_u8x32(arr32(&a.ql, 32)), load_u8x32(arr32(&a.ql, 96)));
        let qh = join(load_u8x32(arr32(&a.qh, 0)), load_u8x32(arr32(&a.qh, 32)));
        let m4 = _mm512_set1_epi8(0x0f);
        let q = [
            _mm512_or_si512(_mm512_and_si512(ql0, m4), _mm512_slli_epi16::<4>(_mm512_and_si512(qh, _mm512_set1_epi8(0x03)))),
            _mm512_or_si512(_mm512_and_si512(ql1, m4), _mm512_slli_epi16::<2>(_mm512_and_si512(qh, _mm512_set1_epi8(0x0c)))),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(ql0), m4), _mm512_and_si512(qh, _mm512_set1_epi8(0x30))),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(ql1), m4), _mm512_srli_epi16::<2>(_mm512_and_si512(qh, _mm512_set1_epi8(0xc0u8 as i8)))),
        ];
        let mut acc512 = _mm512_setzero_si512();
        for (k, qk) in q.into_iter().enumerate() {
            let p = _mm512_maddubs_epi16(qk, qs[k]);
            let (j0, j1) = (4 * k as i16, 4 * k as i16 + 2);
            let pick = _mm256_set_m128i(_mm_set1_epi16(j1 | ((j1 + 1) << 8)), _mm_set1_epi16(j0 | ((j0 + 1) << 8)));
            acc512 = _mm512_add_epi32(acc512, _mm512_madd_epi16(p, _mm512_shuffle_epi8(sch, join(pick, pick))));
        }
        let halves = _mm256_add_epi32(_mm512_castsi512_si256(acc512), _mm512_extracti64x4_epi64::<1>(acc512));
        _mm256_add_epi32(acc, halves)
    }

    /// [`q6_k_rows_x86`] with both halves of each super-block in 512-bit vectors
    /// ([`q6k_lanes_512`]), the activations' quarters loaded once for the R rows: the same lanes,
    /// the same fma per block, so the same bits
    ///
    /// # Safety
    /// as [`q6_k_rows_x86`]; the CPU has AVX-512 F/BW
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
    pub(crate) unsafe fn q6_k_rows_x86_512<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8K], out: *mut f32) {
        let mut acc = [_mm256_setzero_ps(); R];
        for (i, b) in y.iter().enumerate() {
            crate::dot::gemv::prefetch_next::<R>(w, stride, i * size_of::<BlockQ6K>(), size_of::<BlockQ6K>());
            // SAFETY: the 32 bytes of `bsums` (unaligned load)
            let bsums = unsafe { _mm256_loadu_si256(b.bsums.as_ptr().cast()) };
            let qs: [__m512i; 4] = std::array::from_fn(|k| join(load_i8x32(arr32(&b.qs, 32 * k)), load_i8x32(arr32(&b.qs, 128 + 32 * k))));
            for r in 0..R {
                // SAFETY: block i of row r, aligned (caller)
                let a = unsafe { &*w.add(r * stride).cast::<BlockQ6K>().add(i) };
                let lanes = q6k_lanes_512(a, bsums, &qs);
                let d = _mm256_set1_ps(b.d * f16_product(a.d, half::f16::ONE));
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc[r]);
            }
        }
        for r in 0..R {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(hsum_ps(acc[r])) };
        }
    }
}
