//! Family `rope`: ROPE and ROPE_BACK on F32 and F16 (in place too: the K-shift rotates an F16
//! cache view into itself), modes normal, NeoX, multi-section (MROPE, interleaved IMROPE) and
//! vision; `n_dims` below `ne0` (the rest copied), an offset of the rotated part (`op_params[15]`),
//! frequency factors (src2), YaRN (`ext_factor`, `attn_factor`, `beta_fast` / `beta_slow`).
//!
//! The angles are computed as upstream's CPU does, in f32 and in the same order: one cache of
//! (cos, sin) pairs per position, `theta` multiplied by `freq_base^(-2/n_dims)` pair after pair,
//! the YaRN ramp and magnitude correction per pair; ROPE_BACK is the same rotation with the sine
//! negated (the inverse). Op params: [1] n_dims, [2] mode, [4] n_ctx_orig, [5..=10] freq_base,
//! freq_scale, ext_factor, attn_factor, beta_fast, beta_slow (f32), [11..=14] sections, [15] offset.

use super::unary::kit::{f32_row, f32_row_mut, get, get_i32, max_chunks, par_rows_c, scratch_f32, set, unflatten};
use super::{Exec, Family, Node, Op, OpError, View, raw_type};
use crate::vecf::{VecF, rotate_pair};
use half::slice::HalfFloatSliceExt;

pub const FAMILY: Family = Family { name: "rope", ops: &[Op::Rope, Op::RopeBack], supports, compute };

pub const MODE_NORMAL: i32 = 0;
pub const MODE_NEOX: i32 = 2;
pub const MODE_MROPE: i32 = 8;
pub const MODE_VISION: i32 = 24;
pub const MODE_IMROPE: i32 = 40;

/// the parameters of a rope node
#[derive(Clone, Copy, Debug)]
struct Params {
    n_dims: i64,
    mode: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    beta_fast: f32,
    beta_slow: f32,
    sections: [i32; 4],
    n_offs: i64,
}

impl Params {
    fn of(node: &Node) -> Params {
        Params {
            n_dims: node.params[1] as i64,
            mode: node.params[2],
            n_ctx_orig: node.params[4],
            freq_base: node.param_f32(5),
            freq_scale: node.param_f32(6),
            ext_factor: node.param_f32(7),
            attn_factor: node.param_f32(8),
            beta_fast: node.param_f32(9),
            beta_slow: node.param_f32(10),
            sections: [node.params[11], node.params[12], node.params[13], node.params[14]],
            n_offs: node.params[15] as i64,
        }
    }

    fn multi(&self) -> bool {
        self.mode & MODE_MROPE != 0
    }
}

/// why this node is not computed here, `None` when it is
fn refusal(node: &Node) -> Option<&'static str> {
    let d = &node.dst;
    let s0 = node.src[0].as_ref()?;
    let Some(pos) = node.src[1].as_ref() else { return Some("no positions (source 1)") };
    if !(s0.ty == raw_type::F32 || s0.ty == raw_type::F16) || d.ty != s0.ty || d.ne != s0.ne {
        return Some("types or shapes (F32 or F16, the destination as the source)");
    }
    let ts = if s0.ty == raw_type::F32 { 4 } else { 2 };
    if s0.nb[0] != ts || d.nb[0] != ts {
        return Some("the elements of a row are not packed");
    }
    let p = Params::of(node);
    if ![MODE_NORMAL, MODE_NEOX, MODE_MROPE, MODE_VISION, MODE_IMROPE].contains(&p.mode) {
        return Some("unknown mode");
    }
    let ne0 = d.ne[0];
    if p.n_dims <= 0 || p.n_dims % 2 != 0 || p.n_dims > ne0 || p.n_offs < 0 || p.n_offs % 2 != 0 || p.n_offs + p.n_dims > ne0 || ne0 % 2 != 0 {
        return Some("n_dims / offset out of range");
    }
    if p.mode == MODE_VISION && (p.n_dims != ne0 / 2 || p.n_offs != 0) {
        return Some("vision mode needs n_dims == ne0/2 and no offset");
    }
    if p.multi() {
        let s = p.sections;
        if s.iter().any(|&x| x < 0) || !(s[0] > 0 || s[1] > 0 || s[2] > 0) || (s.iter().sum::<i32>() as i64) > ne0 {
            return Some("multi-section rope needs sections within ne0");
        }
    }
    let n_pos = if p.multi() { 4 * d.ne[2] } else { d.ne[2] };
    if pos.ty != raw_type::I32 || pos.nelements() < n_pos || pos.nb[0] != 4 {
        return Some("positions must be I32, one per row of dim 2 (four for multi-section)");
    }
    if let Some(ff) = node.src[2].as_ref()
        && (ff.ty != raw_type::F32 || ff.ne[0] < p.n_dims / 2 || ff.nb[0] != 4)
    {
        return Some("frequency factors must be F32, n_dims/2 of them");
    }
    None
}

