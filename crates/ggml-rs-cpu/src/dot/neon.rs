//! The aarch64 kernel set's dot products (`Level::Neon`, `Level::NeonDot`) and the orders they
//! sum in: upstream's aarch64 build (`arch/arm/quants.c`, `vec.cpp`; GCC, `-std=gnu11`, no SVE,
//! no FP16 vector arithmetic) bit for bit, read off its object code:
//!
//! - Q8_0 · Q8_0 and Q4_0 · Q8_0: the blocks in pairs into two accumulators of 4 lanes, the even
//!   block into the first; a lane takes the exact integer sum of its products (which products
//!   is the form's: `lane_of`) times `f32(dx) · f32(dy)`, multiplied and added with two
//!   roundings (GCC's `vmlaq_n_f32` is `fmul` + `fadd`); each accumulator summed as `faddp`
//!   twice, the two added; an odd last block in scalar code, which GCC fuses (`fmadd`).
//! - F32 · F32 and F16 · F16 (F16 widened, as a build without FP16 vector arithmetic does): 4
//!   accumulators of 4 lanes with `fmla`, over chunks of 16; reduced (0+2, 1+3, then 0+1,
//!   then `faddp` twice) into an f64 sum, which takes the leftover products one by one.
//!
//! - Q4_K · Q8_K and Q6_K · Q8_K: one f32 sum, per super-block two fused steps on its exact
//!   integers (Q4_K: `sum − f32(Σ min·bsums) · dmin` then `+ f32(Σ scale·dot) · d`, `d` and
//!   `dmin` the products with `y.d`; Q6_K: `+ (f32(dx) · dy) · f32(Σ scale·(q−32)·q8)`). The
//!   integers are exact in any grouping, so one portable definition is also the kernel: LLVM
//!   vectorizes it with NEON (baseline on aarch64), and with `sdot` in the DotProd instance.
//!
//! The integer lanes differ between the two forms: with DotProd (`sdot`) lane `l` of a 16-byte
//! half sums products `4l..4l+4`; without it upstream's `ggml_vdotq_s32` (`smull` + `saddlp`)
//! sums products `2l, 2l+1, 8+2l, 9+2l`. So the `neon` and `dotprod` sets give the bits of
//! upstream built without and with `+dotprod` respectively.

use half::f16;

use crate::block::{BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8K};

/// the 16-byte positions whose products lane `l` of a form's 4-lane integer dot sums
pub(crate) fn lane_of(dot: bool, l: usize) -> [usize; 4] {
    if dot { [4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3] } else { [2 * l, 2 * l + 1, 8 + 2 * l, 9 + 2 * l] }
}

/// `vaddvq_f32` (two pairwise adds)
pub fn hsum4(v: [f32; 4]) -> f32 {
    (v[0] + v[1]) + (v[2] + v[3])
}

/// the pairs-of-blocks loop shared by Q8_0 and Q4_0: `w(block, i)` the weight at position i
fn q_pairs<B>(x: &[B], y: &[BlockQ8_0], dot: bool, d: impl Fn(&B) -> f32, w: impl Fn(&B, usize) -> i32, tail: impl Fn(f32, &B, &BlockQ8_0) -> f32) -> f32 {
    let nb = x.len().min(y.len());
    let mut acc = [[0f32; 4]; 2];
    for ib in 0..nb - nb % 2 {
        let (a, b) = (&x[ib], &y[ib]);
        let dd = d(a) * b.d.to_f32();
        for (l, lane) in acc[ib % 2].iter_mut().enumerate() {
            let s: i32 = lane_of(dot, l).iter().map(|&i| w(a, i) * b.qs[i] as i32 + w(a, 16 + i) * b.qs[16 + i] as i32).sum();
            *lane += s as f32 * dd;
        }
    }
    let mut sumf = hsum4(acc[0]) + hsum4(acc[1]);
    if nb % 2 == 1 {
        sumf = tail(sumf, &x[nb - 1], &y[nb - 1]);
    }
    sumf
}

