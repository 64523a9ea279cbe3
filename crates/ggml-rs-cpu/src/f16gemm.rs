//! F16 weights × activations rounded to F16, for prompts, in the bits of upstream's native x86
//! build (AVX-512).
//!
//! Upstream converts F32 activations to F16, then hands each (i12, i13) slice of the product to
//! llamafile's `tinyBLAS` (16 lanes of f32, F16 weights and activations) when the slice has at
//! least 2 activation rows, `k % 16 == 0` and a row count that is a multiple of 4 ([`sgemm_shape`];
//! the conditions do not depend on the slice, so either every slice goes there or none does).
//! `tinyBLAS` sums each output in one 16-lane accumulator, `acc = fma(w[l..l+16], x[l..l+16],
//! acc)` for `l = 0, 16, ...`, then GCC's `_mm512_reduce_add_ps` ([`f16_sgemm_order`], the
//! definition). Otherwise every output is `ggml_vec_dot_f16` (`dot::float::f16_avx512_order`,
//! the row kernels' order at the AVX-512 levels).
//!
//! [`tile_raw`] computes 4 weight rows × up to [`MAX_COLS`] activation rows in that order: 24
//! accumulators of 16 lanes, each weight piece converted once per tile step, the activations
//! given as f32 (their F16 rounding widened: no conversion in the loop). The weights are read
//! in place (no repacking). It equals the definition bit for bit (tests), and
//! its speed is below the one-lane-per-row tiles of [`crate::fgemm`] (another order), which
//! `GGML_RS_CPU_F16_TILES=fast` ([`fast`], read once) keeps for whoever prefers the speed.

use half::f16;

/// weight rows per tile
pub const ROWS: usize = 4;
/// activation rows per tile at most
pub const MAX_COLS: usize = 6;

/// an output as upstream's `tinyBLAS<16, __m512, ...>` sums it (the definition [`tile_raw`] is
/// tested against): one accumulator of 16 lanes, lane l of piece p `fma(w[16p + l], x[16p + l],
/// lane)`, pieces in order, then GCC's `_mm512_reduce_add_ps`. `k` a multiple of 16.
pub fn f16_sgemm_order(w: &[f16], x: &[f16]) -> f32 {
    let k = w.len().min(x.len());
    assert!(k.is_multiple_of(16), "f16_sgemm_order: k = {k} is not a multiple of 16");
    let mut acc = [0f32; 16];
    for p in (0..k).step_by(16) {
        for (l, lane) in acc.iter_mut().enumerate() {
            *lane = w[p + l].to_f32().mul_add(x[p + l].to_f32(), *lane);
        }
    }
    crate::ops::expf::reduce_add16(&acc)
}

/// upstream hands a slice of `m` weight rows × `n` activation rows of length `k` to tinyBLAS
/// (else each output is a row dot product)
pub fn sgemm_shape(m: usize, n: usize, k: usize) -> bool {
    n >= 2 && k.is_multiple_of(16) && m.is_multiple_of(ROWS)
}

/// `GGML_RS_CPU_F16_TILES=fast` (read once): F16 prompts through [`crate::fgemm`]'s tiles
/// (faster, another summation order than upstream's)
pub fn fast() -> bool {
    static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAST.get_or_init(|| std::env::var("GGML_RS_CPU_F16_TILES").is_ok_and(|v| v.trim().eq_ignore_ascii_case("fast")))
}

/// whether a node at `level` takes the exact forms (AVX-512 and the fast tiles not asked for)
pub fn exact(level: crate::simd::Level) -> bool {
    level >= crate::simd::Level::Avx512 && !fast()
}

