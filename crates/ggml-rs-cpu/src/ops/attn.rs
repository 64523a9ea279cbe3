//! Family `attn`: FLASH_ATTN_EXT.
//!
//! Q is F32; K and V are F32, F16, BF16, Q8_0 or Q4_0 (rows packed); the optional mask is F16 (its
//! row is the query's, dims 2 and 3 broadcast), the optional sinks (src4) F32 per head. Op params:
//! [0] scale, [1] max_bias (ALiBi), [2] logit soft-cap, [3] precision (default or F32: both
//! accumulate in f32 here). The output is upstream's permuted layout: [DV, n_head, n_q, n_seq].
//!
//! As upstream's CPU: each query row is converted once to K's `vec_dot_type` (F16 for F16 K, Q8_0
//! for Q8_0 / Q4_0 K, quantized as upstream's CPU quantizes activations) and dotted with the K rows
//! by the same dot kernels MUL_MAT uses; the scores are `s·scale` (through `softcap·tanh` when
//! soft-capped) plus `slope·mask`; a masked `-inf` position is skipped. The softmax is online, over
//! tiles of KV: a tile's scores first, then the running maximum, the rescale of the f32 V
//! accumulator and the sum, then the V rows (converted to f32) weighted in. The sink joins the
//! softmax as a score with no V row. A row with nothing to attend to is 0.

use super::softmax::alibi_slope;
use super::unary::kit::{max_chunks, par_ranges_c, set};
use super::{Exec, Family, Node, Op, OpError, Scratch, View, raw_type};
use crate::GgmlType;
use crate::dot::RowDot;
use crate::quants::{dequantize_row, quantize_row, quantize_row_q8_0_x86};

pub const FAMILY: Family = Family { name: "attn", ops: &[Op::FlashAttnExt], supports, compute };

/// KV positions per tile
const TILE: usize = 64;

fn kv_type(v: &View) -> Option<GgmlType> {
    match v.block_type()? {
        t @ (GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 | GgmlType::Q8_0 | GgmlType::Q4_0) => Some(t),
        _ => None,
    }
}

fn refusal(node: &Node) -> Option<&'static str> {
    let (Some(q), Some(k), Some(v)) = (node.src[0].as_ref(), node.src[1].as_ref(), node.src[2].as_ref()) else {
        return Some("needs q, k, v");
    };
    let d = &node.dst;
    let (Some(kt), Some(vt)) = (kv_type(k), kv_type(v)) else { return Some("K / V type") };
    if q.ty != raw_type::F32 || d.ty != raw_type::F32 || q.nb[0] != 4 || d.nb[0] != 4 {
        return Some("Q and the output must be F32 with packed rows");
    }
    let (dk, dv) = (k.ne[0], v.ne[0]);
    if q.ne[0] != dk || v.ne[1] != k.ne[1] || !(dk as usize).is_multiple_of(kt.block_size()) || !(dv as usize).is_multiple_of(vt.block_size()) {
        return Some("head sizes");
    }
    if k.nb[0] != kt.type_size() || v.nb[0] != vt.type_size() {
        return Some("K / V rows must be packed");
    }
    if d.ne != [dv, q.ne[2], q.ne[1], q.ne[3]] {
        return Some("output shape must be [DV, n_head, n_q, n_seq]");
    }
    let bcast = |x: &View| x.ne[2] > 0 && x.ne[3] > 0 && q.ne[2] % x.ne[2] == 0 && q.ne[3] % x.ne[3] == 0;
    if !bcast(k) || !bcast(v) {
        return Some("K / V heads must divide Q's");
    }
    if let Some(m) = node.src[3].as_ref()
        && (m.ty != raw_type::F16 || m.ne[0] < k.ne[1] || m.ne[1] < q.ne[1] || !bcast(m))
    {
        return Some("the mask must be F16, [n_kv, >= n_q, broadcastable]");
    }
    if let Some(s) = node.src[4].as_ref()
        && (s.ty != raw_type::F32 || s.ne[0] < q.ne[2] || s.nb[0] != 4)
    {
        return Some("sinks must be F32, one per head");
    }
    if !matches!(node.params[3], 0 | 10) {
        return Some("unknown precision");
    }
    None
}

