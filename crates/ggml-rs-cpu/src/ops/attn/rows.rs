//! FLASH_ATTN_EXT in the order of upstream's native CPU build: its one-row path and its KV split
//! (`docs/flash-attn-order.md` §1, §2 and §4 say what upstream does, with line references).
//!
//! Which path: one query row over 512 or more F32 / F16 KV positions (K and V the same type) is
//! split over the KV positions, one chunk per thread, the chunks merged pairwise in chunk order
//! ([`Path::SplitKv`]: the result depends on the thread count, as upstream's does); 64 or more
//! query rows with F32 / F16 K = V go to the prompt blocks of `tiles.rs` ([`Path::Tiled`]);
//! everything else runs one query row at a time ([`Path::Rows`]): prompts under 64 tokens and
//! token generation under 512 positions, which is what llama.cpp's default (flash attention on)
//! runs for short prompts.
//!
//! One row: Q converted to K's dot type; per KV position in order, a position masked `-inf` is
//! skipped, `s = dot·scale` (`softcap·tanhf` when soft-capped) `+ slope·mask`; when `s` is a new
//! maximum the accumulator is rescaled by `expf(M_old − s)` and the row weighs 1, otherwise it
//! weighs `expf(s − M)`; the V row is weighted in and `S = fma(S, ms, vs)`. An F16 V is
//! accumulated in **f16**, rounded at every position, as upstream does: on a build with
//! AVX512-FP16 (upstream's native build on a CPU that has it) the first `DV & !127` elements in
//! f16 arithmetic (one rounding of `y + x·f16(vs)`), the others as the scalar tail (`f32` fused
//! multiply-add, then rounded to f16): the kernels of `crate::accum`. Other V types accumulate in f32 with fused
//! multiply-adds. `GGML_RS_CPU_ORDER=fast` keeps the previous paths (tiles for decode and short
//! prompts, the KV split chosen by idle threads).

use super::{Areas, Ctx, Group, row_bytes, v_to_f32};
use crate::GgmlType;
use crate::accum::AccOps;
use crate::dot::gemv::{STRIDED_AHEAD, prefetch};
use crate::ops::View;
use half::f16;

/// upstream's three paths
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
    Rows,
    Tiled,
    SplitKv,
}

/// the path upstream's CPU takes for this node (`ops.cpp:9490`, `:9547`); the reference set
/// (`ggml_backend_cpu_set_use_ref`, [`crate::kernels::Kernels::is_reference`]) takes the one-row
/// path, as upstream's use_ref does
pub(super) fn path(q: &View, k: &View, kt: GgmlType, vt: GgmlType, kern: &crate::kernels::Kernels) -> Path {
    let float_same = kt == vt && matches!(kt, GgmlType::F32 | GgmlType::F16);
    if kern.is_reference() || !float_same {
        Path::Rows
    } else if q.ne[1] == 1 && q.ne[3] == 1 && k.ne[1] >= 512 {
        Path::SplitKv
    } else if q.ne[1] >= 64 {
        Path::Tiled
    } else {
        Path::Rows
    }
}

/// `GGML_RS_CPU_ORDER=fast` ([`crate::config`]): the previous paths, faster for token
/// generation, not upstream's bits
pub(super) fn fast_order() -> bool {
    crate::config::get().fast()
}

/// the number of leading elements of an F16 accumulator of `dv` that upstream's native build adds
/// in f16 arithmetic: `dv & !127` where the CPU has AVX512-FP16 (`GGML_F16_STEP` 128 there), none
/// elsewhere (its F16 vector macros widen to f32); the table's [`AccOps::f16_native`]
pub(super) fn f16_native_len(dv: usize, ops: &AccOps) -> usize {
    if ops.f16_native { dv & !127 } else { 0 }
}

/// query `a`'s accumulator as `dv` f16 (the first half of its f32 words)
fn acc16(acc: &mut [f32], a: usize, dv: usize) -> &mut [f16] {
    let words = &mut acc[a * dv..(a + 1) * dv];
    // SAFETY: dv f16 fit in dv f32 words (2-byte aligned); any bit pattern is an f16
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut f16, dv) }
}

