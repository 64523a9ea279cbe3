//! F32 and F16 weights for prompts in the bits of upstream's native x86 build (AVX-512):
//! llamafile's `tinyBLAS<16, __m512, __m512, T, T, float>` order, `T` = float or ggml_fp16_t.
//!
//! Upstream's `ggml_compute_forward_mul_mat` hands each (i12, i13) slice of the product to
//! `llamafile_sgemm` first when src1 is contiguous and already of the weights' type (F32 x F32,
//! F16 x F16), and again after converting src1 to the weights' vec-dot type (F32 activations of F16
//! weights rounded to F16; F16 / BF16 activations of F32 weights widened to F32). `tinyBLAS`
//! takes the slice when it has at least 2 activation rows, `k % 16 == 0` and a row count that is
//! a multiple of 4 ([`Tiles::shape`]; the conditions do not depend on the slice, so either every
//! slice goes there or none does). It sums each output in one 16-lane accumulator, `acc =
//! fma(w[l..l+16], x[l..l+16], acc)` for `l = 0, 16, ...`, then GCC's `_mm512_reduce_add_ps`
//! ([`sgemm_order`], the definition; its tiling, 4 rows x up to 6 columns, changes which outputs
//! share a pass, not how any output is summed). Otherwise every output is the row kernel of
//! upstream's AVX-512 build: `ggml_vec_dot_f32` (`dot::float::f32_avx512_order`) or
//! `ggml_vec_dot_f16` (`dot::float::f16_avx512_order`).
//!
//! [`Tiles::tile`] computes 4 weight rows x up to [`MAX_COLS`] activation rows in that order: 24
//! accumulators of 16 lanes, each weight piece loaded (F16: and converted) once per tile step,
//! the activations given as f32 (F16 ones widened beforehand: no conversion in the loop). The
//! weights are read in place (no repacking). It equals the definition bit for bit (tests). Its
//! speed is below the one-lane-per-row tiles of [`crate::fgemm`] (another order), which
//! `GGML_RS_CPU_ORDER=fast` ([`fast`], [`crate::config`]) keeps for
//! whoever prefers the speed.
//!
//! **At AVX2** (+ FMA + F16C; the `avx2` kernel set, and what upstream's AVX2 builds run):
//! `tinyBLAS<8, __m256, ...>`, the same scheme with 8 lanes ([`sgemm_order8`]: `k % 8 == 0`,
//! tinyBLAS's `hsum` of a `__m256`); with 16 vector registers a tile is two passes of 2 rows ×
//! up to [`MAX_COLS`] columns.

use half::f16;

use crate::GgmlType;

/// weight rows per tile
pub const ROWS: usize = 4;
/// activation rows per tile at most
pub const MAX_COLS: usize = 6;

/// an element type tinyBLAS multiplies (f32 or f16), widened exactly to f32
pub trait Elem: Copy {
    fn widen(self) -> f32;
}

impl Elem for f32 {
    fn widen(self) -> f32 {
        self
    }
}

impl Elem for f16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

/// an output as upstream's `tinyBLAS<16, __m512, ...>` sums it (the definition [`Tiles::tile`] is
/// tested against): one accumulator of 16 lanes, lane l of piece p `fma(w[16p + l], x[16p + l],
/// lane)`, pieces in order, then GCC's `_mm512_reduce_add_ps`. `k` a multiple of 16.
pub fn sgemm_order<E: Elem>(w: &[E], x: &[E]) -> f32 {
    let k = w.len().min(x.len());
    assert!(k.is_multiple_of(16), "sgemm_order: k = {k} is not a multiple of 16");
    let mut acc = [0f32; 16];
    for p in (0..k).step_by(16) {
        for (l, lane) in acc.iter_mut().enumerate() {
            *lane = w[p + l].widen().mul_add(x[p + l].widen(), *lane);
        }
    }
    crate::expf::reduce_add16(&acc)
}

