//! Family `mat`: MUL_MAT, MUL_MAT_ID, OUT_PROD (activations quantized to the weight type's vec-dot type).
//!
//! MUL_MAT as upstream's CPU computes it (`ggml_compute_forward_mul_mat`): src0 the weights
//! (`ne00 = k`, rows `ne01`, broadcast over dims 2 and 3), src1 the activations, every src1
//! row converted once to the weights' `vec_dot_type` (Q8_0 for Q8_0 / Q4_0 / Q5_0, Q8_1 for Q5_1, Q8_K for the
//! K-quants, the float types as they are; F16 / BF16 activations of F32 weights widened to
//! F32), then `dst[i01, i11, i12, i13] = dot(src0 row (i01, i12 / r2, i13 / r3), src1 row)`
//! with the crate's row kernels ([`RowDot`]), in chunks of 16 weight rows × 16 activation rows.

use super::copy::elem::{Scalar, block_align, chunk_range, offset, sane, split, type_size, unravel};
use super::unary::kit::MIN_CHUNK_ELEMS;
use super::{Exec, Family, Node, Op, OpError, View, raw_type};
use crate::GgmlType;
use crate::dot::gemv::{STRIDED_AHEAD, prefetch};
use crate::dot::{Order, RowDot};
use crate::kernels::Kernels;

pub const FAMILY: Family = Family { name: "mat", ops: &[Op::MulMat, Op::MulMatId, Op::OutProd], supports, compute };

/// the weight types with a row kernel (every block type but the activation-only Q8_K / Q8_1)
fn weight_type(ty: i32) -> Option<GgmlType> {
    GgmlType::from_raw(ty).filter(|t| t.vec_dot_type().is_some())
}

/// src1's type is one MUL_MAT takes for weights of `wt`: F32 (converted), the vec-dot type
/// itself, or F16 / BF16 widened for F32 weights (upstream's supports_op)
fn activation_ok(wt: GgmlType, b: i32) -> bool {
    let vdt = wt.vec_dot_type().expect("weights have a vec_dot type");
    b == raw_type::F32 || b == vdt as i32 || (vdt == GgmlType::F32 && matches!(b, raw_type::F16 | raw_type::BF16))
}

fn supports(node: &Node) -> bool {
    let (Ok(a), Ok(b), d) = (node.src(0), node.src(1), &node.dst) else { return false };
    if !sane(a) || !sane(b) || !sane(d) || d.ty != raw_type::F32 || d.nb[0] != 4 {
        return false;
    }
    match node.op {
        Op::MulMat => {
            let Some(wt) = weight_type(a.ty) else { return false };
            let bsize = type_size(b.ty).map(|t| t.1);
            activation_ok(wt, b.ty)
                && a.nb[0] == wt.type_size()
                && Some(b.nb[0]) == bsize
                && a.ne[0] % wt.block_size() as i64 == 0
                && b.ne[0] == a.ne[0]
                && d.ne == [a.ne[1], b.ne[1], b.ne[2], b.ne[3]]
                && a.ne[2] > 0
                && a.ne[3] > 0
                && b.ne[2] % a.ne[2] == 0
                && b.ne[3] % a.ne[3] == 0
        }
        Op::MulMatId => {
            let (Some(wt), Ok(ids)) = (weight_type(a.ty), node.src(2)) else { return false };
            let vdt = wt.vec_dot_type().expect("weights have a vec_dot type");
            (b.ty == raw_type::F32 || b.ty == vdt as i32)
                && ids.ty == raw_type::I32
                && a.nb[0] == wt.type_size()
                && type_size(b.ty).map(|t| t.1) == Some(b.nb[0])
                && a.ne[0] % wt.block_size() as i64 == 0
                && b.ne[0] == a.ne[0]
                && a.ne[3] == 1
                && b.ne[3] == 1
                && b.ne[1] > 0
                && ids.ne[1] == b.ne[2]
                && d.ne == [a.ne[1], ids.ne[0], ids.ne[1], 1]
        }
        Op::OutProd => {
            let wt = GgmlType::from_raw(a.ty).filter(|t| t.vec_dot_type().is_some());
            let Some(wt) = wt else { return false };
            let broadcast_ok = if wt == GgmlType::F32 {
                a.ne[2] > 0 && a.ne[3] > 0 && d.ne[2] % a.ne[2] == 0 && d.ne[3] % a.ne[3] == 0
            } else {
                // upstream's F16 and quantized forms take no broadcast
                wt != GgmlType::BF16 && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3]
            };
            b.ty == raw_type::F32
                && broadcast_ok
                && a.nb[0] == wt.type_size()
                && a.ne[0] % wt.block_size() as i64 == 0
                && d.ne == [a.ne[0], b.ne[0], b.ne[2], b.ne[3]]
                && a.ne[1] == b.ne[1]
        }
        _ => false,
    }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    match node.op {
        Op::MulMat => mul_mat(node, exec),
        Op::MulMatId => mul_mat_id(node, exec),
        Op::OutProd => out_prod(node, exec),
        _ => Err(OpError::new(node, "not an op of the mat family")),
    }
}

