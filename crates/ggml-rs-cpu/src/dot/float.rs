//! F32 · F32, F16 · F16, BF16 · BF16. The reference accumulates in f64 (a true reference); the
//! SIMD versions widen to f32 and accumulate in f32 lanes (4 accumulators), as upstream's do.
//! Their error against the reference is bounded in the tests by `2⁻²⁰ · Σ|x·y|` (f32 rounding
//! over at most a few thousand lane additions, with margin).
//!
//! F32 · F32 and F16 · F16 at the AVX-512 levels are [`f32_avx512_order`] and
//! [`f16_avx512_order`] bit for bit: the orders of upstream's AVX-512 build (`ggml_vec_dot_f32`,
//! `ggml_vec_dot_f16`), which its native CPU uses for token generation, so F32 and F16 weights
//! give upstream native's bits. The scalar level's F16 reference is upstream's generic order too
//! (each product of two f16 is exact in f32; the sum in f64).

use half::{bf16, f16};

pub type F32Dot = fn(&[f32], &[f32]) -> f32;
pub type F16Dot = fn(&[f16], &[f16]) -> f32;
pub type Bf16Dot = fn(&[bf16], &[bf16]) -> f32;

pub fn f32_reference(x: &[f32], y: &[f32]) -> f32 {
    x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() as f32
}

pub fn f16_reference(x: &[f16], y: &[f16]) -> f32 {
    x.iter().zip(y).map(|(a, b)| a.to_f64() * b.to_f64()).sum::<f64>() as f32
}

/// F16 · F16 as upstream's AVX-512 build sums it (`ggml_vec_dot_f16`): the blocks of 64 as
/// [`avx512_blocks`] (4 accumulators of 16 lanes, GCC's reduce) into f64, and the `n mod 64`
/// values left each added in f64 as their f32 product. The definition the AVX-512 row kernel
/// and the multi-row forms are tested against bit for bit.
pub fn f16_avx512_order(x: &[f16], y: &[f16]) -> f32 {
    let n = x.len().min(y.len());
    let mut sum = f64::from(avx512_blocks(n, |p| (x[p].to_f32(), y[p].to_f32())));
    for p in n - n % 64..n {
        sum += f64::from(x[p].to_f32() * y[p].to_f32());
    }
    sum as f32
}

/// how many values at the end of an F32 row [`f32_avx512_order`] fuses: what GCC does with
/// ggml_vec_dot_f32's leftover loop on the machine this crate was built on (build.rs: 8 under
/// generic tuning, 4 where GCC tunes for a 256-bit preference)
pub const F32_FUSED_TAIL: usize = {
    let s = env!("GGML_RS_CPU_F32_FUSED_TAIL").as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < s.len() {
        n = 10 * n + (s[i] - b'0') as usize;
        i += 1;
    }
    n
};

/// F32 · F32 as upstream's AVX-512 build sums it (`ggml_vec_dot_f32`): the blocks of 64 as
/// [`avx512_blocks`] (4 accumulators of 16 lanes, GCC's reduce), kept in f32 (the C keeps `sumf`
/// a float). The `n mod 64` values left go into that f32 in order as GCC compiled `sumf +=
/// x[i]*y[i]` (read in the native builds' disassembly): the leftover loop vectorised at the
/// tuning's width with the products rounded (`vmulps`, then in-order `vaddss`), the last `n mod`
/// [`F32_FUSED_TAIL`] contracted to one fused multiply-add each (`vfmadd231ss`): by 16 then 8,
/// 8 fused, under generic tuning; by 8 then 4, 4 fused, at `-mprefer-vector-width=256`. The
/// definition the AVX-512 row kernel is tested against bit for bit.
pub fn f32_avx512_order(x: &[f32], y: &[f32]) -> f32 {
    f32_avx512_order_fusing(x, y, F32_FUSED_TAIL)
}

