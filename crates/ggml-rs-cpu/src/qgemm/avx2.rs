//! The tiles of [`super`] at AVX2 (+ FMA): the same repacked blocks of 16 rows and the same
//! prepared columns as the AVX-512 VNNI kernels, so weights repacked once serve both levels.
//!
//! A 256-bit register holds 8 lanes of i32, so a block of 16 rows is taken as two halves of 8
//! (rows `8h .. 8h + 8`: bytes `32h .. 32h + 32` of each 64-byte group, and of each 16-float
//! table of scales / mins). `vpdpbusd` (u8 × i8, 4 products into each i32 lane) becomes
//! `vpmaddubsw` (u8 × i8, 2 products into each i16 lane, saturating) and `vpmaddwd` by ones
//! (2 i16 into each i32). The i16 lanes cannot saturate: a pair of products is at most
//! `2 · q_max · 128` in magnitude, so the 4-bit quants (`q_max` 15: 3840) sum 8 groups in i16
//! before one `vpmaddwd`, Q6_K (`q_max` 63: 16128) 2 groups; Q8_0's unsigned bytes (`q_max`
//! 255) would, so Q8_0 takes the signed quants back (`w ^ 0x80`) and multiplies `|w|` by
//! `y` with `w`'s sign (`vpsignb`), the sum then without the offset (the column's `neg` is not
//! added). Every integer sum is exact, and each kernel's float steps are the AVX-512 kernel's,
//! lane for lane: the same bits (tests).
//!
//! Register budget (16 ymm): the kernels keep a column's accumulators of one half (or one row
//! pair) in registers, so they take at most [`COLS`] columns per call ([`COLS_PAIRED`] for the
//! forms with more accumulators); [`super::TileFn`] calls them on its columns in pieces.

use std::arch::x86_64::*;

use super::{Aux, PAIR_COL_BLOCK, ROWS};

/// columns per call of the one-lane-per-row and pairs kernels
pub(super) const COLS: usize = 4;
/// columns per call of the k_pairs kernel (four accumulators per column)
pub(super) const COLS_PAIRED: usize = 2;

/// The integer sums of block `b` for the 8 rows of one half (`wh`: the half's first group, the
/// groups 64 bytes apart) and each of the `N` columns: the column's start (`aux.neg`, the
/// unsigned offset taken back; not for `Q8`) plus the `G` groups' products, summed in i16 for
/// `FLUSH` groups at a time.
///
/// # Safety
/// `wh` points to `G` groups (64 bytes apart) of 32 readable bytes; `x[j]` holds the block's
/// `4 · G` quants at `b · 4G` and `aux[j]` its entry `b`
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn block_isums<const N: usize, const G: usize, const Q8: bool, const FLUSH: usize>(
    wh: *const u8,
    b: usize,
    x: &[*const i8; N],
    aux: &[*const Aux; N],
) -> [__m256i; N] {
    let ones = _mm256_set1_epi16(1);
    let flip = _mm256_set1_epi8(-128);
    let mut isum = [_mm256_setzero_si256(); N];
    let mut s16 = [_mm256_setzero_si256(); N];
    // SAFETY: the caller's contract
    unsafe {
        if !Q8 {
            for j in 0..N {
                isum[j] = _mm256_set1_epi32((*aux[j].add(b)).neg);
            }
        }
        for g in 0..G {
            let wg = _mm256_loadu_si256(wh.add(g * 64).cast());
            // Q8: the signed quants, their magnitudes
            let ws = if Q8 { _mm256_xor_si256(wg, flip) } else { wg };
            let wu = if Q8 { _mm256_abs_epi8(ws) } else { wg };
            for j in 0..N {
                let y = _mm256_set1_epi32(x[j].add(b * 4 * G + 4 * g).cast::<i32>().read_unaligned());
                let y = if Q8 { _mm256_sign_epi8(y, ws) } else { y };
                let p = _mm256_maddubs_epi16(wu, y);
                s16[j] = if g % FLUSH == 0 { p } else { _mm256_add_epi16(s16[j], p) };
            }
            if (g + 1) % FLUSH == 0 || g + 1 == G {
                for j in 0..N {
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16[j], ones));
                }
            }
        }
    }
    isum
}

/// stores the first `n` (≤ 8) lanes of `v` at `out`
///
/// # Safety
/// `out` writable for `n` floats
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_rows(out: *mut f32, v: __m256, n: usize) {
    // SAFETY: n floats at out (caller)
    unsafe {
        if n >= 8 {
            _mm256_storeu_ps(out, v);
        } else {
            let mut t = [0f32; 8];
            _mm256_storeu_ps(t.as_mut_ptr(), v);
            std::ptr::copy_nonoverlapping(t.as_ptr(), out, n);
        }
    }
}

