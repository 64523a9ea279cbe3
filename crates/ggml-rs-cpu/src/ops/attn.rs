//! Family `attn`: FLASH_ATTN_EXT.
//!
//! Q is F32; K and V are of any type with a dot product (F32, F16, BF16, the quantized types;
//! rows packed); the optional mask is F16 (its
//! row is the query's, dims 2 and 3 broadcast), the optional sinks (src4) F32 per head. Op params:
//! [0] scale, [1] max_bias (ALiBi), [2] logit soft-cap, [3] precision (default or F32: both
//! accumulate in f32 here). The output is upstream's permuted layout: [DV, n_head, n_q, n_seq].
//!
//! As upstream's CPU: each query row is converted once to K's `vec_dot_type` (F16 for F16 K, Q8_0
//! for Q8_0 / Q4_0 / IQ4_NL K, Q8_1 for Q4_1 / Q5_1 K, quantized as upstream's CPU quantizes activations) and dotted with the K rows
//! by the same dot kernels MUL_MAT uses (BF16: in upstream native's `ggml_vec_dot_bf16` order,
//! `kernels::Kernels::dot`'s `bf16_native`); the scores are `s·scale` (through `softcap·tanh` when
//! soft-capped) plus `slope·mask`; a masked `-inf` position is skipped. The sink joins the
//! softmax as a score with no V row. A row with nothing to attend to is 0.
//!
//! By default each node takes the path upstream's CPU takes for it, in that path's order
//! (`rows.rs`: one query row at a time, or the KV split; `tiles.rs`: the prompt blocks). Under
//! `GGML_RS_CPU_ORDER=fast`, and for the prompt blocks' nodes below AVX2, [`one_group`] runs
//! instead: an online softmax over tiles of KV (a tile's scores first, then the running maximum,
//! the rescale of the f32 V accumulator and the sum, then the V rows weighted in).

use super::softmax::alibi_slope;
use super::unary::kit::{f32_row_mut, max_chunks, par_ranges_c, set};
use super::{Exec, Family, Node, Op, OpError, Scratch, View, raw_type};
use crate::GgmlType;
use crate::dot::RowDot;
use crate::quants::dequantize_row;

mod rows;
mod tiles;

/// how many leading elements of an F16 V accumulator of `dv` elements the one-row path adds in
/// f16 arithmetic (one rounding of `y + x·f16(vs)`) rather than as an f32 fused multiply-add
/// rounded to f16: `dv & !127` where the CPU has AVX512-FP16 (upstream's native build there),
/// else 0 (`docs/flash-attn-order.md` §2). Public for the comparison with upstream's library.
pub fn f16_native_len(dv: usize) -> usize {
    rows::f16_native_len(dv, &crate::kernels::active().acc)
}

pub const FAMILY: Family = Family { name: "attn", ops: &[Op::FlashAttnExt], supports, compute };

/// KV positions per tile
const TILE: usize = 64;
const _: () = assert!(TILE <= 256, "tile positions are kept in a u8");

