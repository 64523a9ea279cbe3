//! Tiled int8 GEMM for prompt processing (MUL_MAT with many activation rows) of Q8_0 and Q4_0
//! weights against Q8_0 activations, on AVX-512 VNNI.
//!
//! The row kernels ([`crate::dot`]) compute one weight row · one activation row at a time: every
//! product re-loads both rows and ends in a horizontal sum. Here weights are repacked so that one
//! 512-bit register holds 4 consecutive quants of 16 rows (lane r = row r), made unsigned (Q8_0
//! quants + 128, Q4_0 nibbles as they are), and 4 activation quants are broadcast to all lanes:
//! one `vpdpbusd` then adds 4 products to each of 16 rows' sums, 64 multiply-adds, with no
//! horizontal step (a 16-row result is a contiguous piece of a dst column). A tile is 16 weight
//! rows × up to [`MAX_COLS`] activation rows, the weight register reused across the columns.
//!
//! The unsigned offset is taken back exactly in integers: Σ (w + c) · y = Σ w·y + c · Σ y, so each
//! column's block starts its sum at `-c · Σ y` (precomputed once per activation block, `aux`).
//!
//! Layout of a repacked block of 16 rows × 32 quants ([`BLOCK_BYTES`]): 8 groups of 64 bytes
//! (group g: row r's quants 4g..4g+4 at byte 4r), then the 16 rows' scales as f32. Rows past the
//! end of the matrix are zero (their results are not stored).
//!
//! The weights are repacked per MUL_MAT call here (one pass over them, cheap next to the
//! 512-column product); a repacking buffer type would do it once at load time.

use crate::GgmlType;
use crate::block::{BlockQ4_0, BlockQ8_0, QK8_0};

/// weight rows per repacked block (the lanes of a 512-bit register of i32)
pub const ROWS: usize = 16;
/// bytes of one repacked block: 16 rows × 32 quants, 16 f32 scales
pub const BLOCK_BYTES: usize = ROWS * QK8_0 + ROWS * 4;
/// activation rows per tile
pub const MAX_COLS: usize = 8;

/// the weight types this GEMM takes (activations Q8_0)
pub fn supports(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q8_0 | GgmlType::Q4_0)
}

/// what the repacked quants have been shifted by to make them unsigned
pub fn offset(ty: GgmlType) -> i32 {
    match ty {
        GgmlType::Q8_0 => 128,
        GgmlType::Q4_0 => 8,
        _ => panic!("qgemm::offset: {} is not a qgemm weight type", ty.name()),
    }
}

/// whether this process runs the tiled kernel (AVX-512 VNNI active)
pub fn available() -> bool {
    crate::simd::active() >= crate::simd::Level::Avx512Vnni
}

/// Repacks up to 16 weight rows (`rows[r]` the bytes of row r, `nb` blocks each) into `out`
/// (`nb · BLOCK_BYTES` bytes); missing rows are zero.
pub fn repack(ty: GgmlType, rows: &[&[u8]], nb: usize, out: &mut [u8]) {
    assert!(rows.len() <= ROWS, "qgemm::repack: {} rows, at most {ROWS}", rows.len());
    assert_eq!(out.len(), nb * BLOCK_BYTES, "qgemm::repack: output of {} bytes for {nb} blocks", out.len());
    let bsize = ty.type_size();
    for (r, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), nb * bsize, "qgemm::repack {}: row {r} of {} bytes is not {nb} blocks", ty.name(), row.len());
    }
    for b in 0..nb {
        let ob = &mut out[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
        let mut q = [0u8; QK8_0];
        for r in 0..ROWS {
            let d = match rows.get(r) {
                None => {
                    q = [0; QK8_0];
                    0.0
                }
                Some(row) => {
                    let blk = &row[b * bsize..(b + 1) * bsize];
                    let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
                    match ty {
                        GgmlType::Q8_0 => {
                            for (o, v) in q.iter_mut().zip(&blk[2..34]) {
                                *o = v ^ 0x80;
                            }
                        }
                        GgmlType::Q4_0 => {
                            for j in 0..16 {
                                q[j] = blk[2 + j] & 0x0f;
                                q[j + 16] = blk[2 + j] >> 4;
                            }
                        }
                        _ => panic!("qgemm::repack: {} is not a qgemm weight type", ty.name()),
                    }
                    d
                }
            };
            for g in 0..QK8_0 / 4 {
                ob[g * 64 + r * 4..g * 64 + r * 4 + 4].copy_from_slice(&q[g * 4..g * 4 + 4]);
            }
            ob[ROWS * QK8_0 + r * 4..ROWS * QK8_0 + r * 4 + 4].copy_from_slice(&d.to_ne_bytes());
        }
    }
}

