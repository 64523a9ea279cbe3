//! Family `unary`: UNARY (every ggml_unary_op), GLU (REGLU, GEGLU, SWIGLU, SWIGLU_OAI, GEGLU_ERF,
//! GEGLU_QUICK, SWIGLU_CLAMP; split (one source, halves) and fused (two sources) forms, swapped),
//! SILU_BACK.
//!
//! Element types: F32, F16, BF16; the destination has the source's type (UNARY also F16/BF16 to
//! F32). Values are computed in f32 and rounded once to the destination type, as upstream's CPU
//! does. GELU and GELU_QUICK follow upstream's table path bit for bit: on F32 and F16 the input is
//! rounded to f16 and the result read from an f16 table (`f16(gelu(f16(x)))`; F32 GELU passes
//! |x| >= 10 through), on BF16 the exact formula. Rows may have any strides; a packed F32 row
//! takes the slice form (`fast`), which the tests compare with the element form.

pub(crate) mod kit;

use super::{Exec, Family, GluOp, Node, Op, OpError, UnaryOp, View, raw_type};
use kit::{f32_row, f32_row_mut, get, is_float, par_rows, set, unflatten};

pub const FAMILY: Family = Family { name: "unary", ops: &[Op::Unary, Op::Glu, Op::SiluBack], supports, compute };

const GELU_COEF_A: f32 = 0.044715;
const GELU_QUICK_COEF: f32 = -1.702;
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const SQRT_2_INV: f32 = std::f32::consts::FRAC_1_SQRT_2;

unsafe extern "C" {
    // the C library's erff: upstream's GELU_ERF calls it; Rust's std has no stable erf
    fn erff(x: f32) -> f32;
}

pub(crate) fn erf(x: f32) -> f32 {
    // SAFETY: a pure libm function of a float
    unsafe { erff(x) }
}

pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
}

pub(crate) fn gelu_quick(x: f32) -> f32 {
    x * (1.0 / (1.0 + (GELU_QUICK_COEF * x).exp()))
}

/// upstream's f16 table lookup: the input and the result rounded to f16
fn via_f16(f: fn(f32) -> f32, x: f32) -> f32 {
    let h = half::f16::from_f32(x).to_f32();
    half::f16::from_f32(f(h)).to_f32()
}

/// GELU as upstream's F32 path computes it (guards, then the f16 table)
fn gelu_f32_path(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        via_f16(gelu, x)
    }
}

pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * SQRT_2_INV))
}

/// `std::min(a, b)` as C++ defines it (b < a ? b : a)
fn cmin(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}

/// `std::clamp(v, lo, hi)`
fn cclamp(v: f32, lo: f32, hi: f32) -> f32 {
    if v < lo {
        lo
    } else if hi < v {
        hi
    } else {
        v
    }
}

fn supports(node: &Node) -> bool {
    let d = &node.dst;
    let Some(s0) = node.src[0].as_ref() else { return false };
    match node.op {
        Op::Unary => {
            let Some(op) = UnaryOp::from_raw(node.params[0]) else { return false };
            let _ = op;
            is_float(s0.ty) && (d.ty == s0.ty || d.ty == raw_type::F32) && d.ne == s0.ne
        }
        Op::Glu => {
            let Some(op) = GluOp::from_raw(node.params[0]) else { return false };
            let _ = op;
            if !is_float(s0.ty) || d.ty != s0.ty {
                return false;
            }
            let nc = d.ne[0];
            let shape_ok = match node.src[1].as_ref() {
                Some(s1) => s1.ty == s0.ty && s1.ne == s0.ne && s0.ne[0] == nc,
                // an odd row's last element belongs to neither half (upstream: nc = ne0 / 2)
                None => s0.ne[0] / 2 == nc,
            };
            shape_ok && s0.ne[1..] == d.ne[1..]
        }
        Op::SiluBack => {
            let Some(x) = node.src[1].as_ref() else { return false };
            is_float(s0.ty) && s0.ty == x.ty && d.ty == x.ty && s0.ne == d.ne && x.ne == d.ne
        }
        _ => false,
    }
}

fn compute(node: &Node, exec: &mut Exec) -> Result<(), OpError> {
    compute_with(node, exec, true)
}