fn supports(node: &Node) -> bool {
    node.src[0].is_some() && refusal(node).is_none()
}

/// upstream's `ggml_rope_yarn_corr_dims`
pub(crate) fn yarn_corr_dims(n_dims: i64, n_ctx_orig: i32, freq_base: f32, beta_fast: f32, beta_slow: f32) -> [f32; 2] {
    let dim = |n_rot: f32| n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * freq_base.ln());
    let start = dim(beta_fast).floor();
    let end = dim(beta_slow).ceil();
    [start.max(0.0), end.min((n_dims - 1) as f32)]
}

/// (cos, sin) of pair `i0` (an even index) rotated by `theta_extrap`, YaRN-corrected
fn yarn(theta_extrap: f32, p: &Params, corr: [f32; 2], i0: i64) -> (f32, f32) {
    let theta_interp = p.freq_scale * theta_extrap;
    let mut theta = theta_interp;
    let mut mscale = p.attn_factor;
    if p.ext_factor != 0.0 {
        let y = ((i0 / 2) as f32 - corr[0]) / 0.001f32.max(corr[1] - corr[0]);
        let ramp_mix = (1.0 - 1f32.min(0f32.max(y))) * p.ext_factor;
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0 + 0.1 * (1.0 / p.freq_scale).ln();
    }
    (theta.cos() * mscale, theta.sin() * mscale)
}

