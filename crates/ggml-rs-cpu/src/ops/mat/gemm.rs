//! MUL_MAT through the GEMMs: the int8 tiles ([`crate::qgemm`]), upstream's tinyBLAS order
//! ([`crate::sgemm`]) and the float tiles ([`crate::fgemm`]), with the shapes each takes
//! ([`super::plan`] chooses among them and the row kernels).

use super::super::{Exec, View, raw_type};
use super::{Acts, prepare_activations};
use crate::GgmlType;
use crate::dot::Order;
use crate::ops::copy::elem::{Scalar, block_align, chunk_range, is_contiguous, offset, split, unravel};

/// activation rows from which the tiled GEMM beats the row kernels (below, repacking the
/// weights costs more than the tiles save)
const QGEMM_MIN_COLS: usize = 16;

/// the weight rows can be viewed as blocks in place (the repacking reads them so)
pub(super) fn rows_aligned(a: &View, wt: GgmlType) -> bool {
    [a.data as usize, a.nb[1]].iter().all(|x| x.is_multiple_of(block_align(wt)))
}

/// the shape the tiled int8 GEMM takes: weights of one slab (no broadcast) whose rows can be read as
/// blocks in place, enough activation rows
pub(super) fn tile_shape(a: &View, b: &View, wt: GgmlType) -> bool {
    rows_aligned(a, wt) && a.ne[2] == 1 && a.ne[3] == 1 && a.ne[1] > 0 && b.nrows() as usize >= QGEMM_MIN_COLS
}

