//! Q1_0, Q2_0 and NVFP4 · Q8_0. A Q1_0 block spans 4 activation blocks, a Q2_0 or NVFP4 block 2;
//! the integer sums are exact in any order, the float steps follow upstream's builds:
//!
//! - definitions (upstream's `*_generic`, the scalar set): Q1_0 and Q2_0 per weight block
//!   `s += dy_k · f32(isum_k)` over its activation blocks, then `sum += d · s`; NVFP4 per
//!   sub-block of 16 `sum += (dy · d_s) · f32(isum_s)` (`d_s` half the UE4M3 scale);
//! - upstream's x86 builds (AVX2 and native AVX-512 alike, the same intrinsics): Q1_0 and NVFP4 in
//!   8 lanes of 4-product sums with fmas, then `hsum_float_8` ([`q1_0_q8_0_x86`],
//!   [`nvfp4_q8_0_x86`]); Q2_0 has no x86 form, its generic C is what runs, which the AVX2 build
//!   compiles with both steps fused ([`q2_0_q8_0_fused`]) and the native build unfused (the
//!   definition's order).
//!
//! - upstream's aarch64 build (NEON; `sdot` with DotProd, else `smull` + pairwise adds, which
//!   group the products into other lanes): Q1_0 and Q2_0 per weight block and activation block
//!   4 lanes of integer sums, `acc_l = acc_l + f32(s_l) · (d · dy)` unfused, at the end
//!   `vaddvq_f32` ([`q1_0_q8_0_neon`], [`q2_0_q8_0_neon`] and their `_dotprod` forms); NVFP4 one
//!   lane per sub-block, `acc_s = fma(f32(s_s), d_s · dy, acc_s)` ([`nvfp4_q8_0_arm`]). Its
//!   repacked Q1_0 kernels (weights in its `CPU_REPACK` buffer with DotProd / i8mm) are not
//!   followed, as for Q4_0.
//!
//! The x86 and aarch64 forms are portable Rust written in the lanes' order (no intrinsics: bit for
//! bit the same floats, slower than SIMD would be).

use super::neon::{hsum4, lane_of};
use super::q8_0::hsum8;
use crate::block::{BlockNvfp4, BlockQ1_0, BlockQ2_0, BlockQ8_0};
use crate::quants::{E2M1_DOUBLED, ue4m3_to_f32_half};

/// activation block `k` of a Q1_0 block times the signs of byte group `k` (bits `32k..32k + 32`)
#[inline(always)]
fn q1_0_isum(a: &BlockQ1_0, b: &BlockQ8_0, k: usize) -> i32 {
    (0..32).map(|e| q1_0_sign(a, k, e) * b.qs[e] as i32).sum()
}

/// the 2-bit codes of a Q2_0 block less one times activation block `k`
#[inline(always)]
fn q2_0_isum(a: &BlockQ2_0, b: &BlockQ8_0, k: usize) -> i32 {
    (0..32).map(|e| q2_0_level(a, k, e) * b.qs[e] as i32).sum()
}

/// the E2M1 values (doubled) of NVFP4 sub-block `s`, in element order
#[inline(always)]
fn nvfp4_levels(a: &BlockNvfp4, s: usize) -> [i32; 16] {
    std::array::from_fn(|e| {
        let q = a.qs[8 * s + e % 8];
        E2M1_DOUBLED[(if e < 8 { q & 0xf } else { q >> 4 }) as usize] as i32
    })
}

fn check(what: &str, nx: usize, per: usize, ny: usize) {
    assert_eq!(nx * per, ny, "vec_dot {what}: {nx} weight blocks need {} activation blocks, got {ny}", nx * per);
}