/// an output as upstream's `tinyBLAS<8, __m256, ...>` (its AVX2 builds) sums it: one
/// accumulator of 8 lanes, lane l of piece p `fma(w[8p + l], x[8p + l], lane)`, pieces in
/// order, then tinyBLAS's `hsum`: the 128-bit halves added, then `(u0 + u2) + (u1 + u3)`. `k` a
/// multiple of 8.
pub fn sgemm_order8<E: Elem>(w: &[E], x: &[E]) -> f32 {
    let k = w.len().min(x.len());
    assert!(k.is_multiple_of(8), "sgemm_order8: k = {k} is not a multiple of 8");
    let mut acc = [0f32; 8];
    for p in (0..k).step_by(8) {
        for (l, lane) in acc.iter_mut().enumerate() {
            *lane = w[p + l].widen().mul_add(x[p + l].widen(), *lane);
        }
    }
    let u: [f32; 4] = std::array::from_fn(|i| acc[i] + acc[i + 4]);
    (u[0] + u[2]) + (u[1] + u[3])
}

/// [`Tiles::f16_cols`]: `(w, stride, k, x, out)` with F16 columns
pub type F16ColsFn = unsafe fn(*const u8, usize, usize, &[*const u8], &[*mut f32]);

/// One kernel set's tinyBLAS-order tiles ([`crate::kernels::Gemms::sgemm`]).
#[derive(Clone, Copy)]
pub struct Tiles {
    /// tinyBLAS's vector width in upstream's build of the set (its `KN`): 16 floats at AVX-512
    /// ([`sgemm_order`]), 8 at AVX2 ([`sgemm_order8`])
    pub lanes: usize,
    /// `out[t][r] = order(weight row r, x[t])` for the 4 weight rows of `ty` (F32 or F16) at `w +
    /// r · stride` (bytes) and the `x.len()` (1 ..= [`MAX_COLS`]) activation rows, given as f32
    /// (for F16 weights values of f16: the definition's activations widened)
    ///
    /// # Safety
    /// `w + r · stride` readable for `k` values of `ty` (r < 4), each `x[t]` for `k` floats, each
    /// `out[t]` writable for 4 floats; `k` a multiple of `lanes`.
    pub tile: unsafe fn(GgmlType, *const u8, usize, usize, &[*const f32], &[*mut f32]),
    /// the tile for F16 weights whose columns stay F16 (widened in the kernel, as upstream's
    /// AVX2 tinyBLAS reads them: half the columns' bytes), where the set has it; the safety
    /// contract of `tile`, each `x[t]` holding `k` f16 values
    pub f16_cols: Option<F16ColsFn>,
}

impl Tiles {
    /// the definition of the tiles ([`sgemm_order`] at 16 lanes, else [`sgemm_order8`])
    pub fn order<E: Elem>(&self, w: &[E], x: &[E]) -> f32 {
        if self.lanes == 16 { sgemm_order(w, x) } else { sgemm_order8(w, x) }
    }

    /// upstream's build of the set hands a slice of `m` weight rows x `n` activation rows of
    /// length `k` to tinyBLAS (else each output is a row dot product)
    pub fn shape(&self, m: usize, n: usize, k: usize) -> bool {
        n >= 2 && k.is_multiple_of(self.lanes) && m.is_multiple_of(ROWS)
    }
}

/// the weight types of the tiles (upstream's tinyBLAS on F32 and F16 at AVX-512)
pub fn supports(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16)
}

/// `GGML_RS_CPU_ORDER=fast` ([`crate::config`]): F16 and F32 prompts through [`crate::fgemm`]'s
/// tiles (faster, another summation order than upstream's)
pub fn fast(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F16 | GgmlType::F32) && crate::config::get().fast()
}