fn kv_type(v: &View) -> Option<GgmlType> {
    // every type with a dot product (upstream's CPU takes any: K through its vec_dot, V
    // through its to_float), not the activation-only Q8_K / Q8_1; not yet the grid types
    // (IQ1 / IQ2 / IQ3: no KV cache is written in them, and this op is not checked with them)
    let t = v.block_type()?;
    t.vec_dot_type().filter(|_| t.has_from_float()).map(|_| t)
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

/// queries computed together: the query rows of one or more heads that read the same K and V
/// head (grouped-query attention), so each K row is dotted and each V row read once per group
const QT: usize = 16;

/// the per-chunk work areas, in f32 words: per query of a group its converted Q (or its f32 row
/// for the tiled path), accumulator, tile scores, running maximum and sum; one V row in f32; a
/// tile of K rows and one of V rows in f32 (the tiled path)
struct Work {
    q_words: usize,
    dk: usize,
    dv: usize,
}

impl Work {
    fn words(&self) -> usize {
        QT * (self.q_words + self.dv + TILE + 2) + self.dv + TILE * (self.dk + self.dv)
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
    ktile: &'a mut [f32],
    vtile: &'a mut [f32],
}

fn chunk_work<'a>(s: &Scratch, c: usize, w: &Work) -> Areas<'a> {
    let all = super::unary::kit::scratch_f32(s, c, w.words());
    let (qbuf, rest) = all.split_at_mut(QT * w.q_words);
    let (acc, rest) = rest.split_at_mut(QT * w.dv);
    let (scores, rest) = rest.split_at_mut(QT * TILE);
    let (m_run, rest) = rest.split_at_mut(QT);
    let (s_run, rest) = rest.split_at_mut(QT);
    let (v32, rest) = rest.split_at_mut(w.dv);
    let (ktile, vtile) = rest.split_at_mut(TILE * w.dk);
    Areas { qbuf, acc, scores, m_run, s_run, v32, ktile, vtile }
}

/// how the queries and the KV positions are cut into work items
#[derive(Clone, Copy)]
struct Split {
    /// heads per group (they share a K and a V head)
    hg: i64,
    /// query rows per group
    rows: i64,
    /// groups along dims 1 (row blocks) and 2 (head groups)
    row_blocks: i64,
    head_groups: i64,
    /// KV chunks per group (more than 1 when the groups alone leave threads idle: decode)
    ns: i64,
    /// KV positions per chunk
    per: i64,
}

impl Split {
    fn of(q: &View, k: &View, v: &View, max_chunks: usize) -> Split {
        let (rk, rv) = (q.ne[2] / k.ne[2], q.ne[2] / v.ne[2]);
        // the largest number of heads below QT that divides the K/V broadcast ratio
        let hg = if rk == rv { (1..=rk.min(QT as i64)).rev().find(|h| rk % h == 0).unwrap_or(1) } else { 1 };
        let rows = QT as i64 / hg;
        let row_blocks = (q.ne[1] + rows - 1) / rows;
        let head_groups = q.ne[2] / hg;
        let units = row_blocks * head_groups * q.ne[3];
        let n_kv = k.ne[1];
        let want = max_chunks as i64;
        let ns = if units < want { ((want + units - 1) / units).min(n_kv / (2 * TILE as i64)).max(1) } else { 1 };
        let per = (n_kv + ns - 1) / ns;
        Split { hg, rows, row_blocks, head_groups, ns, per }
    }

    fn units(&self, q: &View) -> i64 {
        self.row_blocks * self.head_groups * q.ne[3]
    }

    /// the first row, the row count, the first head and the sequence of unit `u`
    fn unit(&self, q: &View, u: i64) -> (i64, i64, i64, i64) {
        let (b, rest) = (u % self.row_blocks, u / self.row_blocks);
        let (hgi, iq3) = (rest % self.head_groups, rest / self.head_groups);
        let iq1 = b * self.rows;
        (iq1, (q.ne[1] - iq1).min(self.rows), hgi * self.hg, iq3)
    }
}

/// the words of one KV chunk's partial result per query: its maximum, sum and accumulator
fn partial_words(dv: usize) -> usize {
    dv + 2
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
    // room for Q in K's dot type or in f32
    let work = Work { q_words: qt.row_size(dk as usize).div_ceil(4).max(dk as usize), dk: dk as usize, dv: dv as usize };
    let mc = max_chunks(exec);
    let mut scale = node.param_f32(0);
    let max_bias = node.param_f32(1);
    let softcap = node.param_f32(2);
    if softcap != 0.0 {
        scale /= softcap;
    }
    let p = Params { scale, max_bias, softcap, k: exec.kernels() };
    // BF16 K as upstream's native `ggml_vec_dot_bf16` sums it (not our BF16 MUL_MAT kernel)
    let dot = if kt == GgmlType::BF16 { RowDot::Bf16(exec.kernels().dot.bf16_native) } else { exec.kernels().row_dot(kt) };
    let ctx = Ctx { q: &q, k: &k, v: &v, mask: mask.as_ref(), sinks: sinks.as_ref(), d: &d, types: (kt, vt, qt), dot: &dot, p: &p, q_words: work.q_words };
    if !rows::fast_order() {
        match rows::path(&q, &k, kt, vt, exec.kernels()) {
            rows::Path::Rows => {
                run_rows(&ctx, exec, &work);
                return Ok(());
            }
            rows::Path::SplitKv => {
                run_split_kv(&ctx, exec, &work);
                return Ok(());
            }
            rows::Path::Tiled => {}
        }
    }
    if tiles::applies(kt, vt, &q, &k, &v, exec.kernels(), exec.n_threads()) {
        let blocks = tiles::Blocks::of(&q, &k, &v);
        let tw = tiles::Work::new(kt, vt, dk as usize, dv as usize);
        let scratch = exec.scratch(mc * tw.words() * 4);
        par_ranges_c(exec, blocks.units(&q), |c, u0, u1| {
            let all = super::unary::kit::scratch_f32(&scratch, c, tw.words());
            for u in u0..u1 {
                tiles::block(&ctx, &blocks.group(&q, u), all, &tw);
            }
        });
        return Ok(());
    }
    let split = Split::of(&q, &k, &v, mc);
    let units = split.units(&q);
    let pw = partial_words(dv as usize);
    // the partials of every (unit, KV chunk) follow the chunks' work areas
    let partials = if split.ns > 1 { (units * split.ns) as usize * QT * pw } else { 0 };
    let scratch = exec.scratch((mc * work.words() + partials) * 4);
    let part_base = mc * work.words();
    par_ranges_c(exec, units * split.ns, |c, i0, i1| {
        let mut w = chunk_work(&scratch, c, &work);
        for item in i0..i1 {
            let (u, sp) = (item / split.ns, item % split.ns);
            let (iq1, nr, h0, iq3) = split.unit(&q, u);
            let g = Group { iq1, nr, h0, hg: split.hg, iq3 };
            let kv0 = sp * split.per;
            let kv1 = (kv0 + split.per).min(k.ne[1]);
            one_group(&ctx, &g, kv0, kv1, &mut w);
            if split.ns == 1 {
                finish_group(&ctx, &g, w.acc, w.m_run, w.s_run, false);
            } else {
                let nq = g.nq();
                // SAFETY: item's own partials (disjoint per item), inside the scratch sized above
                let part = unsafe { std::slice::from_raw_parts_mut((scratch.ptr as *mut f32).add(part_base + item as usize * QT * pw), QT * pw) };
                for a in 0..nq {
                    let o = &mut part[a * pw..(a + 1) * pw];
                    o[0] = w.m_run[a];
                    o[1] = w.s_run[a];
                    o[2..].copy_from_slice(&w.acc[a * work.dv..(a + 1) * work.dv]);
                }
            }
        }
    });
    if split.ns > 1 {
        // the KV chunks of each group combined: every partial rescaled to the largest maximum
        par_ranges_c(exec, units, |c, u0, u1| {
            let w = chunk_work(&scratch, c, &work);
            for u in u0..u1 {
                let (iq1, nr, h0, iq3) = split.unit(&q, u);
                let g = Group { iq1, nr, h0, hg: split.hg, iq3 };
                let dvu = work.dv;
                for a in 0..g.nq() {
                    let part = |sp: i64| -> &[f32] {
                        let off = part_base + ((u * split.ns + sp) as usize * QT + a) * pw;
                        // SAFETY: written by the first phase (joined), read only here
                        unsafe { std::slice::from_raw_parts((scratch.ptr as *const f32).add(off), pw) }
                    };
                    let m = (0..split.ns).map(|sp| part(sp)[0]).fold(f32::NEG_INFINITY, f32::max);
                    let acc = &mut w.acc[a * dvu..(a + 1) * dvu];
                    acc.fill(0.0);
                    let mut s = 0f32;
                    if m != f32::NEG_INFINITY {
                        for sp in 0..split.ns {
                            let pp = part(sp);
                            if pp[0] == f32::NEG_INFINITY {
                                continue;
                            }
                            let f = (pp[0] - m).exp();
                            s += pp[1] * f;
                            p.k.vec.mad_f32(acc, &pp[2..], f);
                        }
                    }
                    w.m_run[a] = m;
                    w.s_run[a] = s;
                }
                finish_group(&ctx, &g, w.acc, w.m_run, w.s_run, false);
            }
        });
    }
    Ok(())
}

struct Params {
    scale: f32,
    max_bias: f32,
    softcap: f32,
    k: &'static crate::kernels::Kernels,
}

/// what every group of a node reads
struct Ctx<'a> {
    q: &'a View,
    k: &'a View,
    v: &'a View,
    mask: Option<&'a View>,
    sinks: Option<&'a View>,
    d: &'a View,
    types: (GgmlType, GgmlType, GgmlType),
    dot: &'a RowDot,
    p: &'a Params,
    q_words: usize,
}

/// query rows iq1 .. iq1 + nr of heads h0 .. h0 + hg, sequence iq3; query `a` of the group is row
/// iq1 + a / hg of head h0 + a % hg
struct Group {
    iq1: i64,
    nr: i64,
    h0: i64,
    hg: i64,
    iq3: i64,
}

impl Group {
    fn nq(&self) -> usize {
        (self.nr * self.hg) as usize
    }

    fn query(&self, a: usize) -> (i64, i64) {
        (self.iq1 + a as i64 / self.hg, self.h0 + a as i64 % self.hg)
    }
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

/// what every query of a group reads besides Q: the K and V head (every head of a group reads
/// the same ones: `Split::of` groups only those), and per query its ALiBi slope and mask row
struct GroupRows {
    k: (i64, i64),
    v: (i64, i64),
    slopes: [f32; QT],
    mrows: [*const u8; QT],
}

fn group_rows(c: &Ctx, g: &Group) -> GroupRows {
    let (q, k, v) = (c.q, c.k, c.v);
    let mut slopes = [1f32; QT];
    let mut mrows = [std::ptr::null::<u8>(); QT];
    for a in 0..g.nq() {
        let (iq1, iq2) = g.query(a);
        slopes[a] = alibi_slope(c.p.max_bias, q.ne[2] as u32, iq2 as u32);
        if let Some(m) = c.mask {
            mrows[a] = m.row(iq1, iq2 % m.ne[2], g.iq3 % m.ne[3]);
        }
    }
    GroupRows { k: (g.h0 / (q.ne[2] / k.ne[2]), g.iq3 / (q.ne[3] / k.ne[3])), v: (g.h0 / (q.ne[2] / v.ne[2]), g.iq3 / (q.ne[3] / v.ne[3])), slopes, mrows }
}

/// each query of group `g` in K's dot type (`q_words` apart in `w.qbuf`), or in f32 (packed, dk
/// apart) for the tiled form of [`one_group`]
fn convert_queries(c: &Ctx, g: &Group, w: &mut Areas, tiled: bool) {
    let q = c.q;
    let (_, _, qt) = c.types;
    let dk = c.k.ne[0];
    let dku = dk as usize;
    let q_words = c.q_words;
    let qbytes = qt.row_size(dku);
    for a in 0..g.nq() {
        let (iq1, iq2) = g.query(a);
        let qrow = row_bytes(q.row(iq1, iq2, g.iq3), GgmlType::F32, dk);
        let qf: &[f32] = crate::block::as_blocks(qrow, "flash_attn_ext q");
        if tiled {
            w.qbuf[a * dku..(a + 1) * dku].copy_from_slice(qf);
            continue;
        }
        let words = &mut w.qbuf[a * q_words..(a + 1) * q_words];
        // SAFETY: this chunk's own f32 words seen as bytes (any bit pattern is valid for both)
        let qb = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, qbytes) };
        // as upstream's CPU quantizes activations (Q8_0, Q8_1: its x86 forms)
        // SAFETY: `qb` is this query's own words, `qt.row_size(dk)` bytes, 4-aligned
        unsafe { super::copy::elem::quantize_from_as(qt, qf, qb.as_mut_ptr(), false) };
    }
}

