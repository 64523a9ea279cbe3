//! Microbenchmark of the dot products at model-like sizes: one thread computes W·x (rows of
//! 4096), row by row, with our kernel (the active level, and AVX2 alone) and with upstream's
//! ggml-cpu `vec_dot` (dlopened from `GGML_RS_UPSTREAM_LIB_DIR`, as the tests do) on the same
//! bytes; plus our row-parallel mat-vec on the pool. Rounds interleave the contenders (rotating
//! their order); the table shows medians.
//!
//!     GGML_RS_UPSTREAM_LIB_DIR=.../build-stock/bin \
//!         cargo run --release --example dot_bench [-- ROUNDS [MiB [TYPE]]]
//!
//! The single-thread columns are measured in thread CPU time (the machine is shared: time spent
//! descheduled would count against whoever was running); the pool column in wall time.
//!
//! Two working sets: `L2` (64 rows, the weights stay in cache: kernel speed) and `mem` (about
//! 128 MiB of weights, beyond the last-level cache: what token generation sees).

#[path = "../tests/support/upstream_lib.rs"]
mod upstream_lib;

use std::hint::black_box;
use std::time::Instant;

use ggml_rs_cpu::GgmlType;
use ggml_rs_cpu::block::{AlignedBytes, BlockQ4_0, BlockQ4K, BlockQ6K, BlockQ8_0, as_blocks_mut};
use ggml_rs_cpu::matmul::{MatMul, Weights};
use ggml_rs_cpu::pool::ThreadPool;
use ggml_rs_cpu::quants::quantize_row;
use ggml_rs_cpu::rng::XorShift;
use ggml_rs_cpu::simd::{self, Level};

const K: usize = 4096;
const TYPES: [GgmlType; 7] = [GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K, GgmlType::Q6K];

/// random weights, valid blocks (quants random, scales small and finite)
fn weights(r: &mut XorShift, ty: GgmlType, rows: usize) -> AlignedBytes {
    let mut w = AlignedBytes::zeroed(rows * ty.row_size(K));
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
            let rs = ty.row_size(K);
            let vals: Vec<f32> = (0..K).map(|_| r.f32_in(-1.0, 1.0)).collect();
            for i in 0..rows {
                // one random row, rotated: distinct rows without generating every value
                let mut row = vals.clone();
                row.rotate_left(i % K);
                quantize_row(ty, &row, &mut w[i * rs..(i + 1) * rs]);
            }
        }
        _ => {
            r.fill_bytes(&mut w);
            let d = half::f16::from_f32(0.01);
            match ty {
                GgmlType::Q8_0 => as_blocks_mut::<BlockQ8_0>(&mut w, "q8_0").iter_mut().for_each(|b| b.d = d),
                GgmlType::Q4_0 => as_blocks_mut::<BlockQ4_0>(&mut w, "q4_0").iter_mut().for_each(|b| b.d = d),
                GgmlType::Q4K => as_blocks_mut::<BlockQ4K>(&mut w, "q4_K").iter_mut().for_each(|b| {
                    b.d = d;
                    b.dmin = d;
                }),
                GgmlType::Q6K => as_blocks_mut::<BlockQ6K>(&mut w, "q6_K").iter_mut().for_each(|b| b.d = d),
                _ => unreachable!(),
            }
        }
    }
    w
}