/// The one-lane-per-row forms (Q8_0 with `Q8`, Q4_0, Q4_K with `MIN`, Q6_K with `G` = 4):
/// each output `Σ_b fma(f32(isum_b), dw · dy_b)` (`- Σ_b mw · m_b` with mins), as
/// [`super::x86`]'s `tile`.
///
/// # Safety
/// as [`super::TileFn`], with exactly `N` columns, blocks of `G` groups, mins if `MIN`
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile<const N: usize, const G: usize, const MIN: bool, const Q8: bool, const FLUSH: usize>(
    w: *const u8,
    nb: usize,
    x: [*const i8; N],
    aux: [*const Aux; N],
    out: [*mut f32; N],
    n_rows: usize,
) {
    let bb = ROWS * 4 * G + ROWS * 4 + if MIN { ROWS * 4 } else { 0 };
    for h in 0..2 {
        if 8 * h >= n_rows {
            break;
        }
        let mut acc = [_mm256_setzero_ps(); N];
        let mut accm = [_mm256_setzero_ps(); N];
        for b in 0..nb {
            // SAFETY: block b of the weights, of every column's quants and aux (caller)
            unsafe {
                let wb = w.add(b * bb);
                let isum = block_isums::<N, G, Q8, FLUSH>(wb.add(32 * h), b, &x, &aux);
                let dw = _mm256_loadu_ps(wb.add(ROWS * 4 * G + 32 * h).cast());
                for j in 0..N {
                    let s = _mm256_mul_ps(dw, _mm256_set1_ps((*aux[j].add(b)).d));
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), s, acc[j]);
                }
                if MIN {
                    let mw = _mm256_loadu_ps(wb.add(ROWS * 4 * G + ROWS * 4 + 32 * h).cast());
                    for j in 0..N {
                        accm[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps((*aux[j].add(b)).m), accm[j]);
                    }
                }
            }
        }
        for j in 0..N {
            let r = if MIN { _mm256_sub_ps(acc[j], accm[j]) } else { acc[j] };
            // SAFETY: out[j] is writable for n_rows floats (caller), rows 8h .. n_rows
            unsafe { store_rows(out[j].add(8 * h), r, n_rows - 8 * h) };
        }
    }
}

/// The k_pairs form (Q4_K in upstream's repacked GEMM order), as [`super::x86`]'s `k_pairs`.
///
/// # Safety
/// as [`super::TileFn`], with exactly `N` columns of the k_pairs form (nb a multiple of 8)
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn k_pairs<const N: usize>(w: *const u8, nb: usize, x: [*const i8; N], aux: [*const Aux; N], out: [*mut f32; N], n_rows: usize) {
    const G: usize = 8;
    let bb = ROWS * 4 * G + 4 * ROWS * 4;
    let (sc_at, m_at, d_at, dmin_at) = (ROWS * 4 * G, ROWS * 4 * G + ROWS * 4, ROWS * 4 * G + 2 * ROWS * 4, ROWS * 4 * G + 3 * ROWS * 4);
    for h in 0..2 {
        if 8 * h >= n_rows {
            break;
        }
        let o = 32 * h;
        let mut acc = [_mm256_setzero_ps(); N];
        let mut accm = [_mm256_setzero_ps(); N];
        let mut s = [_mm256_setzero_ps(); N];
        let mut sm = [_mm256_setzero_ps(); N];
        for b0 in (0..nb).step_by(2) {
            // SAFETY: blocks b0, b0 + 1 < nb of the weights, of every column's quants and aux (caller)
            unsafe {
                let (w0, w1) = (w.add(b0 * bb), w.add((b0 + 1) * bb));
                if b0 % 8 == 0 {
                    let (dw, dminw) = (_mm256_loadu_ps(w0.add(d_at + o).cast()), _mm256_loadu_ps(w0.add(dmin_at + o).cast()));
                    for j in 0..N {
                        let dy = _mm256_set1_ps((*aux[j].add(b0)).d);
                        s[j] = _mm256_mul_ps(dw, dy);
                        sm[j] = _mm256_mul_ps(dminw, dy);
                    }
                }
                let i0 = block_isums::<N, G, false, 8>(w0.add(o), b0, &x, &aux);
                let i1 = block_isums::<N, G, false, 8>(w1.add(o), b0 + 1, &x, &aux);
                let (sc0, sc1) = (_mm256_loadu_ps(w0.add(sc_at + o).cast()), _mm256_loadu_ps(w1.add(sc_at + o).cast()));
                let (m0, m1) = (_mm256_loadu_ps(w0.add(m_at + o).cast()), _mm256_loadu_ps(w1.add(m_at + o).cast()));
                for j in 0..N {
                    let i = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[j]), sc1, _mm256_mul_ps(_mm256_cvtepi32_ps(i0[j]), sc0));
                    acc[j] = _mm256_fmadd_ps(i, s[j], acc[j]);
                    let (y0, y1) = (_mm256_set1_ps((*aux[j].add(b0)).m), _mm256_set1_ps((*aux[j].add(b0 + 1)).m));
                    let m = _mm256_fmadd_ps(m1, y1, _mm256_mul_ps(m0, y0));
                    accm[j] = _mm256_fmadd_ps(m, sm[j], accm[j]);
                }
            }
        }
        for j in 0..N {
            // SAFETY: out[j] is writable for n_rows floats (caller), rows 8h .. n_rows
            unsafe { store_rows(out[j].add(8 * h), _mm256_sub_ps(acc[j], accm[j]), n_rows - 8 * h) };
        }
    }
}