/// the generic C's two float steps of Q1_0 and Q2_0: per weight block of `per` activation
/// blocks `s += dy_k · f32(isum_k)`, then `sum += d · s`; both fused where `fused`
#[inline(always)]
fn two_steps<W>(x: &[W], y: &[BlockQ8_0], per: usize, d: impl Fn(&W) -> f32, isum: impl Fn(&W, &BlockQ8_0, usize) -> i32, fused: bool) -> f32 {
    let step = |a: f32, b: f32, acc: f32| if fused { a.mul_add(b, acc) } else { acc + a * b };
    let mut sum = 0.0f32;
    for (a, ys) in x.iter().zip(y.chunks_exact(per)) {
        let mut s = 0.0f32;
        for (k, b) in ys.iter().enumerate() {
            s = step(b.d.to_f32(), isum(a, b, k) as f32, s);
        }
        sum = step(d(a), s, sum);
    }
    sum
}

/// Q1_0 · Q8_0, upstream's `ggml_vec_dot_q1_0_q8_0_generic`
pub fn q1_0_q8_0_reference(x: &[BlockQ1_0], y: &[BlockQ8_0]) -> f32 {
    check("q1_0", x.len(), 4, y.len());
    two_steps(x, y, 4, |a| a.d.to_f32(), q1_0_isum, false)
}

/// Q1_0 · Q8_0 in upstream's x86 order (its AVX2 branch): per weight block 8 lanes
/// `l_j = dy_0 · f32(s_0j)`, then `l_j = fma(dy_k, f32(s_kj), l_j)` for k = 1..4 (`s_kj` the sum of
/// elements 4j..4j + 4 of activation block k, signed; a negated -128 stays -128 as in its bytes),
/// `acc_j = fma(d, l_j, acc_j)`; at the end `hsum_float_8(acc)`
pub fn q1_0_q8_0_x86(x: &[BlockQ1_0], y: &[BlockQ8_0]) -> f32 {
    check("q1_0", x.len(), 4, y.len());
    let mut acc = [0f32; 8];
    for (a, ys) in x.iter().zip(y.chunks_exact(4)) {
        let mut lanes = [0f32; 8];
        for (k, b) in ys.iter().enumerate() {
            let dy = b.d.to_f32();
            for (j, lane) in lanes.iter_mut().enumerate() {
                let s: i32 = (4 * j..4 * j + 4)
                    .map(|e| {
                        let q = b.qs[e];
                        (if a.qs[4 * k + e / 8] >> (e % 8) & 1 != 0 { q } else { q.wrapping_neg() }) as i32
                    })
                    .sum();
                *lane = if k == 0 { dy * s as f32 } else { dy.mul_add(s as f32, *lane) };
            }
        }
        let d = a.d.to_f32();
        for (acc, lane) in acc.iter_mut().zip(lanes) {
            *acc = d.mul_add(lane, *acc);
        }
    }
    hsum8(acc)
}

/// Q2_0 · Q8_0, upstream's `ggml_vec_dot_q2_0_q8_0_generic` (also what its native x86 build runs)
pub fn q2_0_q8_0_reference(x: &[BlockQ2_0], y: &[BlockQ8_0]) -> f32 {
    check("q2_0", x.len(), 2, y.len());
    two_steps(x, y, 2, |a| a.d.to_f32(), q2_0_isum, false)
}

/// [`q2_0_q8_0_reference`] as upstream's AVX2 build compiles it: both steps fused
/// (`s = fma(dy, f32(isum), s)`, `sum = fma(d, s, sum)`)
pub fn q2_0_q8_0_fused(x: &[BlockQ2_0], y: &[BlockQ8_0]) -> f32 {
    check("q2_0", x.len(), 2, y.len());
    two_steps(x, y, 2, |a| a.d.to_f32(), q2_0_isum, true)
}