/// MUL_MAT through [`crate::qgemm`]: activations to the vec-dot type (as the row path), then
/// their quants and per-block sums, weights repacked 16 rows at a time (unless `packed`: repacked
/// at load time, the repack buffer type), all in the scratch; then tiles of 16 rows × 8 columns,
/// in chunks of 4 row blocks × the columns ([`gemm_chunks`]).
///
/// With `repacked` ([`Order::repacked`]) the bits are upstream's repacked kernels': Q4_0's
/// tiles already sum in that order (one fma per block by `f32(dw) · f32(dy)`, GEMM and GEMV
/// rows alike); Q4_K's tiles (the k_pairs form) sum in its GEMM order, so the GEMM rows' Q8_K
/// are written by the 4-row quantizer, and the last `ne11 % 4` rows of each plane (upstream's
/// GEMV rows, quantized by the reference) are computed again, in the GEMV order, by the
/// mat-vec kernels (phase 3).
#[allow(clippy::too_many_arguments)]
pub(super) fn mul_mat_qgemm(
    a: &View,
    b: &View,
    d: &View,
    wt: GgmlType,
    packed: Option<crate::ops::Packed>,
    form: (crate::qgemm::Kind, crate::qgemm::TileFn),
    repacked: bool,
    exec: &mut Exec,
) {
    use crate::qgemm::{Aux, MAX_COLS, ROWS};
    let (kd, tiles) = form;
    // weights repacked at load time are in kind(wt)'s form; another form is repacked here
    let packed = packed.filter(|_| Some(kd) == crate::qgemm::kind(wt));
    let vdt = wt.vec_dot_type().expect("weights have a vec_dot type");
    let k = a.ne[0] as usize;
    let nb = k / kd.block_len();
    let bb = kd.block_bytes();
    let (nr0, nr1) = (a.ne[1] as usize, b.nrows() as usize);
    let (ne11, ne12) = (b.ne[1] as usize, b.ne[2] as usize);
    let (x_len, w_len) = (vdt.row_size(k), wt.row_size(k));
    // the prepared activation rows (their quants, or Q8_0's 128-byte blocks of the pairs form)
    let col_len = kd.col_len(k);
    let qs_bytes = (nr1 * col_len).next_multiple_of(64);
    let aux_bytes = (nr1 * nb * size_of::<Aux>()).next_multiple_of(64);
    let nrb = nr0.div_ceil(ROWS);
    let w_bytes = if packed.is_some() { 0 } else { nrb * nb * bb };
    // Q4_K's GEMV rows (the last ne11 % 4 of each plane): their Q8_K rows kept for phase 3
    let tail = if repacked && kd.k_pairs { ne11 % 4 } else { 0 };
    let n_planes = nr1 / ne11.max(1);
    let tail_bytes = (tail * n_planes * x_len).next_multiple_of(64);
    let base = exec.scratch(qs_bytes + aux_bytes + tail_bytes + w_bytes).ptr as usize;
    let (qs_at, aux_at) = (base, base + qs_bytes);
    let tail_at = base + qs_bytes + aux_bytes;
    let w_at = packed.map_or(base + qs_bytes + aux_bytes + tail_bytes, |p| p.0 as usize);
    let four_row = |i11: usize| Order::for_row(repacked, i11, ne11) == Order::RepackGemm;
    let (a, b) = (*a, *b);
    let src = Scalar::of(b.ty);
    // activations already in the vec-dot type are read in place where their rows suit the block view
    let direct = b.ty == vdt as i32 && [b.data as usize, b.nb[1], b.nb[2], b.nb[3]].iter().all(|x| x.is_multiple_of(block_align(vdt)));
    // phase 1: each activation row converted to the vec-dot type in a row buffer (in cache), then
    // its quants and sums into the scratch (chunks of COLS_PER columns); weights repacked (one
    // chunk per 16 rows) unless they were at load time. The conversion is the row path's
    // (prepare_activations: the same quantize_from on the same floats), without the pass through
    // a scratch of every converted row.
    const COLS_PER: usize = 8;
    let n_cc = nr1.div_ceil(COLS_PER);
    let n_repack = if packed.is_some() { 0 } else { nrb };
    exec.parallel(n_cc + n_repack, |ch| {
        let (a, b) = (&a, &b);
        if ch < n_cc {
            let mut xq = crate::block::AlignedBytes::zeroed(if direct { 0 } else { x_len });
            let mut xf = vec![0f32; if src.is_some() && b.ty != vdt as i32 { k } else { 0 }];
            for j in chunk_range(ch, COLS_PER, nr1) {
                let (i11, i12, i13) = unravel(j, ne11, ne12);
                let p = b.data.wrapping_add(offset(b, 0, i11, i12, i13)).cast_const();
                // SAFETY: row j of src1 (dense elements, supports: x_len bytes in the vec-dot type,
                // k elements of a scalar type); its col_len prepared bytes and nb aux entries in the scratch,
                // this chunk's alone
                unsafe {
                    let x: &[u8] = if direct {
                        std::slice::from_raw_parts(p, x_len)
                    } else {
                        match src {
                            Some(s) if b.ty != vdt as i32 => {
                                if s == Scalar::F32 && (p as usize).is_multiple_of(4) {
                                    crate::ops::copy::elem::quantize_from_as(
                                        vdt,
                                        std::slice::from_raw_parts(p.cast::<f32>(), k),
                                        xq.as_mut_ptr(),
                                        four_row(i11),
                                    );
                                } else {
                                    for (i, v) in xf.iter_mut().enumerate() {
                                        *v = s.load(p.add(i * s.size()));
                                    }
                                    crate::ops::copy::elem::quantize_from_as(vdt, &xf, xq.as_mut_ptr(), four_row(i11));
                                }
                            }
                            // already the vec-dot type, only not aligned: the bytes
                            _ => std::ptr::copy_nonoverlapping(p, xq.as_mut_ptr(), x_len),
                        }
                        &xq
                    };
                    if i11 >= ne11 - tail {
                        // a GEMV row of Q4_K: its Q8_K bytes for phase 3 (this chunk's alone)
                        let t = (j / ne11) * tail + i11 - (ne11 - tail);
                        std::ptr::copy_nonoverlapping(x.as_ptr(), (tail_at as *mut u8).add(t * x_len), x_len);
                    }
                    let qs = std::slice::from_raw_parts_mut((qs_at as *mut i8).add(j * col_len), col_len);
                    let aux = std::slice::from_raw_parts_mut((aux_at as *mut Aux).add(j * nb), nb);
                    crate::qgemm::prepare_column_as(kd, wt, x, qs, aux);
                }
            }
        } else {
            let rb = ch - n_cc;
            let rows: Vec<&[u8]> = (rb * ROWS..((rb + 1) * ROWS).min(nr0))
                // SAFETY: whole weight rows of slab 0 (supports: w_len bytes at nb1 apart)
                .map(|i| unsafe { std::slice::from_raw_parts(a.data.add(offset(a, 0, i, 0, 0)).cast_const(), w_len) })
                .collect();
            // SAFETY: row block rb of the repacked area in the scratch, this chunk's alone
            let out = unsafe { std::slice::from_raw_parts_mut((w_at as *mut u8).add(rb * nb * bb), nb * bb) };
            crate::qgemm::repack_as(kd, wt, &rows, k, out);
        }
    });
    // phase 2: the tiles
    const RG: usize = 4;
    let (n_rg, cg_len) = gemm_chunks(nrb, RG, nr1, exec.n_threads());
    let n_cg = nr1.div_ceil(cg_len);
    let d = *d;
    exec.parallel(n_rg * n_cg, |ch| {
        let d = &d;
        let (rg, cg) = (ch % n_rg, ch / n_rg);
        for j0 in (cg * cg_len..((cg + 1) * cg_len).min(nr1)).step_by(MAX_COLS) {
            let n = MAX_COLS.min(nr1 - j0);
            let mut xs = [std::ptr::null(); MAX_COLS];
            let mut auxs = [std::ptr::null(); MAX_COLS];
            let mut dsts = [0usize; MAX_COLS];
            for t in 0..n {
                let j = j0 + t;
                let (i11, i12, i13) = unravel(j, ne11, ne12);
                xs[t] = (qs_at as *const i8).wrapping_add(j * col_len);
                auxs[t] = (aux_at as *const Aux).wrapping_add(j * nb);
                dsts[t] = d.data as usize + offset(d, 0, i11, i12, i13);
            }
            for rb in rg * RG..((rg + 1) * RG).min(nrb) {
                let mut outs = [std::ptr::null_mut(); MAX_COLS];
                for t in 0..n {
                    outs[t] = (dsts[t] as *mut f32).wrapping_add(rb * ROWS);
                }
                let n_rows = ROWS.min(nr0 - rb * ROWS);
                // SAFETY: the node's set's tiles (its table: built on a CPU with it); row block rb of the repacked
                // weights, col_len prepared bytes and nb aux entries per column (phase 1), and dst elements
                // rb·16 .. rb·16 + n_rows of each column (dense rows, supports), written by this
                // chunk only
                unsafe { tiles(kd, (w_at as *const u8).add(rb * nb * bb), nb, &xs[..n], &auxs[..n], &outs[..n], n_rows) };
            }
        }
    });
    if tail == 0 {
        return;
    }
    // phase 3: Q4_K's GEMV rows again, in upstream's GEMV order (over the weights in place:
    // rows aligned for the blocks, tile_shape), chunks of 64 weight rows
    let gemv = exec.kernels().gemv(wt, Order::RepackGemv);
    let n_chunks = nr0.div_ceil(64);
    exec.parallel(n_chunks, |c| {
        let (a, d) = (&a, &d);
        let rows = chunk_range(c, 64, nr0);
        for t in 0..tail * n_planes {
            let (i12, i13) = ((t / tail) % ne12, t / tail / ne12);
            let i11 = ne11 - tail + t % tail;
            // SAFETY: the Q8_K row kept in phase 1 (x_len bytes); weight rows `rows` of slab 0
            // (whole rows nb01 apart, aligned: tile_shape); dst elements `rows` of row
            // (i11, i12, i13), dense, this chunk's alone
            unsafe {
                let x = std::slice::from_raw_parts((tail_at as *const u8).add(t * x_len), x_len);
                let out = d.data.add(offset(d, 0, i11, i12, i13)).cast::<f32>().add(rows.start);
                gemv.rows(a.data.add(offset(a, 0, rows.start, 0, 0)), a.nb[1], rows.len(), x, out);
            }
        }
    });
}