/// the online softmax of group `g` over KV positions kv0 .. kv1: leaves each query's running
/// maximum, sum and (unnormalised) accumulator in `w`
fn one_group(c: &Ctx, g: &Group, kv0: i64, kv1: i64, w: &mut Areas) {
    let (k, v, p) = (c.k, c.v, c.p);
    let (kt, vt, qt) = c.types;
    let (dk, dv) = (k.ne[0], v.ne[0]);
    let dvu = dv as usize;
    let nq = g.nq();
    let q_words = c.q_words;
    let qbytes = qt.row_size(dk as usize);
    let dku = dk as usize;
    // the tiled path: K and V tiles in f32, all the group's queries against a tile at once (the
    // kernels have a vector form, K and V are float types, and there is more than one query)
    let tiled = p.k.vec.has_tiles() && matches!(kt, GgmlType::F16 | GgmlType::F32) && matches!(vt, GgmlType::F16 | GgmlType::F32) && nq >= 2;
    convert_queries(c, g, w, tiled);
    let q_bytes = |w: &Areas, a: usize| -> &[u8] {
        let words = &w.qbuf[a * q_words..(a + 1) * q_words];
        // SAFETY: the query's converted bytes (f32 words seen as bytes), read only
        unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, qbytes) }
    };
    let GroupRows { k: (ik2, ik3), v: (iv2, iv3), slopes, mrows } = group_rows(c, g);
    w.acc[..nq * dvu].fill(0.0);
    w.m_run[..nq].fill(f32::NEG_INFINITY);
    w.s_run[..nq].fill(0.0);
    let mut ic0 = kv0;
    while ic0 < kv1 {
        let n = (kv1 - ic0).min(TILE as i64) as usize;
        let mask_at = |a: usize, ic: i64| -> f32 {
            // SAFETY: element ic < n_kv <= mask ne[0] of a packed F16 mask row (refusal checks)
            slopes[a] * half::f16::from_bits(unsafe { (mrows[a].add(ic as usize * 2) as *const u16).read_unaligned() }).to_f32()
        };
        // the positions of the tile the tiled path computes (compacted: a position masked for
        // every query of the group is left out, so sparse masks cost only their live positions)
        let mut live = [0u8; TILE];
        let mut nt = n;
        if tiled {
            nt = 0;
            for j in 0..n {
                if c.mask.is_none() || (0..nq).any(|a| mask_at(a, ic0 + j as i64) != f32::NEG_INFINITY) {
                    live[nt] = j as u8;
                    nt += 1;
                }
            }
            if nt == 0 {
                ic0 += n as i64;
                continue;
            }
            for (jj, &j) in live[..nt].iter().enumerate() {
                let ic = ic0 + j as i64;
                v_to_f32(kt, row_bytes(k.row(ic, ik2, ik3), kt, dk), &mut w.ktile[jj * dku..(jj + 1) * dku]);
            }
            p.k.vec.score_tile(w.qbuf, nq, w.ktile, nt, dku, w.scores, TILE);
            for a in 0..nq {
                for (jj, &j) in live[..nt].iter().enumerate() {
                    let mv = if c.mask.is_some() { mask_at(a, ic0 + j as i64) } else { 0.0 };
                    let sc = &mut w.scores[a * TILE + jj];
                    *sc = if mv == f32::NEG_INFINITY {
                        f32::NEG_INFINITY
                    } else {
                        let mut s = *sc * p.scale;
                        if p.softcap != 0.0 {
                            s = p.softcap * s.tanh();
                        }
                        s + mv
                    };
                }
            }
        }
        // the tile's scores, K row by K row
        for j in 0..if tiled { 0 } else { n } {
            let ic = ic0 + j as i64;
            let krow = row_bytes(k.row(ic, ik2, ik3), kt, dk);
            for a in 0..nq {
                let mv = if c.mask.is_some() { mask_at(a, ic) } else { 0.0 };
                w.scores[a * TILE + j] = if mv == f32::NEG_INFINITY {
                    f32::NEG_INFINITY
                } else {
                    let mut s = c.dot.dot(krow, q_bytes(w, a)) * p.scale;
                    if p.softcap != 0.0 {
                        s = p.softcap * s.tanh();
                    }
                    s + mv
                };
            }
        }
        // the running maxima, the accumulators rescaled; the scores become weights
        for a in 0..nq {
            let sc = &mut w.scores[a * TILE..a * TILE + nt];
            let tmax = p.k.vec.max(sc);
            if tmax > w.m_run[a] {
                let ms = (w.m_run[a] - tmax).exp();
                p.k.vec.scale(&mut w.acc[a * dvu..(a + 1) * dvu], ms);
                w.s_run[a] *= ms;
                w.m_run[a] = tmax;
            }
            let m = w.m_run[a];
            if m == f32::NEG_INFINITY {
                // everything so far masked: every weight is 0
                sc.fill(0.0);
            } else {
                // a masked position weighs 0 (the exp of -inf)
                w.s_run[a] += p.k.vec.exp_sub_sum(sc, m) as f32;
            }
        }
        if tiled {
            for (jj, &j) in live[..nt].iter().enumerate() {
                let ic = ic0 + j as i64;
                v_to_f32(vt, row_bytes(v.row(ic, iv2, iv3), vt, dv), &mut w.vtile[jj * dvu..(jj + 1) * dvu]);
            }
            p.k.vec.acc_tile(w.acc, nq, w.scores, TILE, w.vtile, nt, dvu);
            ic0 += n as i64;
            continue;
        }
        // V row by V row: F16 weighted in directly, other types converted once for the group
        for j in 0..n {
            if (0..nq).all(|a| w.scores[a * TILE + j] == 0.0) {
                continue;
            }
            let ic = ic0 + j as i64;
            let vbytes = row_bytes(v.row(ic, iv2, iv3), vt, dv);
            let vh: Option<&[half::f16]> = (vt == GgmlType::F16).then(|| crate::block::as_blocks(vbytes, "flash_attn_ext v"));
            if vh.is_none() {
                v_to_f32(vt, vbytes, w.v32);
            }
            for a in 0..nq {
                let vs = w.scores[a * TILE + j];
                if vs == 0.0 {
                    continue;
                }
                let acc = &mut w.acc[a * dvu..(a + 1) * dvu];
                match vh {
                    Some(h) => p.k.vec.mad_f16(acc, h, vs),
                    None => p.k.vec.mad_f32(acc, w.v32, vs),
                }
            }
        }
        ic0 += n as i64;
    }
}

