//! Q4_K · Q8_K. Per super-block two exact integer sums: `Σ_j sc[j] · Σ q4·q8` over the 8
//! sub-blocks and `Σ_j m[j] · (bsums)` for the mins; then, in f32 and in block order,
//! `sum += (dy·d)·sumi − (dy·dmin)·summ`. The SIMD versions compute the same two integers and do
//! the same float operations in the same order, so they equal the reference bit for bit.
//!
//! **Upstream's repacked orders** ([`super::Order`]): where upstream repacks Q4_K weights
//! (`q4_K_8x8_q8_K`) its kernels keep the same exact integers but sum the floats otherwise:
//! - GEMV ([`q4_k_q8_k_gemv`], `ggml_gemv_q4_K_8x8_q8_K`'s AVX2 path): per super-block b, with
//!   `I_b = Σ_j sc_j · Σ q4·q8` and `M_b = Σ_j m_j · bsum_j` (the integers above),
//!   `acc = fma(f32(I_b), f32(d) · dy, acc)`, `accm = fma(f32(M_b), f32(dmin) · dy, accm)` (the
//!   scale products rounded first), super-blocks in order; the result `acc - accm`;
//! - GEMM ([`q4_k_q8_k_gemm`], `ggml_gemm_q4_K_8x8_q8_K`, AVX-512 and AVX2 paths alike): the same
//!   two chains, but one fma each per PAIR of sub-blocks (64 quants): `I_b,p = sc_2p · dot_2p +
//!   sc_2p+1 · dot_2p+1`, `M_b,p = m_2p · bsum_2p + m_2p+1 · bsum_2p+1`, pairs in order.
//!
//! Every integer there is below 2²⁴ in magnitude (`|I_b| ≤ 8 · 63 · 32 · 15 · 127`), so its
//! conversion to f32 is exact: the SIMD forms may sum the integers in any order.

use crate::block::{BlockQ4K, BlockQ8K};
use crate::quants::get_scale_min_k4;

pub type Q4KDot = fn(&[BlockQ4K], &[BlockQ8K]) -> f32;

/// the 8 scales and 8 mins of a block, and its mins term `Σ_j m[j] · (bsums[2j] + bsums[2j+1])`
#[inline(always)]
fn scales_and_mins(a: &BlockQ4K, b: &BlockQ8K) -> ([u8; 8], i32) {
    let mut sc = [0u8; 8];
    let mut summ = 0i32;
    for j in 0..8 {
        let (s, m) = get_scale_min_k4(j, &a.scales);
        sc[j] = s;
        summ += m as i32 * (b.bsums[2 * j] as i32 + b.bsums[2 * j + 1] as i32);
    }
    (sc, summ)
}

/// the 8 scales (bytes 0..8) and 8 mins (bytes 8..16) of a block, four at a time: the low 6 bits
/// of bytes 0..4 / 4..8 are scales / mins 0..4; scales / mins 4..8 take their low 4 bits from
/// the low / high nibbles of bytes 8..12 and their top 2 bits from the top of bytes 0..4 / 4..8
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn unpack_scales_mins(q: &[u8; 12]) -> [u8; 16] {
    let w = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (a, b, c) = (w(0), w(1), w(2));
    let sc_lo = a & 0x3f3f_3f3f;
    let m_lo = b & 0x3f3f_3f3f;
    let sc_hi = (c & 0x0f0f_0f0f) | (((a >> 6) & 0x0303_0303) << 4);
    let m_hi = ((c >> 4) & 0x0f0f_0f0f) | (((b >> 6) & 0x0303_0303) << 4);
    let mut out = [0u8; 16];
    for (i, v) in [sc_lo, sc_hi, m_lo, m_hi].into_iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    out
}

#[inline(always)]
fn combine(sum: f32, b: &BlockQ8K, sumi: i32, summ: i32, d: f32, dmin: f32) -> f32 {
    sum + (b.d * d) * sumi as f32 - (b.d * dmin) * summ as f32
}

