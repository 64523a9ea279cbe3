//! Row-parallel matrix × vector(s), the MUL_MAT of token generation (and a first, untiled form
//! for prompts): weights row-major in blocks, activations converted once per call to the weight
//! type's `vec_dot_type`, then chunks of weight rows handed out through the thread pool, each
//! chunk computing its rows against every activation row (a weight row is read once from memory
//! and reused from L1 across the activation rows).
//!
//! Layout as ggml's MUL_MAT with `src0` the weights (`ne00 = k`, `ne01 = rows`) and `src1` the
//! activations (`ne10 = k`, `ne11 = n_vecs`, f32): `dst[j · rows + i] = W[i] · x[j]`.
//!
//! What it does not do yet (issue 15): tiles for prompt processing (several rows × several
//! vectors per kernel call), repacked weights, and it allocates the per-chunk output slices each
//! call.

use std::sync::Mutex;

use crate::GgmlType;
use crate::block::{AlignedBytes, as_blocks_mut, as_bytes};
use crate::dot::RowDot;
use crate::pool::ThreadPool;
use crate::quants::quantize_row;
use crate::simd::Level;

/// `rows` weight rows of `k` elements of type `ty`, row-major, `ty.row_size(k)` bytes each
#[derive(Clone, Copy)]
pub struct Weights<'a> {
    pub ty: GgmlType,
    pub data: &'a [u8],
    pub rows: usize,
    pub k: usize,
}

/// A MUL_MAT for one weight type: the kernel chosen once, and the buffer the activations are
/// converted into (kept between calls, so a steady stream of same-sized calls allocates it once).
pub struct MatMul {
    ty: GgmlType,
    dot: RowDot,
    activations: AlignedBytes,
}

impl MatMul {
    /// for weights of `ty` at the level this process runs
    pub fn new(ty: GgmlType) -> MatMul {
        MatMul::with_level(ty, crate::simd::active())
    }

    pub fn with_level(ty: GgmlType, level: Level) -> MatMul {
        MatMul { ty, dot: crate::kernels::at(level).row_dot(ty), activations: AlignedBytes::default() }
    }

    /// rows per chunk: enough chunks for the pool to balance (8 per thread), at least 4 rows
    fn chunk_rows(rows: usize, threads: usize) -> usize {
        (rows / (threads * 8)).max(4)
    }

    /// `dst[j · rows + i] = w[i] · x[j]` for the `n_vecs` rows of `x` (each `k` f32)
    pub fn compute(&mut self, pool: &mut ThreadPool, w: Weights, x: &[f32], dst: &mut [f32]) {
        let (ty, k, rows) = (w.ty, w.k, w.rows);
        assert_eq!(ty, self.ty, "mul_mat: a MatMul for {} given {} weights", self.ty.name(), ty.name());
        assert!(k > 0 && x.len().is_multiple_of(k), "mul_mat {}: activations of {} floats are not rows of {k}", ty.name(), x.len());
        let n_vecs = x.len() / k;
        let w_row = ty.row_size(k);
        assert_eq!(w.data.len(), rows * w_row, "mul_mat {}: weights are not {rows} rows of {w_row} bytes", ty.name());
        assert_eq!(dst.len(), rows * n_vecs, "mul_mat {}: destination is not {rows} × {n_vecs}", ty.name());
        if rows == 0 || n_vecs == 0 {
            return;
        }

        // activations in the kernel's type, once (f32 weights read them as they are)
        let vt = ty.vec_dot_type().expect("weights have a vec_dot type");
        let a_row = vt.row_size(k);
        let acts: &[u8] = if vt == GgmlType::F32 {
            as_bytes(x)
        } else {
            self.activations.resize(n_vecs * a_row);
            let parts: Vec<Mutex<&mut [u8]>> = self.activations.chunks_mut(a_row).map(Mutex::new).collect();
            pool.run(n_vecs, |j| {
                let mut out = parts[j].lock().unwrap_or_else(|e| e.into_inner());
                quantize_activations(vt, &x[j * k..(j + 1) * k], &mut out);
            });
            &self.activations
        };

        // chunks of weight rows; chunk c owns dst[j·rows + r0 .. j·rows + r1] for every j
        let chunk_rows = Self::chunk_rows(rows, pool.n_threads());
        let n_chunks = rows.div_ceil(chunk_rows);
        let mut outs: Vec<Vec<&mut [f32]>> = (0..n_chunks).map(|_| Vec::with_capacity(n_vecs)).collect();
        for dst_j in dst.chunks_mut(rows) {
            for (c, part) in dst_j.chunks_mut(chunk_rows).enumerate() {
                outs[c].push(part);
            }
        }
        let outs: Vec<Mutex<Vec<&mut [f32]>>> = outs.into_iter().map(Mutex::new).collect();
        let dot = self.dot;
        pool.run(n_chunks, |c| {
            let mut out = outs[c].lock().unwrap_or_else(|e| e.into_inner());
            let r0 = c * chunk_rows;
            let r1 = (r0 + chunk_rows).min(rows);
            for r in r0..r1 {
                let wr = &w.data[r * w_row..(r + 1) * w_row];
                for (j, o) in out.iter_mut().enumerate() {
                    o[r - r0] = dot.dot(wr, &acts[j * a_row..(j + 1) * a_row]);
                }
            }
        });
    }
}

