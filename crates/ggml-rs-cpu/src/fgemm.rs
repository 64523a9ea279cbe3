//! Tiled float GEMM for prompt processing (MUL_MAT with many activation rows) of F32, F16 and
//! BF16 weights, on AVX-512. F32 and F16 weights come here only with `GGML_RS_CPU_ORDER=fast`
//! ([`crate::config`]): by default they take [`crate::sgemm`] (upstream's order).
//!
//! Weights are repacked 32 rows at a time, transposed so that element k of the 32 rows is
//! contiguous (F16 / BF16 kept in 16 bits: half the memory traffic of widened weights; widened
//! in the kernel, one instruction or two per element of 16 rows) and loaded as two 512-bit
//! registers of f32; activations (rounded to the weights' vec-dot type,
//! as the row kernels see them, then widened) are broadcast one element at a time: a tile of 32
//! rows × up to [`MAX_COLS`] columns is an outer-product update of `MAX_COLS` accumulators per
//! element, each weight load reused across the columns, and a column's 32 results are a
//! contiguous piece of dst.
//!
//! Each (row, column) sum runs over k in order in one f32 lane with fused multiply-adds, so a
//! tile's result does not depend on how the caller splits k ([`tile`]'s `accumulate`).
//!
//! The weights are repacked per MUL_MAT call (one pass over them, cheap next to the 512-column
//! product); a repacking buffer type would do it once at load time.
//!
//! At AVX2 (16 registers of 8 lanes) the same repacked blocks are taken as two halves of 16
//! rows, each a pass over k with two registers of weights and up to [`AVX2_COLS`] columns'
//! accumulators; every (row, column) sum is the same chain of fused multiply-adds, so the AVX2
//! tiles give the AVX-512 tiles' bits (tests).

use crate::GgmlType;

/// weight rows per repacked block (the f32 lanes of two 512-bit registers: each broadcast
/// activation element feeds two FMAs, 10 loads per 16 FMAs rather than 9 per 8 with 16 rows;
/// measured on F16 4096 × 14336 × 512: 0.6-0.8× upstream with 16 rows)
pub const ROWS: usize = 32;
/// activation rows per tile
pub const MAX_COLS: usize = 8;
/// columns per pass of the AVX2 kernel (8 accumulators of a 16-row half)
pub const AVX2_COLS: usize = 4;

/// the weight types this GEMM takes
pub fn supports(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
}

/// [`tile`] on raw pointers in one kernel set's form ([`crate::kernels::Gemms::fgemm`]: AVX2's
/// `tile_raw_avx2`, AVX-512's `tile_raw_512`), dispatching on the weight type and the column
/// count: `(ty, w, kc, x, out, n_rows, accumulate)`.
///
/// # Safety
/// `w` holds `32 · kc` repacked elements of `ty`; each `x[j]` `kc` floats; each `out[j]` is
/// readable and writable for `n_rows ≤ 32` floats; 1 ≤ columns ≤ 8.
pub type TileFn = unsafe fn(GgmlType, *const u8, usize, &[*const f32], &[*mut f32], usize, bool);

/// bytes of one repacked weight element (F16 / BF16 stay 16-bit)
pub fn elem_bytes(ty: GgmlType) -> usize {
    match ty {
        GgmlType::F32 => 4,
        GgmlType::F16 | GgmlType::BF16 => 2,
        _ => panic!("fgemm::elem_bytes: {} is not an fgemm weight type", ty.name()),
    }
}

