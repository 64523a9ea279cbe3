//! Tiled int8 GEMM for prompt processing (MUL_MAT with many activation rows) of Q8_0, Q4_0
//! (activations Q8_0), Q4_K and Q6_K (activations Q8_K) weights, on AVX-512 VNNI.
//!
//! The row kernels ([`crate::dot`]) compute one weight row · one activation row at a time: every
//! product re-loads both rows and ends in a horizontal sum. Here weights are repacked so that one
//! 512-bit register holds 4 consecutive quants of 16 rows (lane r = row r), made unsigned (Q8_0
//! quants + 128, Q4_0 nibbles as they are), and 4 activation quants are broadcast to all lanes:
//! one `vpdpbusd` then adds 4 products to each of 16 rows' sums, 64 multiply-adds, with no
//! horizontal step (a 16-row result is a contiguous piece of a dst column). A tile is 16 weight
//! rows × up to [`MAX_COLS`] activation rows, the weight register reused across the columns.
//!
//! Every type is brought to one form: blocks of `4 · groups` quants (32, or 16 for Q6_K's
//! sub-blocks), unsigned, with one f32 scale per row and block (Q4_K, Q6_K: `d · sub-block
//! scale`) and for Q4_K one f32 min per row and block (`dmin · m`). The unsigned offset c (Q8_0
//! quants + 128, Q4_0 and Q6_K as stored, offsets 8 and 32) is taken back exactly in integers:
//! Σ (w + c) · y = Σ w·y + c · Σ y, so each column's block starts its sum at `-c · Σ y`; Q4_K's
//! mins are a second float sum, `min · d_y · Σ y`. Those per-block activation terms are computed
//! once per activation row ([`Aux`]), and the activation quants copied out of their blocks into
//! one contiguous row of i8.
//!
//! Layout of a repacked block of 16 rows ([`Kind::block_bytes`]): `groups` groups of 64 bytes
//! (group g: row r's quants 4g..4g+4 at byte 4r), the 16 rows' scales as f32, then (Q4_K) their
//! mins as f32. Rows past the end of the matrix are zero (their results are not stored).
//!
//! **Q8_0 in upstream's order** ([`Kind::pairs`]): upstream's x86 builds sum each output of a
//! Q8_0 product in 8 lanes (lane g: quants 4g..4g+4 of a block), one fused multiply-add per lane
//! and block by `f32(dw) · f32(dy)`, then a horizontal sum ([`crate::dot::q8_0::q8_0_q8_0_x86`]).
//! To give the same bits, a register holds 2 rows × those 8 lanes, interleaved (lane 2g + h: row
//! 2p + h of pair p, group g): a repacked block is 8 pairs of 64 bytes (pair p, group g, row h
//! at byte 8g + 4h), then the 16 scales. The prepared activation block is 128 bytes: its quants
//! with every group of 4 twice (lanes 2g and 2g + 1 read the same 4), then the lanes' starting
//! values `M - 128 · Σ group` as i32 (the offset taken back, and M = 0x4B40_0000: the sum's bits,
//! read as a float, are `1.5 · 2²³ + sum` exactly, so one subtraction converts it, on either
//! vector port, where vcvtdq2ps has one). Per block and column the 16 scale products are one
//! multiplication, and a pair's two are broadcast as one 64-bit value; the tile then costs per
//! pair, column and block one vpdpbusd, one subtraction and one fma.
//!
//! The weights are repacked per MUL_MAT call here (one pass over them, cheap next to the
//! 512-column product); a repacking buffer type would do it once at load time.

use crate::GgmlType;
use crate::block::{BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8K, QK_K, as_blocks};
use crate::kernels::Kernels;
use crate::simd::Level;

#[cfg(target_arch = "x86_64")]
mod avx2;

/// weight rows per repacked block (the lanes of a 512-bit register of i32)
pub const ROWS: usize = 16;
/// activation rows per tile
pub const MAX_COLS: usize = 8;

/// the shape of a weight type's repacked blocks
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// groups of 4 quants per block (8: 32 quants, 4: 16)
    pub groups: usize,
    /// a min per row and block (subtracted, times the activation block's sum)
    pub mins: bool,
    /// rows in pairs, 8 lanes per row (upstream's order, Q8_0; see the module's text)
    pub pairs: bool,
    /// Q4_K in upstream's repacked GEMM order (see the module's text): per row and block the
    /// sub-block's integer scale and min (as f32), and the super-block's `d` and `dmin`
    pub k_pairs: bool,
    /// Q6_K in the order of upstream's tiled K-quant path (see the module's text): per row and
    /// block the integer scale (as i32), and the super-block's `d`
    pub tiled: bool,
    /// the unsigned quants reach 255 (Q8_0's, offset 128): the AVX2 kernels multiply them
    /// signed ([`avx2`]); the others stay below 64
    pub wide: bool,
}

impl Kind {
    /// quants per block
    pub fn block_len(self) -> usize {
        4 * self.groups
    }

    /// bytes of one repacked block of 16 rows
    pub fn block_bytes(self) -> usize {
        ROWS * self.block_len()
            + ROWS * 4
            + if self.mins { ROWS * 4 } else { 0 }
            + if self.k_pairs { 2 * ROWS * 4 } else { 0 }
            + if self.tiled { ROWS * 4 } else { 0 }
    }