/// Q8_0's odd last block, added to `s` in upstream's scalar code: `sumf += sumi * (dx * dy)`,
/// fused (the definition's and the kernels')
fn q8_0_tail(s: f32, a: &BlockQ8_0, b: &BlockQ8_0) -> f32 {
    let sumi: i32 = a.qs.iter().zip(&b.qs).map(|(&p, &q)| p as i32 * q as i32).sum();
    (sumi as f32).mul_add(a.d.to_f32() * b.d.to_f32(), s)
}

/// Q4_0's odd last block: `sumf += sumi * dx * dy`, the second product fused
fn q4_0_tail(s: f32, a: &BlockQ4_0, b: &BlockQ8_0) -> f32 {
    let sumi: i32 = (0..32).map(|i| q4_0_weight(a, i) * b.qs[i] as i32).sum();
    (sumi as f32 * a.d.to_f32()).mul_add(b.d.to_f32(), s)
}

/// weight `i` of a Q4_0 block (`n − 8`: low nibbles first, then high)
fn q4_0_weight(a: &BlockQ4_0, i: usize) -> i32 {
    if i < 16 { (a.qs[i] & 0x0f) as i32 - 8 } else { (a.qs[i - 16] >> 4) as i32 - 8 }
}

/// Q8_0 · Q8_0 in upstream's aarch64 order (`dot`: built with DotProd)
pub fn q8_0_q8_0_arm(dot: bool, x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    q_pairs(x, y, dot, |a| a.d.to_f32(), |a, i| a.qs[i] as i32, q8_0_tail)
}

/// Q4_0 · Q8_0 in upstream's aarch64 order (`dot`: built with DotProd)
pub fn q4_0_q8_0_arm(dot: bool, x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    q_pairs(x, y, dot, |a| a.d.to_f32(), q4_0_weight, q4_0_tail)
}

/// the float dot's order over values widened to f32 by `v`
fn float_arm<T: Copy>(x: &[T], y: &[T], v: impl Fn(T) -> f32) -> f32 {
    let n = x.len().min(y.len());
    let np = n & !15;
    let mut acc = [[0f32; 4]; 4];
    for i in (0..np).step_by(16) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (l, lane) in a.iter_mut().enumerate() {
                let p = i + 4 * j + l;
                *lane = v(x[p]).mul_add(v(y[p]), *lane);
            }
        }
    }
    let r0: [f32; 4] = std::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
    let mut sum = f64::from(hsum4(r0));
    for p in np..n {
        sum += f64::from(v(x[p]) * v(y[p]));
    }
    sum as f32
}

/// F32 · F32 in upstream's aarch64 order
pub fn f32_arm(x: &[f32], y: &[f32]) -> f32 {
    float_arm(x, y, |v| v)
}

/// F16 · F16 in upstream's aarch64 order (no FP16 vector arithmetic: widened to f32)
pub fn f16_arm(x: &[f16], y: &[f16]) -> f32 {
    float_arm(x, y, f16::to_f32)
}

/// a Q4_K super-block's exact integers: `Σ scale · dot` of its 8 sub-blocks and `Σ min · (bsums
/// of the sub-block)`
#[inline(always)]
fn q4_k_integers(a: &BlockQ4K, b: &BlockQ8K) -> (i32, i32) {
    let (mut sumi, mut summ) = (0i32, 0i32);
    for g in 0..4 {
        let (s0, m0) = crate::quants::get_scale_min_k4(2 * g, &a.scales);
        let (s1, m1) = crate::quants::get_scale_min_k4(2 * g + 1, &a.scales);
        let (mut lo, mut hi) = (0i32, 0i32);
        let (q4, q8) = (&a.qs[32 * g..32 * g + 32], &b.qs[64 * g..64 * g + 64]);
        for l in 0..32 {
            lo += (q4[l] & 0xf) as i32 * q8[l] as i32;
            hi += (q4[l] >> 4) as i32 * q8[32 + l] as i32;
        }
        sumi += s0 as i32 * lo + s1 as i32 * hi;
        let bs = |j: usize| b.bsums[2 * j] as i32 + b.bsums[2 * j + 1] as i32;
        summ += m0 as i32 * bs(2 * g) + m1 as i32 * bs(2 * g + 1);
    }
    (sumi, summ)
}

