//! The mat-vec kernels on the medium model's shapes: the multi-row form ([`Gemv::rows`]) against
//! the row kernel called per row, in thread CPU time (robust on a shared machine), one thread.
//!
//!     cargo run --release -p ggml-rs-cpu --example gemv_bench [-- <repeats> [mem]]
//!
//! For Q4_0 and Q4_K also the mat-vec in upstream's repacked GEMV order (`Order::RepackGemv`,
//! what token generation runs where upstream repacks the weights): the `repack` column.
//!
//! `mem`: matrices of 262144 rows of 512 and 65536 rows of 2048 instead (75-270 MB: read from
//! memory, as token generation reads its weights, not from cache).

use ggml_rs_cpu::GgmlType;
use ggml_rs_cpu::block::AlignedBytes;
use ggml_rs_cpu::dot::gemv::Gemv;
use ggml_rs_cpu::dot::{Order, RowDot};
use ggml_rs_cpu::quants::quantize_row;
use ggml_rs_cpu::rng::XorShift;

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes the timespec
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let reps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let level = ggml_rs_cpu::simd::active();
    let mut r = XorShift::new(5);
    println!("level {}; ns per weight row (min of {reps}), row kernel per row vs gemv", level.name());
    let shapes: &[(usize, usize)] =
        if std::env::args().nth(2).as_deref() == Some("mem") { &[(262144, 512), (65536, 2048)] } else { &[(512, 512), (1536, 512), (512, 1536), (32000, 512)] };
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4K, GgmlType::Q6K, GgmlType::F16] {
        for &(rows, k) in shapes {
            let vt = ty.vec_dot_type().unwrap();
            let wl = ty.row_size(k);
            let mut w = AlignedBytes::zeroed(rows * wl);
            for i in 0..rows {
                quantize_row(ty, &r.model_like(k), &mut w[i * wl..(i + 1) * wl]);
            }
            let mut x = AlignedBytes::zeroed(vt.row_size(k));
            quantize_row(vt, &r.model_like(k), &mut x);
            let mut out = vec![0f32; rows];
            let (row, g) = (RowDot::new(ty, level), Gemv::new(ty, level));
            let repack = matches!(ty, GgmlType::Q4_0 | GgmlType::Q4K).then(|| Gemv::with_order(ty, level, Order::RepackGemv));
            let (mut best_row, mut best_g, mut best_rp) = (u64::MAX, u64::MAX, u64::MAX);
            for _ in 0..reps {
                let t = cpu_ns();
                for i in 0..rows {
                    out[i] = row.dot(&w[i * wl..(i + 1) * wl], &x);
                }
                best_row = best_row.min(cpu_ns() - t);
                std::hint::black_box(&out);
                let t = cpu_ns();
                for c in (0..rows).step_by(16) {
                    // SAFETY: rows c..c+16 of w, 16 floats of out
                    unsafe { g.rows(w.as_ptr().add(c * wl), wl, 16.min(rows - c), &x, out.as_mut_ptr().add(c)) };
                }
                best_g = best_g.min(cpu_ns() - t);
                std::hint::black_box(&out);
                if let Some(g) = &repack {
                    let t = cpu_ns();
                    for c in (0..rows).step_by(16) {
                        // SAFETY: as above
                        unsafe { g.rows(w.as_ptr().add(c * wl), wl, 16.min(rows - c), &x, out.as_mut_ptr().add(c)) };
                    }
                    best_rp = best_rp.min(cpu_ns() - t);
                    std::hint::black_box(&out);
                }
            }
            let per = |ns: u64| ns as f64 / rows as f64;
            println!(
                "{:5} {rows:6}x{k:5}: row {:7.1} ns  gemv {:7.1} ns  ({:.2}x)  gemv {:.2} GB/s{}",
                ty.name(),
                per(best_row),
                per(best_g),
                best_row as f64 / best_g as f64,
                (rows * wl) as f64 / best_g as f64,
                if repack.is_some() { format!("  repack {:7.1} ns ({:.2} GB/s)", per(best_rp), (rows * wl) as f64 / best_rp as f64) } else { String::new() }
            );
        }
    }
}
