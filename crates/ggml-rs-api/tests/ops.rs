//! Every op of `ggml_rs_api::ops` on the CPU backend against a scalar Rust reference, the
//! checks that turn ggml's asserts into errors, and the memory plan report. Each test skips,
//! with a SKIPPED line naming it, when the libraries cannot be loaded (and fails then with
//! GGML_RS_API_REQUIRED=1).

use ggml_rs_api::{AllocatedGraph, Backend, Context, Error, Glu, GraphAllocator, ReportFormat, Rope, RopeMode, Scheduler, Tensor, Type, Unary};

macro_rules! needs_libraries {
    () => {
        if ggml_rs_api::doctest_skip() {
            return;
        }
    };
}

/// `n` numbers in [-scale, scale), the same every run.
fn numbers(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            ((s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Allocates the graph of `out` on the CPU, lets `set` fill the inputs, computes, reads `out`.
fn run(ctx: &Context, out: Tensor<'_>, set: impl FnOnce(&AllocatedGraph<'_>)) -> Vec<f32> {
    let cpu = Backend::cpu().unwrap();
    let graph = ctx.graph(&[out.output()]).unwrap();
    let buft = cpu.default_buffer_type();
    let mut galloc = GraphAllocator::new(&buft).unwrap();
    let allocated = galloc.alloc(&graph).unwrap();
    set(&allocated);
    allocated.compute(&cpu).unwrap();
    allocated.to_vec::<f32>(out).unwrap()
}

fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_infinite() && g == w);
        assert!(ok, "{what}[{i}]: {g} vs {w}");
    }
}