/// Repacks up to 32 weight rows of `ty` (`k` elements each) into `out` (`32 · k` elements of
/// [`elem_bytes`], element k of row r at element `32 k + r`, bits unchanged); missing rows are
/// zero. `repack16`: the set's gather form for 32 rows of 16-bit elements ([`Repack16Fn`]), if any.
pub fn repack(ty: GgmlType, rows: &[&[u8]], k: usize, out: &mut [u8], repack16: Option<Repack16Fn>) {
    let eb = elem_bytes(ty);
    assert!(rows.len() <= ROWS, "fgemm::repack: {} rows, at most {ROWS}", rows.len());
    assert_eq!(out.len(), ROWS * k * eb, "fgemm::repack: output of {} bytes for {k} elements", out.len());
    for (r, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), k * eb, "fgemm::repack {}: row {r} of {} bytes is not {k} elements", ty.name(), row.len());
    }
    if let Some(gather) = repack16.filter(|_| eb == 2)
        && repack_16bit_simd(rows, k, out, gather)
    {
        return;
    }
    match eb {
        2 => repack_n::<2>(rows, out),
        _ => repack_n::<4>(rows, out),
    }
}

/// The gather form of [`repack`] for 32 whole rows of 16-bit elements (the AVX-512 sets':
/// `x86::repack16`, two elements of each row per 32-bit gather lane, rows 0-15 and 16-31, the
/// even and the odd elements of the 32 rows picked into one register each): `(base, offsets of
/// the rows from base, k, out)`. (The element-wise copy was 4% of a medium F16 model's prompt
/// processing: every weight matrix is repacked per MUL_MAT.)
///
/// # Safety
/// row r's `k ≥ 2` 16-bit elements at `base + offs[r]`; `out` writable for `32 · k` of them.
pub type Repack16Fn = unsafe fn(*const u8, &[i32; ROWS], usize, *mut u8);

/// [`repack`] of 16-bit rows by `gather`; `false` (nothing written) with fewer than 32 rows, or
/// rows too far apart for 32-bit offsets
fn repack_16bit_simd(rows: &[&[u8]], k: usize, out: &mut [u8], gather: Repack16Fn) -> bool {
    if rows.len() != ROWS || k < 2 {
        return false;
    }
    let base = rows[0].as_ptr();
    let mut offs = [0i32; ROWS];
    for (o, row) in offs.iter_mut().zip(rows) {
        match i32::try_from((row.as_ptr() as isize).wrapping_sub(base as isize)) {
            Ok(v) => *o = v,
            Err(_) => return false,
        }
    }
    // SAFETY: the set's form (its table is built on a CPU with it); every row holds k ≥ 2 16-bit
    // elements at base + its offset, out 32 · k of them (repack asserted both)
    unsafe { gather(base, &offs, k, out.as_mut_ptr()) };
    true
}

/// [`repack`] for elements of `EB` bytes: the output written in order, one element of each of
/// the 32 rows at a time (the rows are read as 32 streams; writing in order rather than one
/// row at a time, 32 elements apart, keeps the writes sequential)
fn repack_n<const EB: usize>(rows: &[&[u8]], out: &mut [u8]) {
    for (e, dst) in out.chunks_exact_mut(ROWS * EB).enumerate() {
        let (have, missing) = dst.split_at_mut(rows.len() * EB);
        for (d, row) in have.chunks_exact_mut(EB).zip(rows) {
            let v: [u8; EB] = row[e * EB..(e + 1) * EB].try_into().expect("EB bytes");
            d.copy_from_slice(&v);
        }
        missing.fill(0);
    }
}