/// NVFP4 · Q8_0, upstream's `ggml_vec_dot_nvfp4_q8_0_generic`
pub fn nvfp4_q8_0_reference(x: &[BlockNvfp4], y: &[BlockQ8_0]) -> f32 {
    check("nvfp4", x.len(), 2, y.len());
    let mut sum = 0.0f32;
    for (a, ys) in x.iter().zip(y.chunks_exact(2)) {
        for s in 0..4 {
            let b = &ys[s / 2];
            let w = nvfp4_levels(a, s);
            let isum: i32 = w.iter().zip(&b.qs[16 * (s % 2)..]).map(|(&w, &q)| w * q as i32).sum();
            sum += b.d.to_f32() * ue4m3_to_f32_half(a.d[s]) * isum as f32;
        }
    }
    sum
}

/// NVFP4 · Q8_0 in upstream's x86 order (its AVX2 branch): per weight block and activation block
/// k, 8 lanes of 4-product sums (lanes 0..4 sub-block 2k, 4..8 sub-block 2k + 1) each added by
/// `acc_j = fma(d_s · dy_k, f32(s_j), acc_j)`; at the end `hsum_float_8(acc)`
pub fn nvfp4_q8_0_x86(x: &[BlockNvfp4], y: &[BlockQ8_0]) -> f32 {
    check("nvfp4", x.len(), 2, y.len());
    let mut acc = [0f32; 8];
    for (a, ys) in x.iter().zip(y.chunks_exact(2)) {
        for (k, b) in ys.iter().enumerate() {
            let dy = b.d.to_f32();
            let mut w = [0i32; 32];
            w[..16].copy_from_slice(&nvfp4_levels(a, 2 * k));
            w[16..].copy_from_slice(&nvfp4_levels(a, 2 * k + 1));
            let scales = [ue4m3_to_f32_half(a.d[2 * k]) * dy, ue4m3_to_f32_half(a.d[2 * k + 1]) * dy];
            for (j, lane) in acc.iter_mut().enumerate() {
                let s: i32 = (4 * j..4 * j + 4).map(|e| w[e] * b.qs[e] as i32).sum();
                *lane = scales[j / 4].mul_add(s as f32, *lane);
            }
        }
    }
    hsum8(acc)
}

/// the aarch64 order of Q1_0 and Q2_0 (module's text): `w(block, k, e)` the weight of element
/// `e` of activation block `k`; lane l sums the positions [`lane_of`] of both 16-element halves
fn arm_lanes<W>(x: &[W], y: &[BlockQ8_0], per: usize, dot: bool, d: impl Fn(&W) -> f32, w: impl Fn(&W, usize, usize) -> i32) -> f32 {
    let mut acc = [0f32; 4];
    for (a, ys) in x.iter().zip(y.chunks_exact(per)) {
        for (k, b) in ys.iter().enumerate() {
            let scale = d(a) * b.d.to_f32();
            for (l, lane) in acc.iter_mut().enumerate() {
                let s: i32 = lane_of(dot, l).into_iter().flat_map(|p| [p, p + 16]).map(|e| w(a, k, e) * b.qs[e] as i32).sum();
                *lane += s as f32 * scale;
            }
        }
    }
    hsum4(acc)
}

fn q1_0_sign(a: &BlockQ1_0, k: usize, e: usize) -> i32 {
    if a.qs[4 * k + e / 8] >> (e % 8) & 1 != 0 { 1 } else { -1 }
}

fn q2_0_level(a: &BlockQ2_0, k: usize, e: usize) -> i32 {
    ((a.qs[8 * k + e / 4] >> (2 * (e % 4))) & 3) as i32 - 1
}

/// Q1_0 · Q8_0 in upstream's aarch64 order without DotProd
pub fn q1_0_q8_0_neon(x: &[BlockQ1_0], y: &[BlockQ8_0]) -> f32 {
    check("q1_0", x.len(), 4, y.len());
    arm_lanes(x, y, 4, false, |a| a.d.to_f32(), q1_0_sign)
}

/// Q1_0 · Q8_0 in upstream's aarch64 order with DotProd
pub fn q1_0_q8_0_dotprod(x: &[BlockQ1_0], y: &[BlockQ8_0]) -> f32 {
    check("q1_0", x.len(), 4, y.len());
    arm_lanes(x, y, 4, true, |a| a.d.to_f32(), q1_0_sign)
}