/// the sink of head `iq2` joined as a score with no V row: `S·ms + vs`, fused as upstream's
/// tiled path compiles it when `fused`, else rounded twice as its one-row path does
fn join_sink(c: &Ctx, iq2: i64, acc: &mut [f32], m: &mut f32, s_run: &mut f32, fused: bool) {
    if let Some(sk) = c.sinks {
        let s = super::unary::kit::get(sk, iq2, 0, 0, 0);
        let (mut ms, mut vs) = (1f32, 1f32);
        if s > *m {
            ms = (*m - s).exp();
            *m = s;
            c.p.k.vec.scale(acc, ms);
        } else {
            vs = (s - *m).exp();
        }
        *s_run = if fused { s_run.mul_add(ms, vs) } else { *s_run * ms + vs };
    }
}

/// `acc · inv` written as row (iq1, iq2, iq3) of the permuted output [DV, n_head, n_q, n_seq]
fn write_out(c: &Ctx, iq1: i64, iq2: i64, iq3: i64, acc: &[f32], inv: f32) {
    match f32_row_mut(c.d, acc.len() as i64, iq2, iq1, iq3) {
        Some(out) => {
            out.copy_from_slice(acc);
            c.p.k.vec.scale(out, inv);
        }
        None => {
            for (i0, x) in acc.iter().enumerate() {
                set(c.d, i0 as i64, iq2, iq1, iq3, x * inv);
            }
        }
    }
}