/// scalar reference (upstream's `ggml_vec_dot_q4_K_q8_K_generic`, integers kept exact)
pub fn q4_k_q8_k_reference(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (a, b) in x.iter().zip(y) {
        let (sc, summ) = scales_and_mins(a, b);
        let mut sumi = 0i32;
        for g in 0..4 {
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let q = a.qs[32 * g + l];
                lo += (q & 0xf) as i32 * b.qs[64 * g + l] as i32;
                hi += (q >> 4) as i32 * b.qs[64 * g + 32 + l] as i32;
            }
            sumi += sc[2 * g] as i32 * lo + sc[2 * g + 1] as i32 * hi;
        }
        sum = combine(sum, b, sumi, summ, a.d.to_f32(), a.dmin.to_f32());
    }
    sum
}

/// the integers of one super-block per pair of sub-blocks: `(I_p, M_p)` for p in 0..4 (see the
/// module's text); their sums over p are the reference's `sumi` and `summ`
fn pair_integers(a: &BlockQ4K, b: &BlockQ8K) -> ([i32; 4], [i32; 4]) {
    let (mut ip, mut mp) = ([0i32; 4], [0i32; 4]);
    for p in 0..4 {
        for h in 0..2 {
            let j = 2 * p + h;
            let (sc, m) = get_scale_min_k4(j, &a.scales);
            let mut dot = 0i32;
            for l in 0..32 {
                let q = (a.qs[32 * p + l] >> (4 * h)) & 0xf;
                dot += q as i32 * b.qs[32 * j + l] as i32;
            }
            ip[p] += sc as i32 * dot;
            mp[p] += m as i32 * (b.bsums[2 * j] as i32 + b.bsums[2 * j + 1] as i32);
        }
    }
    (ip, mp)
}

/// Q4_K · Q8_K in upstream's repacked GEMV order (the definition; module's text): one fma per
/// super-block into the scale and the min chains, then their difference
pub fn q4_k_q8_k_gemv(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let (mut acc, mut accm) = (0.0f32, 0.0f32);
    for (a, b) in x.iter().zip(y) {
        let (ip, mp) = pair_integers(a, b);
        let (i, m): (i32, i32) = (ip.iter().sum(), mp.iter().sum());
        acc = (i as f32).mul_add(a.d.to_f32() * b.d, acc);
        accm = (m as f32).mul_add(a.dmin.to_f32() * b.d, accm);
    }
    acc - accm
}

