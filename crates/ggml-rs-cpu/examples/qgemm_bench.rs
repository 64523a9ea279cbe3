//! The prompt tiles of the tiled int8 GEMM ([`ggml_rs_cpu::qgemm`]) per form: one 16-row × 8-column
//! tile over k, in thread CPU time (min of the repeats), one thread; at each level the tiles run
//! at on this CPU (AVX2's kernels, AVX-512 VNNI's; `GGML_RS_CPU_SIMD` caps them).
//!
//!     cargo run --release -p ggml-rs-cpu --example qgemm_bench [-- <repeats>]
//!
//! Q4_K in both forms: the vec_dot-like one (per sub-block scale products) and `k_pairs`
//! (upstream's repacked GEMM order, what MUL_MAT runs by default); Q6_K in the per-block form
//! and the `tiled` one (upstream's tiled K-quant path's order, the default).

use ggml_rs_cpu::GgmlType;
use ggml_rs_cpu::block::AlignedBytes;
use ggml_rs_cpu::qgemm::{Aux, Kind, MAX_COLS, ROWS, kind_of, prepare_column_as, repack_as, tile};
use ggml_rs_cpu::quants::quantize_row;
use ggml_rs_cpu::rng::XorShift;

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes the timespec
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    use ggml_rs_cpu::simd::Level;
    let levels: Vec<Level> =
        Level::available().into_iter().filter(|l| matches!(l, Level::Avx2 | Level::Avx512Vnni) && *l <= ggml_rs_cpu::simd::active()).collect();
    if levels.is_empty() {
        println!("no AVX2: the tiles do not run here");
        return;
    }
    let reps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let mut r = XorShift::new(6);
    let k = 2048;
    let q4k = kind_of(GgmlType::Q4K, true).unwrap();
    let forms = [
        ("q4_0", GgmlType::Q4_0, kind_of(GgmlType::Q4_0, true).unwrap()),
        ("q4_K", GgmlType::Q4K, q4k),
        ("q4_K k_pairs", GgmlType::Q4K, Kind { k_pairs: true, ..q4k }),
        ("q6_K", GgmlType::Q6K, kind_of(GgmlType::Q6K, true).unwrap()),
        ("q6_K tiled", GgmlType::Q6K, Kind { tiled: true, ..kind_of(GgmlType::Q6K, true).unwrap() }),
        ("q8_0 pairs", GgmlType::Q8_0, kind_of(GgmlType::Q8_0, true).unwrap()),
        ("q8_0 one-lane", GgmlType::Q8_0, kind_of(GgmlType::Q8_0, false).unwrap()),
    ];
    println!("k = {k}; us per 16 × 8 tile (min of {reps})");
    for (level, (name, ty, kd)) in levels.iter().flat_map(|l| forms.iter().map(move |f| (*l, *f))) {
        if kd.tiled && level < Level::Avx512Vnni {
            continue;
        }
        let vt = ty.vec_dot_type().unwrap();
        let rows: Vec<AlignedBytes> = (0..ROWS)
            .map(|_| {
                let mut w = AlignedBytes::zeroed(ty.row_size(k));
                quantize_row(ty, &r.model_like(k), &mut w);
                w
            })
            .collect();
        let rr: Vec<&[u8]> = rows.iter().map(|w| &w[..]).collect();
        let nb = k / kd.block_len();
        let mut packed = vec![0u8; nb * kd.block_bytes()];
        repack_as(kd, ty, &rr, k, &mut packed);
        let mut qs = vec![vec![0i8; kd.col_len(k)]; MAX_COLS];
        let mut aux = vec![vec![Aux::default(); nb]; MAX_COLS];
        for j in 0..MAX_COLS {
            let mut x = AlignedBytes::zeroed(vt.row_size(k));
            quantize_row(vt, &r.model_like(k), &mut x);
            prepare_column_as(kd, ty, &x, &mut qs[j], &mut aux[j]);
        }
        let qsr: Vec<&[i8]> = qs.iter().map(|a| &a[..]).collect();
        let auxr: Vec<&[Aux]> = aux.iter().map(|a| &a[..]).collect();
        let mut out = vec![vec![0f32; ROWS]; MAX_COLS];
        let mut best = u64::MAX;
        for _ in 0..reps {
            let mut outr: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
            let t = cpu_ns();
            for _ in 0..10 {
                tile(kd, level, &packed, &qsr, &auxr, &mut outr, ROWS);
            }
            best = best.min(cpu_ns() - t);
            std::hint::black_box(&out);
        }
        println!("{:10} {name:14} {:6.2} us", level.name(), best as f64 / 10.0 / 1000.0);
    }
}