/// per activation block: its scale as f32 and `-c · Σ quants` (the offset's share), 8 bytes
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Aux {
    pub d: f32,
    pub neg: i32,
}

/// the `aux` entries of one activation row for weights shifted by `c`
pub fn aux_row(x: &[BlockQ8_0], c: i32, out: &mut [Aux]) {
    assert_eq!(x.len(), out.len(), "qgemm::aux_row: {} blocks, {} entries", x.len(), out.len());
    for (a, b) in out.iter_mut().zip(x) {
        let s: i32 = b.qs.iter().map(|&q| q as i32).sum();
        *a = Aux { d: b.d.to_f32(), neg: -c * s };
    }
}

/// One tile: `out[j][r] = Σ_b w_r,b · x_j,b` for the 16 rows of `w` (repacked, `nb` blocks) and
/// the activation rows `x` (at most [`MAX_COLS`]); the first `n_rows` results of each column are
/// written.
///
/// Panics if the sizes do not agree or the CPU lacks AVX-512 VNNI.
pub fn tile(w: &[u8], nb: usize, x: &[&[BlockQ8_0]], aux: &[&[Aux]], out: &mut [&mut [f32]], n_rows: usize) {
    assert!(crate::simd::detected() >= crate::simd::Level::Avx512Vnni, "qgemm::tile: the CPU has no AVX-512 VNNI");
    assert_eq!(w.len(), nb * BLOCK_BYTES, "qgemm::tile: weights of {} bytes for {nb} blocks", w.len());
    assert!(n_rows <= ROWS && !x.is_empty() && x.len() <= MAX_COLS, "qgemm::tile: {n_rows} rows × {} columns", x.len());
    assert!(x.len() == aux.len() && x.len() == out.len(), "qgemm::tile: {} columns, {} aux, {} outputs", x.len(), aux.len(), out.len());
    let mut xp = [std::ptr::null::<BlockQ8_0>(); MAX_COLS];
    let mut ap = [std::ptr::null::<Aux>(); MAX_COLS];
    let mut op = [std::ptr::null_mut::<f32>(); MAX_COLS];
    for j in 0..x.len() {
        assert!(x[j].len() == nb && aux[j].len() == nb && out[j].len() >= n_rows, "qgemm::tile: column {j} is not {nb} blocks / {n_rows} outputs");
        (xp[j], ap[j], op[j]) = (x[j].as_ptr(), aux[j].as_ptr(), out[j].as_mut_ptr());
    }
    // SAFETY: the CPU has AVX-512 VNNI (asserted); every pointer covers nb blocks / n_rows
    // outputs (asserted above)
    unsafe { tile_raw(w.as_ptr(), nb, &xp[..x.len()], &ap[..x.len()], &op[..x.len()], n_rows) }
}