/// Q4_K · Q8_K in upstream's repacked GEMM order (the definition; module's text): one fma per
/// pair of sub-blocks into each chain, then their difference
pub fn q4_k_q8_k_gemm(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let (mut acc, mut accm) = (0.0f32, 0.0f32);
    for (a, b) in x.iter().zip(y) {
        let (ip, mp) = pair_integers(a, b);
        let (s, sm) = (a.d.to_f32() * b.d, a.dmin.to_f32() * b.d);
        for p in 0..4 {
            acc = (ip[p] as f32).mul_add(s, acc);
            accm = (mp[p] as f32).mul_add(sm, accm);
        }
    }
    acc - accm
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::super::x86::{arr32, f16_pair, hsum_epi32, load_i8x32, load_u8x32};
    use super::{combine, unpack_scales_mins};
    use crate::block::{BlockQ4K, BlockQ8K};

    /// one superblock: (Σ scale · nibble · y, Σ min · bsums pair), both exact integers
    macro_rules! q4k_block {
        ($a:expr, $b:expr, $mask:expr) => {{
            let (acc, summ, _) = q4k_parts!($a, $b, $mask, false);
            (hsum_epi32(acc), summ)
        }};
    }

    /// one superblock's integers per pair of sub-blocks: `(I_0..I_3, M_0..M_3)` as i32 lanes
    macro_rules! q4k_pairs {
        ($a:expr, $b:expr, $mask:expr) => {{
            let (_, _, (ip, mp)) = q4k_parts!($a, $b, $mask, true);
            (ip, mp)
        }};
    }

    /// one superblock: the 8-lane sum of scale · nibble · y, Σ min · bsums pair, and with
    /// `$pairs` the per-pair sums `(I_p, M_p)` as 4 i32 lanes each (else zeros)
    macro_rules! q4k_parts {
        ($a:expr, $b:expr, $mask:expr, $pairs:expr) => {{
            let (a, b, mask): (&BlockQ4K, &BlockQ8K, __m256i) = ($a, $b, $mask);
            let sm = unpack_scales_mins(&a.scales);
            // SAFETY: reads the 16 bytes of `sm` and the 32 of `bsums` (unaligned loads)
            let (sm, bsums) = unsafe { (_mm_loadu_si128(sm.as_ptr().cast()), _mm256_loadu_si256(b.bsums.as_ptr().cast())) };
            // the mins term: mins (i16) · pairwise sums of bsums
            let pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
            let mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
            // lane p: m_2p · bsum_2p + m_2p+1 · bsum_2p+1, the pair's M_p
            let mp = _mm_madd_epi16(mins, pairs);
            let m4 = _mm_add_epi32(mp, _mm_shuffle_epi32(mp, 0b01_00_11_10));
            let summ = _mm_cvtsi128_si32(_mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0b10_11_00_01)));
            // the scales as i16 in both halves; a byte shuffle broadcasts scale j
            let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
            let mut acc = _mm256_setzero_si256();
            let mut per = [_mm256_setzero_si256(); 4];
            for g in 0..4 {
                let q = load_u8x32(arr32(&a.qs, 32 * g));
                let lo = _mm256_and_si256(q, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                // nibble (≤ 15) · byte (≤ 128) pairs fit i16 without saturating
                let plo = _mm256_maddubs_epi16(lo, load_i8x32(arr32(&b.qs, 64 * g)));
                let phi = _mm256_maddubs_epi16(hi, load_i8x32(arr32(&b.qs, 64 * g + 32)));
                let (j0, j1) = (4 * g as i16, 4 * g as i16 + 2);
                let s0 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(j0 | ((j0 + 1) << 8)));
                let s1 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(j1 | ((j1 + 1) << 8)));
                let pg = _mm256_add_epi32(_mm256_madd_epi16(plo, s0), _mm256_madd_epi16(phi, s1));
                if $pairs {
                    per[g] = pg;
                } else {
                    acc = _mm256_add_epi32(acc, pg);
                }
            }
            let ip = if $pairs {
                // the 4 pairs' 8 lanes summed: lane p of the result is I_p
                let h = _mm256_hadd_epi32(_mm256_hadd_epi32(per[0], per[1]), _mm256_hadd_epi32(per[2], per[3]));
                _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
            } else {
                _mm_setzero_si128()
            };
            (acc, summ, (ip, mp))
        }};
    }

    /// [`super::q4_k_q8_k_gemv`] bit for bit: the reference's integers, one fma per super-block
    /// into each chain
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q4_k_q8_k_gemv_avx2(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let (mut acc, mut accm) = (0.0f32, 0.0f32);
        let mask = _mm256_set1_epi8(0x0f);
        for (a, b) in x.iter().zip(y) {
            let (sumi, summ) = q4k_block!(a, b, mask);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            (acc, accm) = gemv_step(acc, accm, sumi, summ, d * b.d, dmin * b.d);
        }
        acc - accm
    }

    /// one super-block of the GEMV order
    #[inline(always)]
    fn gemv_step(acc: f32, accm: f32, sumi: i32, summ: i32, s: f32, sm: f32) -> (f32, f32) {
        ((sumi as f32).mul_add(s, acc), (summ as f32).mul_add(sm, accm))
    }

    /// [`super::q4_k_q8_k_gemm`] bit for bit: the per-pair integers in 4 lanes, then the two
    /// chains of 4 fmas per super-block
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q4_k_q8_k_gemm_avx2(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let (mut acc, mut accm) = (0.0f32, 0.0f32);
        let mask = _mm256_set1_epi8(0x0f);
        for (a, b) in x.iter().zip(y) {
            let (ip, mp) = q4k_pairs!(a, b, mask);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            let (s, sm) = (d * b.d, dmin * b.d);
            let (fi, fm) = (_mm_cvtepi32_ps(ip), _mm_cvtepi32_ps(mp));
            let (mut vi, mut vm) = ([0f32; 4], [0f32; 4]);
            // SAFETY: 4 floats each
            unsafe {
                _mm_storeu_ps(vi.as_mut_ptr(), fi);
                _mm_storeu_ps(vm.as_mut_ptr(), fm);
            }
            for p in 0..4 {
                acc = vi[p].mul_add(s, acc);
                accm = vm[p].mul_add(sm, accm);
            }
        }
        acc - accm
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn q4_k_q8_k_avx2(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let mut sum = 0.0f32;
        let mask = _mm256_set1_epi8(0x0f);
        for (a, b) in x.iter().zip(y) {
            let (sumi, summ) = q4k_block!(a, b, mask);
            let (d, dmin) = f16_pair(a.d, a.dmin);
            sum = combine(sum, b, sumi, summ, d, dmin);
        }
        sum
    }

    /// `R` rows `stride` bytes apart from `w` · `y`, each summed as [`q4_k_q8_k_avx2`] sums it
    /// (superblock by superblock, the rows side by side)
    ///
    /// # Safety
    /// rows `w + r · stride` (r < R) readable for `y.len()` blocks and aligned for them; `out`
    /// writable for R floats
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn q4_k_rows<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8K], out: *mut f32) {
        let mut sum = [0.0f32; R];
        let mask = _mm256_set1_epi8(0x0f);
        for (i, b) in y.iter().enumerate() {
            crate::dot::gemv::prefetch_next::<R>(w, stride, i * size_of::<BlockQ4K>(), size_of::<BlockQ4K>());
            for r in 0..R {
                // SAFETY: block i of row r, aligned (caller)
                let a = unsafe { &*w.add(r * stride).cast::<BlockQ4K>().add(i) };
                let (sumi, summ) = q4k_block!(a, b, mask);
                let (d, dmin) = f16_pair(a.d, a.dmin);
                sum[r] = combine(sum[r], b, sumi, summ, d, dmin);
            }
        }
        for r in 0..R {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(sum[r]) };
        }
    }

    /// one super-block's activations as [`q4k_ints_512`] reads them: the elements each 512-bit
    /// vector of weight nibbles meets (see there), and `bsums`
    pub(crate) struct Q8K512 {
        y: [__m512i; 4],
        bsums: __m256i,
    }

    /// `[lo, hi]` as one 512-bit vector
    #[inline(always)]
    fn join(lo: __m256i, hi: __m256i) -> __m512i {
        // SAFETY: AVX-512 F (every caller's target features)
        unsafe { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi) }
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
    pub(crate) fn q8k_512(b: &BlockQ8K) -> Q8K512 {
        let q = |at: usize| load_i8x32(arr32(&b.qs, at));
        // SAFETY: the 32 bytes of bsums (unaligned load)
        let bsums = unsafe { _mm256_loadu_si256(b.bsums.as_ptr().cast()) };
        Q8K512 { y: [join(q(0), q(64)), join(q(32), q(96)), join(q(128), q(192)), join(q(160), q(224))], bsums }
    }

    /// one super-block's exact integers `(Σ scale · nibble · y, Σ min · bsums)`, the totals
    /// [`q4k_block`] returns, by 512-bit vectors: nibble bytes 0..64 (groups 0 and 1) and 64..128
    /// (groups 2 and 3), their low nibbles meeting elements (0..32, 64..96) and (128..160,
    /// 192..224) with scales (0, 2) and (4, 6), their high nibbles the next 32 of each with
    /// scales (1, 3) and (5, 7); `vpmaddubsw` then `vpdpwssd` with the scales (the totals are
    /// exact integers, so any grouping gives them)
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
    pub(crate) fn q4k_ints_512(a: &BlockQ4K, b: &Q8K512) -> (i32, i32) {
        // [`unpack_scales_mins`] built in a register (its array, stored and loaded back, stalled
        // the load on the four stores)
        let w = |i: usize| u32::from_le_bytes([a.scales[4 * i], a.scales[4 * i + 1], a.scales[4 * i + 2], a.scales[4 * i + 3]]);
        let (w0, w1, w2) = (w(0), w(1), w(2));
        let sc_hi = (w2 & 0x0f0f_0f0f) | (((w0 >> 6) & 0x0303_0303) << 4);
        let m_hi = ((w2 >> 4) & 0x0f0f_0f0f) | (((w1 >> 6) & 0x0303_0303) << 4);
        let sm = _mm_set_epi32(m_hi as i32, (w1 & 0x3f3f_3f3f) as i32, sc_hi as i32, (w0 & 0x3f3f_3f3f) as i32);
        let pairs = _mm_hadd_epi16(_mm256_castsi256_si128(b.bsums), _mm256_extracti128_si256(b.bsums, 1));
        let mp = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), pairs);
        let m4 = _mm_add_epi32(mp, _mm_shuffle_epi32(mp, 0b01_00_11_10));
        let summ = _mm_cvtsi128_si32(_mm_add_epi32(m4, _mm_shuffle_epi32(m4, 0b10_11_00_01)));
        let sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
        let pick = |j0: i16, j1: i16| _mm512_permutexvar_epi16(join(_mm256_set1_epi16(j0), _mm256_set1_epi16(j1)), sc);
        let mask = _mm512_set1_epi8(0x0f);
        // SAFETY: the 128 nibble bytes (two unaligned 64-byte loads)
        let (q01, q23) = unsafe { (_mm512_loadu_si512(a.qs.as_ptr().cast()), _mm512_loadu_si512(a.qs.as_ptr().add(64).cast())) };
        let lo = |q: __m512i| _mm512_and_si512(q, mask);
        let hi = |q: __m512i| _mm512_and_si512(_mm512_srli_epi16::<4>(q), mask);
        let mut acc = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_maddubs_epi16(lo(q01), b.y[0]), pick(0, 2));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(hi(q01), b.y[1]), pick(1, 3));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(lo(q23), b.y[2]), pick(4, 6));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(hi(q23), b.y[3]), pick(5, 7));
        (_mm512_reduce_add_epi32(acc), summ)
    }

    /// `R` rows with [`q4k_ints_512`] (the same integers, so the same bits): with `GEMV` as
    /// [`q4_k_rows_gemv`] sums them (upstream's repacked GEMV order), else as [`q4_k_rows`]
    ///
    /// # Safety
    /// as [`q4_k_rows`]; the CPU has AVX-512 F/BW/VNNI
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
    pub(crate) unsafe fn q4_k_rows_512<const R: usize, const GEMV: bool>(w: *const u8, stride: usize, y: &[BlockQ8K], out: *mut f32) {
        let (mut acc, mut accm) = ([0.0f32; R], [0.0f32; R]);
        for (i, b) in y.iter().enumerate() {
            crate::dot::gemv::prefetch_next::<R>(w, stride, i * size_of::<BlockQ4K>(), size_of::<BlockQ4K>());
            let b5 = q8k_512(b);
            for r in 0..R {
                // SAFETY: block i of row r, aligned (caller)
                let a = unsafe { &*w.add(r * stride).cast::<BlockQ4K>().add(i) };
                let (sumi, summ) = q4k_ints_512(a, &b5);
                let (d, dmin) = f16_pair(a.d, a.dmin);
                if GEMV {
                    (acc[r], accm[r]) = gemv_step(acc[r], accm[r], sumi, summ, d * b.d, dmin * b.d);
                } else {
                    acc[r] = combine(acc[r], b, sumi, summ, d, dmin);
                }
            }
        }
        for r in 0..R {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(acc[r] - accm[r]) };
        }
    }

    /// `R` rows as [`q4_k_rows`], each summed as [`q4_k_q8_k_gemv_avx2`] sums it (upstream's
    /// repacked GEMV order)
    ///
    /// # Safety
    /// as [`q4_k_rows`]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn q4_k_rows_gemv<const R: usize>(w: *const u8, stride: usize, y: &[BlockQ8K], out: *mut f32) {
        let (mut acc, mut accm) = ([0.0f32; R], [0.0f32; R]);
        let mask = _mm256_set1_epi8(0x0f);
        for (i, b) in y.iter().enumerate() {
            crate::dot::gemv::prefetch_next::<R>(w, stride, i * size_of::<BlockQ4K>(), size_of::<BlockQ4K>());
            for r in 0..R {
                // SAFETY: block i of row r, aligned (caller)
                let a = unsafe { &*w.add(r * stride).cast::<BlockQ4K>().add(i) };
                let (sumi, summ) = q4k_block!(a, b, mask);
                let (d, dmin) = f16_pair(a.d, a.dmin);
                (acc[r], accm[r]) = gemv_step(acc[r], accm[r], sumi, summ, d * b.d, dmin * b.d);
            }
        }
        for r in 0..R {
            // SAFETY: R writable floats (caller)
            unsafe { out.add(r).write_unaligned(acc[r] - accm[r]) };
        }
    }
}
