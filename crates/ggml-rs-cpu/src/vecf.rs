//! f32 vector kernels the non-matmul ops share (attention's V accumulation, softmax's
//! exponentials): `y += s·x` for f32 and f16 `x`, `y *= s`, and `exp(x - m)` in place with its sum.
//!
//! Each comes as a scalar reference (plain Rust, libm's `exp`) and AVX2 / AVX-512 forms; [`VecF`] is
//! one kernel set's choice of them, a part of its kernel table ([`crate::kernels`]). The vector exp is our own range reduction (`x = n·ln2 +
//! r`, ln2 split in two parts so `r` is exact to f32) and a degree-7 polynomial of `r` (the Taylor
//! coefficients, the last ones adjusted as Cephes' `expf` does), `2^n` put into the exponent bits:
//! about 2 ulp from libm's over the range softmax uses (`x ≤ 0`), as upstream's `ggml_v_expf`
//! accepts. Inputs below -88 give 0 (the exact value would be a denormal), `-inf` gives 0.

use half::f16;

/// `out[a·stride + j] = q_a · k_j` (see [`VecF::score_tile`]); unsafe: the lengths that method checks
pub type ScoreTile = unsafe fn(&[f32], usize, &[f32], usize, usize, &mut [f32], usize);
/// `acc_a += Σ_j w[a·stride + j] · v_j` (see [`VecF::acc_tile`]); unsafe: the lengths that method checks
pub type AccTile = unsafe fn(&mut [f32], usize, &[f32], usize, &[f32], usize, usize);

/// the NeoX rotation of two halves by (cos, sin) (see [`VecF::rope_halves`])
pub type RopeHalves = unsafe fn(&mut [f32], &mut [f32], &[f32], &[f32]);
/// `y = x · s` (times `w`) (see [`VecF::scale_mul_into`]); unsafe: the lengths that method checks
pub type ScaleMulInto = unsafe fn(&mut [f32], &[f32], f32, Option<&[f32]>);

/// The element-wise vector kernels of one kernel set ([`crate::kernels::Kernels::vec`]). The
/// pointers are `unsafe fn`s: their instruction set is the table's (the table is only built
/// on a CPU that has it), and the length conditions the methods below check before calling.
#[derive(Clone, Copy)]
pub struct VecF {
    pub(crate) mad_f32: unsafe fn(&mut [f32], &[f32], f32),
    pub(crate) mad_f16: unsafe fn(&mut [f32], &[f16], f32),
    pub(crate) scale: unsafe fn(&mut [f32], f32),
    pub(crate) exp_sub_sum: unsafe fn(&mut [f32], f32) -> f64,
    pub(crate) max: unsafe fn(&[f32]) -> f32,
    /// score and accumulate tiles (the attention takes its tiled path only where they exist)
    pub(crate) tiles: Option<(ScoreTile, AccTile)>,
    pub(crate) rope_pairs: unsafe fn(&mut [f32], &[f32]),
    pub(crate) rope_halves: RopeHalves,
    pub(crate) sum_sq: unsafe fn(&[f32]) -> f64,
    pub(crate) scale_mul_into: ScaleMulInto,
    /// SOFT_MAX's `y = exp(y - max)` and its sum, in the order of upstream's build of this set
    /// ([`crate::expf`]); unsafe: none beyond the set
    pub(crate) softmax_exp: unsafe fn(&mut [f32], f32) -> f64,
    /// the values SiLU takes in blocks (the rest of a row through libm)
    pub(crate) silu_block: usize,
    /// one block value's SiLU (what [`VecF::silu_row`] gives for it)
    pub(crate) silu_lane: fn(f32) -> f32,
    /// `y = silu(x) · g` (or `silu(x)`) over whole blocks; unsafe: `x` and `g` as long as `y`,
    /// whose length is a multiple of `silu_block`
    pub(crate) silu_blocks: unsafe fn(&mut [f32], &[f32], Option<&[f32]>),
}

impl VecF {
    /// the definitions (the scalar set's kernels)
    pub const SCALAR: VecF = VecF {
        mad_f32: |y, x, s| y.iter_mut().zip(x).for_each(|(a, b)| *a += b * s),
        mad_f16: |y, x, s| y.iter_mut().zip(x).for_each(|(a, b)| *a += b.to_f32() * s),
        scale: |y, s| y.iter_mut().for_each(|a| *a *= s),
        exp_sub_sum: exp_sub_sum_libm,
        max: |y| y.iter().cloned().fold(f32::NEG_INFINITY, f32::max),
        tiles: None,
        rope_pairs: rope_pairs_scalar,
        rope_halves: rope_halves_scalar,
        sum_sq: sum_sq_scalar,
        scale_mul_into: scale_mul_into_scalar,
        softmax_exp: exp_sub_sum_libm,
        silu_block: 16,
        silu_lane: crate::expf::silu16,
        silu_blocks: crate::expf::silu_blocks16_def,
    };

