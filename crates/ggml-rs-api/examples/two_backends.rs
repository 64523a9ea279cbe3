//! A small graph on two backends through a scheduler, checked against plain Rust:
//!
//!   y = soft_max(W·x + b)      W: 4×8 (weights, in a CPU buffer), b: 4, x: 8×3 (an input)
//!
//! with the matrix product on the second backend (an rpc-server when one is there, see
//! tests/common/rpc.rs, else a second CPU backend) and the rest on the CPU; then the seed
//! scenario of the scheduler: reset + alloc + compute of the same graph, 12 times, with new
//! inputs each time, which must give each round's numbers (upstream's scheduler computes the
//! first round's again: "stale results after reset + re-alloc").
//!
//! GGML_RS_LIB_DIR=<stock build>/bin GGML_RS_LIBRARY=target/release/libggml_rs.so \
//!     cargo run -p ggml-rs-api --example two_backends

#[path = "../tests/common/rpc.rs"]
mod rpc;

use ggml_rs_api::{Backend, Context, Result, Scheduler};

const K: usize = 8; // row length
const M: usize = 4; // rows of W
const N: usize = 3; // columns of x

/// The same computation in plain Rust: y[j][i] = softmax_i(sum_k W[i][k] x[j][k] + b[i]).
fn reference(w: &[f32], b: &[f32], x: &[f32]) -> Vec<f32> {
    let mut y = vec![0.0f32; M * N];
    for j in 0..N {
        let row: Vec<f32> = (0..M).map(|i| (0..K).map(|k| w[i * K + k] * x[j * K + k]).sum::<f32>() + b[i]).collect();
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
        for i in 0..M {
            y[j * M + i] = (row[i] - max).exp() / sum;
        }
    }
    y
}

fn run() -> Result<bool> {
    let version = ggml_rs_api::load()?;
    println!("libraries: {}", version.as_deref().unwrap_or("upstream's ggml (no ggml-rs: its extensions are not there)"));
    let cpu = Backend::cpu_with_threads(2)?;
    let second = rpc::second()?;
    let other = &second.backend;
    println!("backends: {} and the CPU; {} is {}", other.name(), other.name(), second.what);
    let mut ok = true;

    // weights in a buffer of their own, as a model's are
    let weights = Context::new()?;
    let w = weights.new_f32(&[K as i64, M as i64])?.named("W");
    let b = weights.new_f32(&[M as i64])?.named("b");
    let cpu_buft = cpu.default_buffer_type();
    let wbuf = cpu_buft.alloc_ctx_tensors(&weights)?;
    let wv: Vec<f32> = (0..M * K).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
    let bv: Vec<f32> = (0..M).map(|i| i as f32 * 0.25 - 0.5).collect();
    wbuf.set(w, &wv)?;
    wbuf.set(b, &bv)?;

    let ctx = Context::new()?;
    let x = ctx.new_f32(&[K as i64, N as i64])?.named("x").input();
    let wx = ctx.mul_mat(w, x)?.named("Wx");
    let y = ctx.soft_max(ctx.add(wx, b)?.named("Wx+b"))?.named("y").output();
    let graph = ctx.graph(&[y])?;

    let mut sched = Scheduler::new(&[other, &cpu])?;
    for round in 1..=3 {
        let xv: Vec<f32> = (0..K * N).map(|i| ((i * 5 + round * 3) % 13) as f32 / 6.0 - 1.0).collect();
        sched.set_tensor_backend(wx, other)?;
        sched.set_tensor_backend(y, &cpu)?;
        let allocation = sched.alloc(&graph)?;
        allocation.set(x, &xv)?;
        allocation.compute()?;
        let got = allocation.to_vec::<f32>(y)?;
        let want = reference(&wv, &bv, &xv);
        let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
        println!(
            "round {round}: {} splits, Wx on {:?}, y on {:?}, y[0..4] = {:?}, max |ggml - Rust| = {err:.2e}",
            allocation.n_splits(),
            allocation.tensor_backend(wx).map(|i| sched_name(i, other)),
            allocation.tensor_backend(y).map(|i| sched_name(i, other)),
            &got[..M]
        );
        if err > 1e-5 {
            println!("MISMATCH: ggml {got:?}, Rust {want:?}");
            ok = false;
        }
        if round == 1 {
            match allocation.plan_json() {
                Ok(plan) => println!("split plan (JSON, {} bytes): {}...", plan.len(), &plan[..plan.len().min(160)]),
                Err(e) => println!("split plan: {e}"),
            }
        }
    }
    if let Ok(c) = sched.counters() {
        println!("scheduler counters: {} graphs split, {} allocations repeated unchanged", c.splits, c.repeats);
    }

    // the seed scenario: x2 -> n1 = 2·x2 on the second backend -> n2 = n1² on the CPU
    let x2 = ctx.new_f32(&[4])?.named("x2").input();
    let n1 = ctx.scale(x2, 2.0)?.named("n1");
    let n2 = ctx.sqr(n1)?.named("n2").output();
    let seed = ctx.graph(&[n2])?;
    let mut sched = Scheduler::new(&[other, &cpu])?;
    let mut stale = 0;
    for round in 1..=12 {
        sched.set_tensor_backend(n1, other)?;
        sched.set_tensor_backend(n2, &cpu)?;
        let allocation = sched.alloc(&seed)?;
        allocation.set(x2, &[round as f32; 4])?;
        allocation.compute()?;
        let got = allocation.to_vec::<f32>(n2)?[0];
        let want = (2.0 * round as f32).powi(2);
        if got != want {
            println!("reset + alloc round {round}: n2 = {got}, expected {want} (stale)");
            stale += 1;
        }
    } // each allocation resets the scheduler as it ends
    println!("reset + alloc + compute, 12 rounds: {}", if stale == 0 { "every round correct".to_string() } else { format!("{stale} rounds wrong") });
    Ok(ok && stale == 0)
}

fn sched_name(i: usize, other: &Backend) -> String {
    if i == 0 { other.name() } else { "CPU".into() }
}

fn main() {
    match run() {
        Ok(true) => println!("OK"),
        Ok(false) => {
            println!("FAILED");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