/// src1 rows in the weights' vec-dot type: in the scratch (converted, `row_size` apart, in
/// (i11, i12, i13) order) or src1 itself
#[derive(Clone, Copy)]
enum Acts {
    Converted { base: *const u8, row_size: usize },
    Direct(View),
}

// SAFETY: a description of memory that the kernel only reads after the conversion phase joined.
unsafe impl Sync for Acts {}
// SAFETY: as above.
unsafe impl Send for Acts {}

impl Acts {
    fn row(&self, i11: usize, i12: usize, i13: usize, ne11: usize, ne12: usize) -> *const u8 {
        match *self {
            Acts::Converted { base, row_size } => base.wrapping_add(((i13 * ne12 + i12) * ne11 + i11) * row_size),
            Acts::Direct(v) => v.data.wrapping_add(offset(&v, 0, i11, i12, i13)).cast_const(),
        }
    }
}

/// converts every row of `b` to `vdt` in the scratch unless `b` already is `vdt` with rows aligned
/// for its blocks; returns where the kernel finds them
fn prepare_activations(b: &View, vdt: GgmlType, exec: &mut Exec) -> Acts {
    prepare_activations_as(b, vdt, false, exec)
}

/// [`prepare_activations`]; with `repacked` (upstream's repacked kernels take the MUL_MAT:
/// [`Order::repacked`]) F32 rows to Q8_K of a plane's GEMM rows ([`Order::RepackGemm`]) are
/// quantized as upstream's 4-row quantizer does ([`crate::quants::quantize_row_q8_k_4x8`])
fn prepare_activations_as(b: &View, vdt: GgmlType, repacked: bool, exec: &mut Exec) -> Acts {
    let aligned = [b.data as usize, b.nb[1], b.nb[2], b.nb[3]].iter().all(|x| x.is_multiple_of(block_align(vdt)));
    if b.ty == vdt as i32 && aligned {
        return Acts::Direct(*b);
    }
    let k = b.ne[0] as usize;
    let row_size = vdt.row_size(k);
    let n_rows = b.nrows() as usize;
    let scratch = exec.scratch(n_rows * row_size);
    let b = *b;
    let src = Scalar::of(b.ty);
    // chunks of MIN_CHUNK_ELEMS values at least: token generation's attention products convert
    // 8 rows of 64 (one per head), which split over the pool cost a job for ~0.2 µs of work
    let (n_chunks, per) = split(n_rows, exec.n_threads(), (MIN_CHUNK_ELEMS as usize).div_ceil(k.max(1)));
    // the rows upstream quantizes 4 at a time (they differ for Q8_K only)
    let ne11 = b.ne[1] as usize;
    let four_row = |i11: usize| Order::for_row(repacked, i11, ne11) == Order::RepackGemm;
    exec.parallel(n_chunks, |c| {
        // whole views into the closure (a field of one alone is a bare pointer, not Sync)
        let (b, scratch) = (&b, &scratch);
        // filled only for sources that are not f32 rows already (no allocation per node on the
        // token-generation path)
        let mut x = Vec::new();
        for r in chunk_range(c, per, n_rows) {
            let (i11, i12, i13) = unravel(r, b.ne[1] as usize, b.ne[2] as usize);
            let p = b.data.wrapping_add(offset(b, 0, i11, i12, i13));
            let out = scratch.ptr.wrapping_add(r * row_size);
            match src {
                Some(_) if b.ty == raw_type::F32 && b.ty != vdt as i32 && (p as usize).is_multiple_of(4) => {
                    // SAFETY: a dense f32 src1 row of k values (supports: nb10 = 4), aligned;
                    // row r of the scratch as below
                    unsafe { super::copy::elem::quantize_from_as(vdt, std::slice::from_raw_parts(p.cast::<f32>(), k), out, four_row(i11)) };
                }
                Some(s) if b.ty != vdt as i32 => {
                    x.resize(k, 0f32);
                    for (i, v) in x.iter_mut().enumerate() {
                        // SAFETY: element i of a dense src1 row (supports: nb10 is the type size)
                        *v = unsafe { s.load(p.add(i * s.size())) };
                    }
                    // SAFETY: row r of the scratch (n_rows · row_size bytes, rows disjoint across chunks)
                    unsafe { super::copy::elem::quantize_from_as(vdt, &x, out, four_row(i11)) };
                }
                // already the vec-dot type, only not aligned: the bytes
                // SAFETY: a dense src1 row of row_size bytes into row r of the scratch
                _ => unsafe { std::ptr::copy_nonoverlapping(p, out, row_size) },
            }
        }
    });
    Acts::Converted { base: scratch.ptr.cast_const(), row_size }
}