    /// `y[i] += s · x[i]`
    pub fn mad_f32(&self, y: &mut [f32], x: &[f32], s: f32) {
        assert_eq!(y.len(), x.len(), "vecf::mad_f32: lengths differ");
        // SAFETY: the table's set runs on this CPU; the lengths are equal
        unsafe { (self.mad_f32)(y, x, s) }
    }

    /// `y[i] += s · f32(x[i])`: an F16 row weighted in without a conversion pass
    pub fn mad_f16(&self, y: &mut [f32], x: &[f16], s: f32) {
        assert_eq!(y.len(), x.len(), "vecf::mad_f16: lengths differ");
        // SAFETY: as in mad_f32
        unsafe { (self.mad_f16)(y, x, s) }
    }

    /// `y[i] *= s`
    pub fn scale(&self, y: &mut [f32], s: f32) {
        // SAFETY: the table's set runs on this CPU
        unsafe { (self.scale)(y, s) }
    }

    /// `y[i] = exp(y[i] - m)`, returning the sum of the results (in f64, as upstream sums them)
    pub fn exp_sub_sum(&self, y: &mut [f32], m: f32) -> f64 {
        // SAFETY: as in scale
        unsafe { (self.exp_sub_sum)(y, m) }
    }

    /// the largest element (`-inf` for an empty slice)
    pub fn max(&self, y: &[f32]) -> f32 {
        // SAFETY: as in scale
        unsafe { (self.max)(y) }
    }

    /// SOFT_MAX's `y = exp(y - max)` in place and its sum, as upstream's build of this set
    /// computes a row ([`crate::expf`]; the scalar set: libm's exp, summed in f64)
    pub fn softmax_exp(&self, y: &mut [f32], max: f32) -> f64 {
        // SAFETY: as in scale
        unsafe { (self.softmax_exp)(y, max) }
    }

    /// `y = silu(x) · g` (SWIGLU; `g = None`: SILU): whole blocks of [`VecF::silu_block`] values
    /// in the set's vector form, the rest through libm (upstream's rows)
    pub fn silu_row(&self, y: &mut [f32], x: &[f32], g: Option<&[f32]>) {
        assert!(x.len() == y.len() && g.is_none_or(|g| g.len() == y.len()), "vecf::silu_row: lengths differ");
        let whole = y.len() / self.silu_block * self.silu_block;
        // SAFETY: the table's set runs on this CPU; `whole` values of each, a multiple of the block
        unsafe { (self.silu_blocks)(&mut y[..whole], &x[..whole], g.map(|g| &g[..whole])) };
        crate::expf::silu_blocks_libm(&mut y[whole..], &x[whole..], g.map(|g| &g[whole..]));
    }

    /// the values SiLU takes in blocks ([`VecF::silu_row`])
    pub fn silu_block(&self) -> usize {
        self.silu_block
    }

    /// the SiLU of a value that falls in a whole block of a row
    pub fn silu_lane(&self, x: f32) -> f32 {
        (self.silu_lane)(x)
    }
}

impl VecF {
    /// whether [`VecF::score_tile`] and [`VecF::acc_tile`] have a vector form in this set (the
    /// attention takes its tiled path only then)
    pub fn has_tiles(&self) -> bool {
        self.tiles.is_some()
    }

    /// `out[a·stride + j] = q_a · k_j` for the `nq` rows of `q` and the `n` rows of `k` (`d` floats
    /// each, packed)
    #[allow(clippy::too_many_arguments)]
    pub fn score_tile(&self, q: &[f32], nq: usize, k: &[f32], n: usize, d: usize, out: &mut [f32], stride: usize) {
        assert!(q.len() >= nq * d && k.len() >= n * d && n <= stride && out.len() >= (nq.max(1) - 1) * stride + n, "vecf::score_tile: short slices");
        match self.tiles {
            // SAFETY: the table's set runs on this CPU; the lengths are checked above
            Some((score, _)) => unsafe { score(q, nq, k, n, d, out, stride) },
            None => {
                for a in 0..nq {
                    for j in 0..n {
                        out[a * stride + j] = q[a * d..(a + 1) * d].iter().zip(&k[j * d..(j + 1) * d]).map(|(x, y)| x * y).sum();
                    }
                }
            }
        }
    }