/// `fast`: packed F32 rows take the slice form (the tests run both)
pub(crate) fn compute_with(node: &Node, exec: &mut Exec, fast: bool) -> Result<(), OpError> {
    match node.op {
        Op::Unary => unary(node, exec, fast),
        Op::Glu => glu(node, exec, fast),
        Op::SiluBack => {
            let dy = *node.src(0)?;
            let x = *node.src(1)?;
            let d = node.dst;
            let ne = d.ne;
            par_rows(exec, d.nrows(), ne[0], |r0, r1| {
                for r in r0..r1 {
                    let (i1, i2, i3) = unflatten(r, &ne);
                    for i0 in 0..ne[0] {
                        let xv = get(&x, i0, i1, i2, i3);
                        let s = 1.0 / (1.0 + (-xv).exp());
                        set(&d, i0, i1, i2, i3, get(&dy, i0, i1, i2, i3) * s * (1.0 + xv * (1.0 - s)));
                    }
                }
            });
            Ok(())
        }
        _ => Err(OpError::new(node, "not a unary-family op")),
    }
}

/// dst = f(src) row by row
fn map_rows<F: Fn(f32) -> f32 + Sync>(exec: &mut Exec, s: View, d: View, fast: bool, f: F) {
    let ne = d.ne;
    par_rows(exec, d.nrows(), ne[0], |r0, r1| {
        for r in r0..r1 {
            let (i1, i2, i3) = unflatten(r, &ne);
            if fast && let (Some(x), Some(y)) = (f32_row(&s, ne[0], i1, i2, i3), f32_row_mut(&d, ne[0], i1, i2, i3)) {
                for (y, x) in y.iter_mut().zip(x) {
                    *y = f(*x);
                }
                continue;
            }
            for i0 in 0..ne[0] {
                set(&d, i0, i1, i2, i3, f(get(&s, i0, i1, i2, i3)));
            }
        }
    });
}