/// `(row groups, columns per chunk)` for the GEMMs' chunks of `rg` row blocks: every column in
/// one chunk when there are row groups enough for the pool to balance (4 per thread), so that
/// each repacked weight block is read from memory once and the columns stream past it from
/// cache (with 64-column chunks, F16 weights of 4096 × 14336 were read 8 times from memory and
/// ran at 0.55× upstream); else columns split until there are, in multiples of the tile width
pub(super) fn gemm_chunks(nrb: usize, rg: usize, nr1: usize, threads: usize) -> (usize, usize) {
    let n_rg = nrb.div_ceil(rg);
    let want = 4 * threads;
    let n_cg = if n_rg >= want { 1 } else { want.div_ceil(n_rg) };
    (n_rg, nr1.div_ceil(n_cg).next_multiple_of(crate::qgemm::MAX_COLS).max(crate::qgemm::MAX_COLS))
}

/// the tiled float GEMM ([`crate::fgemm`]) takes this MUL_MAT: F32 / F16 / BF16 weights whose
/// rows can be read in place, any number of weight slabs (attention's KQ and KQV: one per head,
/// broadcast to the activations' dims 2 and 3), at least [`QGEMM_MIN_COLS`] activation rows
/// per weight slab (fewer, and repacking the slab costs more than its tiles save: the
/// token-generation KQ of one row per head stays on the row kernels), the node's level (capped
/// to scalar by use_ref) with the tiles
pub(super) fn use_fgemm(a: &View, b: &View, wt: GgmlType) -> bool {
    let slabs = (a.ne[2] * a.ne[3]).max(1) as usize;
    crate::fgemm::supports(wt) && rows_aligned(a, wt) && a.ne[0] > 0 && a.ne[1] > 0 && b.nrows() as usize / slabs >= QGEMM_MIN_COLS
}