/// Q4_K · Q8_K in upstream's aarch64 order
#[inline(always)]
pub fn q4_k_q8_k_arm(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0f32;
    for (a, b) in x.iter().zip(y) {
        let (sumi, summ) = q4_k_integers(a, b);
        let (d, dmin) = (b.d * a.d.to_f32(), b.d * a.dmin.to_f32());
        // `sumf -= dmin * summ` (fmsub) and `sumf += d * sumi` (fmadd)
        sum = (-(summ as f32)).mul_add(dmin, sum);
        sum = (sumi as f32).mul_add(d, sum);
    }
    sum
}

/// a Q6_K super-block's exact `Σ scale · (q6 − 32) · q8`
#[inline(always)]
fn q6_k_integer(a: &BlockQ6K, b: &BlockQ8K) -> i32 {
    let mut isum = 0i32;
    // per 128 values: ql bytes 0..64, qh bytes 0..32; value e of the half is ql's nibble and
    // two bits of qh (upstream's layout, `crate::quants::q6_get`)
    for h in 0..2 {
        let (ql, qh, q8) = (&a.ql[64 * h..64 * h + 64], &a.qh[32 * h..32 * h + 32], &b.qs[128 * h..128 * h + 128]);
        let sc = &a.scales[8 * h..8 * h + 8];
        let mut part = [0i32; 8];
        for l in 0..32 {
            let q1 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            let is = l / 16;
            part[is] += q1 * q8[l] as i32;
            part[is + 2] += q2 * q8[l + 32] as i32;
            part[is + 4] += q3 * q8[l + 64] as i32;
            part[is + 6] += q4 * q8[l + 96] as i32;
        }
        for (p, &s) in part.iter().zip(sc) {
            isum += s as i32 * p;
        }
    }
    isum
}

/// Q6_K · Q8_K in upstream's aarch64 order
#[inline(always)]
pub fn q6_k_q8_k_arm(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0f32;
    for (a, b) in x.iter().zip(y) {
        sum = (a.d.to_f32() * b.d).mul_add(q6_k_integer(a, b) as f32, sum);
    }
    sum
}

#[cfg(target_arch = "aarch64")]
pub(crate) mod kernels {
    use std::arch::aarch64::*;
    use std::arch::asm;

    use half::f16;

    use crate::block::{BlockQ4_0, BlockQ8_0};