/// [`f32_avx512_order`] with the last `n mod fused` values fused (`fused` a power of two)
pub fn f32_avx512_order_fusing(x: &[f32], y: &[f32], fused: usize) -> f32 {
    let n = x.len().min(y.len());
    let mut sum = avx512_blocks(n, |p| (x[p], y[p]));
    let (done, rounded) = (n - n % 64, n - n % fused);
    for p in done..rounded {
        sum += x[p] * y[p];
    }
    for p in rounded..n {
        sum = x[p].mul_add(y[p], sum);
    }
    sum
}

/// the whole blocks of 64 of `n` values as upstream's AVX-512 `ggml_vec_dot_f32` / `_f16` sum
/// them (`GGML_F32_STEP` 64, 4 accumulators of 16 lanes): accumulator j's lane l is
/// `fma(x[i+16j+l], y[i+16j+l], lane)`, then `(acc0 + acc2) + (acc1 + acc3)` lane by lane and GCC's
/// `_mm512_reduce_add_ps` (`GGML_F32x16_REDUCE`); `v(p)` is the pair at p widened to f32
fn avx512_blocks(n: usize, v: impl Fn(usize) -> (f32, f32)) -> f32 {
    let mut acc = [[0f32; 16]; 4];
    for i in (0..n - n % 64).step_by(64) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (l, lane) in a.iter_mut().enumerate() {
                let (x, y) = v(i + 16 * j + l);
                *lane = x.mul_add(y, *lane);
            }
        }
    }
    let s: [f32; 16] = std::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
    crate::expf::reduce_add16(&s)
}

pub fn bf16_reference(x: &[bf16], y: &[bf16]) -> f32 {
    x.iter().zip(y).map(|(a, b)| a.to_f64() * b.to_f64()).sum::<f64>() as f32
}

/// BF16 · BF16 as upstream's build with AVX512-BF16 sums it (`ggml_vec_dot_bf16` under
/// `__AVX512BF16__`, vec.cpp:148-158; a native build on a CPU that has it): blocks of 64 into two
/// accumulators of 16 lanes by `vdpbf16ps`, accumulator j's lane l taking positions
/// `p = i + 32j + 2l` and `p + 1` as `lane = fma(x[p], y[p], fma(x[p+1], y[p+1], lane))` (the odd
/// one first; Intel's definition of the instruction: RNE, bf16 denormal inputs read as zero, a
/// denormal result flushed to zero, MXCSR not consulted); each accumulator reduced in GCC's
/// `_mm512_reduce_add_ps` order and added to an f64 sum, then the `n mod 64` values left each
/// added in f64 as their f32 product. The products of two bf16 are exact in f32, so each step
/// rounds once.
pub fn bf16_dpbf16_order(x: &[bf16], y: &[bf16]) -> f32 {
    fn daz(v: bf16) -> f32 {
        let f = v.to_f32();
        if f.is_subnormal() { 0f32.copysign(f) } else { f }
    }
    fn step(lane: f32, a: bf16, b: bf16) -> f32 {
        let r = daz(a).mul_add(daz(b), lane);
        if r.is_subnormal() { 0f32.copysign(r) } else { r }
    }
    let n = x.len().min(y.len());
    let mut acc = [[0f32; 16]; 2];
    for i in (0..n - n % 64).step_by(64) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (l, lane) in a.iter_mut().enumerate() {
                let p = i + 32 * j + 2 * l;
                *lane = step(step(*lane, x[p + 1], y[p + 1]), x[p], y[p]);
            }
        }
    }
    let mut sum = f64::from(crate::expf::reduce_add16(&acc[0]));
    sum += f64::from(crate::expf::reduce_add16(&acc[1]));
    for p in n - n % 64..n {
        sum += f64::from(x[p].to_f32() * y[p].to_f32());
    }
    sum as f32
}

