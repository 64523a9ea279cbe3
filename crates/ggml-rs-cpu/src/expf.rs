//! The exponential, SiLU and SwiGLU of upstream's x86 CPU backend, bit for bit: the rows of SWIGLU,
//! SILU and SOFT_MAX are computed here as upstream's AVX-512 build computes them, so a model's
//! activations and attention weights come out in the same bits as on upstream's native CPU.
//!
//! Facts taken from upstream's ggml-cpu (`vec.h` / `vec.cpp` at the pin, AVX-512 F/DQ branch):
//! a row is processed 16 values at a time with a vector exp (a range reduction `x = n·ln2 + b`,
//! `n` rounded by adding and subtracting 1.5·2²³, ln2 in two parts; a degree-5 polynomial of `b`
//! evaluated as `(c5·b + c4)·u + (c3·b + c2)`, then `·u + (c1·b + 1)`, `u = b²`; the result scaled
//! by `2ⁿ` with `vscalefps`; `|n| > 192` gives 0 or +inf), and the last `n mod 16` values with
//! libm's `expf` (`x / (1 + expf(-x))` for SiLU). SOFT_MAX sums each 16-value block in f32 in
//! GCC's `_mm512_reduce_add_ps` order (upper 256 + lower 256, upper 128 + lower 128, lanes
//! {0,1} + {2,3}, then lane 0 + lane 1) and adds the block sums in f64; the tail adds each value
//! in f64.
//!
//! [`exp16`] is the definition, one lane at a time in plain Rust (f32 FMAs and one exact f64
//! scaling that rounds once, as `vscalefps` does); the AVX-512 form computes the same 16 lanes
//! at once and the tests hold them equal bit for bit. In the scalar kernel set SiLU's definition runs
//! lane by lane (the AVX-512 build's bits in any set).
//!
//! **SiLU at AVX2** (the `avx2` kernel set) is upstream's AVX2 build's instead (its `__m256`
//! branch): blocks of 8, and an exp of the same range reduction and coefficients whose scale
//! `k = 2ⁿ` is built in the exponent bits and whose polynomial ends in `c1·b` (no `+ 1`), the
//! result `k + k·j`; `|n| > 126` goes through two factors `s2·(1 + j)·s1` so that the scale does
//! not overflow on the way, `|n| > 192` gives `s1·s1` (0 or +inf). [`exp8`] is that definition
//! lane by lane, the AVX2 form computes 8 lanes at once, equal bit for bit (tests).

/// 1.5 · 2²³: adding it rounds to an integer
const SHIFTER: f32 = f32::from_bits(0x4b40_0000);
/// 1 / ln 2
const LOG2E: f32 = f32::from_bits(0x3fb8_aa3b);
/// ln 2 in two parts: the high one, then the rest
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
/// the polynomial's coefficients, degree 5 down to 1
const C5: f32 = f32::from_bits(0x3c07_2010);
const C4: f32 = f32::from_bits(0x3d2b_9f17);
const C3: f32 = f32::from_bits(0x3e2a_af33);
const C2: f32 = f32::from_bits(0x3eff_fedb);
const C1: f32 = f32::from_bits(0x3f7f_fff6);

/// upstream's vector exp of one lane (the definition the AVX-512 form is tested against)
pub fn exp16(x: f32) -> f32 {
    let n = x.mul_add(LOG2E, SHIFTER) - SHIFTER;
    let b = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    let u = b * b;
    let j = C5.mul_add(b, C4).mul_add(u, C3.mul_add(b, C2)).mul_add(u, C1.mul_add(b, 1.0));
    // vscalefps: j · 2ⁿ rounded once (n is an integer of magnitude <= 192 here, so the f64
    // product is exact and the only rounding is the conversion, denormals included)
    (f64::from(j) * 2f64.powi(n as i32)) as f32
}

/// upstream's vector SiLU of one lane: `x / (1 + exp(0 - x))`
pub fn silu16(x: f32) -> f32 {
    x / (1.0 + exp16(0.0 - x))
}