/// MUL_MAT through [`crate::fgemm`]: activations rounded to the vec-dot type (as the row path)
/// and widened to f32, every weight slab repacked 32 rows at a time (16-bit types as they
/// are), all in the scratch; then, per activation slab (i12, i13) against its weight slab
/// (i12 / r2, i13 / r3), tiles of 32 rows × 8 columns over k in pieces of `KC` (a piece of a
/// column tile and of the chunk's row blocks stay in cache), in chunks of 4 row blocks × the
/// slab's columns, split further when there are too few chunks for the pool (as
/// [`gemm_chunks`]).
pub(super) fn mul_mat_fgemm(a: &View, b: &View, d: &View, wt: GgmlType, form: (crate::fgemm::TileFn, Option<crate::fgemm::Repack16Fn>), exec: &mut Exec) {
    use crate::fgemm::{MAX_COLS, ROWS};
    let (tile, repack16) = form;
    const KC: usize = 256;
    const RG: usize = 4;
    let vdt = wt.vec_dot_type().expect("weights have a vec_dot type");
    let k = a.ne[0] as usize;
    let (nr0, nr1) = (a.ne[1] as usize, b.nrows() as usize);
    let (ne11, ne12) = (b.ne[1] as usize, b.ne[2] as usize);
    let (ne02, n_ws) = (a.ne[2] as usize, (a.ne[2] * a.ne[3]) as usize);
    let (r2, r3) = ((b.ne[2] / a.ne[2]) as usize, (b.ne[3] / a.ne[3]) as usize);
    let n_bs = nr1 / ne11.max(1);
    let w_len = wt.row_size(k);
    // F32 activations whose rows are f32-aligned are rounded to the vec-dot type and widened
    // in one pass per column (phase 1); any other src1 is converted to the vec-dot type first
    let direct = b.ty == raw_type::F32 && [b.data as usize, b.nb[1], b.nb[2], b.nb[3]].iter().all(|x| x.is_multiple_of(4));
    let acts_bytes = if direct { 0 } else { (nr1 * vdt.row_size(k)).next_multiple_of(64) };
    let cols_bytes = (nr1 * k * 4).next_multiple_of(64);
    let nrb = nr0.div_ceil(ROWS);
    let eb = crate::fgemm::elem_bytes(wt);
    let slab_bytes = nrb * ROWS * k * eb;
    let total = acts_bytes + cols_bytes + n_ws * slab_bytes;
    // the whole area first: the activations' conversion below then finds it big enough and
    // does not move it
    exec.scratch(total);
    let acts = if direct { Acts::Direct(*b) } else { prepare_activations(b, vdt, exec) };
    let base = exec.scratch(total).ptr as usize;
    let (cols_at, w_at) = (base + acts_bytes, base + acts_bytes + cols_bytes);
    let a = *a;
    // phase 1: columns widened to f32 (one chunk per column), weights repacked (one chunk per
    // 32 rows of a slab)
    exec.parallel(nr1 + n_ws * nrb, |ch| {
        let a = &a;
        if ch < nr1 {
            let (i11, i12, i13) = unravel(ch, ne11, ne12);
            let x = acts.row(i11, i12, i13, ne11, ne12);
            // SAFETY: the column's k floats of the scratch, this chunk's alone
            let col = unsafe { std::slice::from_raw_parts_mut((cols_at as *mut f32).add(ch * k), k) };
            if direct {
                // SAFETY: src1 row (i11, i12, i13): k dense f32 (supports: nb10 = 4), aligned (direct)
                round_to_vec_dot(vdt, unsafe { std::slice::from_raw_parts(x.cast::<f32>(), k) }, col);
            } else {
                // SAFETY: column ch in the vec-dot type (converted or aligned src1), k elements
                unsafe { crate::ops::copy::elem::dequantize_to(vdt, x, k, col.as_mut_ptr().cast()) };
            }
        } else {
            let (ws, rb) = ((ch - nr1) / nrb, (ch - nr1) % nrb);
            let (i02, i03) = (ws % ne02, ws / ne02);
            let rows: Vec<&[u8]> = (rb * ROWS..((rb + 1) * ROWS).min(nr0))
                // SAFETY: whole weight rows of slab (i02, i03) (supports: w_len bytes at nb1 apart)
                .map(|i| unsafe { std::slice::from_raw_parts(a.data.add(offset(a, 0, i, i02, i03)).cast_const(), w_len) })
                .collect();
            // SAFETY: row block rb of slab ws's repacked area in the scratch, this chunk's alone
            let out = unsafe { std::slice::from_raw_parts_mut((w_at as *mut u8).add(ws * slab_bytes + rb * ROWS * k * eb), ROWS * k * eb) };
            crate::fgemm::repack(wt, &rows, k, out, repack16);
        }
    });
    // phase 2: the tiles; chunk = (activation slab, row group, column group)
    let n_rg = nrb.div_ceil(RG);
    let want = 4 * exec.n_threads();
    let n_cg = if n_bs * n_rg >= want { 1 } else { want.div_ceil(n_bs * n_rg) };
    let cg_len = ne11.div_ceil(n_cg).next_multiple_of(MAX_COLS).max(MAX_COLS);
    let n_cg = ne11.div_ceil(cg_len);
    let d = *d;
    exec.parallel(n_bs * n_rg * n_cg, |ch| {
        let d = &d;
        let (rg, cg, bs) = (ch % n_rg, (ch / n_rg) % n_cg, ch / (n_rg * n_cg));
        let (i12, i13) = (bs % ne12, bs / ne12);
        let ws = (i13 / r3) * ne02 + i12 / r2;
        let w_slab = (w_at as *const u8).wrapping_add(ws * slab_bytes);
        for e0 in (0..k).step_by(KC) {
            let kc = KC.min(k - e0);
            for j0 in (cg * cg_len..((cg + 1) * cg_len).min(ne11)).step_by(MAX_COLS) {
                let n = MAX_COLS.min(ne11 - j0);
                let mut xs = [std::ptr::null(); MAX_COLS];
                let mut dsts = [0usize; MAX_COLS];
                for t in 0..n {
                    let i11 = j0 + t;
                    xs[t] = (cols_at as *const f32).wrapping_add((bs * ne11 + i11) * k + e0);
                    dsts[t] = d.data as usize + offset(d, 0, i11, i12, i13);
                }
                for rb in rg * RG..((rg + 1) * RG).min(nrb) {
                    let mut outs = [std::ptr::null_mut(); MAX_COLS];
                    for t in 0..n {
                        outs[t] = (dsts[t] as *mut f32).wrapping_add(rb * ROWS);
                    }
                    let n_rows = ROWS.min(nr0 - rb * ROWS);
                    // SAFETY: the node's set's tiles (its table: built on a CPU with it); elements e0 .. e0 + kc of row block
                    // rb of weight slab ws repacked and of each column (phase 1), and dst
                    // elements rb·32 .. rb·32 + n_rows of each column (dense rows, supports),
                    // read and written by this chunk only
                    unsafe { tile(wt, w_slab.add((rb * k + e0) * ROWS * eb), kc, &xs[..n], &outs[..n], n_rows, e0 > 0) };
                }
            }
        }
    });
}