    /// bytes of one prepared activation row of `k` quants ([`prepare_column`]'s `qs`)
    pub fn col_len(self, k: usize) -> usize {
        if self.pairs { k / self.block_len() * PAIR_COL_BLOCK } else { k }
    }
}

/// bytes of a prepared activation block of the pairs form: 64 of quants, 64 of lane starts
const PAIR_COL_BLOCK: usize = 128;
/// the pairs form's lanes start at these bits (1.5 · 2²³ as an f32): the integer sum added to
/// them gives, read as a float, `1.5 · 2²³ + sum`, exact for |sum| < 2²²
const PAIR_MAGIC: i32 = 0x4B40_0000;

/// Q4_0's form for a MUL_MAT that upstream does not repack (`repacked` false: rows % 8 != 0,
/// ...; [`crate::dot::Order::repacked`]): the pairs form, upstream's x86 / tinyBLAS order (the
/// per-row form sums in its repacked order), unless `GGML_RS_CPU_ORDER=fast`
/// ([`crate::dot::vec_dot_only`], [`q8_0_fast`]); any other type: [`kind`]
pub fn kind_for(ty: GgmlType, repacked: bool, k: &Kernels) -> Option<Kind> {
    if ty == GgmlType::Q4_0 && !repacked && !crate::dot::vec_dot_only() && !q8_0_fast() {
        return Some(Kind { pairs: true, ..kind_of(ty, true)? });
    }
    kind_at(ty, k)
}

/// the repacked form of `ty` in this process's kernel set ([`crate::kernels::active`]: what a
/// tensor repacked at load time holds), [`kind_at`]
pub fn kind(ty: GgmlType) -> Option<Kind> {
    kind_at(ty, crate::kernels::active())
}

/// the repacked form of `ty` in the kernel set `k`, for the weight types this GEMM takes (Q8_0:
/// the pairs form unless [`q8_0_fast`]; Q4_K: upstream's repacked GEMM order unless
/// [`crate::dot::vec_dot_only`]; Q6_K where upstream's build of the set sums it in its tiled
/// path's order ([`crate::dot::Dots::q6_k_tiled_path`], AVX-512 VNNI: the order of upstream's
/// native build, and the faster tiles; elsewhere Q6_K's rows are in its x86 vec_dot order and
/// the tiles in the one-lane form)
pub fn kind_at(ty: GgmlType, k: &Kernels) -> Option<Kind> {
    let kd = kind_of(ty, !q8_0_fast());
    match ty {
        GgmlType::Q4K if !crate::dot::vec_dot_only() => kd.map(|kd| Kind { k_pairs: true, ..kd }),
        GgmlType::Q6K if k.dot.q6_k_tiled_path => kd.map(|kd| Kind { tiled: true, ..kd }),
        _ => kd,
    }
}

/// `GGML_RS_CPU_ORDER=fast` ([`crate::config`]): Q8_0's prompt tiles in the one-lane-per-row form
/// (~2.2× faster per tile at AVX-512 VNNI, ~1.6× at AVX2), summed in another order than
/// upstream (last-bit differences in every prompt MUL_MAT, which a random-weight model amplifies:
/// medium-q8_0's prompt logits at the avx2 set 1.7e-2 from upstream's AVX2 build, 0 in its order);
/// anything else or unset: the pairs form, upstream's x86 order bit for bit at every set
pub fn q8_0_fast() -> bool {
    crate::config::get().fast()
}

/// [`kind`] with the choice of Q8_0's form given
pub fn kind_of(ty: GgmlType, q8_0_pairs: bool) -> Option<Kind> {
    match ty {
        GgmlType::Q8_0 => Some(Kind { groups: 8, mins: false, pairs: q8_0_pairs, k_pairs: false, tiled: false, wide: true }),
        GgmlType::Q4_0 => Some(Kind { groups: 8, mins: false, pairs: false, k_pairs: false, tiled: false, wide: false }),
        GgmlType::Q4K => Some(Kind { groups: 8, mins: true, pairs: false, k_pairs: false, tiled: false, wide: false }),
        GgmlType::Q6K => Some(Kind { groups: 4, mins: false, pairs: false, k_pairs: false, tiled: false, wide: false }),
        _ => None,
    }
}

/// the weight types this GEMM takes
pub fn supports(ty: GgmlType) -> bool {
    kind(ty).is_some()
}

/// what the repacked quants have been shifted by to make them unsigned
pub fn offset(ty: GgmlType) -> i32 {
    match ty {
        GgmlType::Q8_0 => 128,
        GgmlType::Q4_0 => 8,
        GgmlType::Q4K => 0,
        GgmlType::Q6K => 32,
        _ => panic!("qgemm::offset: {} is not a qgemm weight type", ty.name()),
    }
}

/// [`tile`] on raw pointers in one kernel set's form ([`crate::kernels::Gemms::qgemm`]: AVX2's
/// `tile_raw_avx2`, AVX-512 VNNI's `tile_raw_vnni`), dispatching on the kind and the column
/// count.
///
/// # Safety
/// `w` holds `nb` repacked blocks of the kind; each `x[j]` holds `kind.col_len(nb ·
/// kind.block_len())` bytes and `aux[j]` `nb` entries; each `out[j]` is writable for `n_rows ≤
/// 16` floats; 1 ≤ columns ≤ 8; the tiled form only in a set that has it (AVX-512 VNNI).
pub type TileFn = unsafe fn(Kind, *const u8, usize, &[*const i8], &[*const Aux], &[*mut f32], usize);

