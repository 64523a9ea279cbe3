//! Tiled float GEMM for prompt processing (MUL_MAT with many activation rows) of F32, F16 and
//! BF16 weights, on AVX-512.
//!
//! Weights are repacked 16 rows at a time, widened to f32 and transposed so that one 512-bit
//! register holds element k of the 16 rows; activations (rounded to the weights' vec-dot type,
//! as the row kernels see them, then widened) are broadcast one element at a time: a tile of 16
//! rows × up to [`MAX_COLS`] columns is an outer-product update of `MAX_COLS` accumulators per
//! element, each weight load reused across the columns, and a column's 16 results are a
//! contiguous piece of dst.
//!
//! Each (row, column) sum runs over k in order in one f32 lane with fused multiply-adds, so a
//! tile's result does not depend on how the caller splits k ([`tile`]'s `accumulate`).
//!
//! The weights are repacked per MUL_MAT call (one pass over them, cheap next to the 512-column
//! product); a repacking buffer type would do it once at load time.

use crate::GgmlType;

/// weight rows per repacked block (the f32 lanes of a 512-bit register)
pub const ROWS: usize = 16;
/// activation rows per tile
pub const MAX_COLS: usize = 8;

/// the weight types this GEMM takes
pub fn supports(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
}

/// whether this process runs the tiled kernel (AVX-512 active)
pub fn available() -> bool {
    crate::simd::active() >= crate::simd::Level::Avx512
}

/// Repacks up to 16 weight rows of `ty` (`k` elements each) into `out` (`16 · k` floats, element
/// k of row r at `16 k + r`); missing rows are zero.
pub fn repack(ty: GgmlType, rows: &[&[u8]], k: usize, out: &mut [f32]) {
    assert!(supports(ty), "fgemm::repack: {} is not an fgemm weight type", ty.name());
    assert!(rows.len() <= ROWS, "fgemm::repack: {} rows, at most {ROWS}", rows.len());
    assert_eq!(out.len(), ROWS * k, "fgemm::repack: output of {} floats for {k} elements", out.len());
    let mut w = vec![0f32; k];
    for r in 0..ROWS {
        match rows.get(r) {
            Some(row) => {
                assert_eq!(row.len(), ty.row_size(k), "fgemm::repack {}: row {r} of {} bytes is not {k} elements", ty.name(), row.len());
                crate::quants::dequantize_row(ty, row, &mut w);
            }
            None => w.fill(0.0),
        }
        for (e, v) in w.iter().enumerate() {
            out[e * ROWS + r] = *v;
        }
    }
}

/// One tile: `out[j][r] (+)= Σ_e w[e][r] · x[j][e]` over the `kc` elements of `w` (repacked, from
/// some element on) and of each column `x[j]` (at most [`MAX_COLS`]); with `accumulate` the sums
/// continue from what `out` holds. The first `n_rows` results of each column are written.
///
/// Panics if the sizes do not agree or the CPU lacks AVX-512.
pub fn tile(w: &[f32], x: &[&[f32]], out: &mut [&mut [f32]], n_rows: usize, accumulate: bool) {
    assert!(crate::simd::detected() >= crate::simd::Level::Avx512, "fgemm::tile: the CPU has no AVX-512");
    let kc = w.len() / ROWS;
    assert_eq!(w.len(), kc * ROWS, "fgemm::tile: weights of {} floats are not rows of {ROWS}", w.len());
    assert!(n_rows <= ROWS && !x.is_empty() && x.len() <= MAX_COLS, "fgemm::tile: {n_rows} rows × {} columns", x.len());
    assert_eq!(x.len(), out.len(), "fgemm::tile: {} columns, {} outputs", x.len(), out.len());
    let mut xp = [std::ptr::null::<f32>(); MAX_COLS];
    let mut op = [std::ptr::null_mut::<f32>(); MAX_COLS];
    for j in 0..x.len() {
        assert!(x[j].len() == kc && out[j].len() >= n_rows, "fgemm::tile: column {j} is not {kc} elements / {n_rows} outputs");
        (xp[j], op[j]) = (x[j].as_ptr(), out[j].as_mut_ptr());
    }
    // SAFETY: the CPU has AVX-512 (asserted); every pointer covers kc elements / n_rows outputs
    // (asserted above)
    unsafe { tile_raw(w.as_ptr(), kc, &xp[..x.len()], &op[..x.len()], n_rows, accumulate) }
}