/// [`tile`] on raw pointers, dispatching on the column count.
///
/// # Safety
/// The CPU has AVX-512 VNNI; `w` holds `nb` repacked blocks; each `x[j]` / `aux[j]` holds `nb`
/// blocks / entries; each `out[j]` is writable for `n_rows ≤ 16` floats; 1 ≤ columns ≤ 8.
pub unsafe fn tile_raw(w: *const u8, nb: usize, x: &[*const BlockQ8_0], aux: &[*const Aux], out: &[*mut f32], n_rows: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller
    unsafe {
        macro_rules! cols {
            ($n:literal) => {
                x86::tile::<$n>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows)
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
            n => panic!("qgemm::tile_raw: {n} columns"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (w, nb, x, aux, out, n_rows);
        panic!("qgemm::tile_raw: x86-64 only");
    }
}

/// the scalar form of a tile (what the tests hold the kernel to): per block an exact integer sum,
/// scaled by the two f32 scales and summed in block order
pub fn tile_reference(ty: GgmlType, w_rows: &[&[u8]], x: &[BlockQ8_0]) -> Vec<f32> {
    w_rows
        .iter()
        .map(|row| {
            let mut sum = 0.0f32;
            for (b, y) in x.iter().enumerate() {
                let (sumi, d) = match ty {
                    GgmlType::Q8_0 => {
                        let blk: &BlockQ8_0 = &crate::block::as_blocks(row, "qgemm reference")[b];
                        (blk.qs.iter().zip(&y.qs).map(|(&p, &q)| p as i32 * q as i32).sum::<i32>(), blk.d.to_f32())
                    }
                    GgmlType::Q4_0 => {
                        let blk: &BlockQ4_0 = &crate::block::as_blocks(row, "qgemm reference")[b];
                        let mut s = 0i32;
                        for j in 0..16 {
                            s += ((blk.qs[j] & 15) as i32 - 8) * y.qs[j] as i32 + ((blk.qs[j] >> 4) as i32 - 8) * y.qs[j + 16] as i32;
                        }
                        (s, blk.d.to_f32())
                    }
                    _ => panic!("qgemm::tile_reference: {}", ty.name()),
                };
                sum += sumi as f32 * (d * y.d.to_f32());
            }
            sum
        })
        .collect()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Aux, BLOCK_BYTES, ROWS};
    use crate::block::BlockQ8_0;

    /// # Safety
    /// as [`super::tile_raw`], with exactly `N` columns
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn tile<const N: usize>(w: *const u8, nb: usize, x: [*const BlockQ8_0; N], aux: [*const Aux; N], out: [*mut f32; N], n_rows: usize) {
        let mut acc = [_mm512_setzero_ps(); N];
        for b in 0..nb {
            // SAFETY: block b of the weights, of every column's quants and aux (caller)
            unsafe {
                let wb = w.add(b * BLOCK_BYTES);
                let mut isum = [_mm512_setzero_si512(); N];
                for j in 0..N {
                    isum[j] = _mm512_set1_epi32((*aux[j].add(b)).neg);
                }
                for g in 0..8 {
                    let wg = _mm512_loadu_si512(wb.add(g * 64).cast());
                    for j in 0..N {
                        let y = x[j].add(b).cast::<u8>().add(2 + 4 * g).cast::<i32>().read_unaligned();
                        isum[j] = _mm512_dpbusd_epi32(isum[j], wg, _mm512_set1_epi32(y));
                    }
                }
                let dw = _mm512_loadu_ps(wb.add(ROWS * 32).cast());
                for j in 0..N {
                    let s = _mm512_mul_ps(dw, _mm512_set1_ps((*aux[j].add(b)).d));
                    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), s, acc[j]);
                }
            }
        }
        let mask: __mmask16 = if n_rows >= ROWS { 0xffff } else { (1u16 << n_rows) - 1 };
        for j in 0..N {
            // SAFETY: out[j] is writable for n_rows floats; the mask writes no more
            unsafe { _mm512_mask_storeu_ps(out[j], mask, acc[j]) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{AlignedBytes, as_blocks, as_blocks_mut};
    use crate::quants::quantize_row;
    use crate::rng::XorShift;

    fn vnni() -> bool {
        crate::simd::detected() >= crate::simd::Level::Avx512Vnni
    }

    /// random rows of `ty` (model-like values), and with `pow2` every scale set to a power of
    /// two so that every float operation of a product is exact
    fn rows(r: &mut XorShift, ty: GgmlType, n: usize, k: usize, pow2: bool) -> Vec<AlignedBytes> {
        (0..n)
            .map(|i| {
                let mut w = AlignedBytes::zeroed(ty.row_size(k));
                quantize_row(ty, &r.model_like(k), &mut w);
                if pow2 {
                    let d = half::f16::from_f32(2f32.powi(-((i % 5) as i32) - 3));
                    match ty {
                        GgmlType::Q8_0 => as_blocks_mut::<BlockQ8_0>(&mut w, "t").iter_mut().for_each(|b| b.d = d),
                        GgmlType::Q4_0 => as_blocks_mut::<BlockQ4_0>(&mut w, "t").iter_mut().for_each(|b| b.d = d),
                        _ => unreachable!(),
                    }
                }
                w
            })
            .collect()
    }

    fn check(ty: GgmlType, n_rows: usize, n_cols: usize, k: usize, pow2: bool, seed: u64) {
        let mut r = XorShift::new(seed);
        let nb = k / 32;
        let w = rows(&mut r, ty, n_rows, k, pow2);
        let x = rows(&mut r, GgmlType::Q8_0, n_cols, k, pow2);
        let wr: Vec<&[u8]> = w.iter().map(|v| &v[..]).collect();
        let mut packed = vec![0u8; nb * BLOCK_BYTES];
        repack(ty, &wr, nb, &mut packed);
        let xb: Vec<&[BlockQ8_0]> = x.iter().map(|v| as_blocks::<BlockQ8_0>(v, "t")).collect();
        let aux: Vec<Vec<Aux>> = xb
            .iter()
            .map(|b| {
                let mut a = vec![Aux::default(); nb];
                aux_row(b, offset(ty), &mut a);
                a
            })
            .collect();
        let auxr: Vec<&[Aux]> = aux.iter().map(|a| &a[..]).collect();
        let mut out = vec![vec![f32::NAN; ROWS]; n_cols];
        let mut outr: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
        tile(&packed, nb, &xb, &auxr, &mut outr, n_rows);
        for j in 0..n_cols {
            let want = tile_reference(ty, &wr, xb[j]);
            let mag = want.iter().map(|v| v.abs()).fold(0.0, f32::max);
            for i in 0..n_rows {
                let got = out[j][i];
                if pow2 {
                    assert_eq!(got.to_bits(), want[i].to_bits(), "{} {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {}", ty.name(), want[i]);
                } else {
                    // both sum nb scaled block products in f32, in the same order; only the
                    // rounding of the scale products may differ
                    let tol = (mag + want[i].abs()) * 1e-5 * nb as f32;
                    assert!((got - want[i]).abs() <= tol, "{} {n_rows}×{n_cols} k={k}: col {j} row {i}: {got} vs {}", ty.name(), want[i]);
                }
            }
            // rows past n_rows are not written
            assert!(out[j][n_rows..].iter().all(|v| v.is_nan()), "{}: a row past {n_rows} was written", ty.name());
        }
    }

    /// every column count, full and partial row blocks, exact where the floats are exact
    #[test]
    fn tile_equals_the_scalar_reference() {
        if !vnni() {
            eprintln!("no AVX-512 VNNI: qgemm not tested");
            return;
        }
        for ty in [GgmlType::Q8_0, GgmlType::Q4_0] {
            for n_cols in 1..=MAX_COLS {
                for (n_rows, k) in [(16, 32), (16, 1024), (5, 256), (1, 64)] {
                    check(ty, n_rows, n_cols, k, true, 31 + n_cols as u64);
                    check(ty, n_rows, n_cols, k, false, 97 + n_cols as u64);
                }
            }
        }
    }

    /// extreme quants: Q8_0 weights of ±127 and -128 (the offset makes them 255 / 0) against
    /// activations of ±127, every block: the integer sums must not saturate
    #[test]
    fn extreme_quants_do_not_saturate() {
        if !vnni() {
            return;
        }
        let nb = 64;
        let mut w = vec![0u8; nb * 34];
        let mut x = vec![0u8; nb * 34];
        for (i, (wb, xb)) in w.chunks_exact_mut(34).zip(x.chunks_exact_mut(34)).enumerate() {
            wb[..2].copy_from_slice(&half::f16::from_f32(1.0).to_le_bytes());
            xb[..2].copy_from_slice(&half::f16::from_f32(1.0).to_le_bytes());
            for q in 0..32 {
                wb[2 + q] = if (i + q) % 3 == 0 { 0x80 } else { 127 };
                xb[2 + q] = if q % 2 == 0 { 127 } else { (-127i8) as u8 };
            }
        }
        let mut packed = vec![0u8; nb * BLOCK_BYTES];
        repack(GgmlType::Q8_0, &[&w], nb, &mut packed);
        let xb = as_blocks::<BlockQ8_0>(&x, "t");
        let mut aux = vec![Aux::default(); nb];
        aux_row(xb, 128, &mut aux);
        let mut out = [0f32; ROWS];
        tile(&packed, nb, &[xb], &[&aux], &mut [&mut out[..]], 1);
        assert_eq!(out[0], tile_reference(GgmlType::Q8_0, &[&w], xb)[0]);
    }
}