/// the sinks joined ([`join_sink`], `fused_sink` as there), the accumulators normalised and
/// written to the permuted output
fn finish_group(c: &Ctx, g: &Group, accs: &mut [f32], m_run: &mut [f32], s_run: &mut [f32], fused_sink: bool) {
    let dvu = c.v.ne[0] as usize;
    for a in 0..g.nq() {
        let (iq1, iq2) = g.query(a);
        let acc = &mut accs[a * dvu..(a + 1) * dvu];
        join_sink(c, iq2, acc, &mut m_run[a], &mut s_run[a], fused_sink);
        let inv = if s_run[a] == 0.0 { 0.0 } else { 1.0 / s_run[a] };
        write_out(c, iq1, iq2, g.iq3, acc, inv);
    }
}

/// upstream's one-row path over the whole node ([`rows::Path::Rows`]): the queries in groups
/// sharing a K / V head, each query's arithmetic its own (so the grouping and the thread split
/// change no bits)
fn run_rows(ctx: &Ctx, exec: &mut Exec, work: &Work) {
    let split = Split::of(ctx.q, ctx.k, ctx.v, 0);
    let ops = exec.kernels().acc;
    let scratch = exec.scratch(max_chunks(exec) * work.words() * 4);
    par_ranges_c(exec, split.units(ctx.q), |c, u0, u1| {
        let mut w = chunk_work(&scratch, c, work);
        for u in u0..u1 {
            let (iq1, nr, h0, iq3) = split.unit(ctx.q, u);
            let g = Group { iq1, nr, h0, hg: split.hg, iq3 };
            convert_queries(ctx, &g, &mut w, false);
            rows::row_pass(ctx, &g, 0, ctx.k.ne[1], &mut w, ops);
            finish_group(ctx, &g, w.acc, w.m_run, w.s_run, false);
        }
    });
}