/// One tile: `out[j][r] (+)= Σ_e w[e][r] · x[j][e]` over the `kc` elements of `w` (weights of
/// `ty` repacked by [`repack`], from some element on) and of each column `x[j]` (at most
/// [`MAX_COLS`]); with `accumulate` the sums continue from what `out` holds. The first `n_rows`
/// results of each column are written.
///
/// Panics if the sizes do not agree, the CPU lacks `level`, or the set has no float tiles.
pub fn tile(ty: GgmlType, level: crate::simd::Level, w: &[u8], x: &[&[f32]], out: &mut [&mut [f32]], n_rows: usize, accumulate: bool) {
    let tiles = crate::kernels::at(level).gemm.fgemm.unwrap_or_else(|| panic!("fgemm::tile: the {} set has no float tiles", level.name()));
    let eb = elem_bytes(ty);
    let kc = w.len() / (ROWS * eb);
    assert_eq!(w.len(), kc * ROWS * eb, "fgemm::tile: weights of {} bytes are not rows of {ROWS}", w.len());
    assert!(n_rows <= ROWS && !x.is_empty() && x.len() <= MAX_COLS, "fgemm::tile: {n_rows} rows × {} columns", x.len());
    assert_eq!(x.len(), out.len(), "fgemm::tile: {} columns, {} outputs", x.len(), out.len());
    let mut xp = [std::ptr::null::<f32>(); MAX_COLS];
    let mut op = [std::ptr::null_mut::<f32>(); MAX_COLS];
    for j in 0..x.len() {
        assert!(x[j].len() == kc && out[j].len() >= n_rows, "fgemm::tile: column {j} is not {kc} elements / {n_rows} outputs");
        (xp[j], op[j]) = (x[j].as_ptr(), out[j].as_mut_ptr());
    }
    // SAFETY: the set's table (built on a CPU with it); every pointer covers kc elements / n_rows
    // outputs (asserted above)
    unsafe { tiles(ty, w.as_ptr(), kc, &xp[..x.len()], &op[..x.len()], n_rows, accumulate) }
}

/// [`TileFn`] at AVX2 (+ FMA + F16C): the columns in pieces of [`AVX2_COLS`]
///
/// # Safety
/// as [`TileFn`], on a CPU with AVX2, FMA and F16C
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile_raw_avx2(ty: GgmlType, w: *const u8, kc: usize, x: &[*const f32], out: &[*mut f32], n_rows: usize, accumulate: bool) {
    for (x, out) in x.chunks(AVX2_COLS).zip(out.chunks(AVX2_COLS)) {
        // SAFETY: forwarded from the caller, for these columns (the arrays hold N pointers)
        unsafe {
            macro_rules! cols8 {
                ($w:literal) => {
                    match x.len() {
                        1 => x86::tile8::<1, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                        2 => x86::tile8::<2, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                        3 => x86::tile8::<3, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                        _ => x86::tile8::<4, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    }
                };
            }
            match ty {
                GgmlType::F32 => cols8!(0),
                GgmlType::F16 => cols8!(1),
                GgmlType::BF16 => cols8!(2),
                _ => panic!("fgemm tiles: {} is not an fgemm weight type", ty.name()),
            }
        }
    }
}