/// upstream's AVX2 (and NEON) vector exp of one lane (the definition the AVX2 form is tested
/// against; see the module's text)
pub fn exp8(x: f32) -> f32 {
    let z = x.mul_add(LOG2E, SHIFTER);
    let n = z - SHIFTER;
    let b = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    let e = z.to_bits() << 23;
    let k = f32::from_bits(e.wrapping_add(1f32.to_bits()));
    let u = b * b;
    let j = C5.mul_add(b, C4).mul_add(u, C3.mul_add(b, C2)).mul_add(u, C1 * b);
    if n.abs() > 126.0 {
        let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
        let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
        if n.abs() > 192.0 {
            return s1 * s1;
        }
        let s2 = f32::from_bits(e.wrapping_sub(g));
        return s2.mul_add(j, s2) * s1;
    }
    k.mul_add(j, k)
}

/// upstream's AVX2 vector SiLU of one lane: `x / (1 + exp8(0 - x))`
pub fn silu8(x: f32) -> f32 {
    x / (1.0 + exp8(0.0 - x))
}

/// libm's SiLU, upstream's form for the values after the last whole block of a row
fn silu_libm(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// whole blocks of a SiLU row through [`silu16`] (the AVX-512 build's lanes; the scalar set's)
pub(crate) fn silu_blocks16_def(y: &mut [f32], x: &[f32], g: Option<&[f32]>) {
    silu_blocks_scalar(silu16, y, x, g)
}

/// whole blocks of a SiLU row through [`silu8`] (upstream's aarch64 build: blocks of 4 of
/// `ggml_v_silu`, whose exp is [`exp8`]'s lane for lane; plain Rust, the lanes are independent)
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(crate) fn silu_blocks8_def(y: &mut [f32], x: &[f32], g: Option<&[f32]>) {
    silu_blocks_scalar(silu8, y, x, g)
}

/// the values after a row's last whole block, through libm (upstream's tail)
pub(crate) fn silu_blocks_libm(y: &mut [f32], x: &[f32], g: Option<&[f32]>) {
    silu_blocks_scalar(silu_libm, y, x, g)
}

/// `y = lane(x) · g` (or `lane(x)`) value by value
fn silu_blocks_scalar(lane: fn(f32) -> f32, y: &mut [f32], x: &[f32], g: Option<&[f32]>) {
    for i in 0..y.len() {
        let s = lane(x[i]);
        y[i] = match g {
            Some(g) => s * g[i],
            None => s,
        };
    }
}

/// GCC's `_mm512_reduce_add_ps` of 16 values
pub(crate) fn reduce_add16(v: &[f32; 16]) -> f32 {
    let t3: [f32; 8] = std::array::from_fn(|i| v[i + 8] + v[i]);
    let t6: [f32; 4] = std::array::from_fn(|i| t3[i + 4] + t3[i]);
    (t6[0] + t6[2]) + (t6[1] + t6[3])
}

/// `y = exp(y - max)` past the whole blocks, through libm, each value added to `sum` in f64
fn exp_sub_sum_tail(y: &mut [f32], max: f32, mut sum: f64) -> f64 {
    for v in y {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    sum
}

/// `y = exp(y - max)` in place, and its sum, as upstream's AVX-512 build's SOFT_MAX row computes
/// them (`ggml_vec_soft_max_f32`): blocks of 16 through [`exp16`], each summed in f32 in
/// `reduce_add16`'s order and added in f64, the rest through libm. The definition, lane by lane;
/// the AVX-512 set computes the same bits 16 lanes at once.
pub fn exp_sub_sum_row16(y: &mut [f32], max: f32) -> f64 {
    let whole = y.len() / 16 * 16;
    let mut sum = 0.0f64;
    for yb in y[..whole].chunks_exact_mut(16) {
        let yb: &mut [f32; 16] = yb.try_into().expect("a block of 16");
        yb.iter_mut().for_each(|y| *y = exp16(*y - max));
        sum += f64::from(reduce_add16(yb));
    }
    exp_sub_sum_tail(&mut y[whole..], max, sum)
}

/// [`exp_sub_sum_row16`] in upstream's aarch64 build's form: blocks of 4 through [`exp8`] (its
/// `ggml_v_expf` lane for lane), each summed by `vaddvq_f32` and added in f64; the rest through libm
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub fn exp_sub_sum_row4(y: &mut [f32], max: f32) -> f64 {
    let whole = y.len() / 4 * 4;
    let mut sum = 0.0f64;
    for yb in y[..whole].chunks_exact_mut(4) {
        yb.iter_mut().for_each(|v| *v = exp8(*v - max));
        sum += f64::from(crate::dot::neon::hsum4([yb[0], yb[1], yb[2], yb[3]]));
    }
    exp_sub_sum_tail(&mut y[whole..], max, sum)
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::*;

    /// 16 lanes of [`exp16`]
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp16_512(x: __m512) -> __m512 {
        let r = _mm512_set1_ps(SHIFTER);
        let z = _mm512_fmadd_ps(x, _mm512_set1_ps(LOG2E), r);
        let n = _mm512_sub_ps(z, r);
        let b = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x));
        let d = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(_mm512_abs_ps(n), _mm512_set1_ps(192.0));
        let u = _mm512_mul_ps(b, b);
        let j = _mm512_fmadd_ps(
            _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(C5), b, _mm512_set1_ps(C4)), u, _mm512_fmadd_ps(_mm512_set1_ps(C3), b, _mm512_set1_ps(C2))),
            u,
            _mm512_fmadd_ps(_mm512_set1_ps(C1), b, _mm512_set1_ps(1.0)),
        );
        let res = _mm512_scalef_ps(j, n);
        if d == 0 {
            return res;
        }
        let zero = _mm512_setzero_ps();
        let alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LE_OQ>(n, zero), _mm512_set1_ps(f32::INFINITY), zero);
        _mm512_mask_blend_ps(d, res, alt)
    }

    /// 8 lanes of [`exp8`]
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp8_256(x: __m256) -> __m256 {
        let r = _mm256_set1_ps(SHIFTER);
        let z = _mm256_fmadd_ps(x, _mm256_set1_ps(LOG2E), r);
        let n = _mm256_sub_ps(z, r);
        let b = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x));
        let e = _mm256_slli_epi32::<23>(_mm256_castps_si256(z));
        let k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0))));
        let an = _mm256_andnot_ps(_mm256_set1_ps(-0.0), n);
        let c = _mm256_cmp_ps::<_CMP_GT_OQ>(an, _mm256_set1_ps(126.0));
        let u = _mm256_mul_ps(b, b);
        let j = _mm256_fmadd_ps(
            _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(C5), b, _mm256_set1_ps(C4)), u, _mm256_fmadd_ps(_mm256_set1_ps(C3), b, _mm256_set1_ps(C2))),
            u,
            _mm256_mul_ps(_mm256_set1_ps(C1), b),
        );
        if _mm256_movemask_ps(c) == 0 {
            return _mm256_fmadd_ps(k, j, k);
        }
        let g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps())), _mm256_set1_epi32(0x8200_0000u32 as i32));
        let s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f00_0000)));
        let s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
        let d = _mm256_cmp_ps::<_CMP_GT_OQ>(an, _mm256_set1_ps(192.0));
        let big = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
        let normal = _mm256_fmadd_ps(k, j, k);
        _mm256_blendv_ps(_mm256_blendv_ps(normal, big, c), _mm256_mul_ps(s1, s1), d)
    }

    /// SOFT_MAX's row at AVX2, as upstream's AVX2 build computes it: blocks of 8 through
    /// [`exp8`], each block summed as `hsum_ps` sums 8 lanes, the block sums in f64; the rest
    /// through libm
    ///
    /// # Safety
    /// AVX2 and FMA available.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn exp_sub_sum_row8(y: &mut [f32], max: f32) -> f64 {
        let m = _mm256_set1_ps(max);
        let whole = y.len() / 8 * 8;
        let mut sum = 0.0f64;
        for i in (0..whole).step_by(8) {
            // SAFETY: i + 8 <= whole <= y.len()
            unsafe {
                let v = exp8_256(_mm256_sub_ps(_mm256_loadu_ps(y.as_ptr().add(i)), m));
                _mm256_storeu_ps(y.as_mut_ptr().add(i), v);
                sum += f64::from(crate::dot::x86::hsum_ps(v));
            }
        }
        super::exp_sub_sum_tail(&mut y[whole..], max, sum)
    }

    /// a SiLU row's whole blocks at AVX2 ([`crate::vecf::VecF::silu_row`])
    ///
    /// # Safety
    /// AVX2 and FMA available; `x` (and `g`) at least as long as `y`, whose length is a multiple of 8.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn silu_blocks8(y: &mut [f32], x: &[f32], g: Option<&[f32]>) {
        let one = _mm256_set1_ps(1.0);
        for i in (0..y.len()).step_by(8) {
            // SAFETY: i + 8 <= len of every slice (caller)
            unsafe {
                let v = _mm256_loadu_ps(x.as_ptr().add(i));
                let e = exp8_256(_mm256_sub_ps(_mm256_setzero_ps(), v));
                let mut s = _mm256_div_ps(v, _mm256_add_ps(one, e));
                if let Some(g) = g {
                    s = _mm256_mul_ps(s, _mm256_loadu_ps(g.as_ptr().add(i)));
                }
                _mm256_storeu_ps(y.as_mut_ptr().add(i), s);
            }
        }
    }

    /// a SiLU row's whole blocks at AVX-512 ([`crate::vecf::VecF::silu_row`])
    ///
    /// # Safety
    /// AVX-512 F available; `x` (and `g`) at least as long as `y`, whose length is a multiple of 16.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn silu_blocks(y: &mut [f32], x: &[f32], g: Option<&[f32]>) {
        let one = _mm512_set1_ps(1.0);
        for i in (0..y.len()).step_by(16) {
            // SAFETY: i + 16 <= len of every slice (caller)
            unsafe {
                let v = _mm512_loadu_ps(x.as_ptr().add(i));
                let e = exp16_512(_mm512_sub_ps(_mm512_setzero_ps(), v));
                let mut s = _mm512_div_ps(v, _mm512_add_ps(one, e));
                if let Some(g) = g {
                    s = _mm512_mul_ps(s, _mm512_loadu_ps(g.as_ptr().add(i)));
                }
                _mm512_storeu_ps(y.as_mut_ptr().add(i), s);
            }
        }
    }

    /// [`super::exp_sub_sum_row16`] at AVX-512, the same bits
    ///
    /// # Safety
    /// AVX-512 F available.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn exp_sub_sum_row16(y: &mut [f32], max: f32) -> f64 {
        let whole = y.len() / 16 * 16;
        let mut sum = 0.0f64;
        for yb in y[..whole].chunks_exact_mut(16) {
            let yb: &mut [f32; 16] = yb.try_into().expect("a block of 16");
            // SAFETY: 16 values
            unsafe {
                let v = exp16_512(_mm512_sub_ps(_mm512_loadu_ps(yb.as_ptr()), _mm512_set1_ps(max)));
                _mm512_storeu_ps(yb.as_mut_ptr(), v);
            }
            sum += f64::from(reduce_add16(yb));
        }
        super::exp_sub_sum_tail(&mut y[whole..], max, sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels;
    use crate::rng::XorShift;
    use crate::simd::Level;

    /// inputs over the whole range: activations, softmax arguments, the edges where the result
    /// turns denormal, 0 or +inf, and the special values
    fn inputs() -> Vec<f32> {
        let mut r = XorShift::new(11);
        let mut v: Vec<f32> = (0..4096).map(|_| r.f32_in(-20.0, 20.0)).collect();
        v.extend((0..2048).map(|_| r.f32_in(-110.0, 0.0)));
        v.extend((0..512).map(|i| -87.0 - i as f32 * 0.0375));
        v.extend((0..256).map(|i| 87.0 + i as f32 * 0.0125));
        v.extend([0.0, -0.0, 1.0, -1.0, 88.72, 88.73, -103.9, -104.0, -150.0, 200.0, -200.0, 1e30, -1e30]);
        v.extend([f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE, -f32::MIN_POSITIVE]);
        while !v.len().is_multiple_of(16) {
            v.push(r.f32_in(-1.0, 1.0));
        }
        v
    }

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn definition_is_an_exponential() {
        // within 2 ulp of libm where the result is normal, 0 below the range, +inf above
        for x in inputs() {
            let (got, want) = (exp16(x), x.exp());
            if want.is_normal() && got.is_normal() {
                let ulps = (got.to_bits() as i64 - want.to_bits() as i64).abs();
                assert!(ulps <= 2, "exp16({x}) = {got}, libm {want}: {ulps} ulp");
            } else if x < -104.0 {
                assert_eq!(got, 0.0, "exp16({x})");
            } else if x > 89.0 {
                assert_eq!(got, f32::INFINITY, "exp16({x})");
            }
        }
        assert!(exp16(f32::NAN).is_nan());
    }

    #[test]
    fn avx512_lanes_equal_the_definition() {
        if crate::simd::detected() < Level::Avx512 {
            eprintln!("no AVX-512: not tested");
            return;
        }
        let x = inputs();
        let g: Vec<f32> = x.iter().rev().map(|v| v * 0.25).collect();
        for gate in [None, Some(&g[..])] {
            let mut y = vec![0.0f32; x.len()];
            kernels::at(Level::Avx512).vec.silu_row(&mut y, &x, gate);
            for i in 0..x.len() {
                let want = match gate {
                    Some(g) => silu16(x[i]) * g[i],
                    None => silu16(x[i]),
                };
                assert!(same(y[i], want), "silu lane {i}: x {} gives {} (bits {:#x}), definition {} ({:#x})", x[i], y[i], y[i].to_bits(), want, want.to_bits());
            }
        }
        let (mut y, mut want) = (x.clone(), x.clone());
        let (s, s_ref) = (kernels::at(Level::Avx512).vec.softmax_exp(&mut y, 3.5), exp_sub_sum_row16(&mut want, 3.5));
        for i in 0..x.len() {
            assert!(
                same(y[i], want[i]),
                "exp lane {i}: x {} gives {} (bits {:#x}), definition {} ({:#x})",
                x[i],
                y[i],
                y[i].to_bits(),
                want[i],
                want[i].to_bits()
            );
        }
        assert!(same(s as f32, s_ref as f32) && s.to_bits() == s_ref.to_bits(), "sums {s} and {s_ref}");
    }

    #[test]
    fn exp8_is_an_exponential_and_avx2_lanes_equal_it() {
        for x in inputs() {
            let (got, want) = (exp8(x), x.exp());
            if want.is_normal() && got.is_normal() {
                let ulps = (got.to_bits() as i64 - want.to_bits() as i64).abs();
                assert!(ulps <= 2, "exp8({x}) = {got}, libm {want}: {ulps} ulp");
            } else if x < -104.0 {
                assert_eq!(got, 0.0, "exp8({x})");
            } else if x > 89.0 {
                assert_eq!(got, f32::INFINITY, "exp8({x})");
            }
        }
        assert!(exp8(f32::NAN).is_nan());
        if crate::simd::detected() < Level::Avx2 || !cfg!(target_arch = "x86_64") {
            eprintln!("no AVX2: the AVX2 lanes not tested");
            return;
        }
        // the inputs and a row of 8 · k + 5 values: whole blocks of 8 and a libm tail
        let mut x = inputs();
        x.extend([0.5, -2.0, 3.0, -150.0, 7.5]);
        let g: Vec<f32> = x.iter().rev().map(|v| v * 0.25).collect();
        let whole = x.len() / 8 * 8;
        for gate in [None, Some(&g[..])] {
            let mut y = vec![0.0f32; x.len()];
            kernels::at(Level::Avx2).vec.silu_row(&mut y, &x, gate);
            for i in 0..x.len() {
                let s = if i < whole { silu8(x[i]) } else { x[i] / (1.0 + (-x[i]).exp()) };
                let want = gate.map_or(s, |g| s * g[i]);
                assert!(same(y[i], want), "avx2 silu lane {i}: x {} gives {} ({:#x}), definition {} ({:#x})", x[i], y[i], y[i].to_bits(), want, want.to_bits());
                assert!(same(kernels::at(Level::Avx2).vec.silu_lane(x[i]), silu8(x[i])));
            }
        }
        // exp8 and exp16 are other functions (last-bit differences)
        assert!(inputs().iter().any(|&x| !same(exp8(x), exp16(x))));
    }

    /// the AVX2 softmax row: exp8 per value, blocks of 8 summed lanes (0+4, 1+5, ...), then
    /// (0 + 2) + (1 + 3), in f64 across blocks; libm for the tail
    #[test]
    fn avx2_exp_sub_sum_is_the_8_lane_definition() {
        if crate::simd::detected() < Level::Avx2 || !cfg!(target_arch = "x86_64") {
            eprintln!("no AVX2: not tested");
            return;
        }
        let mut x = inputs();
        x.extend([0.25, -3.0, -7.5]);
        let mut y = x.clone();
        let sum = kernels::at(Level::Avx2).vec.softmax_exp(&mut y, 2.5);
        let whole = x.len() / 8 * 8;
        let mut want_sum = 0.0f64;
        for (b, xb) in x[..whole].chunks_exact(8).enumerate() {
            let e: Vec<f32> = xb.iter().map(|v| exp8(v - 2.5)).collect();
            for (i, v) in e.iter().enumerate() {
                assert!(same(y[8 * b + i], *v), "value {}: {} vs {}", 8 * b + i, y[8 * b + i], v);
            }
            let u: Vec<f32> = (0..4).map(|i| e[i] + e[i + 4]).collect();
            want_sum += f64::from((u[0] + u[2]) + (u[1] + u[3]));
        }
        for i in whole..x.len() {
            let v = (x[i] - 2.5).exp();
            assert_eq!(y[i].to_bits(), v.to_bits(), "tail value {i}");
            want_sum += f64::from(v);
        }
        assert!(sum.to_bits() == want_sum.to_bits() || (sum.is_nan() && want_sum.is_nan()), "sum {sum} vs {want_sum}");
    }

    #[test]
    fn tails_are_libm_and_blocks_are_summed_in_gccs_order() {
        // 16 + 5 values: one block through the vector exp, five through libm
        let x: Vec<f32> = (0..21).map(|i| -(i as f32) * 0.37).collect();
        let mut y = x.clone();
        // blocks of 16 (AVX2's are checked above): the AVX-512 set's, else the definition
        let level = if crate::simd::detected() >= Level::Avx512 { crate::simd::detected() } else { Level::Scalar };
        let sum = if level >= Level::Avx512 { kernels::at(level).vec.softmax_exp(&mut y, 0.0) } else { exp_sub_sum_row16(&mut y, 0.0) };
        for i in 16..21 {
            assert_eq!(y[i].to_bits(), x[i].exp().to_bits(), "tail value {i}");
        }
        let block: [f32; 16] = y[..16].try_into().unwrap();
        let t3: Vec<f32> = (0..8).map(|i| block[i] + block[i + 8]).collect();
        let t6: Vec<f32> = (0..4).map(|i| t3[i] + t3[i + 4]).collect();
        let want = y[16..].iter().fold(f64::from((t6[0] + t6[2]) + (t6[1] + t6[3])), |s, &v| s + f64::from(v));
        assert_eq!(sum.to_bits(), want.to_bits());
        let mut s = vec![0.0f32; 21];
        kernels::at(level).vec.silu_row(&mut s, &x, None);
        for i in 16..21 {
            assert_eq!(s[i].to_bits(), (x[i] / (1.0 + (-x[i]).exp())).to_bits(), "silu tail value {i}");
        }
    }
}
