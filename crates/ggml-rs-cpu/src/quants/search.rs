//! The scale searches of upstream's K-quant reference quantizers (`nearest_int`,
//! `make_qx_quants`, `make_qkx2_quants` in ggml-quants.c), operation for operation: the bytes they
//! lead to depend on every rounding, so the order of the float operations is kept.

pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// round to nearest, ties to even, through the float trick upstream uses (valid for
/// |x| <= 4194303)
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12582912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// the largest magnitude of `x` and the value that has it (sign kept; the first of equals)
#[inline]
pub(crate) fn signed_max(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    (amax, max)
}

/// Symmetric scale search for `n` values into `-nmax..nmax-1` (stored as `l + nmax`), weighted
/// by x² (upstream's `rmse_type == 1`, no importance weights: the only form Q6_K's reference uses).
pub(crate) fn make_qx_quants_rmse1(x: &[f32], nmax: i32, l_out: &mut [i8]) -> f32 {
    let n = x.len();
    let (amax, max) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let clamp = |l: i32| l.min(nmax - 1).max(-nmax);
    let mut iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for i in 0..n {
        let l = clamp(nearest_int(iscale * x[i]));
        l_out[i] = (l + nmax) as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for i in 0..n {
            let l = clamp(nearest_int(iscale * x[i]));
            let w = x[i] * x[i];
            sumlx += w * x[i] * l as f32;
            suml2 += w * l as f32 * l as f32;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                l_out[i] = (nmax + clamp(nearest_int(iscale * x[i]))) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Asymmetric (scale and min) search for `n` values into `0..=nmax`, weighted by `weights`;
/// returns the scale and writes `-min` (upstream's `make_qkx2_quants`). The error of a candidate
/// is `Σ w · |diff|` with `use_mad` (Q2_K), `Σ w · diff²` without (Q4_K, Q5_K).
#[allow(clippy::too_many_arguments)]
pub(crate) fn make_qkx2_quants(
    x: &[f32],
    nmax: i32,
    weights: &[f32],
    l_out: &mut [u8],
    the_min: &mut f32,
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> f32 {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out[..n].fill(0);
        *the_min = -min;
        return 0.0;
    }
    let clamp = |l: i32| l.min(nmax).max(0);
    let err = |diff: f32| if use_mad { diff.abs() } else { diff * diff };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = clamp(nearest_int(iscale * (x[i] - min)));
        l_out[i] = l as u8;
        let diff = scale * l_out[i] as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        *the_min = -min;
        return scale;
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = clamp(nearest_int(iscale * (x[i] - min)));
            laux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l_out[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    scale
}

/// Symmetric search for `n` values into `-nmax..nmax-1` (Q3_K's sub-blocks, upstream's
/// `make_q3_quants`); writes `l + nmax` into `l_out` and returns the scale.
///
/// With `do_rmse`: start from `l = round(-nmax · x / max)` (max: the value of largest magnitude),
/// then up to 5 passes of coordinate descent, each value in turn moved to the level that the
/// least-squares scale of the others asks for (`round(x · Σ'wl² / Σ'wxl)`, weights `w = x²`),
/// kept when it raises `(Σwxl)² / Σwl²`; the scale is then `Σwxl / Σwl²`. Without: the first
/// rounding and the scale `-max / nmax`.
pub(crate) fn make_q3_quants(x: &[f32], nmax: i32, l_out: &mut [i8], do_rmse: bool) -> f32 {
    let n = x.len();
    let (amax, max) = signed_max(x);
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let clamp = |l: i32| l.min(nmax - 1).max(-nmax);
    let iscale = -(nmax as f32) / max;
    if !do_rmse {
        for i in 0..n {
            l_out[i] = (clamp(nearest_int(iscale * x[i])) + nmax) as i8;
        }
        return 1.0 / iscale;
    }
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for i in 0..n {
        let l = clamp(nearest_int(iscale * x[i]));
        l_out[i] = l as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for i in 0..n {
            let w = x[i] * x[i];
            let li = l_out[i] as f32;
            // the sums without value i
            let mut slx = sumlx - w * x[i] * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = clamp(nearest_int(x[i] * sl2 / slx));
                if new_l != l_out[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l_out[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for l in &mut l_out[..n] {
        *l += nmax as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}