/// fills `cache` (ne0 floats: cos, sin per pair) for the positions of row i2
fn fill_cache(cache: &mut [f32], p: &Params, corr: [f32; 2], pos: [i32; 4], ff: Option<&View>, sin_sign: f32) {
    let theta_scale = p.freq_base.powf(-2.0 / p.n_dims as f32);
    // the rotated pairs only (all of the row in the vision mode)
    let ne0 = if p.mode == MODE_VISION { cache.len() as i64 } else { p.n_dims };
    let factor = |i0: i64| ff.map_or(1.0, |v| get(v, i0 / 2, 0, 0, 0));
    let mut put = |i0: i64, theta: f32| {
        let (c, s) = yarn(theta / factor(i0), p, corr, i0);
        cache[i0 as usize] = c;
        cache[i0 as usize + 1] = s * sin_sign;
    };
    if !p.multi() {
        let mut theta = pos[0] as f32;
        for i0 in (0..ne0).step_by(2) {
            put(i0, theta);
            theta *= theta_scale;
        }
        return;
    }
    let base = pos.map(|x| x as f32);
    let mut th = base;
    let s = p.sections;
    let sect_dims = s.iter().sum::<i32>() as i64;
    let sec_w = (s[0] + s[1]) as i64;
    let sec_e = s[2] as i64 + sec_w;
    let indep = p.mode == MODE_VISION;
    let imrope = p.mode == MODE_IMROPE;
    for i0 in (0..ne0).step_by(2) {
        let sector = (i0 / 2) % sect_dims;
        if indep {
            // vision: each section restarts its angle
            if sector == 0 {
                th[0] = base[0];
            } else if sector == s[0] as i64 {
                th[1] = base[1];
            } else if sector == sec_w {
                th[2] = base[2];
            } else if sector == sec_e {
                th[3] = base[3];
            }
        }
        let theta = if imrope {
            if sector % 3 == 1 && sector < 3 * s[1] as i64 {
                th[1]
            } else if sector % 3 == 2 && sector < 3 * s[2] as i64 {
                th[2]
            } else if sector % 3 == 0 && sector < 3 * s[0] as i64 {
                th[0]
            } else {
                th[3]
            }
        } else if sector >= s[0] as i64 && sector < sec_w {
            th[1]
        } else if sector >= sec_w && sector < sec_w + s[2] as i64 {
            th[2]
        } else if sector >= sec_w + s[2] as i64 {
            th[3]
        } else {
            th[0]
        };
        put(i0, theta);
        for t in &mut th {
            *t *= theta_scale;
        }
    }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    if let Some(why) = refusal(node) {
        return Err(OpError::new(node, why));
    }
    let forward = match node.op {
        Op::Rope => true,
        Op::RopeBack => false,
        _ => return Err(OpError::new(node, "not a rope-family op")),
    };
    let s = *node.src(0)?;
    let posv = *node.src(1)?;
    let ff = node.src[2];
    let d = node.dst;
    let p = Params::of(node);
    let ne = d.ne;
    let ne0 = ne[0] as usize;
    let corr = yarn_corr_dims(p.n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow);
    let sin_sign = if forward { 1.0 } else { -1.0 };
    let vf = exec.kernels().vec;
    // per chunk: the (cos, sin) cache, the NeoX layout's cos and sin apart, one row in f32
    let per_chunk = 3 * ne0;
    let scratch = exec.scratch(max_chunks(exec) * per_chunk * 4);
    // one chunk per few rows at least: each chunk fills the (cos, sin) cache of its positions
    par_rows_c(exec, d.nrows(), ne[0], |c, r0, r1| {
        let area = scratch_f32(&scratch, c, per_chunk);
        let (cache, rest) = area.split_at_mut(ne0);
        let (halves, row) = rest.split_at_mut(ne0);
        let mut last_i2 = -1;
        for r in r0..r1 {
            let (i1, i2, i3) = unflatten(r, &ne);
            if i2 != last_i2 {
                let at = |k: i64| get_i32(&posv, i2 + k * ne[2], 0, 0, 0);
                let pos = if p.multi() { [at(0), at(1), at(2), at(3)] } else { [at(0), 0, 0, 0] };
                fill_cache(cache, &p, corr, pos, ff.as_ref(), sin_sign);
                if p.mode != MODE_NORMAL && p.mode != MODE_VISION {
                    // the NeoX layout pairs element k with k + n_dims/2: cos and sin as two rows
                    let h = p.n_dims as usize / 2;
                    for k in 0..h {
                        halves[k] = cache[2 * k];
                        halves[h + k] = cache[2 * k + 1];
                    }
                }
                last_i2 = i2;
            }
            if !rotate_row_packed(&s, &d, cache, halves, row, &p, vf, i1, i2, i3) {
                rotate_row(&s, &d, cache, &p, i1, i2, i3);
            }
        }
    });
    Ok(())
}

/// Row (i1, i2, i3) of `s` rotated into `d` (which may be `s` itself) by the vector kernels: the
/// row copied (F32) or converted (F16) whole, its rotated part turned in f32, stored back; false
/// (nothing written) for the vision mode and for rows not aligned to their element type, which
/// [`rotate_row`] does element by element.
#[allow(clippy::too_many_arguments)]
fn rotate_row_packed(s: &View, d: &View, cache: &[f32], halves: &[f32], tmp: &mut [f32], p: &Params, vf: VecF, i1: i64, i2: i64, i3: i64) -> bool {
    if p.mode == MODE_VISION {
        return false;
    }
    let ne0 = d.ne[0] as usize;
    let (o, n) = (p.n_offs as usize, p.n_dims as usize);
    let (src, dst) = (s.row(i1, i2, i3), d.row(i1, i2, i3));
    let turn = |y: &mut [f32]| {
        let part = &mut y[o..o + n];
        if p.mode == MODE_NORMAL {
            vf.rope_pairs(part, &cache[..n]);
        } else {
            vf.rope_halves(part, &halves[..n / 2], &halves[n / 2..n]);
        }
    };
    if d.ty == raw_type::F32 {
        if !(dst as usize).is_multiple_of(4) {
            return false;
        }
        if !std::ptr::eq(src, dst) {
            // SAFETY: rows of ne0 packed f32 (refusal checks nb[0] and the shapes); ptr::copy
            // allows the two rows to overlap
            unsafe { std::ptr::copy(src, dst, ne0 * 4) };
        }
        // SAFETY: the destination row, aligned (checked), written by this chunk only; the source
        // row is not read after the copy
        turn(unsafe { std::slice::from_raw_parts_mut(dst as *mut f32, ne0) });
        return true;
    }
    // F16 (refusal admits no other type)
    if !(src as usize).is_multiple_of(2) || !(dst as usize).is_multiple_of(2) {
        return false;
    }
    let row = &mut tmp[..ne0];
    {
        // SAFETY: ne0 packed f16 of the source row, aligned (checked); this borrow ends before
        // the destination (maybe the same row) is written
        let x = unsafe { std::slice::from_raw_parts(src as *const half::f16, ne0) };
        x.convert_to_f32_slice(row);
    }
    turn(row);
    // SAFETY: the destination row, aligned (checked), this chunk's only
    let y = unsafe { std::slice::from_raw_parts_mut(dst as *mut half::f16, ne0) };
    y.convert_from_f32_slice(row);
    true
}