/// One weight row of `ty` in the common form: unsigned quants (`q`, k of them), and per block of
/// `kind.block_len()` its scale and (Q4_K) min.
pub fn unpack_row(ty: GgmlType, row: &[u8], q: &mut [u8], scale: &mut [f32], min: &mut [f32]) {
    let k = q.len();
    let kd = kind(ty).unwrap_or_else(|| panic!("qgemm::unpack_row: {} is not a qgemm weight type", ty.name()));
    assert_eq!(row.len(), ty.row_size(k), "qgemm::unpack_row {}: a row of {} bytes is not {k} quants", ty.name(), row.len());
    assert!(
        scale.len() == k / kd.block_len() && min.len() == scale.len(),
        "qgemm::unpack_row {}: {} scales / {} mins for {k} quants",
        ty.name(),
        scale.len(),
        min.len()
    );
    match ty {
        GgmlType::Q8_0 => {
            for (b, blk) in as_blocks::<BlockQ8_0>(row, "qgemm q8_0").iter().enumerate() {
                for (o, v) in q[32 * b..32 * b + 32].iter_mut().zip(&blk.qs) {
                    *o = (*v as u8) ^ 0x80;
                }
                (scale[b], min[b]) = (blk.d.to_f32(), 0.0);
            }
        }
        GgmlType::Q4_0 => {
            for (b, blk) in as_blocks::<BlockQ4_0>(row, "qgemm q4_0").iter().enumerate() {
                for j in 0..16 {
                    q[32 * b + j] = blk.qs[j] & 0x0f;
                    q[32 * b + j + 16] = blk.qs[j] >> 4;
                }
                (scale[b], min[b]) = (blk.d.to_f32(), 0.0);
            }
        }
        GgmlType::Q4K => {
            for (sb, blk) in as_blocks::<BlockQ4K>(row, "qgemm q4_K").iter().enumerate() {
                let (d, dmin) = (blk.d.to_f32(), blk.dmin.to_f32());
                for j in 0..8 {
                    let (sc, m) = crate::quants::get_scale_min_k4(j, &blk.scales);
                    (scale[8 * sb + j], min[8 * sb + j]) = (d * sc as f32, dmin * m as f32);
                    // sub-blocks 2g, 2g + 1: the low, the high nibbles of bytes 32g..32g + 32
                    let (bytes, shift) = (&blk.qs[32 * (j / 2)..32 * (j / 2) + 32], 4 * (j % 2));
                    for (o, v) in q[QK_K * sb + 32 * j..QK_K * sb + 32 * j + 32].iter_mut().zip(bytes) {
                        *o = (v >> shift) & 0x0f;
                    }
                }
            }
        }
        GgmlType::Q6K => {
            for (sb, blk) in as_blocks::<BlockQ6K>(row, "qgemm q6_K").iter().enumerate() {
                let d = blk.d.to_f32();
                for (e, o) in q[QK_K * sb..QK_K * (sb + 1)].iter_mut().enumerate() {
                    *o = crate::quants::q6_get(blk, e);
                }
                for j in 0..16 {
                    (scale[16 * sb + j], min[16 * sb + j]) = (d * blk.scales[j] as f32, 0.0);
                }
            }
        }
        _ => unreachable!(),
    }
}

/// Repacks up to 16 weight rows (`rows[r]` the bytes of row r, `k` quants each) into `out`
/// (`k / block_len` repacked blocks); missing rows are zero.
pub fn repack(ty: GgmlType, rows: &[&[u8]], k: usize, out: &mut [u8]) {
    let kd = kind(ty).unwrap_or_else(|| panic!("qgemm::repack: {} is not a qgemm weight type", ty.name()));
    repack_as(kd, ty, rows, k, out);
}