/// erf by Abramowitz and Stegun 7.1.26 (error below 1.5e-7).
fn erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * x.abs() as f64);
    let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let y = 1.0 - p * (-(x as f64) * x as f64).exp();
    (if x < 0.0 { -y } else { y }) as f32
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + ((2.0 / std::f32::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

fn reference(op: Unary, x: f32) -> f32 {
    match op {
        Unary::Abs => x.abs(),
        Unary::Sgn => (x > 0.0) as i32 as f32 - (x < 0.0) as i32 as f32,
        Unary::Neg => -x,
        Unary::Step => (x > 0.0) as i32 as f32,
        Unary::Tanh => x.tanh(),
        Unary::Elu => {
            if x > 0.0 {
                x
            } else {
                x.exp_m1()
            }
        }
        Unary::Relu => x.max(0.0),
        Unary::Sigmoid => sigmoid(x),
        Unary::Gelu => gelu(x),
        Unary::GeluQuick => x * sigmoid(1.702 * x),
        Unary::GeluErf => gelu_erf(x),
        Unary::Silu => x * sigmoid(x),
        Unary::Hardswish => x * ((x + 3.0) / 6.0).clamp(0.0, 1.0),
        Unary::Hardsigmoid => ((x + 3.0) / 6.0).clamp(0.0, 1.0),
        Unary::Exp => x.exp(),
        Unary::Expm1 => x.exp_m1(),
        Unary::Softplus => x.exp().ln_1p(),
        Unary::Floor => x.floor(),
        Unary::Ceil => x.ceil(),
        Unary::Round => x.round(),
        Unary::Trunc => x.trunc(),
        Unary::Sqrt => x.sqrt(),
        Unary::Log => x.ln(),
        Unary::Sin => x.sin(),
        Unary::Cos => x.cos(),
        other => panic!("no reference for {other:?}"),
    }
}

#[test]
fn unary_ops_against_scalar_reference() {
    needs_libraries!();
    for op in Unary::ALL {
        let mut xs = numbers(24, 1, 3.0);
        if matches!(op, Unary::Sqrt | Unary::Log) {
            xs.iter_mut().for_each(|x| *x = x.abs() + 0.1);
        }
        let ctx = Context::new().unwrap();
        let x = ctx.new_f32(&[8, 3]).unwrap().named("x").input();
        let got = run(&ctx, ctx.unary(op, x).unwrap(), |a| a.set(x, &xs).unwrap());
        // ggml's CPU computes the gelu family from an f16 table
        let tol = if matches!(op, Unary::Gelu | Unary::GeluQuick) { 3e-3 } else { 1e-5 };
        let want: Vec<f32> = xs.iter().map(|&v| reference(op, v)).collect();
        close(&got, &want, tol, &format!("{op:?}"));
    }
}

#[test]
fn leaky_relu_clamp_and_shorthands() {
    needs_libraries!();
    let xs = numbers(12, 2, 2.0);
    type Reference = fn(f32) -> f32;
    let cases: [(&str, Reference); 4] =
        [("leaky_relu", |v| if v > 0.0 { v } else { 0.1 * v }), ("clamp", |v| v.clamp(-0.5, 0.25)), ("relu", |v| v.max(0.0)), ("silu", |v| v * sigmoid(v))];
    for (name, f) in cases {
        let ctx = Context::new().unwrap();
        let x = ctx.new_f32(&[12]).unwrap().input();
        let y = match name {
            "leaky_relu" => ctx.leaky_relu(x, 0.1),
            "clamp" => ctx.clamp(x, -0.5, 0.25),
            "relu" => ctx.relu(x),
            _ => ctx.silu(x),
        }
        .unwrap();
        let got = run(&ctx, y, |a| a.set(x, &xs).unwrap());
        close(&got, &xs.iter().map(|&v| f(v)).collect::<Vec<_>>(), 1e-5, name);
    }
}

fn glu_act(op: Glu, x: f32) -> f32 {
    match op {
        Glu::Reglu => x.max(0.0),
        Glu::Geglu => gelu(x),
        Glu::Swiglu => x * sigmoid(x),
        Glu::GegluErf => gelu_erf(x),
        Glu::GegluQuick => x * sigmoid(1.702 * x),
        other => panic!("no reference for {other:?}"),
    }
}

#[test]
fn gated_units_fused_swapped_and_split() {
    needs_libraries!();
    let (rows, half) = (3usize, 4usize);
    for op in [Glu::Reglu, Glu::Geglu, Glu::Swiglu, Glu::GegluErf, Glu::GegluQuick] {
        let tol = if matches!(op, Glu::Geglu | Glu::GegluQuick) { 3e-3 } else { 1e-5 };
        let xs = numbers(rows * 2 * half, 3, 2.0);
        for swapped in [false, true] {
            let ctx = Context::new().unwrap();
            let x = ctx.new_f32(&[2 * half as i64, rows as i64]).unwrap().input();
            let got = run(&ctx, ctx.glu(op, x, swapped).unwrap(), |a| a.set(x, &xs).unwrap());
            let want: Vec<f32> = (0..rows * half)
                .map(|i| {
                    let (r, c) = (i / half, i % half);
                    let (first, second) = (xs[r * 2 * half + c], xs[r * 2 * half + half + c]);
                    if swapped { glu_act(op, second) * first } else { glu_act(op, first) * second }
                })
                .collect();
            close(&got, &want, tol, &format!("{op:?} swapped={swapped}"));
        }
        let (av, bv) = (numbers(12, 4, 2.0), numbers(12, 5, 2.0));
        let ctx = Context::new().unwrap();
        let (a, b) = (ctx.new_f32(&[4, 3]).unwrap().input(), ctx.new_f32(&[4, 3]).unwrap().input());
        let got = run(&ctx, ctx.glu_split(op, a, b).unwrap(), |g| {
            g.set(a, &av).unwrap();
            g.set(b, &bv).unwrap();
        });
        close(&got, &av.iter().zip(&bv).map(|(&x, &y)| glu_act(op, x) * y).collect::<Vec<_>>(), tol, &format!("{op:?} split"));
    }
}

fn softmax_rows(v: &[f32], n: usize) -> Vec<f32> {
    v.chunks(n)
        .flat_map(|row| {
            let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = row.iter().map(|x| (x - m).exp()).collect();
            let s: f32 = e.iter().sum();
            e.into_iter().map(move |x| x / s)
        })
        .collect()
}

#[test]
fn soft_max_with_mask_scale_and_alibi() {
    needs_libraries!();
    // 2 heads of 3 rows of 5; the mask has 4 rows (more than needed) and hides column 4 of row 0
    let (n, rows, heads) = (5usize, 3usize, 2usize);
    let xs = numbers(n * rows * heads, 6, 2.0);
    let mut mask = vec![0.0f32; n * 4];
    mask[4] = f32::NEG_INFINITY;
    mask[n + 1] = -1.5;
    for max_bias in [0.0f32, 8.0] {
        let ctx = Context::new().unwrap();
        let x = ctx.new_f32(&[n as i64, rows as i64, heads as i64]).unwrap().input();
        let m = ctx.new_f32(&[n as i64, 4]).unwrap().input();
        let got = run(&ctx, ctx.soft_max_ext(x, Some(m), 0.5, max_bias).unwrap(), |a| {
            a.set(x, &xs).unwrap();
            a.set(m, &mask).unwrap();
        });
        // ALiBi with 2 heads: n_head_log2 = 2, slope of head h = 2^(-max_bias / 2)^(h + 1)
        let slope = |h: usize| if max_bias > 0.0 { 2f32.powf(-max_bias / 2.0).powi(h as i32 + 1) } else { 1.0 };
        let pre: Vec<f32> = (0..xs.len()).map(|i| xs[i] * 0.5 + slope(i / (n * rows)) * mask[i % (n * rows)]).collect();
        close(&got, &softmax_rows(&pre, n), 1e-5, &format!("soft_max_ext max_bias={max_bias}"));
    }
    let ctx = Context::new().unwrap();
    let x = ctx.new_f32(&[n as i64, rows as i64]).unwrap().input();
    let got = run(&ctx, ctx.soft_max(x).unwrap(), |a| a.set(x, &xs[..n * rows]).unwrap());
    close(&got, &softmax_rows(&xs[..n * rows], n), 1e-5, "soft_max");
}

#[test]
fn norm_and_rms_norm() {
    needs_libraries!();
    let n = 16;
    let xs: Vec<f32> = numbers(n * 3, 7, 2.0).iter().map(|v| v + 1.0).collect();
    for rms in [false, true] {
        let ctx = Context::new().unwrap();
        let x = ctx.new_f32(&[n as i64, 3]).unwrap().input();
        let y = if rms { ctx.rms_norm(x, 1e-6) } else { ctx.norm(x, 1e-5) }.unwrap();
        let got = run(&ctx, y, |a| a.set(x, &xs).unwrap());
        let want: Vec<f32> = xs
            .chunks(n)
            .flat_map(|r| {
                let mean = r.iter().sum::<f32>() / n as f32;
                let (center, denom) = if rms {
                    (0.0, (r.iter().map(|v| v * v).sum::<f32>() / n as f32 + 1e-6).sqrt())
                } else {
                    (mean, (r.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n as f32 + 1e-5).sqrt())
                };
                r.iter().map(move |v| (v - center) / denom).collect::<Vec<_>>()
            })
            .collect();
        close(&got, &want, 1e-4, if rms { "rms_norm" } else { "norm" });
    }
}

#[test]
fn get_rows_and_set_rows() {
    needs_libraries!();
    let k = 4;
    let table = numbers(k * 6, 8, 1.0);
    let ctx = Context::new().unwrap();
    let e = ctx.new_f32(&[k as i64, 6]).unwrap().input();
    let ids = ctx.new_tensor(Type::I32, &[3]).unwrap().input();
    let got = run(&ctx, ctx.get_rows(e, ids).unwrap(), |a| {
        a.set(e, &table).unwrap();
        a.set(ids, &[5i32, 0, 5]).unwrap();
    });
    let want: Vec<f32> = [5, 0, 5].iter().flat_map(|&r| table[r * k..(r + 1) * k].to_vec()).collect();
    close(&got, &want, 0.0, "get_rows");

    let src = numbers(k * 2, 9, 1.0);
    let ctx = Context::new().unwrap();
    let dst = ctx.new_f32(&[k as i64, 6]).unwrap().input();
    let s = ctx.new_f32(&[k as i64, 2]).unwrap().input();
    let ids = ctx.new_tensor(Type::I32, &[2]).unwrap().input();
    let got = run(&ctx, ctx.set_rows(dst, s, ids).unwrap(), |a| {
        a.set(dst, &table).unwrap();
        a.set(s, &src).unwrap();
        a.set(ids, &[4i32, 1]).unwrap();
    });
    let mut want = table.clone();
    want[4 * k..5 * k].copy_from_slice(&src[..k]);
    want[k..2 * k].copy_from_slice(&src[k..]);
    close(&got, &want, 0.0, "set_rows");
}

#[test]
fn rope_normal_and_neox() {
    needs_libraries!();
    let (head, heads, tokens, n_dims) = (8usize, 2usize, 4usize, 6usize);
    let xs = numbers(head * heads * tokens, 10, 1.0);
    let pos = [0i32, 1, 5, 20];
    for mode in [RopeMode::Normal, RopeMode::Neox] {
        let ctx = Context::new().unwrap();
        let x = ctx.new_f32(&[head as i64, heads as i64, tokens as i64]).unwrap().input();
        let p = ctx.new_tensor(Type::I32, &[tokens as i64]).unwrap().input();
        let rope = Rope { mode, freq_base: 100.0, ..Rope::new(n_dims as i32) };
        let got = run(&ctx, ctx.rope(x, p, None, &rope).unwrap(), |a| {
            a.set(x, &xs).unwrap();
            a.set(p, &pos).unwrap();
        });
        let mut want = xs.clone();
        for (t, &p) in pos.iter().enumerate() {
            for h in 0..heads {
                let base = (t * heads + h) * head;
                for i in 0..n_dims / 2 {
                    let theta = p as f64 * 100f64.powf(-2.0 * i as f64 / n_dims as f64);
                    let (c, s) = (theta.cos() as f32, theta.sin() as f32);
                    let (i0, i1) = if mode == RopeMode::Neox { (i, i + n_dims / 2) } else { (2 * i, 2 * i + 1) };
                    let (x0, x1) = (xs[base + i0], xs[base + i1]);
                    want[base + i0] = x0 * c - x1 * s;
                    want[base + i1] = x0 * s + x1 * c;
                }
            }
        }
        close(&got, &want, 1e-5, &format!("rope {mode:?}"));
    }
}

#[test]
fn concat_permute_reshape_cpy() {
    needs_libraries!();
    let (av, bv) = (numbers(6, 11, 1.0), numbers(6, 12, 1.0));
    // [3, 2] and [3, 2] along dimension 1: b's rows after a's
    let ctx = Context::new().unwrap();
    let (a, b) = (ctx.new_f32(&[3, 2]).unwrap().input(), ctx.new_f32(&[3, 2]).unwrap().input());
    let got = run(&ctx, ctx.concat(a, b, 1).unwrap(), |g| {
        g.set(a, &av).unwrap();
        g.set(b, &bv).unwrap();
    });
    close(&got, &[av.clone(), bv.clone()].concat(), 0.0, "concat dim 1");
    // along dimension 0: each row of a then the row of b
    let ctx = Context::new().unwrap();
    let (a, b) = (ctx.new_f32(&[3, 2]).unwrap().input(), ctx.new_f32(&[3, 2]).unwrap().input());
    let got = run(&ctx, ctx.concat(a, b, 0).unwrap(), |g| {
        g.set(a, &av).unwrap();
        g.set(b, &bv).unwrap();
    });
    close(&got, &[&av[..3], &bv[..3], &av[3..], &bv[3..]].concat(), 0.0, "concat dim 0");
    // permute [3, 2] with axes [1, 0, 2, 3] is the transpose; reshape [6] -> [2, 3]; cpy to F16 and back
    let ctx = Context::new().unwrap();
    let a = ctx.new_f32(&[3, 2]).unwrap().input();
    let t = ctx.cont(ctx.permute(a, [1, 0, 2, 3]).unwrap()).unwrap();
    assert_eq!(t.shape(), [2, 3, 1, 1]);
    let r = ctx.reshape(t, &[6]).unwrap();
    let h = ctx.cpy(r, ctx.new_tensor(Type::F16, &[6]).unwrap()).unwrap();
    let back = ctx.cpy(h, ctx.new_f32(&[6]).unwrap()).unwrap();
    let got = run(&ctx, back, |g| g.set(a, &av).unwrap());
    let want: Vec<f32> = (0..6).map(|i| av[(i % 2) * 3 + i / 2]).collect();
    close(&got, &want, 1e-3, "permute + reshape + cpy");
}

#[test]
fn wrong_arguments_are_errors() {
    needs_libraries!();
    let ctx = Context::new().unwrap();
    let a = ctx.new_f32(&[5, 3]).unwrap().named("a");
    let i64s = ctx.new_tensor(Type::I64, &[2]).unwrap();
    let i32s = ctx.new_tensor(Type::I32, &[2]).unwrap();
    let checks: Vec<(&str, ggml_rs_api::Result<Tensor<'_>>, &str)> = vec![
        ("glu odd", ctx.swiglu(a), "odd length"),
        ("glu_split shapes", ctx.glu_split(Glu::Swiglu, a, ctx.new_f32(&[4, 3]).unwrap()), "differ"),
        ("soft_max mask", ctx.soft_max_ext(a, Some(ctx.new_f32(&[5, 2]).unwrap()), 1.0, 0.0), "does not fit"),
        ("soft_max mask type", ctx.soft_max_ext(a, Some(i32s), 1.0, 0.0), "mask"),
        ("alibi without mask", ctx.soft_max_ext(a, None, 1.0, 2.0), "needs a mask"),
        ("unary transposed", ctx.unary(Unary::Relu, ctx.transpose(a).unwrap()), "contiguous rows"),
        ("get_rows type", ctx.get_rows(a, i64s), "index tensor"),
        ("set_rows shapes", ctx.set_rows(a, ctx.new_f32(&[4, 2]).unwrap(), i32s), "do not fit"),
        ("rope positions", ctx.rope(ctx.new_f32(&[8, 2, 4]).unwrap(), i32s, None, &Rope::new(8)), "one per token"),
        ("rope n_dims", ctx.rope(ctx.new_f32(&[8, 2, 2]).unwrap(), i32s, None, &Rope::new(10)), "n_dims"),
        ("concat", ctx.concat(a, ctx.new_f32(&[4, 4]).unwrap(), 0), "differ outside"),
        ("permute", ctx.permute(a, [0, 0, 1, 2]), "not a permutation"),
        ("reshape", ctx.reshape(a, &[4, 4]), "elements"),
        ("clamp", ctx.clamp(a, 1.0, 0.0), "above max"),
    ];
    for (what, result, text) in checks {
        match result {
            Err(Error::Invalid(m)) => assert!(m.contains(text), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn memory_plan_report_of_allocator_and_scheduler() {
    needs_libraries!();
    if ggml_rs_api::load().unwrap().is_none() {
        ggml_rs_api::skipped("upstream's libraries (the report is ggml-rs's)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ggml-rs-api-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cpu = Backend::cpu().unwrap();
    let ctx = Context::new().unwrap();
    let x = ctx.new_f32(&[16]).unwrap().named("x").input();
    let y = ctx.silu(ctx.scale(x, 2.0).unwrap()).unwrap().named("y").output();
    let graph = ctx.graph(&[y]).unwrap();
    let buft = cpu.default_buffer_type();
    let mut galloc = GraphAllocator::new(&buft).unwrap();
    let allocated = galloc.alloc(&graph).unwrap();
    allocated.write_report(&dir.join("galloc.json"), ReportFormat::Json).unwrap();
    allocated.write_report(&dir.join("galloc.svg"), ReportFormat::Svg).unwrap();
    let json = std::fs::read_to_string(dir.join("galloc.json")).unwrap();
    assert!(json.contains("\"tensors\"") && json.contains("\"y\""), "{json}");
    assert!(std::fs::read_to_string(dir.join("galloc.svg")).unwrap().contains("<svg"));
    // a folder that is not there: an error with the library's reason, not a crash
    match allocated.write_report(&dir.join("no/such/dir/r.json"), ReportFormat::Json) {
        Err(Error::Library { call, .. }) => assert_eq!(call, "ggml_rs_gallocr_write_report"),
        other => panic!("{other:?}"),
    }
    let mut sched = Scheduler::new(&[&cpu]).unwrap();
    let allocation = sched.alloc(&graph).unwrap();
    allocation.write_report(&dir.join("sched.json"), ReportFormat::Json).unwrap();
    assert!(std::fs::read_to_string(dir.join("sched.json")).unwrap().contains("\"y\""));
    std::fs::remove_dir_all(&dir).unwrap();
}