/// rotates row (i1, i2, i3) of `s` into `d` (which may be `s` itself: each pair is read before
/// it is written)
fn rotate_row(s: &View, d: &View, cache: &[f32], p: &Params, i1: i64, i2: i64, i3: i64) {
    let ne0 = d.ne[0];
    // (count of pairs, distance between the two elements of a pair, index of pair k's first element)
    let (n, off, first): (i64, i64, fn(i64) -> i64) = match p.mode {
        MODE_NORMAL => (p.n_dims, 1, |i0| i0),
        MODE_VISION => (ne0, p.n_dims, |i0| i0 / 2),
        _ => (p.n_dims, p.n_dims / 2, |i0| i0 / 2),
    };
    let base = if p.mode == MODE_VISION { 0 } else { p.n_offs };
    let pair = |x0: f32, x1: f32, i0: i64| rotate_pair(x0, x1, cache[i0 as usize], cache[i0 as usize + 1]);
    // packed F32 rows: the same arithmetic on slices; in place (the K-shift) only the destination
    // row is borrowed, so no shared and mutable borrows of the same memory exist
    if std::ptr::eq(s.row(i1, i2, i3), d.row(i1, i2, i3)) && s.nb[0] == d.nb[0] {
        if let Some(y) = f32_row_mut(d, ne0, i1, i2, i3) {
            for i0 in (0..n).step_by(2) {
                let a = (base + first(i0)) as usize;
                let b = a + off as usize;
                (y[a], y[b]) = pair(y[a], y[b], i0);
            }
            return;
        }
    } else if let (Some(x), Some(y)) = (f32_row(s, ne0, i1, i2, i3), f32_row_mut(d, ne0, i1, i2, i3)) {
        for i0 in (0..n).step_by(2) {
            let a = (base + first(i0)) as usize;
            let b = a + off as usize;
            (y[a], y[b]) = pair(x[a], x[b], i0);
        }
        if p.mode != MODE_VISION {
            let (o, e) = (p.n_offs as usize, (p.n_offs + p.n_dims) as usize);
            y[..o].copy_from_slice(&x[..o]);
            y[e..].copy_from_slice(&x[e..]);
        }
        return;
    }
    for i0 in (0..n).step_by(2) {
        let (cos, sin) = (cache[i0 as usize], cache[i0 as usize + 1]);
        let a = base + first(i0);
        let x0 = get(s, a, i1, i2, i3);
        let x1 = get(s, a + off, i1, i2, i3);
        let (y0, y1) = rotate_pair(x0, x1, cos, sin);
        set(d, a, i1, i2, i3, y0);
        set(d, a + off, i1, i2, i3, y1);
    }
    if p.mode != MODE_VISION {
        // the channels outside the rotated part are copied
        for i0 in (0..p.n_offs).chain(p.n_offs + p.n_dims..ne0) {
            set(d, i0, i1, i2, i3, get(s, i0, i1, i2, i3));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::unary::kit::testkit::*;
    use super::*;
    use crate::rng::XorShift;

    #[allow(clippy::too_many_arguments)]
    fn params(n_dims: i32, mode: i32, n_ctx_orig: i32, base: f32, scale: f32, ext: f32, attn: f32, sections: [i32; 4], n_offs: i32) -> Vec<i32> {
        vec![0, n_dims, mode, 0, n_ctx_orig, f(base), f(scale), f(ext), f(attn), f(32.0), f(1.0), sections[0], sections[1], sections[2], sections[3], n_offs]
    }

    /// rotation from the definition, in f64: pair k of position p turns by
    /// p·freq_scale·base^(-2k/n_dims)/ff_k (no YaRN), scaled by attn_factor
    #[allow(clippy::too_many_arguments)]
    fn reference(x: &Tensor, pos: &[i32], n_dims: i64, mode: i32, base: f64, scale: f64, attn: f64, ff: Option<&[f32]>, n_offs: i64, sign: f64) -> Vec<f32> {
        let ne = x.view.ne;
        let xs = x.to_f32();
        let mut out = xs.clone();
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    let row = (((i3 * ne[2] + i2) * ne[1] + i1) * ne[0]) as usize;
                    for k in 0..n_dims / 2 {
                        let f = ff.map_or(1.0, |v| v[k as usize] as f64);
                        let theta = pos[i2 as usize] as f64 * scale * base.powf(-2.0 * k as f64 / n_dims as f64) / f;
                        let (a, b) = if mode == MODE_NORMAL { (n_offs + 2 * k, n_offs + 2 * k + 1) } else { (n_offs + k, n_offs + k + n_dims / 2) };
                        let (x0, x1) = (xs[row + a as usize] as f64, xs[row + b as usize] as f64);
                        let (c, s) = (theta.cos() * attn, sign * theta.sin() * attn);
                        out[row + a as usize] = (x0 * c - x1 * s) as f32;
                        out[row + b as usize] = (x0 * s + x1 * c) as f32;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn rope_matches_reference_normal_neox_f32_f16() {
        let mut rng = XorShift::new(31);
        for mode in [MODE_NORMAL, MODE_NEOX] {
            for (ty, tol) in [(raw_type::F32, 2e-4f32), (raw_type::F16, 4e-3)] {
                for layout in [Layout::Contig, Layout::Padded, Layout::Permuted] {
                    for (with_ff, back) in [(false, false), (true, false), (false, true)] {
                        let ne0 = 2 * rng.i32_in(2, 20) as i64;
                        let n_dims = 2 * rng.i32_in(1, (ne0 / 2) as i32) as i64;
                        let n_offs = 2 * rng.i32_in(0, ((ne0 - n_dims) / 2) as i32) as i64;
                        let ne = [ne0, rng.i32_in(1, 4) as i64, rng.i32_in(1, 5) as i64, 1];
                        let x = Tensor::random(ty, ne, layout, &mut rng, -1.0, 1.0);
                        let posv: Vec<i32> = (0..ne[2]).map(|_| rng.i32_in(0, 500)).collect();
                        let pos = Tensor::from_f32(raw_type::I32, [ne[2], 1, 1, 1], Layout::Contig, &posv.iter().map(|&p| p as f32).collect::<Vec<_>>());
                        let ffv: Vec<f32> = (0..n_dims / 2).map(|_| rng.f32_in(1.0, 4.0)).collect();
                        let ff = Tensor::from_f32(raw_type::F32, [n_dims / 2, 1, 1, 1], Layout::Contig, &ffv);
                        let dst = Tensor::new(ty, ne, layout);
                        let (base, scale, attn) = (10000.0f32, 0.5f32, 1.25f32);
                        let pr = params(n_dims as i32, mode, 4096, base, scale, 0.0, attn, [0; 4], n_offs as i32);
                        let op = if back { Op::RopeBack } else { Op::Rope };
                        let n = node(op, &dst, &[Some(&x), Some(&pos), with_ff.then_some(&ff)], &pr);
                        assert!(supports(&n), "{:?}", refusal(&n));
                        run(&n, 3).unwrap();
                        let sign = if back { -1.0 } else { 1.0 };
                        let want = reference(&x, &posv, n_dims, mode, base as f64, scale as f64, attn as f64, with_ff.then_some(&ffv[..]), n_offs, sign);
                        let what = format!("mode {mode} {ty} {layout:?} ff {with_ff} back {back} ne {ne:?} n_dims {n_dims} offs {n_offs}");
                        assert_close(&what, &dst.to_f32(), &want, tol);
                    }
                }
            }
        }
    }

    /// F32 ROPE bit for bit as upstream's x86 CPU backend computes it: theta = p, multiplied by
    /// powf(base, -2/n_dims) pair after pair, cosf/sinf, and (where the target has FMA, as every
    /// upstream x86 build from AVX2 up) the contracted rotation fma(x0, cos, -(x1·sin)),
    /// fma(x0, sin, x1·cos). Before: the plain form, off in the last bit on ~20% of the values.
    #[test]
    fn rope_f32_is_upstreams_rotation_bit_for_bit() {
        let mut rng = XorShift::new(14);
        for mode in [MODE_NORMAL, MODE_NEOX] {
            for layout in [Layout::Contig, Layout::Padded] {
                let (n_dims, ne) = (64i64, [64i64, 8, 6, 1]);
                let x = Tensor::random(raw_type::F32, ne, layout, &mut rng, -4.0, 4.0);
                let posv: Vec<i32> = (0..ne[2]).map(|_| rng.i32_in(0, 300)).collect();
                let pos = Tensor::from_f32(raw_type::I32, [ne[2], 1, 1, 1], Layout::Contig, &posv.iter().map(|&p| p as f32).collect::<Vec<_>>());
                let dst = Tensor::new(raw_type::F32, ne, layout);
                let n = node(Op::Rope, &dst, &[Some(&x), Some(&pos), None], &params(n_dims as i32, mode, 4096, 10000.0, 1.0, 0.0, 1.0, [0; 4], 0));
                run(&n, 2).unwrap();
                let xs = x.to_f32();
                let mut want = xs.clone();
                let theta_scale = 10000.0f32.powf(-2.0 / n_dims as f32);
                for i2 in 0..ne[2] {
                    for i1 in 0..ne[1] {
                        let row = ((i2 * ne[1] + i1) * ne[0]) as usize;
                        let mut theta = posv[i2 as usize] as f32;
                        for k in 0..(n_dims / 2) as usize {
                            let (c, s) = (theta.cos(), theta.sin());
                            let (a, b) = if mode == MODE_NORMAL { (2 * k, 2 * k + 1) } else { (k, k + n_dims as usize / 2) };
                            let (x0, x1) = (xs[row + a], xs[row + b]);
                            (want[row + a], want[row + b]) = (x0.mul_add(c, -(x1 * s)), x0.mul_add(s, x1 * c));
                            theta *= theta_scale;
                        }
                    }
                }
                let got = dst.to_f32();
                let bad = got.iter().zip(&want).filter(|(g, w)| g.to_bits() != w.to_bits()).count();
                assert_eq!(bad, 0, "mode {mode} {layout:?}: {bad} of {} values differ", got.len());
            }
        }
    }

    #[test]
    fn every_simd_level_gives_the_scalar_bits() {
        // the vector rotations round as the scalar one: the same bits for normal / NeoX / multi-
        // section, F32 / F16, row lengths off the vector widths, in place and not
        use crate::simd::Level;
        let mut rng = XorShift::new(34);
        for mode in [MODE_NORMAL, MODE_NEOX, MODE_MROPE] {
            for ty in [raw_type::F32, raw_type::F16] {
                for (ne0, n_dims, offs) in [(64i64, 64i64, 0i64), (128, 128, 0), (80, 20, 4), (38, 34, 2), (6, 6, 0)] {
                    let ne = [ne0, 3, 5, 1];
                    let sections = if mode == MODE_MROPE { [2, 2, 2, 0] } else { [0; 4] };
                    let np = if mode == MODE_MROPE { 4 * ne[2] } else { ne[2] };
                    let posv: Vec<f32> = (0..np).map(|_| rng.i32_in(0, 900) as f32).collect();
                    let pos = Tensor::from_f32(raw_type::I32, [np, 1, 1, 1], Layout::Contig, &posv);
                    let x = Tensor::random(ty, ne, Layout::Contig, &mut rng, -2.0, 2.0);
                    let pr = params(n_dims as i32, mode, 4096, 10000.0, 1.0, 0.0, 1.0, sections, offs as i32);
                    let want = Tensor::new(ty, ne, Layout::Contig);
                    run_at(&node(Op::Rope, &want, &[Some(&x), Some(&pos)], &pr), 2, Level::Scalar).unwrap();
                    assert_ne!(want.to_f32(), x.to_f32());
                    for level in Level::available() {
                        let got = Tensor::new(ty, ne, Layout::Contig);
                        run_at(&node(Op::Rope, &got, &[Some(&x), Some(&pos)], &pr), 2, level).unwrap();
                        let what = format!("mode {mode} {ty} ne0 {ne0} n_dims {n_dims} {level:?}");
                        assert_eq!(got.to_f32(), want.to_f32(), "{what}");
                        let inplace = Tensor::from_f32(ty, ne, Layout::Contig, &x.to_f32());
                        run_at(&node(Op::Rope, &inplace, &[Some(&inplace), Some(&pos)], &pr), 2, level).unwrap();
                        assert_eq!(inplace.to_f32(), want.to_f32(), "{what} in place");
                    }
                }
            }
        }
    }

    #[test]
    fn rope_in_place_on_f16_is_the_out_of_place_result() {
        // the K-shift: the cache view rotated into itself (F32 takes the slice form)
        let mut rng = XorShift::new(32);
        for ty in [raw_type::F16, raw_type::F32] {
            let ne = [16, 4, 6, 1];
            let x = Tensor::random(ty, ne, Layout::Padded, &mut rng, -1.0, 1.0);
            let pos = Tensor::from_f32(raw_type::I32, [6, 1, 1, 1], Layout::Contig, &[3.0, -2.0, 7.0, 0.0, 100.0, 5.0]);
            let pr = params(12, MODE_NEOX, 0, 10000.0, 1.0, 0.0, 1.0, [0; 4], 2);
            let out = Tensor::new(ty, ne, Layout::Padded);
            run(&node(Op::Rope, &out, &[Some(&x), Some(&pos)], &pr), 2).unwrap();
            run(&node(Op::Rope, &x, &[Some(&x), Some(&pos)], &pr), 2).unwrap();
            assert_eq!(x.to_f32(), out.to_f32(), "{ty}");
        }
    }

    #[test]
    fn rotations_compose_and_back_inverts_as_test_rope_checks() {
        // upstream's test-rope: rope(rope(x, p0), p1) == rope(x, p0 + p1); rope_back undoes rope
        let mut rng = XorShift::new(33);
        for mode in [MODE_NORMAL, MODE_NEOX, MODE_MROPE, MODE_IMROPE, MODE_VISION] {
            let ne = [32, 3, 4, 1];
            let n_dims = if mode == MODE_VISION { 16 } else { 24 };
            let sections = if mode & MODE_MROPE != 0 { [4, 4, 4, 0] } else { [0; 4] };
            let np = if mode & MODE_MROPE != 0 { 16 } else { 4 };
            let p0: Vec<f32> = (0..np).map(|_| rng.i32_in(0, 50) as f32).collect();
            let p1: Vec<f32> = (0..np).map(|_| rng.i32_in(0, 50) as f32).collect();
            let p01: Vec<f32> = p0.iter().zip(&p1).map(|(a, b)| a + b).collect();
            let t = |v: &[f32]| Tensor::from_f32(raw_type::I32, [np as i64, 1, 1, 1], Layout::Contig, v);
            let (t0, t1, t01) = (t(&p0), t(&p1), t(&p01));
            let x = Tensor::random(raw_type::F32, ne, Layout::Contig, &mut rng, -1.0, 1.0);
            let pr = params(n_dims, mode, 0, 10000.0, 1.0, 0.0, 1.0, sections, 0);
            let (a, b, c, back) = (
                Tensor::new(raw_type::F32, ne, Layout::Contig),
                Tensor::new(raw_type::F32, ne, Layout::Contig),
                Tensor::new(raw_type::F32, ne, Layout::Contig),
                Tensor::new(raw_type::F32, ne, Layout::Contig),
            );
            run(&node(Op::Rope, &a, &[Some(&x), Some(&t0)], &pr), 2).unwrap();
            run(&node(Op::Rope, &b, &[Some(&a), Some(&t1)], &pr), 2).unwrap();
            run(&node(Op::Rope, &c, &[Some(&x), Some(&t01)], &pr), 2).unwrap();
            assert_close(&format!("mode {mode}: composed"), &b.to_f32(), &c.to_f32(), 1e-4);
            run(&node(Op::RopeBack, &back, &[Some(&a), Some(&t0)], &pr), 2).unwrap();
            assert_close(&format!("mode {mode}: back"), &back.to_f32(), &x.to_f32(), 1e-5);
            // a non-zero position changes the rotated part
            assert_ne!(a.to_f32(), x.to_f32(), "mode {mode}");
        }
    }

    #[test]
    fn yarn_matches_the_ramp_definition() {
        // one pair per ramp region: extrapolated (below corr[0]), interpolated (above corr[1]), mixed
        let (n_dims, n_ctx_orig, base, beta_fast, beta_slow) = (64i64, 4096, 10000.0f32, 32.0f32, 1.0f32);
        let corr = yarn_corr_dims(n_dims, n_ctx_orig, base, beta_fast, beta_slow);
        let dim = |r: f64| n_dims as f64 * (n_ctx_orig as f64 / (r * 2.0 * std::f64::consts::PI)).ln() / (2.0 * (base as f64).ln());
        assert_eq!(corr, [dim(beta_fast as f64).floor().max(0.0) as f32, dim(beta_slow as f64).ceil().min(63.0) as f32]);
        let ne = [n_dims, 1, 1, 1];
        let x = Tensor::from_f32(raw_type::F32, ne, Layout::Contig, &(0..n_dims).map(|i| if i % 2 == 0 { 1.0 } else { 0.0 }).collect::<Vec<_>>());
        let pos = Tensor::from_f32(raw_type::I32, [1, 1, 1, 1], Layout::Contig, &[7.0]);
        let (scale, ext, attn) = (0.25f32, 1.0f32, 1.0f32);
        let mut pr = params(n_dims as i32, MODE_NORMAL, n_ctx_orig, base, scale, ext, attn, [0; 4], 0);
        pr[9] = f(beta_fast);
        pr[10] = f(beta_slow);
        let dst = Tensor::new(raw_type::F32, ne, Layout::Contig);
        run(&node(Op::Rope, &dst, &[Some(&x), Some(&pos)], &pr), 1).unwrap();
        let out = dst.to_f32();
        let mscale = 1.0 + 0.1 * (1.0 / scale as f64).ln();
        for k in 0..n_dims / 2 {
            let extrap = 7.0 * (base as f64).powf(-2.0 * k as f64 / n_dims as f64);
            let ramp = 1.0 - ((k as f64 - corr[0] as f64) / (corr[1] - corr[0]) as f64).clamp(0.0, 1.0);
            let theta = extrap * scale as f64 * (1.0 - ramp) + extrap * ramp;
            let (c, s) = (theta.cos() * mscale, theta.sin() * mscale);
            assert!(
                (out[2 * k as usize] as f64 - c).abs() < 1e-4 && (out[2 * k as usize + 1] as f64 - s).abs() < 1e-4,
                "pair {k}: {} {} vs {c} {s}",
                out[2 * k as usize],
                out[2 * k as usize + 1]
            );
        }
    }

    #[test]
    fn bad_parameters_are_refused_with_a_reason() {
        let x = Tensor::new(raw_type::F32, [8, 1, 2, 1], Layout::Contig);
        let pos = Tensor::new(raw_type::I32, [2, 1, 1, 1], Layout::Contig);
        let d = Tensor::new(raw_type::F32, [8, 1, 2, 1], Layout::Contig);
        for (n_dims, mode, offs) in [(10, 0, 0), (3, 0, 0), (8, 1, 0), (6, 2, 4), (8, MODE_MROPE, 0)] {
            let n = node(Op::Rope, &d, &[Some(&x), Some(&pos)], &params(n_dims, mode, 0, 1e4, 1.0, 0.0, 1.0, [0; 4], offs));
            assert!(!supports(&n));
            assert!(refusal(&n).is_some());
            assert!(run(&n, 1).unwrap_err().0.contains("test"));
        }
    }
}