/// the tiles a node of weights `ty` takes in the kernel set `k`: F32 / F16 where the set has
/// them (x86 from AVX2: the order of upstream's build of the set), the fast tiles not asked for
pub fn exact(ty: GgmlType, k: &crate::kernels::Kernels) -> Option<Tiles> {
    k.gemm.sgemm.filter(|_| supports(ty) && !fast(ty))
}

/// [`Tiles::tile`] at AVX2 (8 lanes)
///
/// # Safety
/// as [`Tiles::tile`], on a CPU with AVX2, FMA and F16C
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn tile_raw_avx2(ty: GgmlType, w: *const u8, stride: usize, k: usize, x: &[*const f32], out: &[*mut f32]) {
    assert!(k.is_multiple_of(8) && x.len() == out.len() && (1..=MAX_COLS).contains(&x.len()), "sgemm tiles: k = {k}, {} columns", x.len());
    assert!(matches!(ty, GgmlType::F32 | GgmlType::F16), "sgemm tiles: {} is not a tinyBLAS weight type", ty.name());
    let mut xb = [std::ptr::null::<u8>(); MAX_COLS];
    for (d, p) in xb.iter_mut().zip(x) {
        *d = p.cast();
    }
    let xb = &xb[..x.len()];
    // SAFETY: the caller's contract (1 to 6 columns)
    unsafe {
        match ty {
            GgmlType::F16 => x86::tile8::<true, false>(w, stride, k, xb, out),
            _ => x86::tile8::<false, false>(w, stride, k, xb, out),
        }
    }
}

/// [`Tiles::tile`] at AVX-512 (16 lanes)
///
/// # Safety
/// as [`Tiles::tile`], on a CPU with AVX-512 F/BW/VL
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn tile_raw_512(ty: GgmlType, w: *const u8, stride: usize, k: usize, x: &[*const f32], out: &[*mut f32]) {
    assert!(k.is_multiple_of(16) && x.len() == out.len() && (1..=MAX_COLS).contains(&x.len()), "sgemm tiles: k = {k}, {} columns", x.len());
    // SAFETY: the caller's contract; the arrays hold exactly N pointers
    unsafe {
        macro_rules! go {
            ($w:literal) => {
                match x.len() {
                    1 => x86::tile::<1, $w>(w, stride, k, x.try_into().expect("1 column"), out.try_into().expect("1 column")),
                    2 => x86::tile::<2, $w>(w, stride, k, x.try_into().expect("2 columns"), out.try_into().expect("2 columns")),
                    3 => x86::tile::<3, $w>(w, stride, k, x.try_into().expect("3 columns"), out.try_into().expect("3 columns")),
                    4 => x86::tile::<4, $w>(w, stride, k, x.try_into().expect("4 columns"), out.try_into().expect("4 columns")),
                    5 => x86::tile::<5, $w>(w, stride, k, x.try_into().expect("5 columns"), out.try_into().expect("5 columns")),
                    _ => x86::tile::<6, $w>(w, stride, k, x.try_into().expect("6 columns"), out.try_into().expect("6 columns")),
                }
            };
        }
        match ty {
            GgmlType::F32 => go!(false),
            GgmlType::F16 => go!(true),
            _ => panic!("sgemm tiles: {} is not a tinyBLAS weight type", ty.name()),
        }
    }
}