fn supports(node: &Node) -> bool {
    refusal(node).is_none()
}

/// bytes of a row of `n` elements of `t`, as a slice at `p`
fn row_bytes<'a>(p: *const u8, t: GgmlType, n: i64) -> &'a [u8] {
    // SAFETY: a packed row of n elements of t inside a view (the views' contract, ops/unary/kit.rs)
    unsafe { std::slice::from_raw_parts(p, t.row_size(n as usize)) }
}

/// query rows of one head computed together: each K row is dotted and each V row converted once
/// per group rather than once per query
const QT: usize = 16;

/// the per-chunk work areas, in f32 words: per query of a group its converted Q, accumulator,
/// tile scores, running maximum and sum; one V row in f32
struct Work {
    q_words: usize,
    dv: usize,
}

impl Work {
    fn words(&self) -> usize {
        QT * (self.q_words + self.dv + TILE + 2) + self.dv
    }
}

struct Areas<'a> {
    /// QT converted query rows of `q_words` words each
    qbuf: &'a mut [f32],
    acc: &'a mut [f32],
    scores: &'a mut [f32],
    m_run: &'a mut [f32],
    s_run: &'a mut [f32],
    v32: &'a mut [f32],
}

fn chunk_work<'a>(s: &Scratch, c: usize, w: &Work) -> Areas<'a> {
    let all = super::unary::kit::scratch_f32(s, c, w.words());
    let (qbuf, rest) = all.split_at_mut(QT * w.q_words);
    let (acc, rest) = rest.split_at_mut(QT * w.dv);
    let (scores, rest) = rest.split_at_mut(QT * TILE);
    let (m_run, rest) = rest.split_at_mut(QT);
    let (s_run, v32) = rest.split_at_mut(QT);
    Areas { qbuf, acc, scores, m_run, s_run, v32 }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    if let Some(why) = refusal(node) {
        return Err(OpError::new(node, why));
    }
    let (q, k, v) = (*node.src(0)?, *node.src(1)?, *node.src(2)?);
    let (mask, sinks) = (node.src[3], node.src[4]);
    let d = node.dst;
    let (kt, vt) = (kv_type(&k).expect("checked"), kv_type(&v).expect("checked"));
    let qt = kt.vec_dot_type().expect("K types have one");
    let (dk, dv) = (k.ne[0], v.ne[0]);
    let work = Work { q_words: qt.row_size(dk as usize).div_ceil(4), dv: dv as usize };
    let scratch = exec.scratch(max_chunks(exec) * work.words() * 4);
    let dot = RowDot::new(kt, exec.level());
    let mut scale = node.param_f32(0);
    let max_bias = node.param_f32(1);
    let softcap = node.param_f32(2);
    if softcap != 0.0 {
        scale /= softcap;
    }
    let p = Params { scale, max_bias, softcap };
    let qne = q.ne;
    // a unit: up to QT query rows of one head (iq2) and sequence (iq3)
    let groups = (qne[1] as usize).div_ceil(QT) as i64;
    par_ranges_c(exec, groups * qne[2] * qne[3], |c, u0, u1| {
        let mut w = chunk_work(&scratch, c, &work);
        for u in u0..u1 {
            let (g, rest) = (u % groups, u / groups);
            let (iq2, iq3) = (rest % qne[2], rest / qne[2]);
            let iq1 = g * QT as i64;
            let n = (qne[1] - iq1).min(QT as i64) as usize;
            one_group(&q, &k, &v, mask.as_ref(), sinks.as_ref(), &d, (kt, vt, qt), &dot, &p, (iq1, n, iq2, iq3), work.q_words, &mut w);
        }
    });
    Ok(())
}