    /// `acc_a += Σ_j w[a·stride + j] · v_j` for the `nq` accumulators (`d` floats each, packed) and
    /// the `n` rows of `v`
    #[allow(clippy::too_many_arguments)]
    pub fn acc_tile(&self, acc: &mut [f32], nq: usize, w: &[f32], stride: usize, v: &[f32], n: usize, d: usize) {
        assert!(acc.len() >= nq * d && v.len() >= n * d && n <= stride && w.len() >= (nq.max(1) - 1) * stride + n, "vecf::acc_tile: short slices");
        match self.tiles {
            // SAFETY: the table's set runs on this CPU; the lengths are checked above
            Some((_, tile)) => unsafe { tile(acc, nq, w, stride, v, n, d) },
            None => {
                for a in 0..nq {
                    for j in 0..n {
                        let s = w[a * stride + j];
                        acc[a * d..(a + 1) * d].iter_mut().zip(&v[j * d..(j + 1) * d]).for_each(|(x, y)| *x += s * y);
                    }
                }
            }
        }
    }
}

impl VecF {
    /// ROPE's normal mode, in place: pair `(y[2k], y[2k+1])` turned by `(cs[2k], cs[2k+1])` =
    /// (cos, sin) of its angle. Every set rounds as the scalar form (a product each, then the
    /// sum or difference: no fused multiply-add), so the results are the same bits.
    pub fn rope_pairs(&self, y: &mut [f32], cs: &[f32]) {
        assert!(y.len() == cs.len() && y.len().is_multiple_of(2), "vecf::rope_pairs: {} values, {} cos/sin", y.len(), cs.len());
        // SAFETY: the table's set runs on this CPU; the lengths are checked above
        unsafe { (self.rope_pairs)(y, cs) }
    }

    /// ROPE's NeoX layout, in place: `(y[k], y[h + k])` turned by `(cos[k], sin[k])`, `h` = half of
    /// `y`. Same bits in every set (as [`VecF::rope_pairs`]).
    pub fn rope_halves(&self, y: &mut [f32], cos: &[f32], sin: &[f32]) {
        assert!(y.len() == 2 * cos.len() && sin.len() == cos.len(), "vecf::rope_halves: {} values, {} cos, {} sin", y.len(), cos.len(), sin.len());
        let (a, b) = y.split_at_mut(cos.len());
        // SAFETY: as in rope_pairs
        unsafe { (self.rope_halves)(a, b, cos, sin) }
    }
}

impl VecF {
    /// `Σ x²` for RMS_NORM: each square rounded to f32, summed in f64 (upstream's `ggml_float`
    /// sum) in 8 interleaved partial sums added in a fixed order, so every set gives the same
    /// bits (the order differs from upstream's one running sum only in f64 rounding).
    pub fn sum_sq(&self, x: &[f32]) -> f64 {
        // SAFETY: the table's set runs on this CPU
        unsafe { (self.sum_sq)(x) }
    }

    /// `y[i] = x[i] · s`, or `(x[i] · s) · w[i]` with `w` (RMS_NORM, and RMS_NORM fused with
    /// the MUL by its weight: the two roundings of the two ops, so the same bits as both)
    pub fn scale_mul_into(&self, y: &mut [f32], x: &[f32], s: f32, w: Option<&[f32]>) {
        assert!(y.len() == x.len() && w.is_none_or(|w| w.len() == y.len()), "vecf::scale_mul_into: lengths differ");
        // SAFETY: the table's set runs on this CPU; the lengths are checked above
        unsafe { (self.scale_mul_into)(y, x, s, w) }
    }
}

/// `y = exp(y - m)` through libm, summed in f64
fn exp_sub_sum_libm(y: &mut [f32], m: f32) -> f64 {
    let mut sum = 0f64;
    for v in y.iter_mut() {
        *v = (*v - m).exp();
        sum += *v as f64;
    }
    sum
}

#[inline(always)]
fn sum_sq_scalar(x: &[f32]) -> f64 {
    let mut acc = [0f64; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for j in 0..8 {
            acc[j] += (c[j] * c[j]) as f64;
        }
    }
    let mut sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for v in it.remainder() {
        sum += (v * v) as f64;
    }
    sum
}

#[inline(always)]
fn scale_mul_into_scalar(y: &mut [f32], x: &[f32], s: f32, w: Option<&[f32]>) {
    match w {
        Some(w) => y.iter_mut().zip(x).zip(w).for_each(|((a, b), c)| *a = (b * s) * c),
        None => y.iter_mut().zip(x).for_each(|(a, b)| *a = b * s),
    }
}

/// the scalar ROPE pair rotation (also the vector kernels' tail)
#[inline(always)]
fn rope_pairs_scalar(y: &mut [f32], cs: &[f32]) {
    for (p, c) in y.chunks_exact_mut(2).zip(cs.chunks_exact(2)) {
        (p[0], p[1]) = rotate_pair(p[0], p[1], c[0], c[1]);
    }
}