/// `out[t][r] = f16_sgemm_order(weight row r, x[t])` for the 4 weight rows at `w + r · stride`
/// (bytes) and the `x.len()` (1 ..= [`MAX_COLS`]) activation rows, given as f32 (values of f16:
/// the definition's activations widened)
///
/// # Safety
/// AVX-512 F available (the level); `w + r · stride` readable for `k` f16 values (r < 4), each
/// `x[t]` for `k` floats, each `out[t]` writable for 4 floats; `k` a multiple of 16.
pub unsafe fn tile_raw(w: *const u8, stride: usize, k: usize, x: &[*const f32], out: &[*mut f32]) {
    assert!(k.is_multiple_of(16) && x.len() == out.len() && (1..=MAX_COLS).contains(&x.len()), "f16gemm::tile_raw: k = {k}, {} columns", x.len());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract; the arrays hold exactly N pointers
    unsafe {
        macro_rules! go {
            ($n:literal) => {
                x86::tile::<$n>(w, stride, k, x.try_into().expect("N columns"), out.try_into().expect("N columns"))
            };
        }
        match x.len() {
            1 => go!(1),
            2 => go!(2),
            3 => go!(3),
            4 => go!(4),
            5 => go!(5),
            _ => go!(6),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("f16gemm::tile_raw: AVX-512 only");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::dot::x86::reduce_add_ps_gcc;

    /// [`super::tile_raw`] for N columns
    ///
    /// # Safety
    /// as [`super::tile_raw`]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
    pub(super) unsafe fn tile<const N: usize>(w: *const u8, stride: usize, k: usize, x: &[*const f32; N], out: &[*mut f32; N]) {
        let mut acc = [[_mm512_setzero_ps(); super::ROWS]; N];
        // SAFETY (the loads): 16 values at element p of a weight row or a column, p + 16 <= k
        let ld = |p: *const u8| _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(p.cast()) });
        for p in (0..k).step_by(16) {
            let wv: [__m512; super::ROWS] = std::array::from_fn(|r| ld(w.wrapping_add(r * stride + 2 * p)));
            for t in 0..N {
                let xv = unsafe { _mm512_loadu_ps(x[t].wrapping_add(p)) };
                for r in 0..super::ROWS {
                    acc[t][r] = _mm512_fmadd_ps(wv[r], xv, acc[t][r]);
                }
            }
        }
        for t in 0..N {
            for r in 0..super::ROWS {
                // SAFETY: 4 writable floats per column (caller)
                unsafe { out[t].add(r).write_unaligned(reduce_add_ps_gcc(acc[t][r])) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::XorShift;
    use crate::simd::Level;

    /// the tile equals the definition bit for bit, for every column count and k from 16 to a
    /// model's 4096, rows and columns at odd byte offsets
    #[test]
    fn tile_equals_upstreams_sgemm_order_bit_for_bit() {
        if crate::simd::detected() < Level::Avx512 {
            eprintln!("no AVX-512: not tested");
            return;
        }
        let mut r = XorShift::new(18);
        let h = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
        let bytes = |v: &[f16]| {
            let mut b = vec![0u8; 2 * v.len() + 3];
            b[1..1 + 2 * v.len()].iter_mut().zip(v.iter().flat_map(|v| v.to_bits().to_le_bytes())).for_each(|(b, v)| *b = v);
            b
        };
        // the columns widened, one float past a 64-byte boundary
        let widen = |v: &[f16]| std::iter::once(0.0).chain(v.iter().map(|v| v.to_f32())).collect::<Vec<f32>>();
        for k in [16usize, 48, 64, 96, 256, 1536, 4096] {
            let rows: Vec<Vec<f16>> = (0..ROWS).map(|_| h(r.model_like(k))).collect();
            let stride = 2 * k + 6;
            let mut w = vec![0u8; 1 + ROWS * stride];
            for (i, row) in rows.iter().enumerate() {
                w[1 + i * stride..][..2 * k].copy_from_slice(&bytes(row)[1..1 + 2 * k]);
            }
            for n in 1..=MAX_COLS {
                let cols: Vec<Vec<f16>> = (0..n).map(|_| h(r.model_like(k).into_iter().map(|v| v * 40.0).collect())).collect();
                let cb: Vec<Vec<f32>> = cols.iter().map(|c| widen(c)).collect();
                let mut outs = vec![[f32::NAN; ROWS]; n];
                let xp: Vec<*const f32> = cb.iter().map(|b| b[1..].as_ptr()).collect();
                let op: Vec<*mut f32> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
                // SAFETY: AVX-512 (checked); 4 rows of k values stride apart in w, n columns of k
                // values, n outputs of 4 floats
                unsafe { tile_raw(w[1..].as_ptr(), stride, k, &xp, &op) };
                for t in 0..n {
                    for i in 0..ROWS {
                        let want = f16_sgemm_order(&rows[i], &cols[t]);
                        assert_eq!(outs[t][i].to_bits(), want.to_bits(), "k={k} n={n} column {t} row {i}: {} vs {want}", outs[t][i]);
                    }
                }
            }
        }
    }

    /// the tinyBLAS order is neither ggml_vec_dot_f16's nor the f64 reference's
    #[test]
    fn sgemm_order_is_not_the_row_kernels() {
        let mut r = XorShift::new(19);
        let h = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
        let (mut vs_row, mut vs_ref) = (false, false);
        for _ in 0..20 {
            let (w, x) = (h(r.model_like(1536)), h(r.model_like(1536).into_iter().map(|v| v * 40.0).collect()));
            let s = f16_sgemm_order(&w, &x);
            vs_row |= s.to_bits() != crate::dot::float::f16_avx512_order(&w, &x).to_bits();
            vs_ref |= s.to_bits() != crate::dot::float::f16_reference(&w, &x).to_bits();
        }
        assert!(vs_row && vs_ref, "20 random rows summed to the same bits: {vs_row} {vs_ref}");
        assert!(sgemm_shape(4, 2, 16) && !sgemm_shape(4, 1, 16) && !sgemm_shape(6, 8, 64) && !sgemm_shape(8, 8, 100));
    }
}