fn unary(node: &Node, exec: &mut Exec, fast: bool) -> Result<(), OpError> {
    let s = *node.src(0)?;
    let d = node.dst;
    let op = UnaryOp::from_raw(node.params[0]).ok_or_else(|| OpError::new(node, format!("unknown unary op {}", node.params[0])))?;
    let bf16 = s.ty == raw_type::BF16;
    let f32_in = s.ty == raw_type::F32;
    use UnaryOp::*;
    match op {
        Abs => map_rows(exec, s, d, fast, f32::abs),
        Sgn => map_rows(exec, s, d, fast, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        Neg => map_rows(exec, s, d, fast, |x| -x),
        Step => map_rows(exec, s, d, fast, |x| if x > 0.0 { 1.0 } else { 0.0 }),
        Tanh => map_rows(exec, s, d, fast, f32::tanh),
        Elu => map_rows(exec, s, d, fast, |x| if x > 0.0 { x } else { x.exp_m1() }),
        Relu => map_rows(exec, s, d, fast, |x| if x > 0.0 { x } else { 0.0 }),
        Sigmoid => map_rows(exec, s, d, fast, |x| 1.0 / (1.0 + (-x).exp())),
        Gelu if bf16 => map_rows(exec, s, d, fast, gelu),
        Gelu if f32_in => map_rows(exec, s, d, fast, gelu_f32_path),
        Gelu => map_rows(exec, s, d, fast, |x| via_f16(gelu, x)),
        GeluQuick if bf16 => map_rows(exec, s, d, fast, gelu_quick),
        GeluQuick => map_rows(exec, s, d, fast, |x| via_f16(gelu_quick, x)),
        Silu if f32_in && d.ty == raw_type::F32 => silu_f32_rows(exec, s, None, d, fast),
        Silu => map_rows(exec, s, d, fast, silu),
        Hardswish => map_rows(exec, s, d, fast, |x| x * 1f32.min(0f32.max((x + 3.0) / 6.0))),
        Hardsigmoid => map_rows(exec, s, d, fast, |x| 1f32.min(0f32.max((x + 3.0) / 6.0))),
        Exp => map_rows(exec, s, d, fast, f32::exp),
        Expm1 => map_rows(exec, s, d, fast, |x| x.exp() - 1.0),
        Softplus => map_rows(exec, s, d, fast, |x| if x > 20.0 { x } else { (1.0 + x.exp()).ln() }),
        GeluErf => map_rows(exec, s, d, fast, gelu_erf),
        Xielu => {
            let (an, ap, beta, eps) = (node.param_f32(1), node.param_f32(2), node.param_f32(3), node.param_f32(4));
            map_rows(exec, s, d, fast, move |x| if x > 0.0 { ap * x * x + beta * x } else { (x.min(eps).exp_m1() - x) * an + beta * x })
        }
        Floor => map_rows(exec, s, d, fast, f32::floor),
        Ceil => map_rows(exec, s, d, fast, f32::ceil),
        Round => map_rows(exec, s, d, fast, f32::round),
        Trunc => map_rows(exec, s, d, fast, f32::trunc),
    }
    Ok(())
}

/// dst = f(a, b) row by row, a and b the two halves of src0 (or src0 and src1)
/// the value and gate operands of a GLU node: its two sources, or the halves of its one source
/// (the second half is the gate unless the node is swapped)
fn glu_operands(node: &Node) -> Result<(View, View), OpError> {
    let s0 = *node.src(0)?;
    let nc = node.dst.ne[0];
    let swapped = node.params[1] != 0;
    Ok(match node.src[1] {
        Some(s1) => (s0, s1),
        None => {
            let mut a = s0;
            let mut b = s0;
            let half = |v: &mut View| v.data = v.data.wrapping_add(nc as usize * v.nb[0]);
            if swapped {
                half(&mut a)
            } else {
                half(&mut b)
            }
            (a, b)
        }
    })
}

/// SILU (`g = None`) and SWIGLU of F32 rows, in upstream's bits (its AVX-512 build, `expf.rs`;
/// its AVX2 build at the AVX2 level): the values of a row's whole blocks of 16 (8) through its
/// vector exp, the rest through libm's. The
/// element form (any layout) takes each value's place in its row the same way, so both forms
/// give the same bits.
fn silu_f32_rows(exec: &mut Exec, x: View, g: Option<View>, d: View, fast: bool) {
    let ne = d.ne;
    let nc = ne[0];
    let vf = exec.kernels().vec;
    let bl = vf.silu_block() as i64;
    let whole = nc / bl * bl;
    par_rows(exec, d.nrows(), nc, |r0, r1| {
        for r in r0..r1 {
            let (i1, i2, i3) = unflatten(r, &ne);
            if fast && let (Some(xs), Some(y)) = (f32_row(&x, nc, i1, i2, i3), f32_row_mut(&d, nc, i1, i2, i3)) {
                match g.map(|g| f32_row(&g, nc, i1, i2, i3)) {
                    None => {
                        vf.silu_row(y, xs, None);
                        continue;
                    }
                    Some(Some(gs)) => {
                        vf.silu_row(y, xs, Some(gs));
                        continue;
                    }
                    Some(None) => {}
                }
            }
            for i0 in 0..nc {
                let v = get(&x, i0, i1, i2, i3);
                let s = if i0 < whole { vf.silu_lane(v) } else { silu(v) };
                set(&d, i0, i1, i2, i3, g.map_or(s, |g| s * get(&g, i0, i1, i2, i3)));
            }
        }
    });
}

fn glu_rows<F: Fn(f32, f32) -> f32 + Sync>(node: &Node, exec: &mut Exec, fast: bool, f: F) -> Result<(), OpError> {
    let (a, b) = glu_operands(node)?;
    let d = node.dst;
    let nc = d.ne[0];
    let ne = d.ne;
    par_rows(exec, d.nrows(), nc, |r0, r1| {
        for r in r0..r1 {
            let (i1, i2, i3) = unflatten(r, &ne);
            if fast && let (Some(x), Some(g), Some(y)) = (f32_row(&a, nc, i1, i2, i3), f32_row(&b, nc, i1, i2, i3), f32_row_mut(&d, nc, i1, i2, i3)) {
                for ((y, x), g) in y.iter_mut().zip(x).zip(g) {
                    *y = f(*x, *g);
                }
                continue;
            }
            for i0 in 0..nc {
                set(&d, i0, i1, i2, i3, f(get(&a, i0, i1, i2, i3), get(&b, i0, i1, i2, i3)));
            }
        }
    });
    Ok(())
}

fn glu(node: &Node, exec: &mut Exec, fast: bool) -> Result<(), OpError> {
    let s0 = node.src(0)?;
    let op = GluOp::from_raw(node.params[0]).ok_or_else(|| OpError::new(node, format!("unknown glu op {}", node.params[0])))?;
    let bf16 = s0.ty == raw_type::BF16;
    let f32_in = s0.ty == raw_type::F32;
    use GluOp::*;
    match op {
        Reglu => glu_rows(node, exec, fast, |x, g| if x > 0.0 { x * g } else { 0.0 }),
        Geglu if bf16 => glu_rows(node, exec, fast, |x, g| gelu(x) * g),
        Geglu if f32_in => glu_rows(node, exec, fast, |x, g| {
            if x <= -10.0 {
                0.0
            } else if x >= 10.0 {
                x * g
            } else {
                via_f16(gelu, x) * g
            }
        }),
        Geglu => glu_rows(node, exec, fast, |x, g| via_f16(gelu, x) * g),
        Swiglu if f32_in && node.dst.ty == raw_type::F32 => {
            let (a, b) = glu_operands(node)?;
            silu_f32_rows(exec, a, Some(b), node.dst, fast);
            Ok(())
        }
        Swiglu => glu_rows(node, exec, fast, |x, g| silu(x) * g),
        SwigluOai => {
            let (alpha, limit) = (node.param_f32(2), node.param_f32(3));
            glu_rows(node, exec, fast, move |x, g| {
                let x = cmin(x, limit);
                let y = cclamp(g, -limit, limit);
                x / (1.0 + (alpha * (-x)).exp()) * (y + 1.0)
            })
        }
        GegluErf => glu_rows(node, exec, fast, |x, g| gelu_erf(x) * g),
        GegluQuick if bf16 => glu_rows(node, exec, fast, |x, g| gelu_quick(x) * g),
        GegluQuick => glu_rows(node, exec, fast, |x, g| via_f16(gelu_quick, x) * g),
        SwigluClamp => {
            let limit = node.param_f32(3);
            glu_rows(node, exec, fast, move |x, g| {
                let gate = cmin(x, limit);
                let up = cclamp(g, -limit, limit);
                gate / (1.0 + (-gate).exp()) * up
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::kit::testkit::*;
    use super::*;
    use crate::block::AlignedBytes;
    use crate::pool::ThreadPool;
    use crate::rng::XorShift;

    /// naive references, in f64 where the op allows it
    fn ref_unary(op: UnaryOp, x: f32) -> f64 {
        let v = x as f64;
        use UnaryOp::*;
        match op {
            Abs => v.abs(),
            Sgn => v.signum() * (v != 0.0) as i32 as f64,
            Neg => -v,
            Step => (v > 0.0) as i32 as f64,
            Tanh => v.tanh(),
            Elu => {
                if v > 0.0 {
                    v
                } else {
                    v.exp_m1()
                }
            }
            Relu => v.max(0.0),
            Sigmoid => 1.0 / (1.0 + (-v).exp()),
            Gelu => 0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * v * (1.0 + 0.044715 * v * v)).tanh()),
            GeluQuick => v / (1.0 + (-1.702 * v).exp()),
            Silu => v / (1.0 + (-v).exp()),
            Hardswish => v * ((v + 3.0) / 6.0).clamp(0.0, 1.0),
            Hardsigmoid => ((v + 3.0) / 6.0).clamp(0.0, 1.0),
            Exp => v.exp(),
            Expm1 => v.exp_m1(),
            Softplus => (1.0 + v.exp()).ln(),
            GeluErf => 0.5 * v * (1.0 + erf((v * std::f64::consts::FRAC_1_SQRT_2) as f32) as f64),
            Xielu => unreachable!(),
            Floor => v.floor(),
            Ceil => v.ceil(),
            Round => v.round(),
            Trunc => v.trunc(),
        }
    }

    fn run_with(node: &Node, fast: bool) {
        let mut pool = ThreadPool::new(3);
        let mut scratch = AlignedBytes::default();
        let mut exec = Exec::new(&mut pool, &mut scratch);
        compute_with(node, &mut exec, fast).unwrap();
    }

    #[test]
    fn unary_matches_reference_every_op_type_layout() {
        let mut rng = XorShift::new(11);
        for op in UnaryOp::ALL {
            if op == UnaryOp::Xielu {
                continue;
            }
            for (ty, tol) in [(raw_type::F32, 2e-3f32), (raw_type::F16, 4e-3), (raw_type::BF16, 2e-2)] {
                for layout in LAYOUTS {
                    let ne = [rng.i32_in(1, 40) as i64, rng.i32_in(1, 5) as i64, rng.i32_in(1, 3) as i64, 2];
                    let src = Tensor::random(ty, ne, layout, &mut rng, -4.0, 4.0);
                    let dst = Tensor::new(ty, ne, layout);
                    let node = node(Op::Unary, &dst, &[Some(&src)], &[op as i32]);
                    assert!(supports(&node));
                    run_with(&node, false);
                    let want: Vec<f32> = src.to_f32().iter().map(|&x| ref_unary(op, x) as f32).collect();
                    // the gelus go through f16 on f32/f16: compare loosely
                    let t = if matches!(op, UnaryOp::Gelu | UnaryOp::GeluQuick) { tol.max(4e-3) } else { tol };
                    assert_close(&format!("{op:?} {ty} {layout:?}"), &dst.to_f32(), &want, t);
                    // the slice form gives the same bits
                    let fast = Tensor::new(ty, ne, layout);
                    let node = super::kit::testkit::node(Op::Unary, &fast, &[Some(&src)], &[op as i32]);
                    run_with(&node, true);
                    assert_eq!(fast.to_f32(), dst.to_f32(), "{op:?} {ty} {layout:?}: fast vs element form");
                }
            }
        }
    }

    #[test]
    fn gelu_takes_upstreams_f16_table_path_on_f32() {
        // 0.3 is not an f16: upstream rounds it to f16 before the table lookup
        let src = Tensor::from_f32(raw_type::F32, [3, 1, 1, 1], Layout::Contig, &[0.3, -11.0, 12.5]);
        let dst = Tensor::new(raw_type::F32, [3, 1, 1, 1], Layout::Contig);
        run(&node(Op::Unary, &dst, &[Some(&src)], &[UnaryOp::Gelu as i32]), 1).unwrap();
        let h = half::f16::from_f32(0.3).to_f32();
        assert_eq!(dst.to_f32(), vec![half::f16::from_f32(gelu(h)).to_f32(), 0.0, 12.5]);
    }

    #[test]
    fn xielu_uses_its_parameters() {
        let src = Tensor::from_f32(raw_type::F32, [2, 1, 1, 1], Layout::Contig, &[2.0, -1.0]);
        let dst = Tensor::new(raw_type::F32, [2, 1, 1, 1], Layout::Contig);
        let (an, ap, beta, eps) = (0.8f32, 0.5f32, 0.25f32, -1e-6f32);
        run(&node(Op::Unary, &dst, &[Some(&src)], &[UnaryOp::Xielu as i32, f(an), f(ap), f(beta), f(eps)]), 1).unwrap();
        let want_pos = ap * 4.0 + beta * 2.0;
        let want_neg = ((-1f32).exp_m1() + 1.0) * an - beta;
        assert_close("xielu", &dst.to_f32(), &[want_pos, want_neg], 1e-6);
    }

    fn ref_glu(op: GluOp, x: f32, g: f32, alpha: f32, limit: f32) -> f64 {
        let (v, w) = (x as f64, g as f64);
        use GluOp::*;
        match op {
            Reglu => v.max(0.0) * w,
            Geglu => ref_unary(UnaryOp::Gelu, x) * w,
            Swiglu => v / (1.0 + (-v).exp()) * w,
            SwigluOai => {
                let v = v.min(limit as f64);
                let w = w.clamp(-limit as f64, limit as f64);
                v / (1.0 + (-(alpha as f64) * v).exp()) * (w + 1.0)
            }
            GegluErf => ref_unary(UnaryOp::GeluErf, x) * w,
            GegluQuick => ref_unary(UnaryOp::GeluQuick, x) * w,
            SwigluClamp => {
                let v = v.min(limit as f64);
                let w = w.clamp(-limit as f64, limit as f64);
                v / (1.0 + (-v).exp()) * w
            }
        }
    }

    #[test]
    fn glu_split_fused_swapped_match_reference() {
        let mut rng = XorShift::new(12);
        let (alpha, limit) = (1.702f32, 2.5f32);
        for op in GluOp::ALL {
            for (ty, tol) in [(raw_type::F32, 5e-3f32), (raw_type::F16, 8e-3), (raw_type::BF16, 3e-2)] {
                for layout in LAYOUTS {
                    for fused in [false, true] {
                        for swapped in [0, 1] {
                            let nc = rng.i32_in(1, 33) as i64;
                            let odd = (!fused && rng.i32_in(0, 1) == 1) as i64;
                            let rows = [rng.i32_in(1, 4) as i64, rng.i32_in(1, 3) as i64, 2];
                            let params = [op as i32, swapped, f(alpha), f(limit)];
                            let dst = Tensor::new(ty, [nc, rows[0], rows[1], rows[2]], layout);
                            let (a, b, node_srcs): (Vec<f32>, Vec<f32>, Vec<Tensor>);
                            if fused {
                                let s0 = Tensor::random(ty, [nc, rows[0], rows[1], rows[2]], layout, &mut rng, -3.0, 3.0);
                                let s1 = Tensor::random(ty, [nc, rows[0], rows[1], rows[2]], layout, &mut rng, -3.0, 3.0);
                                a = s0.to_f32();
                                b = s1.to_f32();
                                node_srcs = vec![s0, s1];
                            } else {
                                let s0 = Tensor::random(ty, [2 * nc + odd, rows[0], rows[1], rows[2]], layout, &mut rng, -3.0, 3.0);
                                let all = s0.to_f32();
                                let (mut lo, mut hi) = (vec![], vec![]);
                                for row in all.chunks((2 * nc + odd) as usize) {
                                    lo.extend_from_slice(&row[..nc as usize]);
                                    hi.extend_from_slice(&row[nc as usize..2 * nc as usize]);
                                }
                                (a, b) = if swapped != 0 { (hi, lo) } else { (lo, hi) };
                                node_srcs = vec![s0];
                            }
                            let srcs: Vec<Option<&Tensor>> = node_srcs.iter().map(Some).collect();
                            let n = node(Op::Glu, &dst, &srcs, &params);
                            assert!(supports(&n), "{op:?}");
                            run_with(&n, false);
                            let want: Vec<f32> = a.iter().zip(&b).map(|(&x, &g)| ref_glu(op, x, g, alpha, limit) as f32).collect();
                            let what = format!("{op:?} {ty} {layout:?} fused {fused} swapped {swapped}");
                            assert_close(&what, &dst.to_f32(), &want, tol);
                            let fast = Tensor::new(ty, dst.view.ne, layout);
                            run_with(&node(Op::Glu, &fast, &srcs, &params), true);
                            assert_eq!(fast.to_f32(), dst.to_f32(), "{what}: fast vs element form");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn silu_back_matches_derivative() {
        let mut rng = XorShift::new(13);
        for layout in LAYOUTS {
            let ne = [17, 3, 2, 1];
            let dy = Tensor::random(raw_type::F32, ne, layout, &mut rng, -2.0, 2.0);
            let x = Tensor::random(raw_type::F32, ne, layout, &mut rng, -4.0, 4.0);
            let dst = Tensor::new(raw_type::F32, ne, layout);
            run(&node(Op::SiluBack, &dst, &[Some(&dy), Some(&x)], &[]), 2).unwrap();
            // central difference of silu
            let want: Vec<f32> = x
                .to_f32()
                .iter()
                .zip(dy.to_f32())
                .map(|(&v, g)| {
                    let v = v as f64;
                    let h = 1e-5;
                    let s = |t: f64| t / (1.0 + (-t).exp());
                    ((s(v + h) - s(v - h)) / (2.0 * h) * g as f64) as f32
                })
                .collect();
            assert_close("silu_back", &dst.to_f32(), &want, 1e-4);
        }
    }

    #[test]
    fn unsupported_types_and_shapes_are_refused() {
        let src = Tensor::new(raw_type::F32, [4, 1, 1, 1], Layout::Contig);
        let dst16 = Tensor::new(raw_type::F16, [4, 1, 1, 1], Layout::Contig);
        // f32 -> f16 is not an upstream combination
        assert!(!supports(&node(Op::Unary, &dst16, &[Some(&src)], &[UnaryOp::Silu as i32])));
        let dst = Tensor::new(raw_type::F32, [3, 1, 1, 1], Layout::Contig);
        assert!(!supports(&node(Op::Glu, &dst, &[Some(&src)], &[GluOp::Swiglu as i32])));
        assert!(!supports(&node(Op::Unary, &dst, &[Some(&src)], &[99])));
        assert!(run(&node(Op::Unary, &dst, &[Some(&src)], &[99]), 1).is_err());
    }
}