/// [`Tiles::f16_cols`] at AVX2: F16 weights whose columns are F16 too (widened in the kernel, as
/// upstream's tinyBLAS reads them): half the columns' bytes, so 6 columns of a long row stay in L1
///
/// # Safety
/// as [`Tiles::tile`] at AVX2, each `x[t]` holding `k` f16 values
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn tile_raw_f16_cols(w: *const u8, stride: usize, k: usize, x: &[*const u8], out: &[*mut f32]) {
    assert!(k.is_multiple_of(8) && x.len() == out.len() && (1..=MAX_COLS).contains(&x.len()), "sgemm::tile_raw_f16_cols: k = {k}, {} columns", x.len());
    // SAFETY: the caller's contract
    unsafe { x86::tile8::<true, true>(w, stride, k, x, out) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::dot::x86::{hsum_ps, reduce_add_ps_gcc};

    /// [`super::Tiles::tile`] at AVX2: the 4 rows as two passes of 2 rows over k, each against all
    /// the columns (up to 6; fewer: the last one repeated, its outputs written once): 12
    /// accumulators, 2 weight pieces loaded (F16: and converted) once per step, one column
    /// piece at a time. (4 rows × 3 columns, upstream's tile, needs all 16 registers and LLVM
    /// spilled and rotated them: 0.5× upstream's speed; 4 × 2 reached 0.82×.)
    ///
    /// # Safety
    /// as [`super::Tiles::tile`] at AVX2, 1 ≤ `x.len()` = `out.len()` ≤ 6
    #[target_feature(enable = "avx2,f16c,fma")]
    pub(super) unsafe fn tile8<const F16: bool, const XH: bool>(w: *const u8, stride: usize, k: usize, x: &[*const u8], out: &[*mut f32]) {
        let n = x.len();
        let xs: [*const u8; 6] = std::array::from_fn(|t| x[t.min(n - 1)]);
        // SAFETY (the loads): 8 values at element p of a column, p + 8 <= k (caller)
        let ly =
            |c: *const u8, p: usize| unsafe { if XH { _mm256_cvtph_ps(_mm_loadu_si128(c.add(2 * p).cast())) } else { _mm256_loadu_ps(c.add(4 * p).cast()) } };
        let eb = if F16 { 2 } else { 4 };
        // SAFETY (the loads): 8 values at element p of a weight row, p + 8 <= k (caller)
        let ld = |r: *const u8, p: usize| unsafe {
            let q = r.add(eb * p);
            if F16 { _mm256_cvtph_ps(_mm_loadu_si128(q.cast())) } else { _mm256_loadu_ps(q.cast()) }
        };
        for pass in 0..2 {
            let (ra, rb) = (w.wrapping_add(2 * pass * stride), w.wrapping_add((2 * pass + 1) * stride));
            let z = _mm256_setzero_ps();
            let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5) = (z, z, z, z, z, z);
            let (mut b0, mut b1, mut b2, mut b3, mut b4, mut b5) = (z, z, z, z, z, z);
            let mut p = 0;
            while p < k {
                let (va, vb) = (ld(ra, p), ld(rb, p));
                let y = ly(xs[0], p);
                a0 = _mm256_fmadd_ps(va, y, a0);
                b0 = _mm256_fmadd_ps(vb, y, b0);
                let y = ly(xs[1], p);
                a1 = _mm256_fmadd_ps(va, y, a1);
                b1 = _mm256_fmadd_ps(vb, y, b1);
                let y = ly(xs[2], p);
                a2 = _mm256_fmadd_ps(va, y, a2);
                b2 = _mm256_fmadd_ps(vb, y, b2);
                let y = ly(xs[3], p);
                a3 = _mm256_fmadd_ps(va, y, a3);
                b3 = _mm256_fmadd_ps(vb, y, b3);
                let y = ly(xs[4], p);
                a4 = _mm256_fmadd_ps(va, y, a4);
                b4 = _mm256_fmadd_ps(vb, y, b4);
                let y = ly(xs[5], p);
                a5 = _mm256_fmadd_ps(va, y, a5);
                b5 = _mm256_fmadd_ps(vb, y, b5);
                p += 8;
            }
            let cols = [[a0, b0], [a1, b1], [a2, b2], [a3, b3], [a4, b4], [a5, b5]];
            for (o, c) in out.iter().zip(cols) {
                // SAFETY: 4 writable floats per column (caller): this pass's rows 2·pass, 2·pass + 1
                unsafe {
                    o.add(2 * pass).write_unaligned(hsum_ps(c[0]));
                    o.add(2 * pass + 1).write_unaligned(hsum_ps(c[1]));
                }
            }
        }
    }

    /// [`super::Tiles::tile`] for N columns of weights in f16 (`F16`) or f32
    ///
    /// # Safety
    /// as [`super::Tiles::tile`]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
    pub(super) unsafe fn tile<const N: usize, const F16: bool>(w: *const u8, stride: usize, k: usize, x: &[*const f32; N], out: &[*mut f32; N]) {
        let mut acc = [[_mm512_setzero_ps(); super::ROWS]; N];
        let eb = if F16 { 2 } else { 4 };
        // SAFETY (the loads): 16 values at element p of a weight row or a column, p + 16 <= k
        let ld = |p: *const u8| unsafe { if F16 { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) } else { _mm512_loadu_ps(p.cast()) } };
        for p in (0..k).step_by(16) {
            let wv: [__m512; super::ROWS] = std::array::from_fn(|r| ld(w.wrapping_add(r * stride + eb * p)));
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

    /// `v` rounded to the weight type (the values of its elements)
    fn rounded(ty: GgmlType, v: Vec<f32>) -> Vec<f32> {
        match ty {
            GgmlType::F16 => v.into_iter().map(|v| f16::from_f32(v).to_f32()).collect(),
            _ => v,
        }
    }

    /// the definition on values of `ty` (given widened)
    fn order(tiles: &Tiles, ty: GgmlType, w: &[f32], x: &[f32]) -> f32 {
        match ty {
            GgmlType::F16 => {
                let h = |v: &[f32]| v.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>();
                tiles.order(&h(w), &h(x))
            }
            _ => tiles.order(w, x),
        }
    }

    /// `v`'s bytes in `ty` (F32 / F16)
    fn bytes(ty: GgmlType, v: &[f32]) -> Vec<u8> {
        match ty {
            GgmlType::F16 => v.iter().flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes()).collect(),
            _ => v.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect(),
        }
    }

    /// the tile equals the definition bit for bit, F32 and F16 weights, for every column count
    /// and k from 16 to a model's 4096, rows and columns at odd byte offsets
    #[test]
    fn tile_equals_upstreams_sgemm_order_bit_for_bit() {
        for level in Level::available().into_iter().filter(|l| matches!(l, Level::Avx2 | Level::Avx512)) {
            let tiles = crate::kernels::at(level).gemm.sgemm.expect("the x86 sets have the tinyBLAS tiles");
            let mut r = XorShift::new(18);
            for ty in [GgmlType::F32, GgmlType::F16] {
                let eb = ty.type_size();
                for k in [8usize, 16, 40, 48, 64, 96, 256, 1536, 4096] {
                    if !k.is_multiple_of(tiles.lanes) {
                        continue;
                    }
                    let rows: Vec<Vec<f32>> = (0..ROWS).map(|_| rounded(ty, r.model_like(k))).collect();
                    let stride = eb * k + 6;
                    let mut w = vec![0u8; 1 + ROWS * stride];
                    for (i, row) in rows.iter().enumerate() {
                        w[1 + i * stride..][..eb * k].copy_from_slice(&bytes(ty, row));
                    }
                    for n in 1..=MAX_COLS {
                        let cols: Vec<Vec<f32>> = (0..n).map(|_| rounded(ty, r.model_like(k).into_iter().map(|v| v * 40.0).collect())).collect();
                        // each column one float past a 64-byte boundary
                        let cb: Vec<Vec<f32>> = cols.iter().map(|c| std::iter::once(0.0).chain(c.iter().copied()).collect()).collect();
                        let mut outs = vec![[f32::NAN; ROWS]; n];
                        let xp: Vec<*const f32> = cb.iter().map(|b| b[1..].as_ptr()).collect();
                        let op: Vec<*mut f32> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
                        // SAFETY: the set's table (built on this CPU); 4 rows of k values stride apart
                        // in w, n columns of k values, n outputs of 4 floats
                        unsafe { (tiles.tile)(ty, w[1..].as_ptr(), stride, k, &xp, &op) };
                        for t in 0..n {
                            for i in 0..ROWS {
                                let want = order(&tiles, ty, &rows[i], &cols[t]);
                                assert_eq!(
                                    outs[t][i].to_bits(),
                                    want.to_bits(),
                                    "{} {} k={k} n={n} column {t} row {i}: {} vs {want}",
                                    level.name(),
                                    ty.name(),
                                    outs[t][i]
                                );
                            }
                        }
                        if let Some(f16_cols) = tiles.f16_cols.filter(|_| ty == GgmlType::F16) {
                            // the same with the columns kept in f16 (odd 2-byte offsets)
                            let hb: Vec<Vec<u8>> = cols.iter().map(|c| std::iter::once(0u8).chain(std::iter::once(0)).chain(bytes(ty, c)).collect()).collect();
                            let hp: Vec<*const u8> = hb.iter().map(|b| b[2..].as_ptr()).collect();
                            let mut outh = vec![[f32::NAN; ROWS]; n];
                            let oh: Vec<*mut f32> = outh.iter_mut().map(|o| o.as_mut_ptr()).collect();
                            // SAFETY: AVX2; 4 rows of k f16 stride apart, n columns of k f16, n outputs of 4
                            unsafe { f16_cols(w[1..].as_ptr(), stride, k, &hp, &oh) };
                            assert_eq!(outh, outs, "f16 columns k={k} n={n}");
                        }
                    }
                }
            }
        }
    }

    /// the tinyBLAS order is neither the row kernels' (ggml_vec_dot_f32 / _f16 at AVX-512) nor
    /// the f64 reference's
    #[test]
    fn sgemm_order_is_not_the_row_kernels() {
        let mut r = XorShift::new(19);
        let h = |v: &[f32]| v.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>();
        let (mut vs_row, mut vs_ref, mut vs_row32, mut vs_ref32) = (false, false, false, false);
        for _ in 0..20 {
            let (w, x) = (r.model_like(1536), r.model_like(1536).into_iter().map(|v| v * 40.0).collect::<Vec<_>>());
            let (wh, xh) = (h(&w), h(&x));
            let s = sgemm_order(&wh, &xh);
            vs_row |= s.to_bits() != crate::dot::float::f16_avx512_order(&wh, &xh).to_bits();
            vs_ref |= s.to_bits() != crate::dot::float::f16_reference(&wh, &xh).to_bits();
            let s = sgemm_order(&w, &x);
            vs_row32 |= s.to_bits() != crate::dot::float::f32_avx512_order(&w, &x).to_bits();
            vs_ref32 |= s.to_bits() != crate::dot::float::f32_reference(&w, &x).to_bits();
        }
        assert!(vs_row && vs_ref && vs_row32 && vs_ref32, "20 random rows summed to the same bits: {vs_row} {vs_ref} {vs_row32} {vs_ref32}");
        // the shapes upstream's builds hand to tinyBLAS (16 and 8 lanes; the tile only described)
        let (l16, l8) = (Tiles { lanes: 16, tile: |_, _, _, _, _, _| (), f16_cols: None }, Tiles { lanes: 8, tile: |_, _, _, _, _, _| (), f16_cols: None });
        assert!(l16.shape(4, 2, 16) && !l16.shape(4, 1, 16) && !l16.shape(6, 8, 64) && !l16.shape(8, 8, 100) && !l16.shape(4, 2, 24));
        assert!(l8.shape(4, 2, 24) && !l8.shape(4, 2, 20));
        // the 8-lane order is another order again
        let (w, x) = (r.model_like(1536), r.model_like(1536));
        assert_ne!(sgemm_order8(&w, &x).to_bits(), sgemm_order(&w, &x).to_bits());
    }
}