/// [`TileFn`] at AVX-512
///
/// # Safety
/// as [`TileFn`], on a CPU with AVX-512 F/BW/VL
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile_raw_512(ty: GgmlType, w: *const u8, kc: usize, x: &[*const f32], out: &[*mut f32], n_rows: usize, accumulate: bool) {
    // SAFETY: forwarded from the caller
    unsafe {
        macro_rules! cols {
            ($w:literal) => {
                match x.len() {
                    1 => x86::tile::<1, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    2 => x86::tile::<2, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    3 => x86::tile::<3, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    4 => x86::tile::<4, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    5 => x86::tile::<5, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    6 => x86::tile::<6, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    7 => x86::tile::<7, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    8 => x86::tile::<8, $w>(w, kc, x.try_into().unwrap(), out.try_into().unwrap(), n_rows, accumulate),
                    n => panic!("fgemm tiles: {n} columns"),
                }
            };
        }
        match ty {
            GgmlType::F32 => cols!(0),
            GgmlType::F16 => cols!(1),
            GgmlType::BF16 => cols!(2),
            _ => panic!("fgemm tiles: {} is not an fgemm weight type", ty.name()),
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::ROWS;

    /// # Safety
    /// AVX-512 F/BW; row r's `k ≥ 2` 16-bit elements at `base + offs[r]`, `out` writable for
    /// `32 · k` of them
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) unsafe fn repack16(base: *const u8, offs: &[i32; ROWS], k: usize, out: *mut u8) {
        // SAFETY: 32 offsets = two registers
        let (lo, hi) = unsafe { (_mm512_loadu_si512(offs.as_ptr().cast()), _mm512_loadu_si512(offs.as_ptr().add(16).cast())) };
        // lane r of a gather holds (element e, element e + 1) of row r, e in the low half:
        // 16-bit word 2r of (lo-gather, hi-gather) is element e of row r, 2r + 1 element e + 1
        const EVEN: [i16; 32] = {
            let mut v = [0i16; 32];
            let mut i = 0;
            while i < 32 {
                v[i] = 2 * i as i16;
                i += 1;
            }
            v
        };
        // SAFETY: 32 words = one register
        let even = unsafe { _mm512_loadu_si512(EVEN.as_ptr().cast()) };
        let odd = _mm512_add_epi16(even, _mm512_set1_epi16(1));
        let mut e = 0;
        while e + 2 <= k {
            // SAFETY: elements e and e + 1 of every row (e + 2 ≤ k), outputs e and e + 1
            unsafe {
                let p = base.add(2 * e);
                let g0 = _mm512_i32gather_epi32::<1>(lo, p.cast());
                let g1 = _mm512_i32gather_epi32::<1>(hi, p.cast());
                _mm512_storeu_si512(out.add(e * 2 * ROWS).cast(), _mm512_permutex2var_epi16(g0, even, g1));
                _mm512_storeu_si512(out.add((e + 1) * 2 * ROWS).cast(), _mm512_permutex2var_epi16(g0, odd, g1));
            }
            e += 2;
        }
        if e < k {
            for (r, &o) in offs.iter().enumerate() {
                // SAFETY: the last element of row r, output element (k - 1, r)
                unsafe { std::ptr::copy_nonoverlapping(base.offset(o as isize + 2 * e as isize), out.add((e * ROWS + r) * 2), 2) };
            }
        }
    }

    /// [`tile`] at AVX2: each 16-row half of the block a pass over the `kc` elements, its two
    /// 8-row registers against `N` (≤ 4) broadcast columns
    ///
    /// # Safety
    /// as [`super::TileFn`] at AVX2, with exactly `N` columns of weights stored as `W`
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn tile8<const N: usize, const W: u8>(w: *const u8, kc: usize, x: [*const f32; N], out: [*mut f32; N], n_rows: usize, accumulate: bool) {
        const H: usize = ROWS / 2;
        let eb = if W == 0 { 4 } else { 2 };
        // the 8 rows at `p` of one element, widened to f32
        let load = |p: *const u8| -> __m256 {
            // SAFETY: p is within the weights (caller)
            unsafe {
                match W {
                    0 => _mm256_loadu_ps(p.cast()),
                    1 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                    _ => _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast())))),
                }
            }
        };
        for h in 0..2 {
            let rows = n_rows.saturating_sub(h * H).min(H);
            if rows == 0 {
                break;
            }
            let mut acc = [[_mm256_setzero_ps(); 2]; N];
            if accumulate {
                for j in 0..N {
                    let mut t = [0f32; H];
                    // SAFETY: out[j] is readable for n_rows floats: rows 16h .. 16h + rows
                    unsafe { std::ptr::copy_nonoverlapping(out[j].add(h * H), t.as_mut_ptr(), rows) };
                    // SAFETY: 16 floats of t
                    acc[j] = unsafe { [_mm256_loadu_ps(t.as_ptr()), _mm256_loadu_ps(t.as_ptr().add(8))] };
                }
            }
            for e in 0..kc {
                // SAFETY: element e of the weights (this half's 16 rows) and of every column (caller)
                unsafe {
                    let p = w.add((e * ROWS + h * H) * eb);
                    let (w0, w1) = (load(p), load(p.add(8 * eb)));
                    for j in 0..N {
                        let xe = _mm256_set1_ps(*x[j].add(e));
                        acc[j][0] = _mm256_fmadd_ps(w0, xe, acc[j][0]);
                        acc[j][1] = _mm256_fmadd_ps(w1, xe, acc[j][1]);
                    }
                }
            }
            for j in 0..N {
                let mut t = [0f32; H];
                // SAFETY: 16 floats of t; out[j] writable for rows 16h .. 16h + rows (caller)
                unsafe {
                    _mm256_storeu_ps(t.as_mut_ptr(), acc[j][0]);
                    _mm256_storeu_ps(t.as_mut_ptr().add(8), acc[j][1]);
                    std::ptr::copy_nonoverlapping(t.as_ptr(), out[j].add(h * H), rows);
                }
            }
        }
    }

    /// # Safety
    /// as [`super::TileFn`], with exactly `N` columns of weights stored as `W` (0 f32, 1 f16,
    /// 2 bf16)
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
    pub(super) unsafe fn tile<const N: usize, const W: u8>(w: *const u8, kc: usize, x: [*const f32; N], out: [*mut f32; N], n_rows: usize, accumulate: bool) {
        const H: usize = ROWS / 2;
        let bits = |n: usize| -> __mmask16 { if n >= H { 0xffff } else { (1u16 << n) - 1 } };
        let (m0, m1) = (bits(n_rows), bits(n_rows.saturating_sub(H)));
        let mut acc0 = [_mm512_setzero_ps(); N];
        let mut acc1 = [_mm512_setzero_ps(); N];
        if accumulate {
            for j in 0..N {
                // SAFETY: out[j] is readable for n_rows floats; the masks read no more
                unsafe {
                    acc0[j] = _mm512_maskz_loadu_ps(m0, out[j]);
                    acc1[j] = _mm512_maskz_loadu_ps(m1, out[j].wrapping_add(H));
                }
            }
        }
        // the 16 rows at `p` of one element, widened to f32
        let load = |p: *const u8| -> __m512 {
            // SAFETY: p is within the weights (caller)
            unsafe {
                match W {
                    0 => _mm512_loadu_ps(p.cast()),
                    1 => _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())),
                    // bf16 is the top half of an f32
                    _ => _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast())), 16)),
                }
            }
        };
        let eb = if W == 0 { 4 } else { 2 };
        for e in 0..kc {
            // SAFETY: element e of the weights and of every column (caller)
            unsafe {
                let p = w.add(e * ROWS * eb);
                let (w0, w1) = (load(p), load(p.add(H * eb)));
                for j in 0..N {
                    let xe = _mm512_set1_ps(*x[j].add(e));
                    acc0[j] = _mm512_fmadd_ps(w0, xe, acc0[j]);
                    acc1[j] = _mm512_fmadd_ps(w1, xe, acc1[j]);
                }
            }
        }
        for j in 0..N {
            // SAFETY: out[j] is writable for n_rows floats; the masks write no more
            unsafe {
                _mm512_mask_storeu_ps(out[j], m0, acc0[j]);
                _mm512_mask_storeu_ps(out[j].wrapping_add(H), m1, acc1[j]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::AlignedBytes;
    use crate::quants::{dequantize_row, quantize_row};
    use crate::rng::XorShift;

    /// the AVX-512 repacking of 16-bit rows against the element-wise one, bit for bit: rows of
    /// one buffer at a stride (as a weight matrix or a KV cache view), odd and even k, and the
    /// cases it leaves to the element-wise form (fewer rows) still repacked right
    #[test]
    fn repack_16bit_simd_equals_the_element_copy() {
        let mut r = XorShift::new(43);
        for (k, stride) in [(2usize, 4usize), (3, 6), (64, 1024), (65, 200), (300, 600)] {
            let buf: Vec<u8> = (0..stride * ROWS + 2 * k).map(|_| (r.f32_in(0.0, 256.0)) as u8).collect();
            for n_rows in [ROWS, 31, 1] {
                let rows: Vec<&[u8]> = (0..n_rows).map(|i| &buf[i * stride..i * stride + 2 * k]).collect();
                let mut want = vec![0xaau8; ROWS * k * 2];
                repack_n::<2>(&rows, &mut want);
                for kern in crate::kernels::available() {
                    let gather = kern.gemm.fgemm_repack16;
                    if let Some(g) = gather {
                        let mut got = vec![0x55u8; ROWS * k * 2];
                        let simd = repack_16bit_simd(&rows, k, &mut got, g);
                        assert_eq!(simd, n_rows == ROWS, "k={k} rows={n_rows}: SIMD taken");
                        if simd {
                            assert_eq!(got, want, "k={k} stride={stride}: SIMD vs element copy");
                        }
                    }
                    let mut via = vec![0x55u8; ROWS * k * 2];
                    repack(GgmlType::F16, &rows, k, &mut via, gather);
                    assert_eq!(via, want, "k={k} rows={n_rows} {}: repack", kern.set.name());
                }
            }
        }
    }

    /// the tile against a plain f32 fused multiply-add loop per (row, column), bit for bit (the
    /// same operations in the same order), whole and split over k
    #[test]
    fn tile_equals_the_sequential_sum() {
        // the AVX2 kernel and the AVX-512 one: the same chains, so the same bits
        for level in crate::simd::Level::available().into_iter().filter(|l| crate::kernels::at(*l).gemm.fgemm.is_some() && *l <= crate::simd::Level::Avx512) {
            let mut r = XorShift::new(41);
            for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
                for n_cols in 1..=MAX_COLS {
                    for (n_rows, k) in [(32, 64), (32, 300), (16, 40), (21, 33), (7, 33), (1, 8)] {
                        let w: Vec<AlignedBytes> = (0..n_rows)
                            .map(|_| {
                                let mut b = AlignedBytes::zeroed(ty.row_size(k));
                                quantize_row(ty, &r.model_like(k), &mut b);
                                b
                            })
                            .collect();
                        let wr: Vec<&[u8]> = w.iter().map(|b| &b[..]).collect();
                        let x: Vec<Vec<f32>> = (0..n_cols).map(|_| r.model_like(k)).collect();
                        let eb = elem_bytes(ty);
                        let mut packed = vec![0u8; ROWS * k * eb];
                        repack(ty, &wr, k, &mut packed, None);
                        let xr: Vec<&[f32]> = x.iter().map(|v| &v[..]).collect();
                        let split = k / 3;
                        for whole in [true, false] {
                            let mut out = vec![vec![f32::NAN; ROWS]; n_cols];
                            let mut outr: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
                            if whole {
                                tile(ty, level, &packed, &xr, &mut outr, n_rows, false);
                            } else {
                                let x0: Vec<&[f32]> = x.iter().map(|v| &v[..split]).collect();
                                let x1: Vec<&[f32]> = x.iter().map(|v| &v[split..]).collect();
                                tile(ty, level, &packed[..ROWS * split * eb], &x0, &mut outr, n_rows, false);
                                tile(ty, level, &packed[ROWS * split * eb..], &x1, &mut outr, n_rows, true);
                            }
                            for j in 0..n_cols {
                                for i in 0..n_rows {
                                    let mut wd = vec![0f32; k];
                                    dequantize_row(ty, wr[i], &mut wd);
                                    let want = wd.iter().zip(&x[j]).fold(0f32, |s, (p, q)| p.mul_add(*q, s));
                                    let got = out[j][i];
                                    assert_eq!(
                                        got.to_bits(),
                                        want.to_bits(),
                                        "{} {} {n_rows}×{n_cols} k={k} whole={whole}: col {j} row {i}: {got} vs {want}",
                                        level.name(),
                                        ty.name()
                                    );
                                }
                                assert!(out[j][n_rows..].iter().all(|v| v.is_nan()), "{}: a row past {n_rows} was written", ty.name());
                            }
                        }
                    }
                }
            }
        }
    }
}
