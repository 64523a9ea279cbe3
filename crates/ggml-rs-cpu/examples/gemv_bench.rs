//! The mat-vec kernels on the medium model's shapes: the multi-row form ([`Gemv::rows`]) against
//! the row kernel called per row, in thread CPU time (robust on a shared machine), one thread.
//!
//!     cargo run --release -p ggml-rs-cpu --example gemv_bench [-- <repeats> [mem]]
//!
//! For Q4_0 and Q4_K also the mat-vec in upstream's repacked GEMV order (`Order::RepackGemv`,
//! what token generation runs where upstream repacks the weights): the `repack` column.
//!
//! F16 also on the attention products of token generation without flash attention (256 rows of
//! 64, 64 rows of 256). `mem`: matrices of 262144 rows of 512 and 65536 rows of 2048 instead (75-270 MB: read from
//! memory, as token generation reads its weights, not from cache).
//!
//! With `GGML_RS_UPSTREAM_LIB_DIR` (a native build's `bin`), the `upstream` column: what upstream's
//! token generation runs on the same shape, in the same rounds: for Q4_0 its repacked GEMV
//! (`ggml_gemv_q4_0_8x8_q8_0` over weights of the repacked size), for the other types its
//! `vec_dot` row by row (the bytes are ours: the same work).

#[path = "../tests/support/upstream_lib.rs"]
mod upstream_lib;

use ggml_rs_cpu::GgmlType;
use ggml_rs_cpu::block::AlignedBytes;
use ggml_rs_cpu::dot::Order;
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
    let upstream = upstream_lib::Upstream::load().ok();
    type Gemv8 = unsafe extern "C" fn(i32, *mut f32, usize, *const std::ffi::c_void, *const std::ffi::c_void, i32, i32);
    // SAFETY: ggml_gemv_q4_0_8x8_q8_0(n, s, bs, vx, vy, nr, nc) at the pin
    let up_gemv_q4_0: Option<Gemv8> = upstream.as_ref().and_then(|u| unsafe { u.cpu_symbol::<Gemv8>(b"ggml_gemv_q4_0_8x8_q8_0\0") });
    let shapes: &[(usize, usize)] =
        if std::env::args().nth(2).as_deref() == Some("mem") { &[(262144, 512), (65536, 2048)] } else { &[(512, 512), (1536, 512), (512, 1536), (32000, 512)] };
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4K, GgmlType::Q6K, GgmlType::F16] {
        // F16 also as attention's products without flash attention: K (n_kv rows of a head's 64)
        // and the transposed V (64 rows of n_kv)
        let attn: &[(usize, usize)] = if ty == GgmlType::F16 && shapes.len() == 4 { &[(256, 64), (64, 256)] } else { &[] };
        for &(rows, k) in shapes.iter().chain(attn) {
            let vt = ty.vec_dot_type().unwrap();
            let wl = ty.row_size(k);
            let mut w = AlignedBytes::zeroed(rows * wl);
            for i in 0..rows {
                quantize_row(ty, &r.model_like(k), &mut w[i * wl..(i + 1) * wl]);
            }
            let mut x = AlignedBytes::zeroed(vt.row_size(k));
            quantize_row(vt, &r.model_like(k), &mut x);
            let mut out = vec![0f32; rows];
            let (row, g) = (ggml_rs_cpu::kernels::at(level).row_dot(ty), ggml_rs_cpu::kernels::at(level).gemv(ty, Order::VecDot));
            let repack = matches!(ty, GgmlType::Q4_0 | GgmlType::Q4K).then(|| ggml_rs_cpu::kernels::at(level).gemv(ty, Order::RepackGemv));
            let (mut best_row, mut best_g, mut best_rp, mut best_up) = (u64::MAX, u64::MAX, u64::MAX, u64::MAX);
            // upstream's form of the weights: Q4_0 repacked 8 rows to a block of 144 bytes (8
            // scales, then the nibbles), scales 1.0; the others as they are
            let up_w = (ty == GgmlType::Q4_0 && rows % 8 == 0 && up_gemv_q4_0.is_some()).then(|| {
                let mut b = AlignedBytes::zeroed(rows * wl);
                for (i, blk) in b.chunks_exact_mut(144).enumerate() {
                    blk[..16].copy_from_slice(&[0x00, 0x3c].repeat(8));
                    blk[16..].iter_mut().enumerate().for_each(|(j, v)| *v = (i * 131 + j * 7) as u8);
                }
                b
            });
            for _ in 0..reps {
                let t = cpu_ns();
                for i in 0..rows {
                    out[i] = row.dot(&w[i * wl..(i + 1) * wl], &x);
                }
                best_row = best_row.min(cpu_ns() - t);
                std::hint::black_box(&out);
                let t = cpu_ns();
                // 64 rows a call, as MUL_MAT's chunks of token generation
                for c in (0..rows).step_by(64) {
                    // SAFETY: rows c..c+64 of w, 64 floats of out
                    unsafe { g.rows(w.as_ptr().add(c * wl), wl, 64.min(rows - c), &x, out.as_mut_ptr().add(c)) };
                }
                best_g = best_g.min(cpu_ns() - t);
                std::hint::black_box(&out);
                if let Some(g) = &repack {
                    let t = cpu_ns();
                    for c in (0..rows).step_by(64) {
                        // SAFETY: as above
                        unsafe { g.rows(w.as_ptr().add(c * wl), wl, 64.min(rows - c), &x, out.as_mut_ptr().add(c)) };
                    }
                    best_rp = best_rp.min(cpu_ns() - t);
                    std::hint::black_box(&out);
                }
                if let (Some(f), Some(uw)) = (up_gemv_q4_0, &up_w) {
                    let t = cpu_ns();
                    // SAFETY: rows / 8 repacked blocks of k values, one Q8_0 activation row of k,
                    // rows floats of output
                    unsafe { f(k as i32, out.as_mut_ptr(), 0, uw.as_ptr().cast(), x.as_ptr().cast(), 1, rows as i32) };
                    best_up = best_up.min(cpu_ns() - t);
                    std::hint::black_box(&out);
                } else if let Some(u) = upstream.as_ref().filter(|_| ty != GgmlType::Q4_0) {
                    let (f, _) = u.vec_dot_fn(ty as u32);
                    let t = cpu_ns();
                    for (i, o) in out.iter_mut().enumerate() {
                        // SAFETY: weight row i (k values), the activation row, one result
                        unsafe { f(k as i32, o, 0, w.as_ptr().add(i * wl).cast(), 0, x.as_ptr().cast(), 0, 1) };
                    }
                    best_up = best_up.min(cpu_ns() - t);
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
                if repack.is_some() { format!("  repack {:7.1} ns ({:.2} GB/s)", per(best_rp), (rows * wl) as f64 / best_rp as f64) } else { String::new() },
            );
            if best_up != u64::MAX {
                let ours = if repack.is_some() { best_rp } else { best_g };
                println!("      upstream {:7.1} ns a row; ours / upstream time {:.2}", per(best_up), ours as f64 / best_up as f64);
            }
        }
    }
}