/// [`tile`] on raw pointers, dispatching on the column count.
///
/// # Safety
/// The CPU has AVX-512; `w` holds `16 · kc` floats; each `x[j]` `kc` floats; each `out[j]` is
/// readable and writable for `n_rows ≤ 16` floats; 1 ≤ columns ≤ 8.
pub unsafe fn tile_raw(w: *const f32, kc: usize, x: &[*const f32], out: &[*mut f32], n_rows: usize, accumulate: bool) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller
    unsafe {
        macro_rules! cols {
            ($n:literal) => {
                x86::tile::<$n>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate)
            };
        }
        match x.len() {
            1 => cols!(1),
            2 => cols!(2),
            3 => cols!(3),
            4 => cols!(4),
            5 => cols!(5),
            6 => cols!(6),
            7 => cols!(7),
            8 => cols!(8),
            n => panic!("fgemm::tile_raw: {n} columns"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (w, kc, x, out, n_rows, accumulate);
        panic!("fgemm::tile_raw: x86-64 only");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::ROWS;

    /// # Safety
    /// as [`super::tile_raw`], with exactly `N` columns
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
    pub(super) unsafe fn tile<const N: usize>(w: *const f32, kc: usize, x: [*const f32; N], out: [*mut f32; N], n_rows: usize, accumulate: bool) {
        let mask: __mmask16 = if n_rows >= ROWS { 0xffff } else { (1u16 << n_rows) - 1 };
        let mut acc = [_mm512_setzero_ps(); N];
        if accumulate {
            for j in 0..N {
                // SAFETY: out[j] is readable for n_rows floats; the mask reads no more
                acc[j] = unsafe { _mm512_maskz_loadu_ps(mask, out[j]) };
            }
        }
        for e in 0..kc {
            // SAFETY: element e of the weights and of every column (caller)
            unsafe {
                let we = _mm512_loadu_ps(w.add(e * ROWS));
                for j in 0..N {
                    acc[j] = _mm512_fmadd_ps(we, _mm512_set1_ps(*x[j].add(e)), acc[j]);
                }
            }
        }
        for j in 0..N {
            // SAFETY: out[j] is writable for n_rows floats; the mask writes no more
            unsafe { _mm512_mask_storeu_ps(out[j], mask, acc[j]) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::AlignedBytes;
    use crate::quants::{dequantize_row, quantize_row};
    use crate::rng::XorShift;

    /// the tile against a plain f32 fused multiply-add loop per (row, column), bit for bit (the
    /// same operations in the same order), whole and split over k
    #[test]
    fn tile_equals_the_sequential_sum() {
        if crate::simd::detected() < crate::simd::Level::Avx512 {
            eprintln!("no AVX-512: fgemm not tested");
            return;
        }
        let mut r = XorShift::new(41);
        for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
            for n_cols in 1..=MAX_COLS {
                for (n_rows, k) in [(16, 64), (16, 300), (7, 33), (1, 8)] {
                    let w: Vec<AlignedBytes> = (0..n_rows)
                        .map(|_| {
                            let mut b = AlignedBytes::zeroed(ty.row_size(k));
                            quantize_row(ty, &r.model_like(k), &mut b);
                            b
                        })
                        .collect();
                    let wr: Vec<&[u8]> = w.iter().map(|b| &b[..]).collect();
                    let x: Vec<Vec<f32>> = (0..n_cols).map(|_| r.model_like(k)).collect();
                    let mut packed = vec![0f32; ROWS * k];
                    repack(ty, &wr, k, &mut packed);
                    let xr: Vec<&[f32]> = x.iter().map(|v| &v[..]).collect();
                    let split = k / 3;
                    for whole in [true, false] {
                        let mut out = vec![vec![f32::NAN; ROWS]; n_cols];
                        let mut outr: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
                        if whole {
                            tile(&packed, &xr, &mut outr, n_rows, false);
                        } else {
                            let x0: Vec<&[f32]> = x.iter().map(|v| &v[..split]).collect();
                            let x1: Vec<&[f32]> = x.iter().map(|v| &v[split..]).collect();
                            tile(&packed[..ROWS * split], &x0, &mut outr, n_rows, false);
                            tile(&packed[ROWS * split..], &x1, &mut outr, n_rows, true);
                        }
                        for j in 0..n_cols {
                            for i in 0..n_rows {
                                let mut wd = vec![0f32; k];
                                dequantize_row(ty, wr[i], &mut wd);
                                let want = wd.iter().zip(&x[j]).fold(0f32, |s, (p, q)| p.mul_add(*q, s));
                                let got = out[j][i];
                                assert_eq!(got.to_bits(), want.to_bits(), "{} {n_rows}×{n_cols} k={k} whole={whole}: col {j} row {i}: {got} vs {want}", ty.name());
                            }
                            assert!(out[j][n_rows..].iter().all(|v| v.is_nan()), "{}: a row past {n_rows} was written", ty.name());
                        }
                    }
                }
            }
        }
    }
}