    /// `sdot`: `acc` plus the 4-product sums of `a · b` (lane l: bytes 4l..4l+4). Through
    /// `asm!`, as the intrinsic is not stable Rust yet.
    ///
    /// # Safety
    /// the CPU has DotProd
    #[inline]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let mut r = acc;
        // SAFETY: a register-only instruction the caller's CPU has
        unsafe { asm!("sdot {r:v}.4s, {a:v}.16b, {b:v}.16b", r = inout(vreg) r, a = in(vreg) a, b = in(vreg) b, options(pure, nomem, nostack)) };
        r
    }

    /// upstream's `ggml_vdotq_s32` without DotProd: `smull` of the halves, `saddlp`, added
    #[inline]
    #[target_feature(enable = "neon")]
    fn mdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let p1 = vmull_high_s8(a, b);
        vaddq_s32(acc, vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)))
    }

    /// 4 halves widened to f32 (`fcvtl`; f16 vector types are not stable Rust yet)
    #[inline]
    #[target_feature(enable = "neon")]
    fn cvt4(h: uint16x4_t) -> float32x4_t {
        let r: float32x4_t;
        // SAFETY: a register-only instruction of every AArch64 CPU
        unsafe { asm!("fcvtl {r:v}.4s, {h:v}.4h", r = out(vreg) r, h = in(vreg) h, options(pure, nomem, nostack)) };
        r
    }

    /// the pairs loop of [`super::q_pairs`] with `$lanes(block a, block b)` a block pair's
    /// 4 integer lanes and `$tail` the odd block
    macro_rules! pairs {
        ($x:ident, $y:ident, $lanes:expr, $tail:expr) => {{
            let nb = $x.len().min($y.len());
            let (mut s0, mut s1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
            let mut ib = 0;
            while ib + 1 < nb {
                let (a0, a1, b0, b1) = (&$x[ib], &$x[ib + 1], &$y[ib], &$y[ib + 1]);
                let d0 = a0.d.to_f32() * b0.d.to_f32();
                let d1 = a1.d.to_f32() * b1.d.to_f32();
                s0 = vaddq_f32(s0, vmulq_n_f32(vcvtq_f32_s32($lanes(a0, b0)), d0));
                s1 = vaddq_f32(s1, vmulq_n_f32(vcvtq_f32_s32($lanes(a1, b1)), d1));
                ib += 2;
            }
            let mut sumf = vaddvq_f32(s0) + vaddvq_f32(s1);
            if ib < nb {
                sumf = $tail(sumf, &$x[ib], &$y[ib]);
            }
            sumf
        }};
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn q8_halves(a: &BlockQ8_0) -> (int8x16_t, int8x16_t) {
        // SAFETY: 32 quants: two loads of 16
        unsafe { (vld1q_s8(a.qs.as_ptr()), vld1q_s8(a.qs.as_ptr().add(16))) }
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn q4_halves(a: &BlockQ4_0) -> (int8x16_t, int8x16_t) {
        // SAFETY: 16 bytes of nibbles
        let v = unsafe { vld1q_u8(a.qs.as_ptr()) };
        let m8 = vdupq_n_s8(8);
        let lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), m8);
        let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(v)), m8);
        (lo, hi)
    }

    #[target_feature(enable = "neon")]
    pub fn q8_0_q8_0_neon(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        pairs!(
            x,
            y,
            |a: &BlockQ8_0, b: &BlockQ8_0| {
                let ((a0, a1), (b0, b1)) = (q8_halves(a), q8_halves(b));
                vaddq_s32(mdot(vdupq_n_s32(0), a0, b0), mdot(vdupq_n_s32(0), a1, b1))
            },
            super::q8_0_tail
        )
    }

    /// # Safety
    /// the CPU has DotProd
    #[target_feature(enable = "neon,dotprod")]
    pub unsafe fn q8_0_q8_0_dotprod(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        pairs!(
            x,
            y,
            |a: &BlockQ8_0, b: &BlockQ8_0| {
                let ((a0, a1), (b0, b1)) = (q8_halves(a), q8_halves(b));
                // SAFETY: DotProd (caller)
                unsafe { vaddq_s32(sdot(vdupq_n_s32(0), a0, b0), sdot(vdupq_n_s32(0), a1, b1)) }
            },
            super::q8_0_tail
        )
    }

    #[target_feature(enable = "neon")]
    pub fn q4_0_q8_0_neon(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        pairs!(
            x,
            y,
            |a: &BlockQ4_0, b: &BlockQ8_0| {
                let ((a0, a1), (b0, b1)) = (q4_halves(a), q8_halves(b));
                mdot(mdot(vdupq_n_s32(0), a0, b0), a1, b1)
            },
            super::q4_0_tail
        )
    }

    /// # Safety
    /// the CPU has DotProd
    #[target_feature(enable = "neon,dotprod")]
    pub unsafe fn q4_0_q8_0_dotprod(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        pairs!(
            x,
            y,
            |a: &BlockQ4_0, b: &BlockQ8_0| {
                let ((a0, a1), (b0, b1)) = (q4_halves(a), q8_halves(b));
                // SAFETY: DotProd (caller)
                unsafe { sdot(sdot(vdupq_n_s32(0), a0, b0), a1, b1) }
            },
            super::q4_0_tail
        )
    }

    /// the float loop: `$load(p)` gives 4 lanes of f32 from element pointer p
    macro_rules! float_loop {
        ($x:ident, $y:ident, $load:expr, $widen:expr) => {{
            let n = $x.len().min($y.len());
            let np = n & !15;
            let mut acc = [vdupq_n_f32(0.0); 4];
            let (xp, yp) = ($x.as_ptr(), $y.as_ptr());
            let mut i = 0;
            while i < np {
                for (j, a) in acc.iter_mut().enumerate() {
                    // SAFETY: i + 4j + 4 <= np <= n elements in both rows
                    let (px, py) = unsafe { (xp.add(i + 4 * j), yp.add(i + 4 * j)) };
                    *a = vfmaq_f32(*a, $load(px), $load(py));
                }
                i += 16;
            }
            let r = vaddq_f32(vaddq_f32(acc[0], acc[2]), vaddq_f32(acc[1], acc[3]));
            let mut sum = f64::from(vaddvq_f32(r));
            for p in np..n {
                sum += f64::from($widen($x[p]) * $widen($y[p]));
            }
            sum as f32
        }};
    }

    /// the K-quant definitions compiled with DotProd (LLVM's `sdot` for the integer sums)
    ///
    /// # Safety
    /// the CPU has DotProd
    #[target_feature(enable = "neon,dotprod")]
    pub unsafe fn q4_k_q8_k_dotprod(x: &[crate::block::BlockQ4K], y: &[crate::block::BlockQ8K]) -> f32 {
        super::q4_k_q8_k_arm(x, y)
    }

    /// # Safety
    /// the CPU has DotProd
    #[target_feature(enable = "neon,dotprod")]
    pub unsafe fn q6_k_q8_k_dotprod(x: &[crate::block::BlockQ6K], y: &[crate::block::BlockQ8K]) -> f32 {
        super::q6_k_q8_k_arm(x, y)
    }

    #[target_feature(enable = "neon")]
    pub fn f32_neon(x: &[f32], y: &[f32]) -> f32 {
        // SAFETY (the loads): 4 floats at p (float_loop)
        float_loop!(x, y, |p: *const f32| unsafe { vld1q_f32(p) }, |v: f32| v)
    }

    #[target_feature(enable = "neon")]
    pub fn f16_neon(x: &[f16], y: &[f16]) -> f32 {
        // SAFETY (the loads): 4 halves at p (float_loop)
        float_loop!(x, y, |p: *const f16| cvt4(unsafe { vld1_u16(p.cast()) }), f16::to_f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{BlockQ4_0, BlockQ6K, BlockQ8_0};
    use crate::rng::XorShift;

    fn rows(r: &mut XorShift, nb: usize) -> (Vec<BlockQ4_0>, Vec<BlockQ8_0>, Vec<BlockQ8_0>) {
        let (x8, y) = crate::dot::tests::q8_0_model_rows(r, nb);
        let x4 = (0..nb).map(|_| BlockQ4_0 { d: f16::from_f32(r.f32_in(0.001, 0.05)), qs: std::array::from_fn(|_| (r.next_u64() & 0xff) as u8) }).collect();
        (x4, x8, y)
    }

    fn six(r: &mut XorShift, nb: usize) -> Vec<BlockQ6K> {
        (0..nb)
            .map(|_| {
                let mut b = BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [0; 16], d: f16::from_f32(0.25) };
                b.ql.iter_mut().chain(b.qh.iter_mut()).for_each(|v| *v = r.next_u64() as u8);
                b.scales.iter_mut().for_each(|v| *v = r.i32_in(-128, 127) as i8);
                b
            })
            .collect()
    }

    /// the two integer forms group the products differently, so their float sums differ now
    /// and then; each equals the generic sum up to float rounding
    #[test]
    fn the_arm_orders_are_the_integer_sums_and_the_forms_differ() {
        let mut r = XorShift::new(71);
        let mut differ = false;
        for nb in [0, 1, 2, 3, 8, 33] {
            for _ in 0..8 {
                let (x4, x8, y) = rows(&mut r, nb);
                for dot in [false, true] {
                    let (a, b) = (q8_0_q8_0_arm(dot, &x8, &y), crate::dot::q8_0::q8_0_q8_0_reference(&x8, &y));
                    assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "q8_0 nb={nb} dot={dot}: {a} vs {b}");
                    let (a, b) = (q4_0_q8_0_arm(dot, &x4, &y), crate::dot::q8_0::q4_0_q8_0_reference(&x4, &y));
                    assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "q4_0 nb={nb} dot={dot}: {a} vs {b}");
                }
                differ |= q8_0_q8_0_arm(false, &x8, &y).to_bits() != q8_0_q8_0_arm(true, &x8, &y).to_bits();
            }
        }
        assert!(differ, "the sdot and smull lane groupings never gave other bits");
        // the K-quant integers are the references' (scales with exact products: d, dmin, y.d
        // powers of two), and the orders within float rounding of them
        for nb in [1, 3] {
            let y = crate::dot::tests::q8_k_row(&mut r, nb);
            let x4 = crate::dot::tests::q4_k_random(&mut r, nb, 1.0);
            let x6 = six(&mut r, nb);
            for (a, b) in x6.iter().zip(&y) {
                let want: i32 = (0..256).map(|e| a.scales[e / 16] as i32 * (crate::quants::q6_get(a, e) as i32 - 32) * b.qs[e] as i32).sum();
                assert_eq!(q6_k_integer(a, b), want);
            }
            let (a, b) = (q4_k_q8_k_arm(&x4, &y), crate::dot::q4_k::q4_k_q8_k_reference(&x4, &y));
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "q4_K nb={nb}: {a} vs {b}");
            let (a, b) = (q6_k_q8_k_arm(&x6, &y), crate::dot::q6_k::q6_k_q8_k_reference(&x6, &y));
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "q6_K nb={nb}: {a} vs {b}");
        }
        // one pair of blocks: lane l of the two forms sums other products
        assert_eq!(lane_of(true, 1), [4, 5, 6, 7]);
        assert_eq!(lane_of(false, 1), [2, 3, 10, 11]);
    }

    /// the NEON kernels equal their orders bit for bit
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn neon_kernels_equal_upstreams_arm_orders_bit_for_bit() {
        {
            use crate::simd::Level;
            let mut r = XorShift::new(72);
            for level in Level::available().into_iter().filter(|l| l.is_neon()) {
                let dot = level == Level::NeonDot;
                for nb in [0, 1, 2, 3, 5, 17, 64, 127] {
                    for _ in 0..4 {
                        let (x4, x8, y) = rows(&mut r, nb);
                        let got = (crate::kernels::at(level).dot.q8_0)(&x8, &y);
                        assert_eq!(got.to_bits(), q8_0_q8_0_arm(dot, &x8, &y).to_bits(), "q8_0 {} nb={nb}", level.name());
                        let got = (crate::kernels::at(level).dot.q4_0)(&x4, &y);
                        assert_eq!(got.to_bits(), q4_0_q8_0_arm(dot, &x4, &y).to_bits(), "q4_0 {} nb={nb}", level.name());
                    }
                }
                for nb in [0, 1, 2, 5] {
                    let y = crate::dot::tests::q8_k_row(&mut r, nb);
                    let x4 = crate::dot::tests::q4_k_random(&mut r, nb, 0.01);
                    let got = (crate::kernels::at(level).dot.q4_k)(&x4, &y);
                    assert_eq!(got.to_bits(), q4_k_q8_k_arm(&x4, &y).to_bits(), "q4_K {} nb={nb}", level.name());
                    let x6 = six(&mut r, nb);
                    let got = (crate::kernels::at(level).dot.q6_k)(&x6, &y);
                    assert_eq!(got.to_bits(), q6_k_q8_k_arm(&x6, &y).to_bits(), "q6_K {} nb={nb}", level.name());
                }
                for n in [0, 1, 15, 16, 17, 100, 4096 + 7] {
                    let x: Vec<f32> = (0..n).map(|_| r.f32_in(-1.0, 1.0)).collect();
                    let y: Vec<f32> = (0..n).map(|_| r.f32_in(-1.0, 1.0)).collect();
                    assert_eq!((crate::kernels::at(level).dot.f32)(&x, &y).to_bits(), f32_arm(&x, &y).to_bits(), "f32 {} n={n}", level.name());
                    let (xh, yh): (Vec<f16>, Vec<f16>) = (x.iter().map(|&v| f16::from_f32(v)).collect(), y.iter().map(|&v| f16::from_f32(v)).collect());
                    assert_eq!((crate::kernels::at(level).dot.f16)(&xh, &yh).to_bits(), f16_arm(&xh, &yh).to_bits(), "f16 {} n={n}", level.name());
                }
            }
        }
    }
}