/// The pairs form (Q8_0, and Q4_0 as Q8_0's bytes: upstream's x86 order), as [`super::x86`]'s
/// `pairs`: a row pair at a time, its 64 bytes a block as two registers (groups 0..4 and 4..8,
/// lane `2g + h` row `2p + h`'s group g), the signed products as for Q8_0 in [`tile`] (the
/// prepared block's lane starts are not read: the offset never enters), per lane
/// `acc = fma(dw · dy, f32(isum), acc)`, then each row's 8 lanes in group order summed as
/// `hsum_ps` sums them.
///
/// # Safety
/// as [`super::TileFn`], with exactly `N` columns of the pairs form's prepared blocks
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn pairs<const N: usize>(w: *const u8, nb: usize, x: [*const i8; N], aux: [*const Aux; N], out: [*mut f32; N], n_rows: usize) {
    let bb = ROWS * 32 + ROWS * 4;
    let ones = _mm256_set1_epi16(1);
    let flip = _mm256_set1_epi8(-128);
    for p in 0..ROWS / 2 {
        if 2 * p >= n_rows {
            break;
        }
        let mut acc = [[_mm256_setzero_ps(); 2]; N];
        for b in 0..nb {
            // SAFETY: block b of the weights and of every column's prepared blocks (caller)
            unsafe {
                let wb = w.add(b * bb);
                // the pair's two weight scales, (dw_2p, dw_2p+1) in every lane pair
                let dw = _mm256_castpd_ps(_mm256_broadcast_sd(&*wb.add(ROWS * 32 + 8 * p).cast::<f64>()));
                let ws = [0, 1].map(|q| _mm256_xor_si256(_mm256_loadu_si256(wb.add(64 * p + 32 * q).cast()), flip));
                let wu = ws.map(|v| _mm256_abs_epi8(v));
                for j in 0..N {
                    let xb = x[j].add(b * PAIR_COL_BLOCK);
                    let s = _mm256_mul_ps(dw, _mm256_set1_ps((*aux[j].add(b)).d));
                    for q in 0..2 {
                        let y = _mm256_sign_epi8(_mm256_loadu_si256(xb.add(32 * q).cast()), ws[q]);
                        let i = _mm256_madd_epi16(_mm256_maddubs_epi16(wu[q], y), ones);
                        acc[j][q] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(i), acc[j][q]);
                    }
                }
            }
        }
        for h in 0..2 {
            let row = 2 * p + h;
            if row >= n_rows {
                continue;
            }
            // row h's lanes h, 2 + h, 4 + h, 6 + h of each register: groups 0..4, then 4..8
            let h = h as i32;
            let lo = _mm256_setr_epi32(h, 2 + h, 4 + h, 6 + h, 0, 0, 0, 0);
            let hi = _mm256_setr_epi32(0, 0, 0, 0, h, 2 + h, 4 + h, 6 + h);
            for j in 0..N {
                let lanes = _mm256_blend_ps::<0xF0>(_mm256_permutevar8x32_ps(acc[j][0], lo), _mm256_permutevar8x32_ps(acc[j][1], hi));
                // SAFETY: out[j] is writable for n_rows floats (caller), row < n_rows
                unsafe { out[j].add(row).write_unaligned(crate::dot::x86::hsum_ps(lanes)) };
            }
        }
    }
}
