//! F32 · F32, F16 · F16, BF16 · BF16. The reference accumulates in f64 (a true reference); the
//! SIMD versions widen to f32 and accumulate in f32 lanes (4 accumulators), as upstream's do.
//! Their error against the reference is bounded in the tests by `2⁻²⁰ · Σ|x·y|` (f32 rounding
//! over at most a few thousand lane additions, with margin).

use half::{bf16, f16};

use crate::simd::Level;

pub type F32Dot = fn(&[f32], &[f32]) -> f32;
pub type F16Dot = fn(&[f16], &[f16]) -> f32;
pub type Bf16Dot = fn(&[bf16], &[bf16]) -> f32;

pub fn f32_reference(x: &[f32], y: &[f32]) -> f32 {
    x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() as f32
}

pub fn f16_reference(x: &[f16], y: &[f16]) -> f32 {
    x.iter().zip(y).map(|(a, b)| a.to_f64() * b.to_f64()).sum::<f64>() as f32
}

pub fn bf16_reference(x: &[bf16], y: &[bf16]) -> f32 {
    x.iter().zip(y).map(|(a, b)| a.to_f64() * b.to_f64()).sum::<f64>() as f32
}

macro_rules! selector {
    ($name:ident, $ty:ty, $reference:ident, $avx2:ident, $avx512:ident) => {
        /// the kernel of `level`
        pub fn $name(level: Level) -> fn(&[$ty], &[$ty]) -> f32 {
            assert!(level <= crate::simd::detected(), "{}: {} is not supported by this CPU", stringify!($name), level.name());
            match level {
                Level::Scalar => $reference,
                #[cfg(target_arch = "x86_64")]
                Level::Avx2 => |x, y| {
                    // SAFETY: selected only when the CPU has AVX2, FMA and F16C (asserted above)
                    unsafe { x86::$avx2(x, y) }
                },
                #[cfg(target_arch = "x86_64")]
                Level::Avx512 | Level::Avx512Vnni => |x, y| {
                    // SAFETY: selected only when the CPU has AVX-512 F/BW/VL (asserted above)
                    unsafe { x86::$avx512(x, y) }
                },
                #[cfg(not(target_arch = "x86_64"))]
                _ => $reference,
            }
        }
    };
}

selector!(select_f32, f32, f32_reference, f32_avx2, f32_avx512);
selector!(select_f16, f16, f16_reference, f16_avx2, f16_avx512);
selector!(select_bf16, bf16, bf16_reference, bf16_avx2, bf16_avx512);

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::{bf16, f16};

    use super::super::x86::hsum_ps;

    /// the 4-accumulator loop shared by the AVX2 kernels: `load(i)` gives the 8 f32 of element i·8
    macro_rules! avx2_loop {
        ($x:ident, $y:ident, $load:expr, $tail:expr) => {{
            let n = $x.len().min($y.len());
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 32 <= n {
                for k in 0..4 {
                    acc[k] = _mm256_fmadd_ps($load($x, i + 8 * k), $load($y, i + 8 * k), acc[k]);
                }
                i += 32;
            }
            while i + 8 <= n {
                acc[0] = _mm256_fmadd_ps($load($x, i), $load($y, i), acc[0]);
                i += 8;
            }
            let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            let mut sum = hsum_ps(s);
            for j in i..n {
                sum += $tail($x[j]) * $tail($y[j]);
            }
            sum
        }};
    }

    macro_rules! avx512_loop {
        ($x:ident, $y:ident, $load:expr, $tail:expr) => {{
            let n = $x.len().min($y.len());
            let mut acc = [_mm512_setzero_ps(); 4];
            let mut i = 0;
            while i + 64 <= n {
                for k in 0..4 {
                    acc[k] = _mm512_fmadd_ps($load($x, i + 16 * k), $load($y, i + 16 * k), acc[k]);
                }
                i += 64;
            }
            while i + 16 <= n {
                acc[0] = _mm512_fmadd_ps($load($x, i), $load($y, i), acc[0]);
                i += 16;
            }
            let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
            let mut sum = _mm512_reduce_add_ps(s);
            for j in i..n {
                sum += $tail($x[j]) * $tail($y[j]);
            }
            sum
        }};
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn ld_f32(s: &[f32], i: usize) -> __m256 {
        let c: &[f32; 8] = s[i..i + 8].try_into().expect("8 elements");
        // SAFETY: reads exactly the 8 floats of `c`
        unsafe { _mm256_loadu_ps(c.as_ptr()) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn ld_f16(s: &[f16], i: usize) -> __m256 {
        let c: &[f16; 8] = s[i..i + 8].try_into().expect("8 elements");
        // SAFETY: reads exactly the 16 bytes of `c`
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(c.as_ptr().cast()) })
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn ld_bf16(s: &[bf16], i: usize) -> __m256 {
        let c: &[bf16; 8] = s[i..i + 8].try_into().expect("8 elements");
        // SAFETY: reads exactly the 16 bytes of `c`
        let v = unsafe { _mm_loadu_si128(c.as_ptr().cast()) };
        // bf16 is the upper half of an f32
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn ld16_f32(s: &[f32], i: usize) -> __m512 {
        let c: &[f32; 16] = s[i..i + 16].try_into().expect("16 elements");
        // SAFETY: reads exactly the 16 floats of `c`
        unsafe { _mm512_loadu_ps(c.as_ptr()) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn ld16_f16(s: &[f16], i: usize) -> __m512 {
        let c: &[f16; 16] = s[i..i + 16].try_into().expect("16 elements");
        // SAFETY: reads exactly the 32 bytes of `c`
        _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(c.as_ptr().cast()) })
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    fn ld16_bf16(s: &[bf16], i: usize) -> __m512 {
        let c: &[bf16; 16] = s[i..i + 16].try_into().expect("16 elements");
        // SAFETY: reads exactly the 32 bytes of `c`
        let v = unsafe { _mm256_loadu_si256(c.as_ptr().cast()) };
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn f32_avx2(x: &[f32], y: &[f32]) -> f32 {
        avx2_loop!(x, y, ld_f32, |v: f32| v)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn f16_avx2(x: &[f16], y: &[f16]) -> f32 {
        avx2_loop!(x, y, ld_f16, |v: f16| v.to_f32())
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn bf16_avx2(x: &[bf16], y: &[bf16]) -> f32 {
        avx2_loop!(x, y, ld_bf16, |v: bf16| v.to_f32())
    }

    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(super) fn f32_avx512(x: &[f32], y: &[f32]) -> f32 {
        avx512_loop!(x, y, ld16_f32, |v: f32| v)
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn f16_avx512(x: &[f16], y: &[f16]) -> f32 {
        avx512_loop!(x, y, ld16_f16, |v: f16| v.to_f32())
    }

    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(super) fn bf16_avx512(x: &[bf16], y: &[bf16]) -> f32 {
        avx512_loop!(x, y, ld16_bf16, |v: bf16| v.to_f32())
    }
}