/// upstream's one-row pass (`one_chunk`) for every query of group `g` over KV positions
/// `kv0 .. kv1`, the queries converted to K's dot type in `w.qbuf` (`super::convert_queries`):
/// leaves each query's maximum, sum and accumulator (widened to f32) in `w`
pub(super) fn row_pass(c: &Ctx, g: &Group, kv0: i64, kv1: i64, w: &mut Areas, ops: AccOps) {
    let (k, v, p) = (c.k, c.v, c.p);
    let (kt, vt, qt) = c.types;
    let (dk, dv) = (k.ne[0], v.ne[0]);
    let dvu = dv as usize;
    let nq = g.nq();
    let qbytes = qt.row_size(dk as usize);
    let f16v = vt == GgmlType::F16;
    let np = f16_native_len(dvu, &ops);
    let super::GroupRows { k: (ik2, ik3), v: (iv2, iv3), slopes, mrows } = super::group_rows(c, g);
    w.acc[..nq * dvu].fill(0.0);
    w.m_run[..nq].fill(f32::NEG_INFINITY);
    w.s_run[..nq].fill(0.0);
    let (kb, vb) = (kt.row_size(dk as usize), vt.row_size(dvu));
    for ic in kv0..kv1 {
        // K and V rows of one head sit a whole row of heads apart in a KV cache: each is a miss
        // the hardware prefetchers do not see coming (STRIDED_AHEAD)
        let ahead = ic + STRIDED_AHEAD as i64;
        prefetch(k.row(ahead, ik2, ik3), kb);
        prefetch(v.row(ahead, iv2, iv3), vb);
        let krow = row_bytes(k.row(ic, ik2, ik3), kt, dk);
        let vbytes = row_bytes(v.row(ic, iv2, iv3), vt, dv);
        let mut v_ready = f16v;
        for a in 0..nq {
            let mv = match c.mask {
                // SAFETY: element ic < n_kv <= mask ne[0] of a packed F16 mask row (refusal checks)
                Some(_) => slopes[a] * f16::from_bits(unsafe { (mrows[a].add(ic as usize * 2) as *const u16).read_unaligned() }).to_f32(),
                None => 0.0,
            };
            if mv == f32::NEG_INFINITY {
                continue;
            }
            let qw = &w.qbuf[a * c.q_words..(a + 1) * c.q_words];
            // SAFETY: the query's own converted bytes (f32 words seen as bytes, read only)
            let qb = unsafe { std::slice::from_raw_parts(qw.as_ptr() as *const u8, qbytes) };
            let mut s = c.dot.dot(krow, qb) * p.scale;
            if p.softcap != 0.0 {
                s = p.softcap * s.tanh();
            }
            s += mv;
            let m_old = w.m_run[a];
            let (mut ms, mut vs) = (1f32, 1f32);
            if s > m_old {
                w.m_run[a] = s;
                ms = (m_old - s).exp();
            } else {
                vs = (s - m_old).exp();
            }
            if f16v {
                let acc = acc16(w.acc, a, dvu);
                if s > m_old {
                    ops.scale16(acc, ms, np);
                }
                ops.mad16(acc, crate::block::as_blocks(vbytes, "flash_attn_ext v"), vs, np);
            } else {
                if !v_ready {
                    v_to_f32(vt, vbytes, w.v32);
                    v_ready = true;
                }
                let acc = &mut w.acc[a * dvu..(a + 1) * dvu];
                if s > m_old {
                    p.k.vec.scale(acc, ms);
                }
                ops.mad32(acc, w.v32, vs);
            }
            w.s_run[a] = w.s_run[a].mul_add(ms, vs);
        }
    }
    if f16v {
        for a in 0..nq {
            let h = acc16(w.acc, a, dvu);
            for (o, x) in w.v32.iter_mut().zip(h.iter()) {
                *o = x.to_f32();
            }
            w.acc[a * dvu..(a + 1) * dvu].copy_from_slice(w.v32);
        }
    }
}

/// upstream's merge of the KV chunks' partials of one query (`ggml_flash_attn_ext_reduce_partials`):
/// in chunk order, skipping chunks with a zero sum, `M = fmaxf(M, M_c)`, both sides rescaled by
/// `expf`, the accumulator `fma(acc, a, acc_c·b)` and the sum `fma(S, a, S_c·b)`; the result is
/// left unnormalised with its sum
pub(super) fn merge(parts: &mut dyn Iterator<Item = (f32, f32, &[f32])>, acc: &mut [f32]) -> f32 {
    let (mut m, mut s) = (f32::NEG_INFINITY, 0f32);
    acc.fill(0.0);
    for (mc, sc, ac) in parts {
        if sc == 0.0 {
            continue;
        }
        let mn = m.max(mc);
        let (a, b) = ((m - mn).exp(), (mc - mn).exp());
        for (y, x) in acc.iter_mut().zip(ac) {
            *y = y.mul_add(a, x * b);
        }
        s = s.mul_add(a, sc * b);
        m = mn;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// the merge: a chunk of zero sum is skipped, the order of chunks is kept, one chunk is
    /// itself; and the merged result is the softmax of all chunks (to rounding)
    #[test]
    fn merge_follows_upstream() {
        let a = [1.0f32, 2.0];
        let mut acc = [0f32; 2];
        let s = merge(&mut [(0.5f32, 3.0f32, &a[..])].into_iter(), &mut acc);
        assert_eq!((s, acc), (3.0, a));
        let b = [4.0f32, -1.0];
        let z = [9.0f32, 9.0];
        let s = merge(&mut [(0.5f32, 3.0f32, &a[..]), (7.0, 0.0, &z[..]), (1.5, 2.0, &b[..])].into_iter(), &mut acc);
        let e = (0.5f32 - 1.5).exp();
        assert!((s - (3.0 * e + 2.0)).abs() < 1e-6);
        assert!((acc[0] - (1.0 * e + 4.0)).abs() < 1e-6 && (acc[1] - (2.0 * e - 1.0)).abs() < 1e-6);
    }
}