/// Q2_0 · Q8_0 in upstream's aarch64 order without DotProd
pub fn q2_0_q8_0_neon(x: &[BlockQ2_0], y: &[BlockQ8_0]) -> f32 {
    check("q2_0", x.len(), 2, y.len());
    arm_lanes(x, y, 2, false, |a| a.d.to_f32(), q2_0_level)
}

/// Q2_0 · Q8_0 in upstream's aarch64 order with DotProd
pub fn q2_0_q8_0_dotprod(x: &[BlockQ2_0], y: &[BlockQ8_0]) -> f32 {
    check("q2_0", x.len(), 2, y.len());
    arm_lanes(x, y, 2, true, |a| a.d.to_f32(), q2_0_level)
}

/// NVFP4 · Q8_0 in upstream's aarch64 order (with or without DotProd: each lane is a whole
/// sub-block's sum either way)
pub fn nvfp4_q8_0_arm(x: &[BlockNvfp4], y: &[BlockQ8_0]) -> f32 {
    check("nvfp4", x.len(), 2, y.len());
    let mut acc = [0f32; 4];
    for (a, ys) in x.iter().zip(y.chunks_exact(2)) {
        for (s, lane) in acc.iter_mut().enumerate() {
            let b = &ys[s / 2];
            let isum: i32 = nvfp4_levels(a, s).iter().zip(&b.qs[16 * (s % 2)..]).map(|(&w, &q)| w * q as i32).sum();
            *lane = (isum as f32).mul_add(ue4m3_to_f32_half(a.d[s]) * b.d.to_f32(), *lane);
        }
    }
    hsum4(acc)
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;
    use crate::GgmlType;
    use crate::block::{AlignedBytes, as_bytes, as_bytes_mut};
    use crate::dot::{Dots, Order, RowDot};
    use crate::quants::dequantize_row;
    use crate::rng::XorShift;
    use crate::simd::Level;

    /// `nb` weight blocks of `ty` of random bytes and their activations; `exact`: power-of-two
    /// scales (NVFP4: UE4M3 bytes of 2⁻³..2⁰) and activations in [-3, 3], else random f16 scales
    /// (NVFP4: every scale byte) and activations
    fn rows(ty: GgmlType, nb: usize, r: &mut XorShift, exact: bool) -> (AlignedBytes, Vec<BlockQ8_0>) {
        let mut w = AlignedBytes::zeroed(nb * ty.type_size());
        r.fill_bytes(&mut w);
        for blk in w.chunks_exact_mut(ty.type_size()) {
            if ty == GgmlType::Nvfp4 {
                if exact {
                    // scales 2^-3 .. 2^0 (bytes of exponent 4..7, mantissa 0)
                    for b in &mut blk[..4] {
                        *b = (4 + (r.next_u64() % 4) as u8) << 3;
                    }
                }
            } else {
                let d = if exact { 0.125 } else { r.f32_in(-0.1, 0.1) };
                blk[..2].copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
            }
        }
        let na = nb * ty.block_size() / 32;
        let qmax = if exact { 3 } else { 127 };
        let y = (0..na)
            .map(|_| BlockQ8_0 { d: f16::from_f32(if exact { 0.25 } else { r.f32_in(-0.1, 0.1) }), qs: std::array::from_fn(|_| r.i32_in(-qmax, qmax) as i8) })
            .collect();
        (w, y)
    }

    /// every set's Q1_0 / Q2_0 / NVFP4 kernel, and every arch's forms (run on any machine), equals
    /// the definition bit for bit where every float operation is exact (power-of-two scales, small
    /// activations: then only the integer sums count, and they are the dequantized product's),
    /// within rounding on random scales
    #[test]
    fn low_bit_kernels_match_the_definitions() {
        let mut r = XorShift::new(91);
        let mut kernels: Vec<(String, GgmlType, RowDot)> = Vec::new();
        for level in Level::available() {
            for ty in [GgmlType::Q1_0, GgmlType::Q2_0, GgmlType::Nvfp4] {
                kernels.push((level.name().to_string(), ty, crate::kernels::at(level).dot.row(ty, Order::VecDot)));
            }
        }
        let forms = [
            ("x86", RowDot::Q1_0(q1_0_q8_0_x86)),
            ("fused", RowDot::Q2_0(q2_0_q8_0_fused)),
            ("x86", RowDot::Nvfp4(nvfp4_q8_0_x86)),
            ("neon", RowDot::Q1_0(q1_0_q8_0_neon)),
            ("dotprod", RowDot::Q1_0(q1_0_q8_0_dotprod)),
            ("neon", RowDot::Q2_0(q2_0_q8_0_neon)),
            ("dotprod", RowDot::Q2_0(q2_0_q8_0_dotprod)),
            ("arm", RowDot::Nvfp4(nvfp4_q8_0_arm)),
        ];
        for (name, f) in forms {
            let ty = match f {
                RowDot::Q1_0(_) => GgmlType::Q1_0,
                RowDot::Q2_0(_) => GgmlType::Q2_0,
                _ => GgmlType::Nvfp4,
            };
            kernels.push((name.to_string(), ty, f));
        }
        for (name, ty, set) in kernels {
            let reference = Dots::SCALAR.row(ty, Order::VecDot);
            for nb in [0usize, 1, 2, 3, 7, 33] {
                for exact in [true, false] {
                    let (w, y) = rows(ty, nb, &mut r, exact);
                    let ya = as_bytes(&y);
                    let (got, want) = (set.dot(&w, ya), reference.dot(&w, ya));
                    let (mut wd, mut yd) = (vec![0f32; nb * ty.block_size()], vec![0f32; y.len() * 32]);
                    dequantize_row(ty, &w, &mut wd);
                    dequantize_row(GgmlType::Q8_0, ya, &mut yd);
                    let p = wd.iter().zip(&yd).map(|(&a, &b)| a as f64 * b as f64);
                    let (sum, mag): (f64, f64) = (p.clone().sum(), p.map(f64::abs).sum());
                    if exact {
                        assert_eq!(got.to_bits(), want.to_bits(), "{} {name} nb={nb}: {got} vs {want}", ty.name());
                        assert_eq!(want as f64, sum, "{} nb={nb}: definition vs dequantized", ty.name());
                    } else {
                        let tol = (nb as f64 + 8.0) * 2f64.powi(-22) * mag + 1e-30;
                        assert!(((got - want) as f64).abs() <= tol, "{} {name} nb={nb}: {got} vs {want}", ty.name());
                        assert!((want as f64 - sum).abs() <= tol, "{} nb={nb}: definition {want} vs dequantized {sum}", ty.name());
                    }
                }
            }
        }
    }

    /// the x86 Q1_0 form negates activation bytes as upstream's vector code does: a −128 under a
    /// clear bit stays −128 (the definition's `-q` is +128); −127 and the rest agree
    #[test]
    fn q1_0_x86_negates_bytes_as_bytes() {
        let mut x = [BlockQ1_0 { d: f16::ONE, qs: [0; 16] }];
        let mut y = [BlockQ8_0 { d: f16::ONE, qs: [0; 32] }; 4];
        y[0].qs[0] = -128;
        assert_eq!(q1_0_q8_0_x86(&x, &y), -128.0);
        assert_eq!(q1_0_q8_0_reference(&x, &y), 128.0);
        y[0].qs[0] = -127;
        as_bytes_mut(&mut x)[2] = 0xfe;
        assert_eq!(q1_0_q8_0_x86(&x, &y), 127.0);
        assert_eq!(q1_0_q8_0_reference(&x, &y), 127.0);
    }
}