/// [`repack`] into the form `kd` (one of `ty`'s: [`kind_of`])
pub fn repack_as(kd: Kind, ty: GgmlType, rows: &[&[u8]], k: usize, out: &mut [u8]) {
    let (bl, bb) = (kd.block_len(), kd.block_bytes());
    let nb = k / bl;
    assert!(rows.len() <= ROWS, "qgemm::repack: {} rows, at most {ROWS}", rows.len());
    assert_eq!(out.len(), nb * bb, "qgemm::repack: output of {} bytes for {nb} blocks", out.len());
    let mut q = vec![0u8; k];
    let (mut scale, mut min) = (vec![0f32; nb], vec![0f32; nb]);
    // the k_pairs form: per block the super-block's d and dmin
    let (mut sd, mut sdmin) = (vec![0f32; nb], vec![0f32; nb]);
    for r in 0..ROWS {
        match rows.get(r) {
            Some(row) if kd.tiled => {
                // the integer scales (their bits as i32) and d per block, instead of their products
                unpack_row(ty, row, &mut q, &mut scale, &mut min);
                for (sb, blk) in as_blocks::<BlockQ6K>(row, "qgemm q6_K").iter().enumerate() {
                    for j in 0..16 {
                        scale[16 * sb + j] = f32::from_bits(blk.scales[j] as i32 as u32);
                        sd[16 * sb + j] = blk.d.to_f32();
                    }
                }
            }
            Some(row) if kd.k_pairs => {
                // the integer scales and mins, and d / dmin per block, instead of their products
                unpack_row(ty, row, &mut q, &mut scale, &mut min);
                for (sb, blk) in as_blocks::<BlockQ4K>(row, "qgemm q4_K").iter().enumerate() {
                    for j in 0..8 {
                        let (sc, m) = crate::quants::get_scale_min_k4(j, &blk.scales);
                        (scale[8 * sb + j], min[8 * sb + j]) = (sc as f32, m as f32);
                        (sd[8 * sb + j], sdmin[8 * sb + j]) = (blk.d.to_f32(), blk.dmin.to_f32());
                    }
                }
            }
            Some(row) if kd.pairs && ty == GgmlType::Q4_0 => {
                // the pairs form reads Q8_0's bytes (w + 128): Q4_0's n - 8 + 128
                unpack_row(ty, row, &mut q, &mut scale, &mut min);
                q.iter_mut().for_each(|v| *v += 120);
            }
            Some(row) => unpack_row(ty, row, &mut q, &mut scale, &mut min),
            None => {
                q.fill(0);
                scale.fill(0.0);
                min.fill(0.0);
                sd.fill(0.0);
                sdmin.fill(0.0);
            }
        }
        for b in 0..nb {
            let ob = &mut out[b * bb..(b + 1) * bb];
            for g in 0..kd.groups {
                // group g of row r: a 4-byte lane of the group's register, or of its pair's
                let at = if kd.pairs { (r / 2) * 64 + g * 8 + (r % 2) * 4 } else { g * 64 + r * 4 };
                ob[at..at + 4].copy_from_slice(&q[b * bl + 4 * g..b * bl + 4 * g + 4]);
            }
            let at = ROWS * bl;
            ob[at + r * 4..at + r * 4 + 4].copy_from_slice(&scale[b].to_ne_bytes());
            if kd.mins {
                ob[at + 64 + r * 4..at + 64 + r * 4 + 4].copy_from_slice(&min[b].to_ne_bytes());
            }
            if kd.tiled {
                ob[at + 64 + r * 4..at + 64 + r * 4 + 4].copy_from_slice(&sd[b].to_ne_bytes());
            }
            if kd.k_pairs {
                ob[at + 128 + r * 4..at + 128 + r * 4 + 4].copy_from_slice(&sd[b].to_ne_bytes());
                ob[at + 192 + r * 4..at + 192 + r * 4 + 4].copy_from_slice(&sdmin[b].to_ne_bytes());
            }
        }
    }
}

/// per activation block: its scale, `-c · Σ quants` (the offset's share), and for the mins
/// `d · Σ quants`
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Aux {
    pub d: f32,
    pub neg: i32,
    pub m: f32,
}

/// One activation row (`x`: bytes of the weights' vec-dot type, Q8_0 or Q8_K) for weights of
/// `ty`: its quants into `qs` ([`Kind::col_len`] bytes: the quants, or for the pairs form the
/// 128-byte blocks of the module's text), one [`Aux`] per weight block into `aux`.
pub fn prepare_column(ty: GgmlType, x: &[u8], qs: &mut [i8], aux: &mut [Aux]) {
    let kd = kind(ty).unwrap_or_else(|| panic!("qgemm::prepare_column: {} is not a qgemm weight type", ty.name()));
    prepare_column_as(kd, ty, x, qs, aux);
}

/// [`prepare_column`] for the form `kd` (one of `ty`'s: [`kind_of`])
pub fn prepare_column_as(kd: Kind, ty: GgmlType, x: &[u8], qs: &mut [i8], aux: &mut [Aux]) {
    let bl = kd.block_len();
    let k = aux.len() * bl;
    assert_eq!(qs.len(), kd.col_len(k), "qgemm::prepare_column {}: {} bytes of quants for {} aux entries", ty.name(), qs.len(), aux.len());
    if kd.pairs {
        let blocks = as_blocks::<BlockQ8_0>(x, "qgemm q8_0 activations");
        assert_eq!(blocks.len(), aux.len(), "qgemm::prepare_column {}: activations of {} blocks for {k} quants", ty.name(), blocks.len());
        for ((blk, out), a) in blocks.iter().zip(qs.chunks_exact_mut(PAIR_COL_BLOCK)).zip(aux.iter_mut()) {
            let (quants, starts) = out.split_at_mut(64);
            for g in 0..8 {
                let q = &blk.qs[4 * g..4 * g + 4];
                quants[8 * g..8 * g + 4].copy_from_slice(q);
                quants[8 * g + 4..8 * g + 8].copy_from_slice(q);
                let start = PAIR_MAGIC - 128 * q.iter().map(|&v| v as i32).sum::<i32>();
                for h in 0..2 {
                    for (o, v) in starts[8 * g + 4 * h..8 * g + 4 * h + 4].iter_mut().zip(start.to_ne_bytes()) {
                        *o = v as i8;
                    }
                }
            }
            *a = Aux { d: blk.d.to_f32(), neg: 0, m: 0.0 };
        }
        return;
    }
    let c = offset(ty);
    let (ds, src): (Vec<(f32, &[i8])>, usize) = match ty {
        GgmlType::Q8_0 | GgmlType::Q4_0 => (as_blocks::<BlockQ8_0>(x, "qgemm q8_0 activations").iter().map(|b| (b.d.to_f32(), &b.qs[..])).collect(), 32),
        _ => (as_blocks::<BlockQ8K>(x, "qgemm q8_K activations").iter().map(|b| (b.d, &b.qs[..])).collect(), QK_K),
    };
    assert_eq!(ds.len() * src, k, "qgemm::prepare_column {}: activations of {} blocks for {k} quants", ty.name(), ds.len());
    for (i, (d, q)) in ds.iter().enumerate() {
        qs[i * src..(i + 1) * src].copy_from_slice(q);
        for (b, a) in aux[i * src / bl..(i + 1) * src / bl].iter_mut().enumerate() {
            let s: i32 = q[b * bl..(b + 1) * bl].iter().map(|&v| v as i32).sum();
            // k_pairs: the block's quant sum itself (exact as f32: |s| ≤ 32 · 127)
            let m = if kd.k_pairs {
                s as f32
            } else if kd.mins {
                d * s as f32
            } else {
                0.0
            };
            *a = Aux { d: *d, neg: -c * s, m };
        }
    }
}