/// one ROPE pair turned by (cos, sin) as upstream's x86 builds compute it: GCC contracts
/// `x0*cos - x1*sin` and `x0*sin + x1*cos` into fused multiply-adds wherever the target has FMA
/// (its default `-ffp-contract=fast`; every x86 variant from AVX2 up), so a pair is
/// `fma(x0, cos, -(x1*sin))`, `fma(x0, sin, x1*cos)`: one rounding fewer than the plain form.
/// The one definition: the scalar forms here, the vector kernels (their lanes round the same) and
/// ROPE's element-by-element rows (`ops/rope.rs`) all turn pairs so.
#[inline(always)]
pub(crate) fn rotate_pair(x0: f32, x1: f32, cos: f32, sin: f32) -> (f32, f32) {
    (x0.mul_add(cos, -(x1 * sin)), x0.mul_add(sin, x1 * cos))
}

/// the scalar NeoX rotation; plain element-wise arithmetic the compiler vectorises inside the
/// `target_feature` wrappers below
#[inline(always)]
fn rope_halves_scalar(a: &mut [f32], b: &mut [f32], cos: &[f32], sin: &[f32]) {
    for (((x0, x1), c), s) in a.iter_mut().zip(b.iter_mut()).zip(cos).zip(sin) {
        (*x0, *x1) = rotate_pair(*x0, *x1, *c, *s);
    }
}