/// this thread's CPU time in seconds: descheduling by other processes does not count
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(21);
    let mem_mib: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    // optional: only the types whose names contain this
    let only = args.get(3).cloned().unwrap_or_default();
    let upstream = match upstream_lib::Upstream::load() {
        Ok(u) => Some(u),
        Err(why) => {
            eprintln!("upstream's vec_dot not measured: {why}");
            None
        }
    };
    let top = simd::active();
    let mut pool = ThreadPool::new(2);
    let mut r = XorShift::new(7);
    println!("k = {K}, one thread (CPU time) unless said; ours = {} kernels; medians of {rounds} interleaved rounds", top.name());
    println!();
    println!(
        "| type | set | weights MiB | ours GB/s | ours GFLOP/s | ours avx2 GB/s | upstream GB/s | upstream GFLOP/s | ours/upstream | ours 2 threads (pool) GB/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for ty in TYPES.into_iter().filter(|t| t.name().contains(only.as_str())) {
        let vt = ty.vec_dot_type().unwrap();
        let x: Vec<f32> = r.model_like(K);
        let mut a = AlignedBytes::zeroed(vt.row_size(K));
        quantize_row(vt, &x, &mut a);
        for (set, rows) in [("L2", 64usize), ("mem", (mem_mib << 20) / ty.row_size(K))] {
            let w = weights(&mut r, ty, rows);
            let rs = ty.row_size(K);
            // passes per sample: at least ~2 ms of work
            let reps = (((2usize << 20) * 8) / (rows * rs)).max(1);
            let ours = ggml_rs_cpu::kernels::at(top).row_dot(ty);
            let avx2 = (top >= Level::Avx2).then(|| ggml_rs_cpu::kernels::at(Level::Avx2).row_dot(ty));
            let mut mm = MatMul::new(ty);
            let mut dst = vec![0f32; rows];
            let mut out = vec![0f32; rows];
            let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
            for round in 0..rounds + 1 {
                for slot in 0..4 {
                    let which = (slot + round) % 4;
                    if (which == 1 && avx2.is_none()) || (which == 2 && upstream.is_none()) {
                        continue;
                    }
                    let start = Instant::now();
                    let cpu0 = thread_cpu_s();
                    for _ in 0..reps {
                        match which {
                            0 => (0..rows).for_each(|i| out[i] = ours.dot(&w[i * rs..(i + 1) * rs], &a)),
                            1 => {
                                let k = avx2.as_ref().expect("checked");
                                (0..rows).for_each(|i| out[i] = k.dot(&w[i * rs..(i + 1) * rs], &a))
                            }
                            2 => {
                                let u = upstream.as_ref().expect("checked");
                                (0..rows).for_each(|i| out[i] = u.vec_dot(ty as u32, K, &w[i * rs..(i + 1) * rs], &a))
                            }
                            _ => mm.compute(&mut pool, Weights { ty, data: &w, rows, k: K }, &x, &mut dst),
                        }
                        black_box(&out);
                    }
                    // the first round warms up
                    if round > 0 {
                        // single-thread kernels: CPU time; the pool's two threads: wall time
                        let s = if which == 3 { start.elapsed().as_secs_f64() } else { thread_cpu_s() - cpu0 };
                        t[which].push(s / reps as f64);
                    }
                }
            }
            let bytes = (rows * rs) as f64;
            let flops = 2.0 * (rows * K) as f64;
            let med: Vec<f64> = t.iter_mut().map(|v| if v.is_empty() { f64::NAN } else { median(v) }).collect();
            let gbs = |s: f64| bytes / s / 1e9;
            let gfs = |s: f64| flops / s / 1e9;
            println!(
                "| {} | {set} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} |",
                ty.name(),
                bytes / (1 << 20) as f64,
                gbs(med[0]),
                gfs(med[0]),
                gbs(med[1]),
                gbs(med[2]),
                gfs(med[2]),
                med[2] / med[0],
                gbs(med[3]),
            );
        }
    }
    // the pool's cost per job: an empty job of 2 chunks (both threads), wall time
    let mut t: Vec<f64> = (0..2000)
        .map(|_| {
            let start = Instant::now();
            pool.run(2, |c| {
                black_box(c);
            });
            start.elapsed().as_secs_f64()
        })
        .collect();
    println!();
    println!("pool (2 threads): an empty job of 2 chunks takes {:.1} µs (median of 2000, wall)", median(&mut t) * 1e6);
}