/// BF16 · BF16 as upstream's AVX-512 build without AVX512-BF16 sums it (`ggml_vec_dot_bf16`
/// under `__AVX512F__`, vec.cpp:160-169): blocks of 32 into two accumulators of 16 lanes
/// (`lane += x·y`, the product exact), each reduced in GCC's order into an f64 sum, then the
/// `n mod 32` values left in f64 as their f32 products.
pub fn bf16_avx512f_order(x: &[bf16], y: &[bf16]) -> f32 {
    let n = x.len().min(y.len());
    let mut acc = [[0f32; 16]; 2];
    for i in (0..n - n % 32).step_by(32) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (l, lane) in a.iter_mut().enumerate() {
                let p = i + 16 * j + l;
                *lane = x[p].to_f32().mul_add(y[p].to_f32(), *lane);
            }
        }
    }
    let mut sum = f64::from(crate::expf::reduce_add16(&acc[0]));
    sum += f64::from(crate::expf::reduce_add16(&acc[1]));
    for p in n - n % 32..n {
        sum += f64::from(x[p].to_f32() * y[p].to_f32());
    }
    sum as f32
}

// f32 at the AVX-512 levels: upstream's AVX-512 order with 512-bit loads (dot_bench, one thread,
// against upstream native's ggml_vec_dot_f32: 0.89-0.96x in L2, 0.93-1.07x from memory; the same
// order in 256-bit halves 0.83-0.87x, the AVX2 kernel's 4 × 8 lanes about the same)

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use half::{bf16, f16};

    use super::super::x86::{hsum_ps, reduce_add_ps_gcc};

    /// the 4-accumulator loop shared by the AVX2 kernels: `$load(p)` widens the 8 elements at
    /// `p` to f32. Whole chunks of 32 go through raw-pointer loads (no bounds checks in the hot
    /// loop), the rest through the scalar tail.
    macro_rules! avx2_loop {
        ($x:ident, $y:ident, $load:ident, $tail:expr) => {{
            let n = $x.len().min($y.len());
            let (x, y) = (&$x[..n], &$y[..n]);
            let mut acc = [_mm256_setzero_ps(); 4];
            let (xc, yc) = (x.chunks_exact(32), y.chunks_exact(32));
            let done = n - xc.remainder().len();
            for (a, b) in xc.zip(yc) {
                // SAFETY: `a` and `b` hold 32 elements; the loads read 8 at offsets 0, 8, 16, 24
                unsafe {
                    acc[0] = _mm256_fmadd_ps($load(a.as_ptr()), $load(b.as_ptr()), acc[0]);
                    acc[1] = _mm256_fmadd_ps($load(a.as_ptr().add(8)), $load(b.as_ptr().add(8)), acc[1]);
                    acc[2] = _mm256_fmadd_ps($load(a.as_ptr().add(16)), $load(b.as_ptr().add(16)), acc[2]);
                    acc[3] = _mm256_fmadd_ps($load(a.as_ptr().add(24)), $load(b.as_ptr().add(24)), acc[3]);
                }
            }
            let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            let mut sum = hsum_ps(s);
            for j in done..n {
                sum += $tail(x[j]) * $tail(y[j]);
            }
            sum
        }};
    }

    /// `super::avx512_blocks` with 16-lane registers, `$load(p)` widening the 16 elements at `p`:
    /// `(sum of the blocks, values in them, x, y)` with `x` and `y` cut to the same length
    macro_rules! avx512_blocks {
        ($x:ident, $y:ident, $load:ident) => {{
            let n = $x.len().min($y.len());
            let (x, y) = (&$x[..n], &$y[..n]);
            let mut acc = [_mm512_setzero_ps(); 4];
            let (xc, yc) = (x.chunks_exact(64), y.chunks_exact(64));
            for (a, b) in xc.zip(yc) {
                for (j, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: `a` and `b` hold 64 elements; the loads read 16 at offset 16·j < 64
                    unsafe { *acc = _mm512_fmadd_ps($load(a.as_ptr().add(16 * j)), $load(b.as_ptr().add(16 * j)), *acc) };
                }
            }
            let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
            (reduce_add_ps_gcc(s), n - n % 64, x, y)
        }};
    }

    /// as `avx2_loop`, 16 elements per load, chunks of 64
    macro_rules! avx512_loop {
        ($x:ident, $y:ident, $load:ident, $tail:expr) => {{
            let n = $x.len().min($y.len());
            let (x, y) = (&$x[..n], &$y[..n]);
            let mut acc = [_mm512_setzero_ps(); 4];
            let (xc, yc) = (x.chunks_exact(64), y.chunks_exact(64));
            let done = n - xc.remainder().len();
            for (a, b) in xc.zip(yc) {
                // SAFETY: `a` and `b` hold 64 elements; the loads read 16 at offsets 0, 16, 32, 48
                unsafe {
                    acc[0] = _mm512_fmadd_ps($load(a.as_ptr()), $load(b.as_ptr()), acc[0]);
                    acc[1] = _mm512_fmadd_ps($load(a.as_ptr().add(16)), $load(b.as_ptr().add(16)), acc[1]);
                    acc[2] = _mm512_fmadd_ps($load(a.as_ptr().add(32)), $load(b.as_ptr().add(32)), acc[2]);
                    acc[3] = _mm512_fmadd_ps($load(a.as_ptr().add(48)), $load(b.as_ptr().add(48)), acc[3]);
                }
            }
            let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
            let mut sum = _mm512_reduce_add_ps(s);
            for j in done..n {
                sum += $tail(x[j]) * $tail(y[j]);
            }
            sum
        }};
    }

    // The loads: each reads 8 (AVX2) or 16 (AVX-512) elements at `p`.
    // SAFETY (all six): the caller passes a pointer with that many readable elements.

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn ld_f32(p: *const f32) -> __m256 {
        // SAFETY: see above
        unsafe { _mm256_loadu_ps(p) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn ld_f16(p: *const f16) -> __m256 {
        // SAFETY: see above
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.cast()) })
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn ld_bf16(p: *const bf16) -> __m256 {
        // SAFETY: see above
        let v = unsafe { _mm_loadu_si128(p.cast()) };
        // bf16 is the upper half of an f32
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn ld16_f32(p: *const f32) -> __m512 {
        // SAFETY: see above
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn ld16_f16(p: *const f16) -> __m512 {
        // SAFETY: see above
        _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(p.cast()) })
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn ld16_bf16(p: *const bf16) -> __m512 {
        // SAFETY: see above
        let v = unsafe { _mm256_loadu_si256(p.cast()) };
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn f32_avx2(x: &[f32], y: &[f32]) -> f32 {
        avx2_loop!(x, y, ld_f32, |v: f32| v)
    }

    /// [`super::f32_avx512_order`] with 16-lane registers
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(crate) fn f32_avx512(x: &[f32], y: &[f32]) -> f32 {
        let (mut sum, done, x, y) = avx512_blocks!(x, y, ld16_f32);
        let rounded = x.len() - x.len() % super::F32_FUSED_TAIL;
        for j in done..rounded {
            sum += x[j] * y[j];
        }
        for j in rounded..x.len() {
            sum = x[j].mul_add(y[j], sum);
        }
        sum
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn f16_avx2(x: &[f16], y: &[f16]) -> f32 {
        avx2_loop!(x, y, ld_f16, |v: f16| v.to_f32())
    }

    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn bf16_avx2(x: &[bf16], y: &[bf16]) -> f32 {
        avx2_loop!(x, y, ld_bf16, |v: bf16| v.to_f32())
    }

    /// [`super::f16_avx512_order`] with 16-lane registers
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn f16_avx512(x: &[f16], y: &[f16]) -> f32 {
        let (blocks, done, x, y) = avx512_blocks!(x, y, ld16_f16);
        let mut sum = f64::from(blocks);
        for j in done..x.len() {
            sum += f64::from(x[j].to_f32() * y[j].to_f32());
        }
        sum as f32
    }

    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(crate) fn bf16_avx512(x: &[bf16], y: &[bf16]) -> f32 {
        avx512_loop!(x, y, ld16_bf16, |v: bf16| v.to_f32())
    }
}