/// One tile: `out[j][r] = Σ_b w_r,b · x_j,b` for the 16 rows of `w` (repacked, `nb` blocks of
/// `kind`) and the activation rows `x` (at most [`MAX_COLS`], prepared by [`prepare_column`]);
/// the first `n_rows` results of each column are written.
///
/// Panics if the sizes do not agree, the CPU lacks `level`, or the set has no such tiles.
pub fn tile(kind: Kind, level: Level, w: &[u8], x: &[&[i8]], aux: &[&[Aux]], out: &mut [&mut [f32]], n_rows: usize) {
    let k = crate::kernels::at(level);
    let tiles = k.gemm.qgemm.unwrap_or_else(|| panic!("qgemm::tile: the {} set has no int8 tiles", level.name()));
    assert!(!kind.tiled || k.dot.q6_k_tiled_path, "qgemm::tile: Q6_K's tiled form is AVX-512 VNNI's");
    let nb = w.len() / kind.block_bytes();
    assert_eq!(w.len(), nb * kind.block_bytes(), "qgemm::tile: weights of {} bytes are not whole blocks", w.len());
    assert!(n_rows <= ROWS && !x.is_empty() && x.len() <= MAX_COLS, "qgemm::tile: {n_rows} rows × {} columns", x.len());
    assert!(x.len() == aux.len() && x.len() == out.len(), "qgemm::tile: {} columns, {} aux, {} outputs", x.len(), aux.len(), out.len());
    let mut xp = [std::ptr::null::<i8>(); MAX_COLS];
    let mut ap = [std::ptr::null::<Aux>(); MAX_COLS];
    let mut op = [std::ptr::null_mut::<f32>(); MAX_COLS];
    for j in 0..x.len() {
        assert!(
            x[j].len() == kind.col_len(nb * kind.block_len()) && aux[j].len() == nb && out[j].len() >= n_rows,
            "qgemm::tile: column {j} is not {nb} blocks / {n_rows} outputs"
        );
        (xp[j], ap[j], op[j]) = (x[j].as_ptr(), aux[j].as_ptr(), out[j].as_mut_ptr());
    }
    // SAFETY: the set's table (built on a CPU with it); every pointer covers nb blocks / n_rows
    // outputs (asserted above); the tiled form asserted to be the set's
    unsafe { tiles(kind, w.as_ptr(), nb, &xp[..x.len()], &ap[..x.len()], &op[..x.len()], n_rows) }
}

/// [`TileFn`] at AVX-512 VNNI (the 512-bit kernels)
///
/// # Safety
/// as [`TileFn`], on a CPU with AVX-512 VNNI
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn tile_raw_vnni(kind: Kind, w: *const u8, nb: usize, x: &[*const i8], aux: &[*const Aux], out: &[*mut f32], n_rows: usize) {
    // SAFETY: forwarded from the caller
    unsafe {
        macro_rules! cols {
            ($g:literal, $m:literal) => {
                match x.len() {
                    1 => x86::tile::<1, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    2 => x86::tile::<2, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    3 => x86::tile::<3, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    4 => x86::tile::<4, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    5 => x86::tile::<5, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    6 => x86::tile::<6, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    7 => x86::tile::<7, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    8 => x86::tile::<8, $g, $m>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    n => panic!("qgemm tiles: {n} columns"),
                }
            };
        }
        match (kind.groups, kind.mins, kind.pairs) {
            (8, false, true) => {
                // columns two at a time (16 accumulators, each weight register used twice; one
                // at a time measured 2.51 vs 2.25 us a 16 × 8 tile of k = 2048), the odd one alone
                let mut j = 0;
                while j + 2 <= x.len() {
                    x86::pairs::<2>(w, nb, x[j..j + 2].try_into().unwrap(), aux[j..j + 2].try_into().unwrap(), out[j..j + 2].try_into().unwrap(), n_rows);
                    j += 2;
                }
                while j < x.len() {
                    x86::pairs::<1>(w, nb, [x[j]], [aux[j]], [out[j]], n_rows);
                    j += 1;
                }
            }
            (8, true, false) if kind.k_pairs => match x.len() {
                1 => x86::k_pairs::<1>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                2 => x86::k_pairs::<2>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                3 => x86::k_pairs::<3>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                4 => x86::k_pairs::<4>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                5 => x86::k_pairs::<5>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                6 => x86::k_pairs::<6>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                7 => x86::k_pairs::<7>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                8 => x86::k_pairs::<8>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                n => panic!("qgemm tiles: {n} columns"),
            },
            (8, false, false) => cols!(8, false),
            (8, true, false) => cols!(8, true),
            (4, false, false) if kind.tiled => match x.len() {
                1 => x86::q6_tiled::<1>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                2 => x86::q6_tiled::<2>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                3 => x86::q6_tiled::<3>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                4 => x86::q6_tiled::<4>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                5 => x86::q6_tiled::<5>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                6 => x86::q6_tiled::<6>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                7 => x86::q6_tiled::<7>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                8 => x86::q6_tiled::<8>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                n => panic!("qgemm tiles: {n} columns"),
            },
            (4, false, false) => cols!(4, false),
            k => panic!("qgemm tiles: no kernel for {k:?}"),
        }
    }
}