/// upstream's native build takes this MUL_MAT of F32 / F16 weights into llamafile's tinyBLAS:
/// src1 contiguous and of the weights' type (its first call), or src1 converted to the weights'
/// vec-dot type first (its second call: F32 activations of F16 weights, F16 / BF16 ones of F32
/// weights; a contiguous buffer whatever src1's strides), and the shape of
/// [`crate::sgemm::Tiles::shape`] per (i12, i13) slice (k > 0 here; an empty product is the row
/// path's zeros). F32 activations of F32 weights that are not contiguous go to the row kernels.
pub(super) fn use_sgemm(a: &View, b: &View, wt: GgmlType, tiles: &crate::sgemm::Tiles) -> bool {
    let acts = if wt == GgmlType::F16 {
        b.ty == raw_type::F32 || (b.ty == raw_type::F16 && is_contiguous(b))
    } else {
        wt == GgmlType::F32 && (matches!(b.ty, raw_type::F16 | raw_type::BF16) || (b.ty == raw_type::F32 && is_contiguous(b)))
    };
    acts && a.ne[0] > 0 && a.ne[1] > 0 && tiles.shape(a.ne[1] as usize, b.ne[1] as usize, a.ne[0] as usize)
}

/// MUL_MAT of F32 / F16 weights through [`crate::sgemm`]'s tiles (upstream's tinyBLAS order):
/// F16 weights' activations converted to F16 (as the row path), then widened to f32 (the tiles
/// load them without a conversion: 6 of their 10 conversions per step); F32 weights' read where
/// they are (F32 src1 with f32-aligned rows) or widened to F32 in the scratch (as the row path);
/// weights read in place; per activation slab (i12, i13) against its weight slab, tiles of 4
/// rows × 6 columns, in chunks of 128 rows (F32 rows longer than 1536: fewer, see below) × the
/// slab's columns (each column piece read from cache for 32 tiles; bench_mul_mat f16 2048 × 2048
/// × 512: 8 rows 56 ms, 16 rows 44, 64 rows 39, 128 rows 35, 1024 rows 39), the columns split
/// further when there are too few chunks for the pool
pub(super) fn mul_mat_sgemm(a: &View, b: &View, d: &View, wt: GgmlType, tiles: crate::sgemm::Tiles, exec: &mut Exec) {
    use crate::sgemm::{MAX_COLS, ROWS};
    let k = a.ne[0] as usize;
    // rows per chunk: F32 weights at most 768 KiB of them, so that they stay in L2 while the
    // chunk's columns pass (bench_mul_mat f32 2048 × 5632 × 512, 2 threads: 128 rows 94 ms, 32
    // rows 53; 5632 × 2048 × 512: 128 rows 48, 96 rows 46); F16 128 (2048 × 5632 × 512: 128
    // rows 100 ms, 44 rows 130)
    let rg = if wt == GgmlType::F32 { (768 * 1024 / (4 * k)).clamp(ROWS, 128) / ROWS * ROWS } else { 128 };
    let (nr0, nr1) = (a.ne[1] as usize, b.nrows() as usize);
    let (ne11, ne12) = (b.ne[1] as usize, b.ne[2] as usize);
    // at AVX2 the F16 weights' columns stay F16, widened in the tiles (upstream's tinyBLAS
    // reads them so): half the bytes, 6 columns of a long row still in L1
    let f16_cols = tiles.f16_cols.filter(|_| wt == GgmlType::F16);
    // where activation row (i11, i12, i13) is, as k floats (or, f16_cols, k f16 values)
    let cols: Acts = if f16_cols.is_some() {
        prepare_activations(b, GgmlType::F16, exec)
    } else if wt == GgmlType::F16 {
        let acts_bytes = (nr1 * GgmlType::F16.row_size(k)).next_multiple_of(64);
        let total = acts_bytes + nr1 * k * 4;
        // the whole area first: the conversion below then finds it big enough and does not move it
        exec.scratch(total);
        let acts = prepare_activations(b, GgmlType::F16, exec);
        let cols_at = exec.scratch(total).ptr as usize + acts_bytes;
        let (n_chunks, per) = split(nr1, exec.n_threads(), 16);
        exec.parallel(n_chunks, |c| {
            for j in chunk_range(c, per, nr1) {
                let (i11, i12, i13) = unravel(j, ne11, ne12);
                // SAFETY: activation row j in F16 (k values), into its k floats of the scratch,
                // this chunk's alone
                unsafe {
                    crate::ops::copy::elem::dequantize_to(GgmlType::F16, acts.row(i11, i12, i13, ne11, ne12), k, (cols_at as *mut f32).add(j * k).cast())
                };
            }
        });
        Acts::Converted { base: cols_at as *const u8, row_size: 4 * k }
    } else {
        prepare_activations(b, GgmlType::F32, exec)
    };
    let (r2, r3) = ((b.ne[2] / a.ne[2]) as usize, (b.ne[3] / a.ne[3]) as usize);
    let n_bs = nr1 / ne11.max(1);
    let n_rg = nr0.div_ceil(rg);
    let want = 4 * exec.n_threads();
    let n_cg = if n_bs * n_rg >= want { 1 } else { want.div_ceil(n_bs * n_rg) };
    let cg_len = ne11.div_ceil(n_cg).next_multiple_of(MAX_COLS);
    let n_cg = ne11.div_ceil(cg_len);
    let (a, d) = (*a, *d);
    exec.parallel(n_bs * n_rg * n_cg, |ch| {
        let (a, d) = (&a, &d);
        let (g, cg, bs) = (ch % n_rg, (ch / n_rg) % n_cg, ch / (n_rg * n_cg));
        let (i12, i13) = (bs % ne12, bs / ne12);
        let w0 = a.data.wrapping_add(offset(a, 0, 0, i12 / r2, i13 / r3)).cast_const();
        for j0 in (cg * cg_len..((cg + 1) * cg_len).min(ne11)).step_by(MAX_COLS) {
            let n = MAX_COLS.min(ne11 - j0);
            let mut xs = [std::ptr::null(); MAX_COLS];
            let mut dsts = [std::ptr::null_mut(); MAX_COLS];
            for t in 0..n {
                xs[t] = cols.row(j0 + t, i12, i13, ne11, ne12).cast::<f32>();
                dsts[t] = d.data.wrapping_add(offset(d, 0, j0 + t, i12, i13)).cast::<f32>();
            }
            for i in (g * rg..((g + 1) * rg).min(nr0)).step_by(ROWS) {
                let outs: [*mut f32; MAX_COLS] = std::array::from_fn(|t| dsts[t].wrapping_add(i));
                // SAFETY: the node's set's tiles (its table: built on a CPU with it); weight rows i .. i + 4 of the slab
                // (nr0 a multiple of 4: use_sgemm; whole rows of k elements of the weight
                // type, nb01 apart: supports), k floats of each activation row (src1's dense f32 rows or
                // widened above; f16_cols: k f16 values), dst elements i .. i + 4 of each column (dense rows), written
                // by this chunk only
                unsafe {
                    match f16_cols {
                        Some(tile) => tile(w0.add(i * a.nb[1]), a.nb[1], k, &xs.map(|p| p.cast::<u8>())[..n], &outs[..n]),
                        None => (tiles.tile)(wt, w0.add(i * a.nb[1]), a.nb[1], k, &xs[..n], &outs[..n]),
                    }
                }
            }
        }
    });
}

/// `out` = `x` rounded to `vdt` (F32, F16 or BF16: what the row kernels' activations hold) and
/// widened back, through a piece on the stack at a time
pub(super) fn round_to_vec_dot(vdt: GgmlType, x: &[f32], out: &mut [f32]) {
    const PIECE: usize = 256;
    match vdt {
        GgmlType::F16 => {
            let mut h = [half::f16::ZERO; PIECE];
            for (xs, os) in x.chunks(PIECE).zip(out.chunks_mut(PIECE)) {
                crate::fp::f32_to_f16_row(xs, &mut h[..xs.len()]);
                crate::fp::f16_to_f32_row(&h[..xs.len()], os);
            }
        }
        GgmlType::BF16 => {
            let mut h = [half::bf16::ZERO; PIECE];
            for (xs, os) in x.chunks(PIECE).zip(out.chunks_mut(PIECE)) {
                crate::fp::f32_to_bf16_row(xs, &mut h[..xs.len()]);
                crate::fp::bf16_to_f32_row(&h[..xs.len()], os);
            }
        }
        _ => out.copy_from_slice(x),
    }
}