/// the dot of `n` bytes of a weight row with an activation row, the weight row copied to an
/// aligned buffer first when its address does not suit the block view
///
/// # Safety
/// `w` and `x` are valid for reading `w_len` / `x_len` bytes.
#[inline]
unsafe fn dot(kern: &RowDot, w: *const u8, w_len: usize, x: *const u8, x_len: usize, align: usize, tmp: &mut Vec<u64>) -> f32 {
    if w_len == 0 {
        // an empty product (k = 0); no slice over pointers that may be dangling
        return 0.0;
    }
    // SAFETY: the lengths are readable (caller); x comes from the scratch or an aligned src1
    unsafe {
        let wr = super::copy::elem::aligned_bytes(w, w_len, align, tmp);
        kern.dot(wr, std::slice::from_raw_parts(x, x_len))
    }
}

fn mul_mat(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, b, d) = (*node.src(0)?, *node.src(1)?, node.dst);
    if fwht::applies(&a, &b, &d, &node.params) && !exec.kernels().is_reference() {
        fwht::compute(&b, &d, exec);
        return Ok(());
    }
    let wt = weight_type(a.ty).ok_or_else(|| OpError::new(node, "weights of a type without a row kernel"))?;
    let vdt = wt.vec_dot_type().expect("weights have a vec_dot type");
    let kern = exec.kernels();
    let (repacked, tiled) = match plan(&a, &b, wt, kern) {
        MatPlan::Qgemm { kind, repacked } => {
            let tiles = kern.gemm.qgemm.expect("the plan takes the int8 tiles of a set that has them");
            mul_mat_qgemm(&a, &b, &d, wt, node.packed, (kind, tiles), repacked, exec);
            return Ok(());
        }
        MatPlan::Sgemm => {
            let tiles = kern.gemm.sgemm.expect("the plan takes the tinyBLAS tiles of a set that has them");
            mul_mat_sgemm(&a, &b, &d, wt, tiles, exec);
            return Ok(());
        }
        MatPlan::Fgemm => {
            let tile = kern.gemm.fgemm.expect("the plan takes the float tiles of a set that has them");
            mul_mat_fgemm(&a, &b, &d, wt, (tile, kern.gemm.fgemm_repack16), exec);
            return Ok(());
        }
        MatPlan::Rows { repacked, tiled } => (repacked, tiled),
    };
    // F16 / BF16 activations of F32 weights are widened to F32 (upstream does the same)
    let acts = prepare_activations_as(&b, vdt, repacked, exec);
    let k = a.ne[0] as usize;
    let (w_len, x_len) = (wt.row_size(k), vdt.row_size(k));
    // per order (vec_dot's, or the repacked GEMV's and GEMM's): the row kernel, and 4 weight
    // rows per pass where the type has a multi-row kernel at this level (bit for bit the row
    // kernel's results)
    let orders = [Order::VecDot, Order::RepackGemv, Order::RepackGemm];
    let mut kerns = orders.map(|o| kern.dot.row(wt, o));
    let gemvs = orders.map(|o| kern.gemv(wt, o));
    let mut multis = gemvs.map(|g| {
        let ra = g.row_align();
        g.is_multi_row() && w_len > 0 && [a.data as usize, a.nb[1], a.nb[2], a.nb[3]].iter().all(|v| v.is_multiple_of(ra))
    });
    if tiled {
        // 8 or more activation rows: upstream's tiled K-quant path's order, row by row
        kerns[0] = kern.dot.row(wt, Order::Tiled);
        multis[0] = false;
    }
    let align = block_align(wt);
    let (ne11, ne12) = (b.ne[1] as usize, b.ne[2] as usize);
    let (r2, r3) = ((b.ne[2] / a.ne[2]) as usize, (b.ne[3] / a.ne[3]) as usize);
    let nr0 = a.ne[1] as usize;
    let nr1 = b.nrows() as usize;
    if nr0 == 0 || nr1 == 0 {
        return Ok(());
    }
    // upstream's chunking: 16 × 16 (64 for a vector), re-split by thread when too few chunks
    let nth = exec.n_threads();
    let cs = if nr0 == 1 || nr1 == 1 { 64 } else { 16 };
    let (mut nc0, mut nc1) = (nr0.div_ceil(cs), nr1.div_ceil(cs));
    if nc0 * nc1 < nth * 4 {
        (nc0, nc1) = if nr0 > nr1 { (nth, 1) } else { (1, nth) };
    }
    let (dr0, dr1) = (nr0.div_ceil(nc0), nr1.div_ceil(nc1));
    // rows with gaps between them (a permuted view: the K of a KV cache, one head's row every
    // n_head_kv rows) are misses the hardware prefetchers do not see coming
    let strided = a.nb[1] > w_len;
    exec.parallel(nc0 * nc1, |c| {
        let (c0, c1) = (c % nc0, c / nc0);
        let (ir0, ir1) = (chunk_range(c0, dr0, nr0), chunk_range(c1, dr1, nr1));
        let mut tmp = Vec::new();
        // blocks of 16 weight rows × 16 activation rows; one activation row (token generation):
        // the chunk's weight rows in one call (the multi-row kernels take the activation's
        // per-block work once for all of them)
        let bw = if ir1.len() == 1 { ir0.len().max(1) } else { 16 };
        for jb in ir1.clone().step_by(16) {
            for ib in ir0.clone().step_by(bw) {
                for j in jb..(jb + 16).min(ir1.end) {
                    let (i11, i12, i13) = unravel(j, ne11, ne12);
                    let o = Order::for_row(repacked, i11, ne11) as usize;
                    let (kern, gemv, multi) = (&kerns[o], &gemvs[o], multis[o]);
                    let x = acts.row(i11, i12, i13, ne11, ne12);
                    let w0 = offset(&a, 0, 0, i12 / r2, i13 / r3);
                    let out = d.data.wrapping_add(offset(&d, 0, i11, i12, i13)).cast::<f32>();
                    if multi {
                        let n = (ib + bw).min(ir0.end) - ib;
                        // SAFETY: weight rows ib..ib + n of the broadcast slab (whole rows, nb01
                        // apart: supports), the activation row j (x_len bytes), dst elements
                        // (ib.., j) written by this chunk only
                        unsafe { gemv.rows(a.data.add(w0 + ib * a.nb[1]), a.nb[1], n, std::slice::from_raw_parts(x, x_len), out.add(ib)) };
                        continue;
                    }
                    for i in ib..(ib + bw).min(ir0.end) {
                        if strided {
                            prefetch(a.data.wrapping_add(w0 + (i + STRIDED_AHEAD) * a.nb[1]), w_len);
                        }
                        // SAFETY: weight row i of the broadcast slab and the activation row j,
                        // whole rows (supports); dst element (i, j) is written by this chunk only
                        unsafe {
                            let v = dot(kern, a.data.add(w0 + i * a.nb[1]), w_len, x, x_len, align, &mut tmp);
                            out.add(i).write_unaligned(v);
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

/// How a MUL_MAT is computed: a plain value chosen by [`plan`] from the types, the shapes and the
/// kernel table, testable without running it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatPlan {
    /// the int8 tiles ([`crate::qgemm`]) in the repacked form `kind`; `repacked`: in upstream's
    /// repacked orders ([`Order::repacked`])
    Qgemm { kind: crate::qgemm::Kind, repacked: bool },
    /// F32 / F16 weights in upstream's tinyBLAS order ([`crate::sgemm`])
    Sgemm,
    /// the float tiles ([`crate::fgemm`]: BF16, and F32 / F16 under `GGML_RS_CPU_ORDER=fast`)
    Fgemm,
    /// the row kernels: `ggml_vec_dot_*`'s order, or by row upstream's repacked GEMV / GEMM
    /// orders (`repacked`), Q2_K / Q3_K / Q5_K / Q6_K / IQ4_XS in its tiled path's order (`tiled`)
    Rows { repacked: bool, tiled: bool },
}

/// the plan of a MUL_MAT of weights `a` (type `wt`) and activations `b` with the kernels `k`
/// (`supports` has accepted the node)
pub fn plan(a: &View, b: &View, wt: GgmlType, k: &Kernels) -> MatPlan {
    // Q4_0 / Q4_K weights that upstream would repack: its repacked kernels' orders
    let repacked = Order::repacked(wt, a.ne[1], a.ne[2], a.ne[3], b.ty == raw_type::F32, b.ne[3], &k.dot);
    if k.gemm.qgemm.is_some() && crate::qgemm::supports(wt) && tile_shape(a, b, wt) {
        let kind = crate::qgemm::kind_for(wt, repacked, k).expect("qgemm::supports checked the type");
        return MatPlan::Qgemm { kind, repacked };
    }
    match crate::sgemm::exact(wt, k) {
        // F32 / F16 weights in upstream native's bits: its tinyBLAS order where it takes the
        // product, else the row kernels (ggml_vec_dot_f32's / _f16's order)
        Some(tiles) if use_sgemm(a, b, wt, &tiles) => return MatPlan::Sgemm,
        Some(_) => {}
        None if k.gemm.fgemm.is_some() && use_fgemm(a, b, wt) => return MatPlan::Fgemm,
        None => {}
    }
    // repacked weights never take the tiled path (upstream's takes only plain ones)
    // (the qgemm tiles of Q6_K sum in the tiled order too: their `tiled` form, whatever
    // `GGML_RS_CPU_ORDER`)
    MatPlan::Rows { repacked, tiled: !repacked && Order::tiled(wt, b.ne[1], tiled_src1(b), &k.dot) }
}

/// activations upstream's tiled K-quant path takes: F32 or Q8_K
fn tiled_src1(b: &View) -> bool {
    b.ty == raw_type::F32 || b.ty == GgmlType::Q8K as i32
}

/// MUL_MAT_ID: for token t and slot s, `dst[:, s, t] = src0[expert ids[s, t]] · src1[:, s % ne11, t]`,
/// each expert's products in the order upstream's CPU sums them ([`id_orders`])
fn mul_mat_id(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, b, ids, d) = (*node.src(0)?, *node.src(1)?, *node.src(2)?, node.dst);
    let wt = weight_type(a.ty).ok_or_else(|| OpError::new(node, "weights of a type without a row kernel"))?;
    let vdt = wt.vec_dot_type().expect("weights have a vec_dot type");
    let (n_ids, n_tok) = (ids.ne[0] as usize, ids.ne[1] as usize);
    let mut experts = Vec::with_capacity(n_ids * n_tok);
    for t in 0..n_tok {
        for s in 0..n_ids {
            // SAFETY: inside ids
            let e = unsafe { ids.data.add(offset(&ids, s, t, 0, 0)).cast::<i32>().read_unaligned() };
            if e < 0 || e as i64 >= a.ne[2] {
                return Err(OpError::new(node, format!("expert id {e} at ({s}, {t}) is outside 0..{}", a.ne[2])));
            }
            experts.push(e as usize);
        }
    }
    let orders = id_orders(&a, &b, wt, &experts, &exec.kernels().dot);
    // every routed row quantized by from_float (upstream's repacked MUL_MAT_ID too: no GEMM rows)
    let acts = prepare_activations(&b, vdt, exec);
    let k = a.ne[0] as usize;
    let (w_len, x_len) = (wt.row_size(k), vdt.row_size(k));
    let kerns = [Order::VecDot, Order::RepackGemv, Order::Tiled].map(|o| exec.kernels().dot.row(wt, o));
    let align = block_align(wt);
    let (ne11, ne12) = (b.ne[1] as usize, b.ne[2] as usize);
    let nr0 = a.ne[1] as usize;
    let pairs = n_ids * n_tok;
    if nr0 == 0 || pairs == 0 {
        return Ok(());
    }
    let row_block = 64.min(nr0);
    let nc0 = nr0.div_ceil(row_block);
    let experts = &experts;
    exec.parallel(pairs * nc0, |c| {
        let (p, c0) = (c / nc0, c % nc0);
        let (s, t) = (p % n_ids, p / n_ids);
        let e = experts[p];
        let kern = &kerns[match orders[e] {
            Order::RepackGemv => 1,
            Order::Tiled => 2,
            _ => 0,
        }];
        let x = acts.row(s % ne11, t, 0, ne11, ne12);
        let out = d.data.wrapping_add(offset(&d, 0, s, t, 0)).cast::<f32>();
        let mut tmp = Vec::new();
        for i in chunk_range(c0, row_block, nr0) {
            // SAFETY: weight row i of expert e (checked in range), activation row (s % ne11, t);
            // dst element (i, s, t) written by this chunk only
            unsafe {
                let v = dot(kern, a.data.add(offset(&a, 0, i, e, 0)), w_len, x, x_len, align, &mut tmp);
                out.add(i).write_unaligned(v);
            }
        }
    });
    Ok(())
}

/// per expert of a MUL_MAT_ID, the order upstream's CPU sums its products in: the repacked GEMV's
/// for every row where its repack buffer takes the experts ([`Order::repacked_experts`]), else
/// its tiled K-quant path's for an expert with 8 or more routed rows ([`Order::tiled`], decided
/// per expert as upstream does), else `ggml_vec_dot_*`'s
pub fn id_orders(a: &View, b: &View, wt: GgmlType, experts: &[usize], dots: &crate::dot::Dots) -> Vec<Order> {
    let n_as = a.ne[2].max(0) as usize;
    if Order::repacked_experts(wt, a.ne[1], a.ne[2], a.ne[3], b.ty == raw_type::F32, b.ne[3], dots) {
        return vec![Order::RepackGemv; n_as];
    }
    let mut routed = vec![0i64; n_as];
    for &e in experts {
        routed[e] += 1;
    }
    routed.iter().map(|&n| if Order::tiled(wt, n, tiled_src1(b), dots) { Order::Tiled } else { Order::VecDot }).collect()
}

/// OUT_PROD: `dst[i0, i1, i2, i3] = Σ_j src0[i0, j, i2 / r2, i3 / r3] · src1[i1, j, i2, i3]`,
/// summed in order of j (upstream's `ggml_vec_mad_f32` per j); src0 rows dequantized to F32
fn out_prod(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    let (a, b, d) = (*node.src(0)?, *node.src(1)?, node.dst);
    let wt = GgmlType::from_raw(a.ty).ok_or_else(|| OpError::new(node, "src0 of an unknown type"))?;
    let ne0 = d.ne[0] as usize;
    let (ne1, ne2) = (d.ne[1] as usize, d.ne[2] as usize);
    let nj = a.ne[1] as usize;
    let (r2, r3) = ((d.ne[2] / a.ne[2].max(1)) as usize, (d.ne[3] / a.ne[3].max(1)) as usize);
    let rows = d.nrows() as usize;
    let (n_chunks, per) = split(rows, exec.n_threads(), 1);
    exec.parallel(n_chunks, |c| {
        let mut acc = vec![0f32; ne0];
        let mut w = vec![0f32; ne0];
        for r in chunk_range(c, per, rows) {
            let (i1, i2, i3) = unravel(r, ne1, ne2);
            acc.fill(0.0);
            for j in 0..nj {
                // SAFETY: row j of src0's slab (i2 / r2, i3 / r3) (whole blocks, supports) and
                // element (i1, j, i2, i3) of src1
                let s = unsafe {
                    super::copy::elem::dequantize_to(wt, a.data.add(offset(&a, 0, j, i2 / r2, i3 / r3)), ne0, w.as_mut_ptr().cast());
                    b.data.add(offset(&b, i1, j, i2, i3)).cast::<f32>().read_unaligned()
                };
                for (o, v) in acc.iter_mut().zip(&w) {
                    *o += v * s;
                }
            }
            let out = d.data.wrapping_add(offset(&d, 0, i1, i2, i3));
            // SAFETY: dst row (i1, i2, i3), dense (nb0 = 4, supports); this chunk's alone
            unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr().cast::<u8>(), out, ne0 * 4) };
        }
    });
    Ok(())
}

mod fwht;
mod gemm;
use gemm::*;
#[cfg(test)]
mod tests;