/// [`TileFn`] at AVX2: the columns in pieces of the kernel's width ([`avx2::COLS`])
///
/// # Safety
/// as [`TileFn`], on a CPU with AVX2 (not the tiled form)
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn tile_raw_avx2(kind: Kind, w: *const u8, nb: usize, x: &[*const i8], aux: &[*const Aux], out: &[*mut f32], n_rows: usize) {
    macro_rules! pieces {
        ($width:expr, $f:ident $(::<$($g:tt),*>)?) => {{
            let mut j = 0;
            while j < x.len() {
                let n = $width.min(x.len() - j);
                let (x, aux, out) = (&x[j..j + n], &aux[j..j + n], &out[j..j + n]);
                // SAFETY: forwarded from the caller, n of its columns
                unsafe {
                    match n {
                        1 => avx2::$f::<1 $($(, $g)*)?>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                        2 => avx2::$f::<2 $($(, $g)*)?>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                        3 => avx2::$f::<3 $($(, $g)*)?>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                        _ => avx2::$f::<4 $($(, $g)*)?>(w, nb, x.try_into().unwrap(), aux.try_into().unwrap(), out.try_into().unwrap(), n_rows),
                    }
                }
                j += n;
            }
        }};
    }
    match (kind.groups, kind.mins, kind.pairs, kind.k_pairs, kind.wide) {
        (8, false, true, _, _) => pieces!(avx2::COLS, pairs),
        (8, true, false, true, _) => pieces!(avx2::COLS_PAIRED, k_pairs),
        (8, false, false, false, true) => pieces!(avx2::COLS, tile::<8, false, true, 1>),
        (8, false, false, false, false) => pieces!(avx2::COLS, tile::<8, false, false, 8>),
        (8, true, false, false, false) => pieces!(avx2::COLS, tile::<8, true, false, 8>),
        (4, false, false, false, false) if !kind.tiled => pieces!(avx2::COLS, tile::<4, false, false, 2>),
        _ => panic!("qgemm tiles: no AVX2 kernel for {kind:?}"),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Aux, PAIR_COL_BLOCK, PAIR_MAGIC, ROWS};

    /// The pairs form ([`super::Kind::pairs`], Q8_0): 16 rows as 8 pairs × `N` columns, each
    /// output summed as [`crate::dot::q8_0::q8_0_q8_0_x86`] sums it.
    ///
    /// # Safety
    /// as [`super::TileFn`], with exactly `N` columns of the pairs form's prepared blocks
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    pub(super) unsafe fn pairs<const N: usize>(w: *const u8, nb: usize, x: [*const i8; N], aux: [*const Aux; N], out: [*mut f32; N], n_rows: usize) {
        let bb = ROWS * 32 + ROWS * 4;
        let magic = _mm512_set1_ps(f32::from_bits(PAIR_MAGIC as u32));
        let mut acc = [[_mm512_setzero_ps(); N]; 8];
        // the scale products of SC blocks, 16 per block and column (one f32 product per row and
        // column, as upstream's f32(dw) · f32(dy)), computed ahead of the blocks that use them so
        // that a pair's two come by a broadcast load from memory written long before (a load
        // right after the store stalls on the forwarding of a 64-byte store; kept in registers,
        // LLVM extracts them with shuffles, on the vector ports the tile is bound by)
        const SC: usize = 32;
        let mut sc = [[_mm512_setzero_ps(); N]; SC];
        for b0 in (0..nb).step_by(SC) {
            let n = SC.min(nb - b0);
            for (t, sc) in sc[..n].iter_mut().enumerate() {
                // SAFETY: block b0 + t < nb of the weights and of every column's aux (caller)
                unsafe {
                    let dw = _mm512_loadu_ps(w.add((b0 + t) * bb + ROWS * 32).cast());
                    for j in 0..N {
                        sc[j] = _mm512_mul_ps(dw, _mm512_set1_ps((*aux[j].add(b0 + t)).d));
                    }
                }
            }
            let scp = std::hint::black_box(sc.as_ptr()).cast::<f64>();
            for t in 0..n {
                let b = b0 + t;
                // SAFETY: block b of the weights and of every column's prepared blocks (caller);
                // the products of block b were written above
                unsafe {
                    let wb = w.add(b * bb);
                    let mut y = [_mm512_setzero_si512(); N];
                    let mut start = [_mm512_setzero_si512(); N];
                    for j in 0..N {
                        let xb = x[j].add(b * PAIR_COL_BLOCK);
                        y[j] = _mm512_loadu_si512(xb.cast());
                        start[j] = _mm512_loadu_si512(xb.add(64).cast());
                    }
                    for (p, acc) in acc.iter_mut().enumerate() {
                        let wp = _mm512_loadu_si512(wb.add(64 * p).cast());
                        for j in 0..N {
                            let f = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_dpbusd_epi32(start[j], wp, y[j])), magic);
                            // rows 2p and 2p + 1's products, in the even and the odd lanes
                            let s = _mm512_castpd_ps(_mm512_set1_pd(scp.add((t * N + j) * 8 + p).read()));
                            acc[j] = _mm512_fmadd_ps(s, f, acc[j]);
                        }
                    }
                }
            }
        }
        for (p, acc) in acc.iter().enumerate() {
            for h in 0..2 {
                let row = 2 * p + h;
                if row >= n_rows {
                    continue;
                }
                // the row's 8 lanes, in group order, into the low half
                let h = h as i32;
                let idx = _mm512_setr_epi32(h, 2 + h, 4 + h, 6 + h, 8 + h, 10 + h, 12 + h, 14 + h, 0, 0, 0, 0, 0, 0, 0, 0);
                for j in 0..N {
                    let lanes = _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, acc[j]));
                    // SAFETY: out[j] is writable for n_rows floats (caller), row < n_rows
                    unsafe { out[j].add(row).write_unaligned(crate::dot::x86::hsum_ps(lanes)) };
                }
            }
        }
    }

    /// Q6_K's tiled form ([`super::Kind::tiled`]): 16 rows × `N` columns, each output summed as
    /// [`crate::dot::q6_k::q6_k_q8_k_tiled`] sums it: per 16-quant block the integer sum
    /// `Σ (q - 32) · y` (vpdpbusd from `-32 · Σ y`), times the block's integer scale into the
    /// super-block's exact i32; per super-block `r = f32(S) · f32(d)`, `acc = fma(r, dy, acc)`.
    ///
    /// # Safety
    /// as [`super::TileFn`], with exactly `N` columns of the tiled form (nb a multiple of 16)
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn q6_tiled<const N: usize>(w: *const u8, nb: usize, x: [*const i8; N], aux: [*const Aux; N], out: [*mut f32; N], n_rows: usize) {
        const G: usize = 4;
        let bb = ROWS * 4 * G + 2 * ROWS * 4;
        let mut acc = [_mm512_setzero_ps(); N];
        let mut s1 = [_mm512_setzero_si512(); N];
        for b in 0..nb {
            // SAFETY: block b of the weights, of every column's quants and aux (caller)
            unsafe {
                let wb = w.add(b * bb);
                let isum = block_isums::<N, G>(wb, b, &x, &aux);
                let sc = _mm512_loadu_si512(wb.add(ROWS * 4 * G).cast());
                for j in 0..N {
                    s1[j] = _mm512_add_epi32(s1[j], _mm512_mullo_epi32(isum[j], sc));
                }
                if b % 16 == 15 {
                    let dw = _mm512_loadu_ps(wb.add(ROWS * 4 * G + ROWS * 4).cast());
                    for j in 0..N {
                        let r = _mm512_mul_ps(_mm512_cvtepi32_ps(s1[j]), dw);
                        acc[j] = _mm512_fmadd_ps(r, _mm512_set1_ps((*aux[j].add(b)).d), acc[j]);
                        s1[j] = _mm512_setzero_si512();
                    }
                }
            }
        }
        let mask: __mmask16 = if n_rows >= ROWS { 0xffff } else { (1u16 << n_rows) - 1 };
        for j in 0..N {
            // SAFETY: out[j] is writable for n_rows floats; the mask writes no more
            unsafe { _mm512_mask_storeu_ps(out[j], mask, acc[j]) };
        }
    }

    /// Block `b`'s integer sums of the 16 rows for each of the `N` columns, in the one-lane-per-row
    /// forms: the column's start (`neg`: the unsigned offset taken back) plus `G` vpdpbusd of the
    /// block's groups (64 bytes each at `wb`) with the column's quants 4 at a time.
    ///
    /// # Safety
    /// `wb` points to block b's `G` weight groups; `x[j]` and `aux[j]` hold block b (the tiles'
    /// callers)
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn block_isums<const N: usize, const G: usize>(wb: *const u8, b: usize, x: &[*const i8; N], aux: &[*const Aux; N]) -> [__m512i; N] {
        let mut isum = [_mm512_setzero_si512(); N];
        // SAFETY: block b of the weights, quants and aux (caller)
        unsafe {
            for j in 0..N {
                isum[j] = _mm512_set1_epi32((*aux[j].add(b)).neg);
            }
            for g in 0..G {
                let wg = _mm512_loadu_si512(wb.add(g * 64).cast());
                for j in 0..N {
                    let y = x[j].add(b * 4 * G + 4 * g).cast::<i32>().read_unaligned();
                    isum[j] = _mm512_dpbusd_epi32(isum[j], wg, _mm512_set1_epi32(y));
                }
            }
        }
        isum
    }

    /// The k_pairs form ([`super::Kind::k_pairs`], Q4_K): 16 rows × `N` columns, each output
    /// summed as [`crate::dot::q4_k::q4_k_q8_k_gemm`] sums it. Per pair of sub-blocks (blocks
    /// 2p, 2p + 1 of a super-block) and column: the two blocks' integer sums by vpdpbusd, then
    /// `I = fma(f32(isum_1), sc_1, f32(isum_0) · sc_0)` and `M = fma(m_1, Σy_1, m_0 · Σy_0)`,
    /// both exact in f32 (every product and sum below 2²⁴), then `acc = fma(I, d · dy, acc)`
    /// and `accm = fma(M, dmin · dy, accm)` (the scale products once per super-block and
    /// column); at the end `acc - accm`.
    ///
    /// # Safety
    /// as [`super::TileFn`], with exactly `N` columns of the k_pairs form (nb a multiple of 8)
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn k_pairs<const N: usize>(w: *const u8, nb: usize, x: [*const i8; N], aux: [*const Aux; N], out: [*mut f32; N], n_rows: usize) {
        const G: usize = 8;
        let bb = ROWS * 4 * G + 4 * ROWS * 4;
        let (sc_at, m_at, d_at, dmin_at) = (ROWS * 4 * G, ROWS * 4 * G + ROWS * 4, ROWS * 4 * G + 2 * ROWS * 4, ROWS * 4 * G + 3 * ROWS * 4);
        let mut acc = [_mm512_setzero_ps(); N];
        let mut accm = [_mm512_setzero_ps(); N];
        let mut s = [_mm512_setzero_ps(); N];
        let mut sm = [_mm512_setzero_ps(); N];
        for b0 in (0..nb).step_by(2) {
            // SAFETY: blocks b0, b0 + 1 < nb of the weights, of every column's quants and aux (caller)
            unsafe {
                if b0 % 8 == 0 {
                    // a new super-block: its scale products f32(d) · dy, f32(dmin) · dy
                    let wb = w.add(b0 * bb);
                    let (dw, dminw) = (_mm512_loadu_ps(wb.add(d_at).cast()), _mm512_loadu_ps(wb.add(dmin_at).cast()));
                    for j in 0..N {
                        let dy = _mm512_set1_ps((*aux[j].add(b0)).d);
                        s[j] = _mm512_mul_ps(dw, dy);
                        sm[j] = _mm512_mul_ps(dminw, dy);
                    }
                }
                let mut isum = [[_mm512_setzero_si512(); N]; 2];
                for (h, isum) in isum.iter_mut().enumerate() {
                    let b = b0 + h;
                    let wb = w.add(b * bb);
                    for g in 0..G {
                        let wg = _mm512_loadu_si512(wb.add(g * 64).cast());
                        for j in 0..N {
                            let y = x[j].add(b * 4 * G + 4 * g).cast::<i32>().read_unaligned();
                            isum[j] = _mm512_dpbusd_epi32(isum[j], wg, _mm512_set1_epi32(y));
                        }
                    }
                }
                let (w0, w1) = (w.add(b0 * bb), w.add((b0 + 1) * bb));
                let (sc0, sc1) = (_mm512_loadu_ps(w0.add(sc_at).cast()), _mm512_loadu_ps(w1.add(sc_at).cast()));
                let (m0, m1) = (_mm512_loadu_ps(w0.add(m_at).cast()), _mm512_loadu_ps(w1.add(m_at).cast()));
                for j in 0..N {
                    let i = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[1][j]), sc1, _mm512_mul_ps(_mm512_cvtepi32_ps(isum[0][j]), sc0));
                    acc[j] = _mm512_fmadd_ps(i, s[j], acc[j]);
                    let (y0, y1) = (_mm512_set1_ps((*aux[j].add(b0)).m), _mm512_set1_ps((*aux[j].add(b0 + 1)).m));
                    let m = _mm512_fmadd_ps(m1, y1, _mm512_mul_ps(m0, y0));
                    accm[j] = _mm512_fmadd_ps(m, sm[j], accm[j]);
                }
            }
        }
        let mask: __mmask16 = if n_rows >= ROWS { 0xffff } else { (1u16 << n_rows) - 1 };
        for j in 0..N {
            // SAFETY: out[j] is writable for n_rows floats; the mask writes no more
            unsafe { _mm512_mask_storeu_ps(out[j], mask, _mm512_sub_ps(acc[j], accm[j])) };
        }
    }

    /// # Safety
    /// as [`super::TileFn`], with exactly `N` columns, blocks of `G` groups, mins if `MIN`
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn tile<const N: usize, const G: usize, const MIN: bool>(
        w: *const u8,
        nb: usize,
        x: [*const i8; N],
        aux: [*const Aux; N],
        out: [*mut f32; N],
        n_rows: usize,
    ) {
        let bb = ROWS * 4 * G + ROWS * 4 + if MIN { ROWS * 4 } else { 0 };
        let mut acc = [_mm512_setzero_ps(); N];
        let mut accm = [_mm512_setzero_ps(); N];
        for b in 0..nb {
            // SAFETY: block b of the weights, of every column's quants and aux (caller)
            unsafe {
                let wb = w.add(b * bb);
                let isum = block_isums::<N, G>(wb, b, &x, &aux);
                let dw = _mm512_loadu_ps(wb.add(ROWS * 4 * G).cast());
                for j in 0..N {
                    let s = _mm512_mul_ps(dw, _mm512_set1_ps((*aux[j].add(b)).d));
                    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), s, acc[j]);
                }
                if MIN {
                    let mw = _mm512_loadu_ps(wb.add(ROWS * 4 * G + ROWS * 4).cast());
                    for j in 0..N {
                        accm[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps((*aux[j].add(b)).m), accm[j]);
                    }
                }
            }
        }
        let mask: __mmask16 = if n_rows >= ROWS { 0xffff } else { (1u16 << n_rows) - 1 };
        for j in 0..N {
            let r = if MIN { _mm512_sub_ps(acc[j], accm[j]) } else { acc[j] };
            // SAFETY: out[j] is writable for n_rows floats; the mask writes no more
            unsafe { _mm512_mask_storeu_ps(out[j], mask, r) };
        }
    }
}

#[cfg(test)]
mod tests;