/// the scalar form of the vector exp (the tail lanes of the vector kernels)
#[inline]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn exp_poly(x: f32) -> f32 {
    let x = x.clamp(-88.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = P[0];
    for c in &P[1..] {
        p = p * r + c;
    }
    let y = p * r * r + r + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const LN2_HI: f32 = 0.693_359_4;
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const LN2_LO: f32 = -2.121_944_4e-4;
/// exp(r) ≈ 1 + r + r²·(P0·r⁵ + … + P5)
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const P: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5];

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{LN2_HI, LN2_LO, P, exp_poly, rope_halves_scalar, rope_pairs_scalar, scale_mul_into_scalar, sum_sq_scalar};
    use half::f16;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn sum_sq_256(x: &[f32]) -> f64 {
        sum_sq_scalar(x)
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn sum_sq_512(x: &[f32]) -> f64 {
        sum_sq_scalar(x)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn scale_mul_into_256(y: &mut [f32], x: &[f32], s: f32, w: Option<&[f32]>) {
        scale_mul_into_scalar(y, x, s, w)
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn scale_mul_into_512(y: &mut [f32], x: &[f32], s: f32, w: Option<&[f32]>) {
        scale_mul_into_scalar(y, x, s, w)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn rope_pairs_256(y: &mut [f32], cs: &[f32]) {
        let n = y.len() - y.len() % 8;
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= n <= y.len() == cs.len() (the caller checks)
            unsafe {
                let py = y.as_mut_ptr().add(i);
                let x = _mm256_loadu_ps(py);
                let c = _mm256_loadu_ps(cs.as_ptr().add(i));
                // cos in both lanes of a pair, sin in both, the pair's elements swapped
                // even lanes fma(x0, cos, -(x1·sin)), odd lanes fma(x0, sin, x1·cos): x0 in both
                // lanes of a pair times (cos, sin), minus / plus x1 in both times (sin, cos)
                let (x0, x1) = (_mm256_moveldup_ps(x), _mm256_movehdup_ps(x));
                let t = _mm256_mul_ps(x1, _mm256_permute_ps::<0b1011_0001>(c));
                _mm256_storeu_ps(py, _mm256_fmaddsub_ps(x0, c, t));
            }
        }
        rope_pairs_scalar(&mut y[n..], &cs[n..]);
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn rope_pairs_512(y: &mut [f32], cs: &[f32]) {
        let n = y.len() - y.len() % 16;
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= y.len() == cs.len() (the caller checks)
            unsafe {
                let py = y.as_mut_ptr().add(i);
                let x = _mm512_loadu_ps(py);
                let c = _mm512_loadu_ps(cs.as_ptr().add(i));
                // as in rope_pairs_256
                let (x0, x1) = (_mm512_moveldup_ps(x), _mm512_movehdup_ps(x));
                let t = _mm512_mul_ps(x1, _mm512_permute_ps::<0b1011_0001>(c));
                _mm512_storeu_ps(py, _mm512_fmaddsub_ps(x0, c, t));
            }
        }
        rope_pairs_scalar(&mut y[n..], &cs[n..]);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn rope_halves_256(a: &mut [f32], b: &mut [f32], cos: &[f32], sin: &[f32]) {
        rope_halves_scalar(a, b, cos, sin)
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn rope_halves_512(a: &mut [f32], b: &mut [f32], cos: &[f32], sin: &[f32]) {
        rope_halves_scalar(a, b, cos, sin)
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn mad_f32_512(y: &mut [f32], x: &[f32], s: f32) {
        let n = y.len() - y.len() % 16;
        let sv = _mm512_set1_ps(s);
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= both lengths (asserted equal by the caller)
            unsafe {
                let py = y.as_mut_ptr().add(i);
                _mm512_storeu_ps(py, _mm512_fmadd_ps(_mm512_loadu_ps(x.as_ptr().add(i)), sv, _mm512_loadu_ps(py)));
            }
        }
        y[n..].iter_mut().zip(&x[n..]).for_each(|(a, b)| *a += b * s);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn mad_f32_256(y: &mut [f32], x: &[f32], s: f32) {
        let n = y.len() - y.len() % 8;
        let sv = _mm256_set1_ps(s);
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= n <= both lengths
            unsafe {
                let py = y.as_mut_ptr().add(i);
                _mm256_storeu_ps(py, _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr().add(i)), sv, _mm256_loadu_ps(py)));
            }
        }
        y[n..].iter_mut().zip(&x[n..]).for_each(|(a, b)| *a += b * s);
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn mad_f16_512(y: &mut [f32], x: &[f16], s: f32) {
        let n = y.len() - y.len() % 16;
        let sv = _mm512_set1_ps(s);
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= both lengths; 16 f16 are the 32 bytes loaded
            unsafe {
                let py = y.as_mut_ptr().add(i);
                let xv = _mm512_cvtph_ps(_mm256_loadu_si256(x.as_ptr().add(i) as *const __m256i));
                _mm512_storeu_ps(py, _mm512_fmadd_ps(xv, sv, _mm512_loadu_ps(py)));
            }
        }
        y[n..].iter_mut().zip(&x[n..]).for_each(|(a, b)| *a += b.to_f32() * s);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn mad_f16_256(y: &mut [f32], x: &[f16], s: f32) {
        let n = y.len() - y.len() % 8;
        let sv = _mm256_set1_ps(s);
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= n <= both lengths; 8 f16 are the 16 bytes loaded
            unsafe {
                let py = y.as_mut_ptr().add(i);
                let xv = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(i) as *const __m128i));
                _mm256_storeu_ps(py, _mm256_fmadd_ps(xv, sv, _mm256_loadu_ps(py)));
            }
        }
        y[n..].iter_mut().zip(&x[n..]).for_each(|(a, b)| *a += b.to_f32() * s);
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn scale_512(y: &mut [f32], s: f32) {
        let n = y.len() - y.len() % 16;
        let sv = _mm512_set1_ps(s);
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= y.len()
            unsafe {
                let py = y.as_mut_ptr().add(i);
                _mm512_storeu_ps(py, _mm512_mul_ps(_mm512_loadu_ps(py), sv));
            }
        }
        y[n..].iter_mut().for_each(|a| *a *= s);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn scale_256(y: &mut [f32], s: f32) {
        let n = y.len() - y.len() % 8;
        let sv = _mm256_set1_ps(s);
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= n <= y.len()
            unsafe {
                let py = y.as_mut_ptr().add(i);
                _mm256_storeu_ps(py, _mm256_mul_ps(_mm256_loadu_ps(py), sv));
            }
        }
        y[n..].iter_mut().for_each(|a| *a *= s);
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn max_512(y: &[f32]) -> f32 {
        let n = y.len() - y.len() % 16;
        let mut m = _mm512_set1_ps(f32::NEG_INFINITY);
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= y.len()
            m = _mm512_max_ps(m, unsafe { _mm512_loadu_ps(y.as_ptr().add(i)) });
        }
        y[n..].iter().cloned().fold(_mm512_reduce_max_ps(m), f32::max)
    }

    /// the mask of the first `r` (1..=16) lanes
    #[inline]
    fn lanes(r: usize) -> __mmask16 {
        if r >= 16 { 0xffff } else { ((1u32 << r) - 1) as __mmask16 }
    }

    /// four queries at a time against each K row: one load of K feeds four FMAs; K row by K row
    /// outside (a row stays in L1 while every query meets it, the queries are few)
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn score_tile_512(q: &[f32], nq: usize, k: &[f32], n: usize, d: usize, out: &mut [f32], stride: usize) {
        let (qp, kp) = (q.as_ptr(), k.as_ptr());
        for j in 0..n {
            let mut a = 0;
            while a < nq {
                let m = (nq - a).min(4);
                let mut acc = [_mm512_setzero_ps(); 4];
                let mut i = 0;
                while i < d {
                    let mk = lanes(d - i);
                    // SAFETY: lanes past d are masked off; rows a..a+m of q and row j of k hold d floats (caller's checks)
                    unsafe {
                        let kv = _mm512_maskz_loadu_ps(mk, kp.add(j * d + i));
                        for (t, acc_t) in acc.iter_mut().enumerate().take(m) {
                            *acc_t = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, qp.add((a + t) * d + i)), kv, *acc_t);
                        }
                    }
                    i += 16;
                }
                for (t, acc_t) in acc.iter().enumerate().take(m) {
                    out[(a + t) * stride + j] = _mm512_reduce_add_ps(*acc_t);
                }
                a += 4;
            }
        }
    }

    /// strips of 64 floats of every accumulator held in four registers over all the V rows, then
    /// the remaining vectors one at a time (the last one masked); strip outside, so the strip of
    /// the V tile stays in L1 while each accumulator takes it in
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn acc_tile_512(acc: &mut [f32], nq: usize, w: &[f32], stride: usize, v: &[f32], n: usize, d: usize) {
        let vp = v.as_ptr();
        let ap0 = acc.as_mut_ptr();
        let mut i = 0;
        while i + 64 <= d {
            for a in 0..nq {
                let wa = &w[a * stride..a * stride + n];
                // SAFETY: floats i..i+64 of accumulator a and of every V row (i + 64 <= d, lengths checked by the caller)
                unsafe {
                    let ap = ap0.add(a * d);
                    let mut r = [_mm512_loadu_ps(ap.add(i)), _mm512_loadu_ps(ap.add(i + 16)), _mm512_loadu_ps(ap.add(i + 32)), _mm512_loadu_ps(ap.add(i + 48))];
                    for (j, &s) in wa.iter().enumerate() {
                        let sv = _mm512_set1_ps(s);
                        let row = vp.add(j * d + i);
                        for (t, r_t) in r.iter_mut().enumerate() {
                            *r_t = _mm512_fmadd_ps(_mm512_loadu_ps(row.add(16 * t)), sv, *r_t);
                        }
                    }
                    for (t, r_t) in r.iter().enumerate() {
                        _mm512_storeu_ps(ap.add(i + 16 * t), *r_t);
                    }
                }
            }
            i += 64;
        }
        while i < d {
            let mk = lanes(d - i);
            for a in 0..nq {
                let wa = &w[a * stride..a * stride + n];
                // SAFETY: lanes past d are masked off
                unsafe {
                    let ap = ap0.add(a * d);
                    let mut r = _mm512_maskz_loadu_ps(mk, ap.add(i));
                    for (j, &s) in wa.iter().enumerate() {
                        r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, vp.add(j * d + i)), _mm512_set1_ps(s), r);
                    }
                    _mm512_mask_storeu_ps(ap.add(i), mk, r);
                }
            }
            i += 16;
        }
    }

    /// exp of 16 lanes, as `exp_poly`
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    fn exp16(x: __m512) -> __m512 {
        let x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-88.0)), _mm512_set1_ps(88.0));
        let ni = _mm512_cvtps_epi32(_mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E)));
        let n = _mm512_cvtepi32_ps(ni);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x));
        let mut p = _mm512_set1_ps(P[0]);
        for c in &P[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
        }
        let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0));
        let pow2 = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(ni, _mm512_set1_epi32(127))));
        _mm512_mul_ps(y, pow2)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn exp8(x: __m256) -> __m256 {
        let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.0)), _mm256_set1_ps(88.0));
        let ni = _mm256_cvtps_epi32(_mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)));
        let n = _mm256_cvtepi32_ps(ni);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x));
        let mut p = _mm256_set1_ps(P[0]);
        for c in &P[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
        }
        let y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0));
        let pow2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(ni, _mm256_set1_epi32(127))));
        _mm256_mul_ps(y, pow2)
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn exp_sub_sum_512(y: &mut [f32], m: f32) -> f64 {
        let n = y.len() - y.len() % 16;
        let mv = _mm512_set1_ps(m);
        // two f64 accumulators of 8 lanes: the sum is f64 as the scalar form's
        let (mut s0, mut s1) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= y.len()
            unsafe {
                let py = y.as_mut_ptr().add(i);
                let e = exp16(_mm512_sub_ps(_mm512_loadu_ps(py), mv));
                _mm512_storeu_ps(py, e);
                s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
                s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(e)))));
            }
        }
        let mut sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
        for v in y[n..].iter_mut() {
            *v = exp_poly(*v - m);
            sum += *v as f64;
        }
        sum
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn exp_sub_sum_256(y: &mut [f32], m: f32) -> f64 {
        let n = y.len() - y.len() % 8;
        let mv = _mm256_set1_ps(m);
        let (mut s0, mut s1) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= n <= y.len()
            unsafe {
                let py = y.as_mut_ptr().add(i);
                let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(py), mv));
                _mm256_storeu_ps(py, e);
                s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
                s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(e)));
            }
        }
        let mut lanes = [0f64; 4];
        // SAFETY: 4 f64 into a 4-element array
        unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(s0, s1)) };
        let mut sum: f64 = lanes.iter().sum();
        for v in y[n..].iter_mut() {
            *v = exp_poly(*v - m);
            sum += *v as f64;
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::XorShift;

    use crate::kernels::{self, Kernels};

    fn levels() -> Vec<&'static Kernels> {
        kernels::available()
    }

    #[test]
    fn the_vector_exp_is_within_a_few_ulp_of_libm() {
        // the scalar form of the polynomial, over the range softmax feeds it and past it
        let mut worst = 0f32;
        let mut x = -90.0f32;
        while x <= 10.0 {
            let (got, want) = (exp_poly(x), x.exp());
            if want > f32::MIN_POSITIVE {
                worst = worst.max(((got - want) / want).abs());
            } else {
                assert!(got <= f32::MIN_POSITIVE, "exp({x}) = {got}, libm {want}");
            }
            x += 0.001_37;
        }
        assert!(worst < 3.0 * f32::EPSILON, "worst relative error {worst}");
        assert_eq!(exp_poly(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_poly(0.0), 1.0);
    }

    #[test]
    fn every_level_matches_the_scalar_reference() {
        let mut rng = XorShift::new(77);
        let scalar = VecF::SCALAR;
        for len in [0usize, 1, 7, 8, 15, 16, 17, 33, 64, 100, 257] {
            let x: Vec<f32> = (0..len).map(|_| rng.f32_in(-3.0, 3.0)).collect();
            let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
            let mut y0: Vec<f32> = (0..len).map(|_| rng.f32_in(-30.0, 0.0)).collect();
            if len > 3 {
                y0[2] = f32::NEG_INFINITY;
            }
            for k in levels() {
                let (mut a, mut b) = (x.clone(), x.clone());
                k.vec.mad_f32(&mut a, &y0.iter().map(|v| v.max(-5.0)).collect::<Vec<_>>(), 0.37);
                scalar.mad_f32(&mut b, &y0.iter().map(|v| v.max(-5.0)).collect::<Vec<_>>(), 0.37);
                close(&a, &b, 1e-6, 1.0, "mad_f32", k);
                let (mut a, mut b) = (x.clone(), x.clone());
                k.vec.mad_f16(&mut a, &xh, -1.5);
                scalar.mad_f16(&mut b, &xh, -1.5);
                close(&a, &b, 1e-6, 1.0, "mad_f16", k);
                let (mut a, mut b) = (x.clone(), x.clone());
                k.vec.scale(&mut a, 0.3);
                scalar.scale(&mut b, 0.3);
                close(&a, &b, 0.0, 0.0, "scale", k);
                assert_eq!(k.vec.max(&y0), scalar.max(&y0), "max at {}", k.set.name());
                let (mut a, mut b) = (y0.clone(), y0.clone());
                let (sa, sb) = (k.vec.exp_sub_sum(&mut a, -1.0), scalar.exp_sub_sum(&mut b, -1.0));
                close(&a, &b, 4.0 * f32::EPSILON, 0.0, "exp_sub_sum", k);
                assert!((sa - sb).abs() <= 1e-6 * sb.abs().max(1e-30), "exp sum {sa} vs {sb} at {}", k.set.name());
            }
        }
    }

    #[test]
    fn the_rope_rotations_give_the_scalar_bits_at_every_level() {
        let mut rng = XorShift::new(79);
        let scalar = VecF::SCALAR;
        for h in [1usize, 3, 4, 8, 9, 16, 32, 40, 64, 67] {
            let x: Vec<f32> = (0..2 * h).map(|_| rng.f32_in(-3.0, 3.0)).collect();
            let cs: Vec<f32> = (0..2 * h).map(|_| rng.f32_in(-1.0, 1.0)).collect();
            let (cos, sin) = (&cs[..h], &cs[h..]);
            let (mut want_p, mut want_h) = (x.clone(), x.clone());
            scalar.rope_pairs(&mut want_p, &cs);
            scalar.rope_halves(&mut want_h, cos, sin);
            // the definition: pair k of the normal layout is (2k, 2k+1), of NeoX (k, h+k), each
            // turned in upstream's contracted form fma(x0, cos, -(x1 sin)), fma(x0, sin, x1 cos)
            for k in 0..h {
                assert_eq!(want_p[2 * k], x[2 * k].mul_add(cs[2 * k], -(x[2 * k + 1] * cs[2 * k + 1])));
                assert_eq!(want_p[2 * k + 1], x[2 * k].mul_add(cs[2 * k + 1], x[2 * k + 1] * cs[2 * k]));
                assert_eq!(want_h[k], x[k].mul_add(cos[k], -(x[h + k] * sin[k])));
                assert_eq!(want_h[h + k], x[k].mul_add(sin[k], x[h + k] * cos[k]));
            }
            for k in levels() {
                let (mut a, mut b) = (x.clone(), x.clone());
                k.vec.rope_pairs(&mut a, &cs);
                k.vec.rope_halves(&mut b, cos, sin);
                assert_eq!(a, want_p, "rope_pairs h {h} at {}", k.set.name());
                assert_eq!(b, want_h, "rope_halves h {h} at {}", k.set.name());
            }
        }
    }

    #[test]
    fn the_rms_norm_kernels_give_the_scalar_bits_at_every_level() {
        let mut rng = XorShift::new(80);
        let scalar = VecF::SCALAR;
        for len in [0usize, 1, 5, 8, 15, 16, 17, 64, 100, 512, 1000] {
            let x: Vec<f32> = (0..len).map(|_| rng.f32_in(-3.0, 3.0)).collect();
            let w: Vec<f32> = (0..len).map(|_| rng.f32_in(-2.0, 2.0)).collect();
            let want = scalar.sum_sq(&x);
            // the definition, in f64 over the f32 squares
            let exact: f64 = x.iter().map(|v| (v * v) as f64).sum();
            assert!((want - exact).abs() <= 1e-12 * exact.max(1.0), "sum_sq {want} vs {exact}");
            let (mut ys, mut yw) = (vec![0f32; len], vec![0f32; len]);
            scalar.scale_mul_into(&mut ys, &x, 0.7, None);
            scalar.scale_mul_into(&mut yw, &x, 0.7, Some(&w));
            for i in 0..len {
                assert_eq!(ys[i], x[i] * 0.7);
                assert_eq!(yw[i], ys[i] * w[i], "the fused form rounds as the two ops");
            }
            for k in levels() {
                assert_eq!(k.vec.sum_sq(&x).to_bits(), want.to_bits(), "sum_sq len {len} at {}", k.set.name());
                let (mut a, mut b) = (vec![0f32; len], vec![0f32; len]);
                k.vec.scale_mul_into(&mut a, &x, 0.7, None);
                k.vec.scale_mul_into(&mut b, &x, 0.7, Some(&w));
                assert_eq!((a == ys, b == yw), (true, true), "scale_mul_into len {len} at {}", k.set.name());
            }
        }
    }

    /// |a - b| within `rel` of max(|b|, floor) (a floor for sums that may cancel)
    #[test]
    fn the_tile_kernels_match_the_scalar_reference() {
        let mut rng = XorShift::new(78);
        let scalar = VecF::SCALAR;
        for (nq, n, d) in [(1usize, 1usize, 16usize), (3, 5, 72), (8, 64, 64), (16, 33, 130), (5, 7, 576), (2, 3, 8)] {
            let stride = n + 3;
            let q: Vec<f32> = (0..nq * d).map(|_| rng.f32_in(-1.0, 1.0)).collect();
            let kv: Vec<f32> = (0..n * d).map(|_| rng.f32_in(-1.0, 1.0)).collect();
            let w: Vec<f32> = (0..nq * stride).map(|_| rng.f32_in(0.0, 1.0)).collect();
            let acc0: Vec<f32> = (0..nq * d).map(|_| rng.f32_in(-1.0, 1.0)).collect();
            for k in levels() {
                let (mut a, mut b) = (vec![0f32; nq * stride], vec![0f32; nq * stride]);
                k.vec.score_tile(&q, nq, &kv, n, d, &mut a, stride);
                scalar.score_tile(&q, nq, &kv, n, d, &mut b, stride);
                close(&a, &b, 1e-5, 1.0, "score_tile", k);
                let (mut a, mut b) = (acc0.clone(), acc0.clone());
                k.vec.acc_tile(&mut a, nq, &w, stride, &kv, n, d);
                scalar.acc_tile(&mut b, nq, &w, stride, &kv, n, d);
                close(&a, &b, 1e-5, 1.0, "acc_tile", k);
            }
        }
    }

    fn close(a: &[f32], b: &[f32], rel: f32, floor: f32, what: &str, k: &Kernels) {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let tol = rel * y.abs().max(floor) + 1e-37;
            assert!((x - y).abs() <= tol, "{what} at {}: [{i}] {x} vs {y}", k.set.name());
        }
    }
}
