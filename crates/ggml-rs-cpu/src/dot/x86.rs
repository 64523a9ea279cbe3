//! Small AVX2 helpers shared by the kernels: horizontal sums, the signed-byte dot of 32 pairs,
//! f16 scalar conversion.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

/// sum of the 16 lanes in GCC's `_mm512_reduce_add_ps` order (upstream's native builds): the
/// 256-bit halves added, then the 128-bit halves, then `(u0 + u2) + (u1 + u3)`; the same bits
/// as `crate::expf::reduce_add16`
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn reduce_add_ps_gcc(v: __m512) -> f32 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    let t = _mm256_add_ps(hi, _mm512_castps512_ps256(v));
    let u = _mm_add_ps(_mm256_extractf128_ps::<1>(t), _mm256_castps256_ps128(t));
    let w = _mm_add_ps(u, _mm_movehl_ps(u, u));
    _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)))
}

/// sum of the 8 lanes
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// sum of the 8 lanes
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// 8 sums of 4 products of signed bytes `x * y`; bytes of -128 are not allowed in `x` (the sign
/// trick turns them into +128 unsigned, fine) nor, with one in `x` too, in `y` (upstream has the
/// same limit: quantizers never produce -128 in activations)
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn dot_i8x32(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    let p = _mm256_maddubs_epi16(ax, sy);
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// the product of two f16 values, both converted by one vcvtph2ps from a register built in a
/// general-purpose register: with a single f16, LLVM turns the conversion into a `vpinsrw` into
/// whatever vector register is at hand, often an accumulator, and the false dependency
/// serialises the blocks of a dot product (measured: Q8_0 at half speed)
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn f16_product(a: half::f16, b: half::f16) -> f32 {
    let both = a.to_bits() as u32 | (b.to_bits() as u32) << 16;
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(both as i32));
    _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)))
}

/// two f16 values converted together (see [`f16_product`] for why not one at a time)
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn f16_pair(a: half::f16, b: half::f16) -> (f32, f32) {
    let both = a.to_bits() as u32 | (b.to_bits() as u32) << 16;
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(both as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// 32 bytes from 16 packed nibbles: low nibbles in bytes 0..16, high nibbles in 16..32
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn nibbles_32(p: &[u8; 16]) -> __m256i {
    // SAFETY: reads exactly the 16 bytes of `p` (unaligned load)
    let lo = unsafe { _mm_loadu_si128(p.as_ptr().cast()) };
    let hi = _mm_srli_epi16(lo, 4);
    _mm256_and_si256(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(0x0f))
}

/// loads 32 unsigned bytes
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn load_u8x32(p: &[u8; 32]) -> __m256i {
    // SAFETY: reads exactly the 32 bytes of `p` (unaligned load)
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

/// loads 32 signed bytes
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn load_i8x32(p: &[i8; 32]) -> __m256i {
    // SAFETY: reads exactly the 32 bytes of `p` (unaligned load)
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

/// the 32-byte sub-array of `s` at `at`
#[inline(always)]
pub(crate) fn arr32<T>(s: &[T], at: usize) -> &[T; 32] {
    s[at..at + 32].try_into().expect("32 elements")
}