struct Params {
    scale: f32,
    max_bias: f32,
    softcap: f32,
}

/// a V row in f32; F16 through `half`'s slice conversion (F16C, eight at a time, where the CPU
/// has it: the per-element form checks for it on every value)
fn v_to_f32(vt: GgmlType, bytes: &[u8], out: &mut [f32]) {
    if vt == GgmlType::F16 {
        use half::slice::HalfFloatSliceExt;
        crate::block::as_blocks::<half::f16>(bytes, "flash_attn_ext v").convert_to_f32_slice(out);
    } else {
        dequantize_row(vt, bytes, out);
    }
}

/// query rows iq1 .. iq1 + nq of head iq2, sequence iq3
#[allow(clippy::too_many_arguments)]
fn one_group(
    q: &View,
    k: &View,
    v: &View,
    mask: Option<&View>,
    sinks: Option<&View>,
    d: &View,
    (kt, vt, qt): (GgmlType, GgmlType, GgmlType),
    dot: &RowDot,
    p: &Params,
    (iq1, nq, iq2, iq3): (i64, usize, i64, i64),
    q_words: usize,
    w: &mut Areas,
) {
    let (dk, dv, n_kv) = (k.ne[0], v.ne[0], k.ne[1]);
    let dvu = dv as usize;
    let slope = alibi_slope(p.max_bias, q.ne[2] as u32, iq2 as u32);
    let qbytes = qt.row_size(dk as usize);
    // each query in K's dot type
    for a in 0..nq {
        let qrow = row_bytes(q.row(iq1 + a as i64, iq2, iq3), GgmlType::F32, dk);
        let qf: &[f32] = crate::block::as_blocks(qrow, "flash_attn_ext q");
        let words = &mut w.qbuf[a * q_words..(a + 1) * q_words];
        // SAFETY: this chunk's own f32 words seen as bytes (any bit pattern is valid for both)
        let qb = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, qbytes) };
        if qt == GgmlType::Q8_0 {
            quantize_row_q8_0_x86(qf, crate::block::as_blocks_mut(qb, "flash_attn_ext q as q8_0"));
        } else {
            quantize_row(qt, qf, qb);
        }
    }
    let q_bytes = |w: &Areas, a: usize| -> &[u8] {
        let words = &w.qbuf[a * q_words..(a + 1) * q_words];
        // SAFETY: as above, read only
        unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, qbytes) }
    };
    let (ik2, ik3) = (iq2 / (q.ne[2] / k.ne[2]), iq3 / (q.ne[3] / k.ne[3]));
    let (iv2, iv3) = (iq2 / (q.ne[2] / v.ne[2]), iq3 / (q.ne[3] / v.ne[3]));
    let mrow = |a: usize| mask.map(|m| m.row(iq1 + a as i64, iq2 % m.ne[2], iq3 % m.ne[3]));
    w.acc[..nq * dvu].fill(0.0);
    w.m_run[..nq].fill(f32::NEG_INFINITY);
    w.s_run[..nq].fill(0.0);
    let mut ic0 = 0;
    while ic0 < n_kv {
        let n = (n_kv - ic0).min(TILE as i64) as usize;
        // the tile's scores, K row by K row
        for j in 0..n {
            let ic = ic0 + j as i64;
            let krow = row_bytes(k.row(ic, ik2, ik3), kt, dk);
            for a in 0..nq {
                let mv = match mrow(a) {
                    // SAFETY: element ic < n_kv <= mask ne[0] of a packed F16 mask row (refusal checks)
                    Some(mp) => slope * half::f16::from_bits(unsafe { (mp.add(ic as usize * 2) as *const u16).read_unaligned() }).to_f32(),
                    None => 0.0,
                };
                w.scores[a * TILE + j] = if mv == f32::NEG_INFINITY {
                    f32::NEG_INFINITY
                } else {
                    let mut s = dot.dot(krow, q_bytes(w, a)) * p.scale;
                    if p.softcap != 0.0 {
                        s = p.softcap * s.tanh();
                    }
                    s + mv
                };
            }
        }
        // the running maxima, the accumulators rescaled; the scores become weights
        for a in 0..nq {
            let sc = &mut w.scores[a * TILE..a * TILE + n];
            let tmax = sc.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            if tmax > w.m_run[a] {
                let ms = (w.m_run[a] - tmax).exp();
                w.acc[a * dvu..(a + 1) * dvu].iter_mut().for_each(|x| *x *= ms);
                w.s_run[a] *= ms;
                w.m_run[a] = tmax;
            }
            let m = w.m_run[a];
            for s in sc.iter_mut() {
                // a masked position weighs 0 (exp(-inf) is 0, and a row masked so far has m = -inf)
                *s = if *s == f32::NEG_INFINITY { 0.0 } else { (*s - m).exp() };
                w.s_run[a] += *s;
            }
        }
        // V row by V row, converted once for the group
        for j in 0..n {
            if (0..nq).all(|a| w.scores[a * TILE + j] == 0.0) {
                continue;
            }
            let ic = ic0 + j as i64;
            v_to_f32(vt, row_bytes(v.row(ic, iv2, iv3), vt, dv), w.v32);
            for a in 0..nq {
                let vs = w.scores[a * TILE + j];
                if vs == 0.0 {
                    continue;
                }
                for (x, y) in w.acc[a * dvu..(a + 1) * dvu].iter_mut().zip(w.v32.iter()) {
                    *x += y * vs;
                }
            }
        }
        ic0 += n as i64;
    }
    for a in 0..nq {
        let acc = &mut w.acc[a * dvu..(a + 1) * dvu];
        if let Some(sk) = sinks {
            let s = super::unary::kit::get(sk, iq2, 0, 0, 0);
            if s > w.m_run[a] {
                let ms = (w.m_run[a] - s).exp();
                acc.iter_mut().for_each(|x| *x *= ms);
                w.s_run[a] = w.s_run[a] * ms + 1.0;
            } else {
                w.s_run[a] += (s - w.m_run[a]).exp();
            }
        }
        let inv = if w.s_run[a] == 0.0 { 0.0 } else { 1.0 / w.s_run[a] };
        for (i0, x) in acc.iter().enumerate() {
            // permuted output: [DV, n_head, n_q, n_seq]
            set(d, i0 as i64, iq2, iq1 + a as i64, iq3, x * inv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::unary::kit::testkit::*;
    use super::*;
    use crate::rng::XorShift;

    /// attention from its definition, in f64, with K and V as the kernel reads them (after
    /// rounding to their type) and Q as given
    #[allow(clippy::too_many_arguments)]
    fn reference(
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        sinks: Option<&[f32]>,
        scale: f32,
        max_bias: f32,
        softcap: f32,
        kv: (&[f32], &[f32]),
    ) -> Vec<f32> {
        let (qn, kn, vn) = (q.view.ne, k.view.ne, v.view.ne);
        let (dk, dv, n_kv) = (kn[0] as usize, vn[0] as usize, kn[1] as usize);
        let qs = q.to_f32();
        let ms = mask.map(|m| (m.to_f32(), m.view.ne));
        let mut out = vec![0f32; dv * (qn[1] * qn[2] * qn[3]) as usize];
        for iq3 in 0..qn[3] {
            for iq2 in 0..qn[2] {
                for iq1 in 0..qn[1] {
                    let qoff = (((iq3 * qn[2] + iq2) * qn[1] + iq1) as usize) * dk;
                    let (ik2, ik3) = (iq2 / (qn[2] / kn[2]), iq3 / (qn[3] / kn[3]));
                    let slope = alibi_slope(max_bias, qn[2] as u32, iq2 as u32) as f64;
                    let mut sc = vec![f64::NEG_INFINITY; n_kv];
                    for (ic, s) in sc.iter_mut().enumerate() {
                        let koff = (((ik3 * kn[2] + ik2) * kn[1] + ic as i64) as usize) * dk;
                        let mut x: f64 = (0..dk).map(|i| qs[qoff + i] as f64 * kv.0[koff + i] as f64).sum::<f64>() * scale as f64;
                        if softcap != 0.0 {
                            x = softcap as f64 * (x / softcap as f64).tanh();
                        }
                        if let Some((m, mne)) = &ms {
                            let mi = (((iq3 % mne[3]) * mne[2] + iq2 % mne[2]) * mne[1] + iq1) * mne[0] + ic as i64;
                            x += slope * m[mi as usize] as f64;
                        }
                        *s = x;
                    }
                    let sink = sinks.map(|s| s[iq2 as usize] as f64);
                    let mx = sc.iter().cloned().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = sc.iter().map(|s| if *s == f64::NEG_INFINITY { 0.0 } else { (s - mx).exp() }).collect();
                    let sum: f64 = w.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - mx).exp());
                    let ooff = (((iq3 * qn[1] + iq1) * qn[2] + iq2) as usize) * dv;
                    for i in 0..dv {
                        let mut a = 0f64;
                        for (ic, wi) in w.iter().enumerate() {
                            let voff = (((ik3 * vn[2] + iq2 / (qn[2] / vn[2])) * vn[1] + ic as i64) as usize) * dv;
                            a += wi * kv.1[voff + i] as f64;
                        }
                        out[ooff + i] = if sum == 0.0 { 0.0 } else { (a / sum) as f32 };
                    }
                }
            }
        }
        out
    }

    /// a K or V tensor of block type `t` (packed) from random values, and the values it holds
    fn kv_tensor(t: GgmlType, ne: [i64; 4], rng: &mut XorShift) -> (Tensor, Vec<f32>) {
        let n = ne.iter().product::<i64>() as usize;
        let vals: Vec<f32> = (0..n).map(|_| rng.f32_in(-1.0, 1.0)).collect();
        let bytes = t.row_size(n);
        let mut buf = crate::block::AlignedBytes::zeroed(bytes);
        quantize_row(t, &vals, &mut buf);
        let mut back = vec![0f32; n];
        dequantize_row(t, &buf, &mut back);
        let ts = t.type_size();
        let bs = t.block_size() as i64;
        let nb0 = ts;
        let nb1 = ts * (ne[0] / bs) as usize;
        let nb = [nb0, nb1, nb1 * ne[1] as usize, nb1 * (ne[1] * ne[2]) as usize];
        let data = buf.as_mut_ptr();
        (Tensor { buf, view: View { ty: t as i32, ne, nb, data } }, back)
    }

    #[test]
    fn flash_attn_matches_reference() {
        let mut rng = XorShift::new(41);
        let types = [GgmlType::F16, GgmlType::F32, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0];
        for (case, &kt) in types.iter().cycle().take(15).enumerate() {
            let vt = if case % 2 == 0 { kt } else { GgmlType::F16 };
            let dk = if case % 3 == 0 { 64 } else { 32 };
            let dv = if case % 4 == 1 { 64 } else { dk };
            let n_kv = [1, 7, 70, 130][case % 4];
            // more queries than a group (QT) in some cases
            let (n_q, n_head, n_head_kv, n_seq) =
                (if case % 5 == 0 { 37 } else { rng.i32_in(1, 5) as i64 }, 4, if case % 2 == 0 { 2 } else { 4 }, 1 + (case % 2) as i64);
            let q = Tensor::random(raw_type::F32, [dk, n_q, n_head, n_seq], if case % 3 == 2 { Layout::Permuted } else { Layout::Contig }, &mut rng, -1.0, 1.0);
            let (k, kvals) = kv_tensor(kt, [dk, n_kv, n_head_kv, n_seq], &mut rng);
            let (v, vvals) = kv_tensor(vt, [dv, n_kv, n_head_kv, n_seq], &mut rng);
            let with_mask = case % 3 != 1;
            // a causal-looking mask with -inf, padded rows, one mask for all heads
            let mvals: Vec<f32> =
                (0..n_kv * (n_q + 3)).map(|i| if (i % n_kv) > (i / n_kv) + n_kv / 2 { f32::NEG_INFINITY } else { rng.f32_in(-1.0, 0.0) }).collect();
            let mask = Tensor::from_f32(raw_type::F16, [n_kv, n_q + 3, 1, 1], Layout::Contig, &mvals);
            let sinks: Vec<f32> = (0..n_head).map(|_| rng.f32_in(-1.0, 1.0)).collect();
            let sk = Tensor::from_f32(raw_type::F32, [n_head, 1, 1, 1], Layout::Contig, &sinks);
            let with_sinks = case % 4 == 3;
            let (scale, max_bias, softcap) = (1.0 / (dk as f32).sqrt(), if case % 5 == 4 { 8.0 } else { 0.0 }, if case % 6 == 5 { 30.0 } else { 0.0 });
            let dst = Tensor::new(raw_type::F32, [dv, n_head, n_q, n_seq], Layout::Contig);
            let n = node(
                Op::FlashAttnExt,
                &dst,
                &[Some(&q), Some(&k), Some(&v), with_mask.then_some(&mask), with_sinks.then_some(&sk)],
                &[f(scale), f(max_bias), f(softcap)],
            );
            assert!(supports(&n), "{:?}", refusal(&n));
            run(&n, 3).unwrap();
            // Q is rounded to K's dot type by the kernel: a loose tolerance for the quantized K
            let want = reference(&q, &k, &v, with_mask.then_some(&mask), with_sinks.then_some(&sinks[..]), scale, max_bias, softcap, (&kvals, &vvals));
            let tol = match kt {
                GgmlType::F32 => 1e-5,
                GgmlType::F16 => 2e-3,
                _ => 2e-2,
            };
            assert_close(&format!("case {case}: K {kt:?} V {vt:?} dk {dk} dv {dv} n_kv {n_kv} mask {with_mask} sinks {with_sinks}"), &dst.to_f32(), &want, tol);
        }
    }

    #[test]
    fn a_fully_masked_row_is_zero_and_bad_shapes_are_refused() {
        let mut rng = XorShift::new(42);
        let q = Tensor::random(raw_type::F32, [32, 1, 2, 1], Layout::Contig, &mut rng, -1.0, 1.0);
        let (k, _) = kv_tensor(GgmlType::F16, [32, 4, 2, 1], &mut rng);
        let (v, _) = kv_tensor(GgmlType::F16, [32, 4, 2, 1], &mut rng);
        let mask = Tensor::from_f32(raw_type::F16, [4, 1, 1, 1], Layout::Contig, &[f32::NEG_INFINITY; 4]);
        let dst = Tensor::random(raw_type::F32, [32, 2, 1, 1], Layout::Contig, &mut rng, 1.0, 2.0);
        run(&node(Op::FlashAttnExt, &dst, &[Some(&q), Some(&k), Some(&v), Some(&mask)], &[f(1.0)]), 1).unwrap();
        assert!(dst.to_f32().iter().all(|&x| x == 0.0));
        let bad = Tensor::new(raw_type::F32, [32, 1, 2, 1], Layout::Contig);
        let n = node(Op::FlashAttnExt, &bad, &[Some(&q), Some(&k), Some(&v)], &[f(1.0)]);
        assert!(!supports(&n));
        assert!(refusal(&n).unwrap().contains("output shape"));
        assert!(run(&n, 1).is_err());
    }
}