/// upstream's KV split ([`rows::Path::SplitKv`]: one query row, 512+ positions): `n_threads`
/// chunks of `ceil(n_kv / n_threads)` positions, each run as the one-row path for every head (the
/// sink in chunk 0), then per head the chunks merged in order ([`rows::merge`])
fn run_split_kv(ctx: &Ctx, exec: &mut Exec, work: &Work) {
    let (q, n_kv, dvu) = (ctx.q, ctx.k.ne[1], work.dv);
    let nth = exec.n_threads() as i64;
    let cs = (n_kv + nth - 1) / nth;
    let n_chunks = (n_kv + cs - 1) / cs;
    let split = Split::of(q, ctx.k, ctx.v, 0);
    let ops = exec.kernels().acc;
    let pw = partial_words(dvu);
    let n_head = q.ne[2];
    let mc = max_chunks(exec);
    let part_base = mc * work.words();
    let scratch = exec.scratch((part_base + (n_head * n_chunks) as usize * pw) * 4);
    let base = scratch.ptr as usize;
    let part_ptr = |h: i64, t: i64| -> *mut f32 {
        // SAFETY: partial (h, t) lies inside the area sized above, after the work areas
        unsafe { (base as *mut f32).add(part_base + (h * n_chunks + t) as usize * pw) }
    };
    par_ranges_c(exec, n_chunks, |c, t0, t1| {
        let mut w = chunk_work(&scratch, c, work);
        for t in t0..t1 {
            let (ic0, ic1) = (t * cs, ((t + 1) * cs).min(n_kv));
            for u in 0..split.units(q) {
                let (iq1, nr, h0, iq3) = split.unit(q, u);
                let g = Group { iq1, nr, h0, hg: split.hg, iq3 };
                convert_queries(ctx, &g, &mut w, false);
                rows::row_pass(ctx, &g, ic0, ic1, &mut w, ops);
                for a in 0..g.nq() {
                    let (_, iq2) = g.query(a);
                    let acc = &mut w.acc[a * dvu..(a + 1) * dvu];
                    if ic0 == 0 {
                        join_sink(ctx, iq2, acc, &mut w.m_run[a], &mut w.s_run[a], false);
                    }
                    // SAFETY: chunk t's own partial of head iq2 (each (head, chunk) written once)
                    let part = unsafe { std::slice::from_raw_parts_mut(part_ptr(iq2, t), pw) };
                    part[0] = w.m_run[a];
                    part[1] = w.s_run[a];
                    part[2..].copy_from_slice(acc);
                }
            }
        }
    });
    par_ranges_c(exec, n_head, |c, h0, h1| {
        let w = chunk_work(&scratch, c, work);
        let acc = &mut w.acc[..dvu];
        for h in h0..h1 {
            let mut parts = (0..n_chunks).map(|t| {
                // SAFETY: written by the first phase (joined), read only here
                let part = unsafe { std::slice::from_raw_parts(part_ptr(h, t) as *const f32, pw) };
                (part[0], part[1], &part[2..])
            });
            let s = rows::merge(&mut parts, acc);
            write_out(ctx, 0, h, 0, acc, if s != 0.0 { 1.0 / s } else { 1.0 });
        }
    });
}

#[cfg(test)]
mod tests;