/// one activation row in the kernel's type: Q8_0 as upstream's CPU backend does it on x86 (so
/// results can match it bit for bit), every other type by its reference conversion
fn quantize_activations(vt: GgmlType, x: &[f32], out: &mut [u8]) {
    if vt == GgmlType::Q8_0 && cfg!(target_arch = "x86_64") {
        crate::quants::quantize_row_q8_0_cpu(x, as_blocks_mut(out, "mul_mat q8_0 activations"));
    } else if vt == GgmlType::Q8_1 && cfg!(target_arch = "x86_64") {
        crate::quants::quantize_row_q8_1_x86(x, as_blocks_mut(out, "mul_mat q8_1 activations"));
    } else {
        quantize_row(vt, x, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quants::dequantize_row;
    use crate::rng::XorShift;

    const TYPES: [GgmlType; 9] =
        [GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4K, GgmlType::Q6K];

    fn weights(r: &mut XorShift, ty: GgmlType, rows: usize, k: usize) -> AlignedBytes {
        let mut w = AlignedBytes::zeroed(rows * ty.row_size(k));
        let rs = ty.row_size(k);
        for i in 0..rows {
            quantize_row(ty, &r.model_like(k), &mut w[i * rs..(i + 1) * rs]);
        }
        w
    }

    /// the parallel result is the row kernel's, bit for bit, whatever the thread count and
    /// however the rows fall into chunks
    #[test]
    fn parallel_result_equals_the_row_kernel() {
        let mut r = XorShift::new(21);
        for threads in [1, 2, 3] {
            let mut pool = ThreadPool::new(threads);
            for ty in TYPES {
                for (rows, k, n_vecs) in [(1, 256, 1), (37, 512, 1), (130, 256, 3), (64, 1024, 5)] {
                    let w = weights(&mut r, ty, rows, k);
                    let x = r.model_like(k * n_vecs);
                    let mut dst = vec![f32::NAN; rows * n_vecs];
                    let mut mm = MatMul::new(ty);
                    mm.compute(&mut pool, Weights { ty, data: &w, rows, k }, &x, &mut dst);
                    let dot = crate::kernels::active().row_dot(ty);
                    let vt = ty.vec_dot_type().unwrap();
                    for j in 0..n_vecs {
                        let mut a = AlignedBytes::zeroed(vt.row_size(k));
                        quantize_activations(vt, &x[j * k..(j + 1) * k], &mut a);
                        for i in 0..rows {
                            let want = dot.dot(&w[i * ty.row_size(k)..(i + 1) * ty.row_size(k)], &a);
                            let got = dst[j * rows + i];
                            assert_eq!(got.to_bits(), want.to_bits(), "{} {threads} threads rows={rows} vec {j} row {i}: {got} vs {want}", ty.name());
                        }
                    }
                }
            }
        }
    }

    /// and it is the product of the dequantized matrices (f64), within float rounding
    #[test]
    fn result_is_the_product_of_the_dequantized_operands() {
        let mut r = XorShift::new(22);
        let mut pool = ThreadPool::new(2);
        let (rows, k, n_vecs) = (48, 512, 2);
        for ty in TYPES {
            let w = weights(&mut r, ty, rows, k);
            let x = r.model_like(k * n_vecs);
            let mut dst = vec![0f32; rows * n_vecs];
            MatMul::new(ty).compute(&mut pool, Weights { ty, data: &w, rows, k }, &x, &mut dst);
            let vt = ty.vec_dot_type().unwrap();
            for j in 0..n_vecs {
                let mut a = AlignedBytes::zeroed(vt.row_size(k));
                quantize_activations(vt, &x[j * k..(j + 1) * k], &mut a);
                let mut ad = vec![0f32; k];
                dequantize_row(vt, &a, &mut ad);
                for i in 0..rows {
                    let mut wd = vec![0f32; k];
                    dequantize_row(ty, &w[i * ty.row_size(k)..(i + 1) * ty.row_size(k)], &mut wd);
                    let exact: f64 = wd.iter().zip(&ad).map(|(p, q)| *p as f64 * *q as f64).sum();
                    let mag: f64 = wd.iter().zip(&ad).map(|(p, q)| (*p as f64 * *q as f64).abs()).sum();
                    let got = dst[j * rows + i] as f64;
                    // Q5_1: s = f16(d·Σq) is rounded by upstream's format (2⁻¹¹), m the block's minimum weight
                    let slack = if ty == GgmlType::Q5_1 {
                        let blocks = wd[..].chunks(32).zip(ad.chunks(32));
                        blocks
                            .map(|(wb, xb)| wb.iter().fold(f64::MAX, |m, &v| m.min(v as f64)).abs() * xb.iter().map(|&v| v as f64).sum::<f64>().abs() / 1024.0)
                            .sum()
                    } else {
                        0.0
                    };
                    assert!((got - exact).abs() <= mag * 1e-5 + 1e-30 + slack, "{} vec {j} row {i}: {got} vs {exact}", ty.name());
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "mul_mat q4_0: weights are not 3 rows of 18 bytes")]
    fn wrong_weight_size_is_named() {
        let mut pool = ThreadPool::new(1);
        let w = AlignedBytes::zeroed(18 * 2);
        let mut dst = [0f32; 3];
        MatMul::new(GgmlType::Q4_0).compute(&mut pool, Weights { ty: GgmlType::Q4_0, data: &w, rows: 3, k: 32 }, &[0.0; 32], &mut dst);
    }
}
