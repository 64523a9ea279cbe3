//! Against what we did not write: our formats and kernels compared with upstream's stock
//! libggml-base / libggml-cpu (dlopened from `GGML_RS_UPSTREAM_LIB_DIR`; each test prints why
//! and passes when they are not there, unless `GGML_RS_UPSTREAM_REQUIRED=1`).
//!
//! - quantize: `ggml_quantize_chunk` (upstream's reference quantizers) byte for byte;
//! - dequantize: the type's `to_float` bit for bit;
//! - activation quantization: ggml-cpu's `from_float` (Q8_K: the reference; Q8_0: the x86 form);
//! - dot products: ggml-cpu's `vec_dot` — equal where the sum is exact, within float rounding
//!   otherwise.
//! - FLASH_ATTN_EXT: the node built with upstream's ggml and computed by its libggml-cpu and by
//!   ours on the same graph and bytes — bit for bit against the native AVX-512 build, within
//!   tolerance against others; and which F16-accumulator rule the library follows.

#[path = "support/upstream_lib.rs"]
mod upstream_lib;

use ggml_rs_cpu::block::AlignedBytes;
use ggml_rs_cpu::dot::RowDot;
use ggml_rs_cpu::quants::{dequantize_row, quantize_row, quantize_row_q8_0_cpu, quantize_row_q8_1_x86};
use ggml_rs_cpu::rng::XorShift;
use ggml_rs_cpu::simd::Level;
use ggml_rs_cpu::{GgmlType, block};
use upstream_lib::Upstream;

/// the libraries, or None (the test skips) — unless GGML_RS_UPSTREAM_REQUIRED=1 (the suite sets
/// it), where a missing library fails the test
fn upstream() -> Option<Upstream> {
    match Upstream::load() {
        Ok(u) => Some(u),
        Err(why) if std::env::var("GGML_RS_UPSTREAM_REQUIRED").is_ok_and(|v| v == "1") => {
            panic!("upstream's libraries are required (GGML_RS_UPSTREAM_REQUIRED=1) and not loaded: {why}")
        }
        Err(why) => {
            println!("SKIPPED: upstream's libraries not loaded: {why}");
            None
        }
    }
}

const WEIGHT_TYPES: [GgmlType; 9] =
    [GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4K, GgmlType::Q6K];

/// rows that stress the rounding rules: model-like values, zeros, a constant, ties (.5 steps),
/// tiny and huge magnitudes, one outlier, all negative, exact halves
fn test_rows(r: &mut XorShift, n: usize) -> Vec<Vec<f32>> {
    let mut rows = vec![r.model_like(n), r.model_like(n), vec![0.0; n], vec![0.75; n]];
    rows.push((0..n).map(|i| (i % 17) as f32 * 0.5 - 4.0).collect());
    rows.push((0..n).map(|_| r.f32_in(-1e-20, 1e-20)).collect());
    rows.push((0..n).map(|_| r.f32_in(-6e4, 6e4)).collect());
    let mut outlier = r.model_like(n);
    outlier[n / 3] = 100.0;
    rows.push(outlier);
    rows.push((0..n).map(|_| -r.f32_in(0.0, 1.0)).collect());
    rows.push((0..n).map(|i| if i % 32 < 16 { 1.0 } else { -1.0 }).collect());
    // exact halves after scaling (amax 127: d = 1): where round-half-away and ties-to-even part
    rows.push((0..n).map(|i| if i % 32 == 0 { 127.0 } else { (i % 7) as f32 - 3.5 }).collect());
    // and bulk: sums of uniforms (bell-shaped, as trained weights), at several scales, so the
    // rarely taken branches of the scale searches are taken too
    for k in 0..48 {
        let scale = [0.02f32, 0.3, 1.0, 7.0][k % 4];
        rows.push((0..n).map(|_| (r.f32_in(-1.0, 1.0) + r.f32_in(-1.0, 1.0) + r.f32_in(-1.0, 1.0)) * scale).collect());
    }
    rows
}

#[test]
fn type_sizes_match_upstream() {
    let Some(u) = upstream() else { return };
    for ty in GgmlType::ALL {
        let (blck, size) = u.type_size(ty as u32);
        assert_eq!((blck as usize, size), (ty.block_size(), ty.type_size()), "{}", ty.name());
        assert_eq!(u.type_name(ty as u32), ty.name());
    }
}

#[test]
fn quantize_is_byte_for_byte_upstreams() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(11);
    let mut compared = 0usize;
    for ty in WEIGHT_TYPES {
        // upstream's aarch64 build (GCC, FMA in the baseline) fuses multiply-adds in the K-quant
        // scale searches (`make_qkx2_quants`, `make_qx_quants`); ours are the unfused x86 build's
        if cfg!(target_arch = "aarch64") && matches!(ty, GgmlType::Q4K | GgmlType::Q6K) {
            println!("SKIP {}: upstream's aarch64 build fuses its scale search's multiply-adds (ours: the x86 build's bytes)", ty.name());
            continue;
        }
        for n in [256, 4096] {
            for (k, row) in test_rows(&mut r, n).iter().enumerate() {
                let mut theirs = AlignedBytes::zeroed(ty.row_size(n));
                let mut ours = AlignedBytes::zeroed(ty.row_size(n));
                u.quantize_chunk(ty as u32, row, n, &mut theirs);
                quantize_row(ty, row, &mut ours);
                if let Some(at) = theirs.iter().zip(ours.iter()).position(|(a, b)| a != b) {
                    panic!(
                        "{} row {k} (n={n}): first different byte {at} (block {}): upstream {:#04x}, ours {:#04x}",
                        ty.name(),
                        at / ty.type_size(),
                        theirs[at],
                        ours[at]
                    );
                }
                compared += ours.len();
            }
        }
    }
    println!("quantize: {compared} bytes equal to ggml_quantize_chunk's");
}

#[test]
fn dequantize_is_bit_for_bit_upstreams() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(12);
    let n = 4096;
    // f32 has no to_float upstream (it is not converted)
    for ty in WEIGHT_TYPES.into_iter().filter(|&t| t != GgmlType::F32) {
        for row in test_rows(&mut r, n) {
            let mut q = AlignedBytes::zeroed(ty.row_size(n));
            quantize_row(ty, &row, &mut q);
            let (mut theirs, mut ours) = (vec![0f32; n], vec![0f32; n]);
            u.to_float(ty as u32, &q, &mut theirs);
            dequantize_row(ty, &q, &mut ours);
            for i in 0..n {
                assert_eq!(theirs[i].to_bits(), ours[i].to_bits(), "{} element {i}: upstream {} ours {}", ty.name(), theirs[i], ours[i]);
            }
        }
    }
}

#[test]
fn activation_quantization_is_ggml_cpus() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(13);
    let n = 4096;
    let (mut diff_ref, mut total) = (0usize, 0usize);
    for row in test_rows(&mut r, n) {
        // Q8_K: ggml-cpu's from_float is the reference quantizer
        let mut theirs = AlignedBytes::zeroed(GgmlType::Q8K.row_size(n));
        let mut ours = AlignedBytes::zeroed(GgmlType::Q8K.row_size(n));
        u.cpu_from_float(GgmlType::Q8K as u32, &row, &mut theirs);
        quantize_row(GgmlType::Q8K, &row, &mut ours);
        assert!(*theirs == *ours, "q8_K activations differ from ggml-cpu's from_float");
        // Q8_0: this architecture's form (x86: 127/amax; aarch64: 1/d), byte for byte; the
        // reference differs now and then (ties, the scale's reciprocal)
        let mut theirs = AlignedBytes::zeroed(GgmlType::Q8_0.row_size(n));
        let mut ours = AlignedBytes::zeroed(GgmlType::Q8_0.row_size(n));
        u.cpu_from_float(GgmlType::Q8_0 as u32, &row, &mut theirs);
        quantize_row_q8_0_cpu(&row, block::as_blocks_mut(&mut ours, "q8_0"));
        assert!(*theirs == *ours, "q8_0 activations differ from ggml-cpu's from_float");
        // Q8_1 (Q5_1's activations): the x86 form too, `s` included
        let mut theirs1 = AlignedBytes::zeroed(GgmlType::Q8_1.row_size(n));
        let mut ours1 = AlignedBytes::zeroed(GgmlType::Q8_1.row_size(n));
        u.cpu_from_float(GgmlType::Q8_1 as u32, &row, &mut theirs1);
        quantize_row_q8_1_x86(&row, block::as_blocks_mut(&mut ours1, "q8_1"));
        assert!(*theirs1 == *ours1, "q8_1 activations differ from ggml-cpu's from_float");
        quantize_row(GgmlType::Q8_0, &row, &mut ours);
        diff_ref += theirs.iter().zip(ours.iter()).filter(|(a, b)| a != b).count();
        total += ours.len();
    }
    println!("q8_0: ggml-cpu's from_float and the reference quantizer differ in {diff_ref} of {total} bytes");
    // denormal activations, where the reciprocal of the scale overflows to +inf: x86's conversion
    // of ±inf and NaN (the integer indefinite, packed to -128), not a saturating cast; aarch64's
    // saturating conversion kept to its low byte
    let tiny: Vec<f32> = (0..n).map(|i| ((i % 64) as f32 - 31.5) * 1e-40).collect();
    let mut theirs = AlignedBytes::zeroed(GgmlType::Q8_0.row_size(n));
    let mut ours = AlignedBytes::zeroed(GgmlType::Q8_0.row_size(n));
    u.cpu_from_float(GgmlType::Q8_0 as u32, &tiny, &mut theirs);
    quantize_row_q8_0_cpu(&tiny, block::as_blocks_mut(&mut ours, "q8_0"));
    assert!(*theirs == *ours, "q8_0 activations of denormals differ from ggml-cpu's from_float: {:?} vs {:?}", &theirs[..34], &ours[..34]);
}

/// activations of the weight type's vec_dot type, quantized our way
fn activations(ty: GgmlType, x: &[f32]) -> AlignedBytes {
    let vt = ty.vec_dot_type().unwrap();
    let mut y = AlignedBytes::zeroed(vt.row_size(x.len()));
    quantize_row(vt, x, &mut y);
    y
}

/// model-like data: every level's kernel within float rounding of ggml-cpu's vec_dot on the same
/// bytes (bound: 2⁻¹⁸ · Σ|w·a| over the dequantized rows, far above the few-ulp differences
/// of summation order, far below any wrong block)
#[test]
fn vec_dot_matches_ggml_cpus() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(14);
    for ty in WEIGHT_TYPES {
        let mut worst = 0f64;
        for n in [256, 4096, 11008] {
            for _ in 0..8 {
                let (w, a) = (r.model_like(n), r.model_like(n));
                let mut wq = AlignedBytes::zeroed(ty.row_size(n));
                quantize_row(ty, &w, &mut wq);
                let aq = activations(ty, &a);
                let theirs = u.vec_dot(ty as u32, n, &wq, &aq) as f64;
                let (mut wd, mut ad) = (vec![0f32; n], vec![0f32; n]);
                dequantize_row(ty, &wq, &mut wd);
                dequantize_row(ty.vec_dot_type().unwrap(), &aq, &mut ad);
                let mag: f64 = wd.iter().zip(&ad).map(|(x, y)| (*x as f64 * *y as f64).abs()).sum();
                for level in Level::available() {
                    let ours = RowDot::new(ty, level).dot(&wq, &aq) as f64;
                    let err = (ours - theirs).abs() / mag.max(f64::MIN_POSITIVE);
                    assert!(err <= 2f64.powi(-18), "{} {} n={n}: upstream {theirs}, ours {ours} (error {err:e} of Σ|w·a|)", ty.name(), level.name());
                    worst = worst.max(err);
                }
            }
        }
        println!("vec_dot {}: worst difference from ggml-cpu {worst:.2e} of Σ|w·a|", ty.name());
    }
}

/// upstream built for aarch64 with DotProd (`-march=armv8.2-a+dotprod`, scripts/aarch64.sh's
/// stock build, run under qemu-user): our `dotprod` kernel set's vec_dot is its bit for bit for
/// every type with a NEON kernel of ours (`dot::neon`'s orders), on its own activation bytes
#[cfg(target_arch = "aarch64")]
#[test]
fn vec_dot_is_the_aarch64_builds_bit_for_bit() {
    let Some(u) = upstream() else { return };
    if Level::available().last() != Some(&Level::NeonDot) {
        println!("SKIP: this CPU has no DotProd");
        return;
    }
    let mut r = XorShift::new(21);
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K, GgmlType::Q6K] {
        let vt = ty.vec_dot_type().unwrap();
        let mut compared = 0;
        for n in [256, 512, 4096, 11008] {
            for (k, w) in test_rows(&mut r, n).iter().enumerate().take(20) {
                let a = r.model_like(n);
                let mut wq = AlignedBytes::zeroed(ty.row_size(n));
                quantize_row(ty, w, &mut wq);
                let mut aq = AlignedBytes::zeroed(vt.row_size(n));
                u.cpu_from_float(vt as u32, &a, &mut aq);
                let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
                let ours = RowDot::new(ty, Level::NeonDot).dot(&wq, &aq);
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{} n={n} row {k}: upstream {theirs}, ours {ours}", ty.name());
                compared += 1;
            }
        }
        println!("vec_dot {}: {compared} rows equal to upstream's aarch64 build bit for bit", ty.name());
    }
}

/// an AVX-512 build of upstream (the native one: `GGML_RS_UPSTREAM_LIB_DIR=<build-native>/bin`)
/// sums F32 and F16 rows in the orders our AVX-512 kernels take (`ggml_vec_dot_f32` with its
/// tail as GCC compiled it, `ggml_vec_dot_f16`): equal bit for bit, every length from 0 to 300
/// (each kind of tail) and models' rows; BF16 too, in `select_bf16_native`'s order (FLASH_ATTN_EXT's
/// BF16 K); skipped with another build (the stock one is AVX2)
#[test]
fn vec_dot_f32_and_f16_are_an_avx512_builds_bit_for_bit() {
    let Some(u) = upstream() else { return };
    if !u.avx512_build || ggml_rs_cpu::simd::detected() < Level::Avx512 {
        println!("SKIPPED: upstream's libggml-cpu is not an AVX-512 build, or this CPU has no AVX-512");
        return;
    }
    let mut r = XorShift::new(22);
    // which leftover values the native build fuses (GCC's tuning on the machine it was built on):
    // the one power of two whose order gives its bits on every length 1..=40
    let fused = native_f32_fused_tail(&u, &mut r);
    assert_eq!(
        fused,
        Some(ggml_rs_cpu::dot::float::F32_FUSED_TAIL),
        "the native build's ggml_vec_dot_f32 fuses the last n mod {fused:?} values, this build of ggml-rs-cpu the last n mod {} \
         (build.rs reads GCC's -mprefer-vector-width; was upstream built with another compiler or on another machine? \
         GGML_RS_CPU_F32_FUSED_TAIL=N at build time overrides)",
        ggml_rs_cpu::dot::float::F32_FUSED_TAIL
    );
    for ty in [GgmlType::F32, GgmlType::F16] {
        for n in (0..300).chain([512, 1536, 2048 + 57, 4096 + 7, 5632]) {
            for _ in 0..3 {
                let (w, a) = (r.model_like(n), r.model_like(n).into_iter().map(|v| v * 40.0).collect::<Vec<_>>());
                let (mut wq, mut aq) = (AlignedBytes::zeroed(ty.row_size(n)), AlignedBytes::zeroed(ty.row_size(n)));
                quantize_row(ty, &w, &mut wq);
                quantize_row(ty, &a, &mut aq);
                let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
                for level in Level::available().into_iter().filter(|&l| l >= Level::Avx512) {
                    let ours = RowDot::new(ty, level).dot(&wq, &aq);
                    assert_eq!(ours.to_bits(), theirs.to_bits(), "{} {} n={n}: upstream {theirs}, ours {ours}", ty.name(), level.name());
                }
            }
        }
    }
    // BF16 in the native build's order (what FLASH_ATTN_EXT dots a BF16 K with): vdpbf16ps
    // where this CPU has AVX512-BF16, as -march=native compiles it here
    let ty = GgmlType::BF16;
    for n in (0..300).chain([512, 2048 + 57]) {
        let (w, a) = (r.model_like(n), r.model_like(n).into_iter().map(|v| v * 40.0).collect::<Vec<_>>());
        let (mut wq, mut aq) = (AlignedBytes::zeroed(ty.row_size(n)), AlignedBytes::zeroed(ty.row_size(n)));
        quantize_row(ty, &w, &mut wq);
        quantize_row(ty, &a, &mut aq);
        let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
        for level in Level::available().into_iter().filter(|&l| l >= Level::Avx512) {
            let ours = RowDot::Bf16(ggml_rs_cpu::dot::float::select_bf16_native(level)).dot(&wq, &aq);
            assert_eq!(ours.to_bits(), theirs.to_bits(), "bf16 native order {} n={n}: upstream {theirs}, ours {ours}", level.name());
        }
    }
}

/// the `fused` of `f32_avx512_order_fusing` that gives the bits of `u`'s ggml_vec_dot_f32 on
/// every length from 1 to 40 (each kind of leftover), if one does
fn native_f32_fused_tail(u: &Upstream, r: &mut XorShift) -> Option<usize> {
    let rows: Vec<(Vec<f32>, Vec<f32>, f32)> = (1..=40)
        .flat_map(|n| [n; 4])
        .map(|n| {
            let (w, a) = (r.model_like(n), r.model_like(n).into_iter().map(|v| v * 40.0).collect::<Vec<_>>());
            let (mut wq, mut aq) = (AlignedBytes::zeroed(4 * n), AlignedBytes::zeroed(4 * n));
            quantize_row(GgmlType::F32, &w, &mut wq);
            quantize_row(GgmlType::F32, &a, &mut aq);
            let theirs = u.vec_dot(GgmlType::F32 as u32, n, &wq, &aq);
            (w, a, theirs)
        })
        .collect();
    [1, 2, 4, 8, 16].into_iter().find(|&f| rows.iter().all(|(w, a, t)| ggml_rs_cpu::dot::float::f32_avx512_order_fusing(w, a, f).to_bits() == t.to_bits()))
}

/// integer paths exactly: power-of-two scales and small activations make every float operation
/// exact, so ours and upstream's must agree to the bit
#[test]
fn vec_dot_integer_sums_equal_ggml_cpus() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(15);
    let n = 4096;
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K, GgmlType::Q6K] {
        for _ in 0..8 {
            // random quants, then the scales set to powers of two
            let mut wq = AlignedBytes::zeroed(ty.row_size(n));
            r.fill_bytes(&mut wq);
            let a: Vec<f32> = (0..n).map(|_| r.i32_in(-3, 3) as f32).collect();
            let mut aq = activations(ty, &a);
            match ty {
                GgmlType::Q8_0 | GgmlType::Q4_0 => {
                    let bs = ty.type_size();
                    for b in wq.chunks_exact_mut(bs) {
                        b[..2].copy_from_slice(&half::f16::from_f32(0.125).to_bits().to_le_bytes());
                        if ty == GgmlType::Q8_0 {
                            // no -128 in weights: upstream's sign trick needs it too
                            for q in &mut b[2..] {
                                if *q == 0x80 {
                                    *q = 0x81;
                                }
                            }
                        }
                    }
                    for b in aq.chunks_exact_mut(34) {
                        b[..2].copy_from_slice(&half::f16::from_f32(0.25).to_bits().to_le_bytes());
                    }
                }
                GgmlType::Q4K | GgmlType::Q6K => {
                    // quants of -3..3 and unit scales: every partial sum an integer below 2^24
                    for b in block::as_blocks_mut::<block::BlockQ8K>(&mut aq, "q8_K") {
                        b.d = 1.0;
                        for q in b.qs.iter_mut() {
                            *q = r.i32_in(-3, 3) as i8;
                        }
                        for j in 0..16 {
                            b.bsums[j] = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum();
                        }
                    }
                }
                _ => unreachable!(),
            }
            match ty {
                GgmlType::Q4K => {
                    for b in block::as_blocks_mut::<block::BlockQ4K>(&mut wq, "q4_K") {
                        b.d = half::f16::from_f32(1.0);
                        b.dmin = half::f16::from_f32(1.0);
                    }
                }
                GgmlType::Q6K => {
                    for b in block::as_blocks_mut::<block::BlockQ6K>(&mut wq, "q6_K") {
                        b.d = half::f16::from_f32(1.0);
                        for s in b.scales.iter_mut() {
                            *s = (*s).clamp(-16, 16);
                        }
                    }
                }
                _ => {}
            }
            let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
            for level in Level::available() {
                let ours = RowDot::new(ty, level).dot(&wq, &aq);
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{} {}: upstream {theirs}, ours {ours}", ty.name(), level.name());
            }
        }
    }
}

/// the row-parallel MUL_MAT against upstream's own recipe: ggml-cpu's `from_float` on the
/// activations, then its `vec_dot` per row; within float rounding (2⁻¹⁸ · Σ|w·a|)
/// SILU and SWIGLU rows as upstream's CPU computes them (its build's vector exp in blocks, libm
/// for the tail), bit for bit: our rows at the level of the build loaded (AVX-512 for a native
/// AVX-512 build, AVX2 for an AVX2 build: `ops::expf`'s two definitions; NEON for an aarch64
/// build: AVX2's exp in blocks of 4)
#[test]
fn silu_and_swiglu_are_ggml_cpus_bit_for_bit() {
    let Some(u) = upstream() else { return };
    // the kernel set of the build's: its aarch64 build (NEON's blocks of 4), AVX-512, AVX2
    let level = if cfg!(target_arch = "aarch64") {
        Level::Neon
    } else if u.avx512_build {
        Level::Avx512
    } else {
        Level::Avx2
    };
    if ggml_rs_cpu::simd::detected() < level {
        println!("SKIPPED: this CPU does not run {}", level.name());
        return;
    }
    let mut r = XorShift::new(71);
    // rows of 4096 + 13 (whole blocks and a tail), values over SiLU's whole range
    let n = 4109usize;
    let x: Vec<f32> = (0..n).map(|i| if i % 97 == 0 { r.f32_in(-120.0, 120.0) } else { r.f32_in(-12.0, 12.0) }).collect();
    let g: Vec<f32> = (0..n).map(|_| r.f32_in(-3.0, 3.0)).collect();
    for gated in [false, true] {
        let ctx = u.context(4 * n * 4, 4).expect("context");
        let (a, b) = (ctx.new_tensor(GgmlType::F32 as u32, [n as i64, 1, 1, 1]), ctx.new_tensor(GgmlType::F32 as u32, [n as i64, 1, 1, 1]));
        // SAFETY: contiguous F32 tensors of n values, not otherwise borrowed
        unsafe {
            upstream_lib::tensor_bytes(a).copy_from_slice(block::as_bytes(&x));
            upstream_lib::tensor_bytes(b).copy_from_slice(block::as_bytes(&g));
        }
        let out = ctx.silu(a, gated.then_some(b));
        assert_eq!(ctx.compute(ctx.graph(out), 1), 0, "upstream's compute");
        // SAFETY: the result, n floats
        let theirs: Vec<f32> = unsafe { upstream_lib::tensor_bytes(out) }.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect();
        let mut ours = vec![0f32; n];
        ggml_rs_cpu::ops::expf::silu_row(level, &mut ours, &x, gated.then_some(&g[..]));
        for i in 0..n {
            assert_eq!(
                ours[i].to_bits(),
                theirs[i].to_bits(),
                "{} gated={gated}: x[{i}] = {} gives {} here, {} upstream",
                level.name(),
                x[i],
                ours[i],
                theirs[i]
            );
        }
    }
}

#[test]
fn mul_mat_matches_ggml_cpus_recipe() {
    use ggml_rs_cpu::matmul::{MatMul, Weights};
    use ggml_rs_cpu::pool::ThreadPool;
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(16);
    let mut pool = ThreadPool::new(2);
    let (rows, k, n_vecs) = (40, 4096, 3);
    for ty in WEIGHT_TYPES {
        let rs = ty.row_size(k);
        let mut w = AlignedBytes::zeroed(rows * rs);
        for i in 0..rows {
            quantize_row(ty, &r.model_like(k), &mut w[i * rs..(i + 1) * rs]);
        }
        let x = r.model_like(k * n_vecs);
        let mut dst = vec![0f32; rows * n_vecs];
        MatMul::new(ty).compute(&mut pool, Weights { ty, data: &w, rows, k }, &x, &mut dst);
        let vt = ty.vec_dot_type().unwrap();
        for j in 0..n_vecs {
            let mut a = AlignedBytes::zeroed(vt.row_size(k));
            u.cpu_from_float(vt as u32, &x[j * k..(j + 1) * k], &mut a);
            let mut ad = vec![0f32; k];
            dequantize_row(vt, &a, &mut ad);
            for i in 0..rows {
                let theirs = u.vec_dot(ty as u32, k, &w[i * rs..(i + 1) * rs], &a) as f64;
                let mut wd = vec![0f32; k];
                dequantize_row(ty, &w[i * rs..(i + 1) * rs], &mut wd);
                let mag: f64 = wd.iter().zip(&ad).map(|(p, q)| (*p as f64 * *q as f64).abs()).sum();
                let ours = dst[j * rows + i] as f64;
                assert!((ours - theirs).abs() <= mag * 2f64.powi(-18), "{} vec {j} row {i}: upstream {theirs}, ours {ours}", ty.name());
            }
        }
    }
}

/// Q6_K (not repacked on x86) on model-like data: from AVX2 our kernel is ggml-cpu's x86
/// `vec_dot` bit for bit (`dot::q6_k::q6_k_q8_k_x86`'s order)
#[test]
fn q6_k_vec_dot_is_ggml_cpus_x86_order_bit_for_bit() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(16);
    let ty = GgmlType::Q6K;
    for n in [256, 4096, 11008 / 256 * 256] {
        for _ in 0..8 {
            let (w, a) = (r.model_like(n), r.model_like(n));
            let mut wq = AlignedBytes::zeroed(ty.row_size(n));
            quantize_row(ty, &w, &mut wq);
            let aq = activations(ty, &a);
            let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
            for level in Level::available().into_iter().filter(|l| *l >= Level::Avx2) {
                let ours = RowDot::new(ty, level).dot(&wq, &aq);
                assert_eq!(ours.to_bits(), theirs.to_bits(), "q6_K {} n={n}: upstream {theirs}, ours {ours}", level.name());
            }
        }
    }
}

//
// FLASH_ATTN_EXT: the whole op, upstream's graph computed by upstream's libggml-cpu and by ours
//

/// how a case's mask is filled (F16, `[n_kv, n_q + pad, 1, 1 or n_seq]`, as llama.cpp makes it)
#[derive(Clone, Copy, Debug, PartialEq)]
enum FaMask {
    /// no mask
    None,
    /// finite values in [-3, 0] with `-inf` runs of 1 to 90 positions starting anywhere
    Runs,
    /// causal after `n_kv - n_q` cached positions; every 7th row (3, 10, ...) sees nothing,
    /// positions 64..128 are `-inf` for every row (a whole KV tile, for every Q tile), and a
    /// single query row does not see the first third (a whole KV chunk of the split when
    /// n_threads ≥ 4)
    Causal,
    /// every position `-inf` (every row sees nothing)
    All,
}

#[derive(Clone, Copy, Debug)]
struct FaCase {
    dk: i64,
    dv: i64,
    n_kv: i64,
    n_q: i64,
    /// query heads, K/V heads
    heads: (i64, i64),
    n_seq: i64,
    kt: GgmlType,
    vt: GgmlType,
    mask: FaMask,
    /// mask rows past n_q
    mask_pad: i64,
    /// one mask per sequence (ne[3] = n_seq) or one for all (1)
    mask_per_seq: bool,
    sinks: bool,
    softcap: f32,
    max_bias: f32,
    /// `ggml_flash_attn_ext_set_prec`: 0 (default) or 10 (GGML_PREC_F32)
    prec: i32,
    n_threads: usize,
}

impl FaCase {
    /// upstream's path for the node (`docs/flash-attn-order.md` §1)
    fn path(&self) -> &'static str {
        let float_same = self.kt == self.vt && matches!(self.kt, GgmlType::F32 | GgmlType::F16);
        if float_same && self.n_q == 1 && self.n_seq == 1 && self.n_kv >= 512 {
            "split-kv"
        } else if float_same && self.n_q >= 64 {
            "tiled"
        } else {
            "one-row"
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} path: K {} V {} DK {} DV {} n_kv {} n_q {} heads {}/{} n_seq {} mask {:?} (pad {}, per seq {}) sinks {} softcap {} max_bias {} prec {} threads {}",
            self.path(),
            self.kt.name(),
            self.vt.name(),
            self.dk,
            self.dv,
            self.n_kv,
            self.n_q,
            self.heads.0,
            self.heads.1,
            self.n_seq,
            self.mask,
            self.mask_pad,
            self.mask_per_seq,
            self.sinks,
            self.softcap,
            self.max_bias,
            self.prec,
            self.n_threads
        )
    }
}

/// The cases: every path (upstream's KV split over each thread count 1-4, its 64-row tiles, the
/// one-row path), every K/V type alone and mixed, the head sizes of models (16, 64, 80, 128,
/// 256, and DK 192 with DV 128), KV lengths 1 / 7 / 300 / 512 / 1000, query rows 1 / 5 / 63 / 64
/// / 65 / 130, grouped heads (8 over 2) and not (8 over 8), one and two sequences, with and
/// without mask, sinks, soft-cap and ALiBi, both precisions. The dimensions turn with different
/// periods so that the pairs vary, at a size that keeps the test to seconds.
fn flash_attn_cases() -> Vec<FaCase> {
    use GgmlType::*;
    let dims: [(i64, i64); 6] = [(16, 16), (64, 64), (80, 80), (128, 128), (192, 128), (256, 256)];
    // (mask, sinks, softcap, max_bias)
    let feats = [
        (FaMask::Runs, false, 0.0, 0.0),
        (FaMask::Causal, true, 0.0, 0.0),
        (FaMask::Runs, false, 1.5, 0.0),
        (FaMask::Causal, false, 0.0, 8.0),
        (FaMask::None, true, 0.0, 0.0),
        (FaMask::Runs, true, 1.5, 8.0),
    ];
    let base = FaCase {
        dk: 64,
        dv: 64,
        n_kv: 300,
        n_q: 1,
        heads: (8, 2),
        n_seq: 1,
        kt: F16,
        vt: F16,
        mask: FaMask::Runs,
        mask_pad: 0,
        mask_per_seq: false,
        sinks: false,
        softcap: 0.0,
        max_bias: 0.0,
        prec: 0,
        n_threads: 1,
    };
    let with_feats = |c: FaCase, f: usize| {
        let (mask, sinks, softcap, max_bias) = feats[f % feats.len()];
        FaCase { mask, sinks, softcap, max_bias, ..c }
    };
    let mut cases = Vec::new();
    // upstream's KV split: one query row, 512+ positions, K = V F32 or F16; per thread count
    let mut i = 0;
    for kt in [F32, F16] {
        for n_kv in [512, 1000] {
            for n_threads in 1..=4 {
                let (dk, dv) = dims[i % 6];
                let heads = if i % 2 == 0 { (8, 2) } else { (8, 8) };
                cases.push(with_feats(FaCase { dk, dv, n_kv, kt, vt: kt, heads, n_threads, prec: if i % 5 == 2 { 10 } else { 0 }, ..base }, i + i / 6));
                i += 1;
            }
        }
    }
    // its 64-row tiles: 64+ query rows, K = V F32 or F16
    for i in 0..18usize {
        let kt = [F32, F16][i % 2];
        let (dk, dv) = dims[(i + 1) % 6];
        let n_kv = [7, 300, 512, 1000, 1][i % 5];
        // the largest tiles only with the smaller heads (time)
        let (dk, dv) = if n_kv >= 512 && dk > 128 { (64, 64) } else { (dk, dv) };
        cases.push(with_feats(
            FaCase {
                dk,
                dv,
                n_kv,
                n_q: [64, 65, 130][i % 3],
                kt,
                vt: kt,
                heads: if (i / 2) % 2 == 0 { (8, 2) } else { (8, 8) },
                n_seq: 1 + ((i / 3) % 2) as i64,
                mask_pad: if i % 4 == 1 { 61 } else { 0 },
                mask_per_seq: i % 5 == 3,
                n_threads: 1 + i % 4,
                prec: if i % 7 == 3 { 10 } else { 0 },
                ..base
            },
            i,
        ));
    }
    // the one-row path: everything else (fewer than 64 rows, decode under 512 positions or with
    // two sequences, BF16 and quantized K / V, K type ≠ V type)
    let pairs = [(F16, F16), (F32, F32), (BF16, BF16), (Q8_0, Q8_0), (Q4_0, Q4_0), (F16, F32), (Q8_0, F16), (F32, BF16), (F16, Q4_0), (BF16, F16)];
    for i in 0..60usize {
        let (kt, vt) = pairs[i % pairs.len()];
        // quantized rows need head sizes of whole 32-blocks
        let fits = |(dk, dv): (i64, i64)| dk % kt.block_size() as i64 == 0 && dv % vt.block_size() as i64 == 0;
        let (dk, dv) = (0..6).map(|j| dims[(i + j) % 6]).find(|&d| fits(d)).expect("a head size fits");
        let float_same = kt == vt && matches!(kt, F32 | F16);
        let mut n_q = [1, 5, 63, 64, 65, 130][i % 6];
        if float_same && n_q >= 64 {
            // the tiles are above; these stay below 64 rows
            n_q = [1, 5, 63][i % 3];
        }
        let n_kv = [1, 7, 300, 512, 1000][i % 5];
        let n_seq = if i % 4 == 3 || (float_same && n_q == 1 && n_kv >= 512) { 2 } else { 1 };
        // the largest rows × positions only with the smaller heads (time)
        let (dk, dv) = if n_q * n_kv * n_seq > 30_000 && dk > 64 && fits((64, 64)) { (64, 64) } else { (dk, dv) };
        cases.push(with_feats(
            FaCase {
                dk,
                dv,
                n_kv,
                n_q,
                kt,
                vt,
                heads: if (i / 3) % 2 == 0 { (8, 2) } else { (8, 8) },
                n_seq,
                mask_pad: if i % 3 == 2 { 3 } else { 0 },
                mask_per_seq: i % 8 == 7,
                n_threads: 1 + (i / 2) % 4,
                prec: if i % 7 == 5 { 10 } else { 0 },
                ..base
            },
            i + i / 6,
        ));
    }
    // rows that see nothing at all, on each path, with and without sinks
    for (n_q, n_kv, sinks, n_threads) in [(1, 1000, false, 3), (1, 1000, true, 4), (70, 300, false, 2), (70, 300, true, 1), (5, 300, true, 2)] {
        cases.push(FaCase { n_q, n_kv, sinks, n_threads, mask: FaMask::All, ..base });
    }
    cases
}

/// the bits of upstream's output and of ours for one case, on the same graph and the same bytes
fn flash_attn_case(u: &Upstream, r: &mut XorShift, c: &FaCase) -> (Vec<u32>, Vec<u32>) {
    use ggml_abi::sys::ggml_tensor;
    let (h, hkv) = c.heads;
    let mask_rows = c.n_q + c.mask_pad;
    let mask_seqs = if c.mask_per_seq { c.n_seq } else { 1 };
    let sizes = [
        4 * (c.dk * c.n_q * h * c.n_seq) as usize,
        c.kt.row_size((c.dk * c.n_kv * hkv * c.n_seq) as usize),
        c.vt.row_size((c.dv * c.n_kv * hkv * c.n_seq) as usize),
        2 * (c.n_kv * mask_rows * mask_seqs) as usize,
        4 * h as usize,
        4 * (c.dv * h * c.n_q * c.n_seq) as usize,
    ];
    // upstream's work buffer (ggml_graph_plan: the larger of the tiles' and the split's scratch)
    let nth = c.n_threads;
    let (dk, dv) = (c.dk as usize, c.dv as usize);
    let work = 4 * ((64 * dk + 2 * 64 * 64 + 64 * dv + 64 * dv + 64 * dk) * nth).max(h as usize * nth * (2 + dv) + nth * (dk + 2 * dv));
    let ctx = u.context(sizes.iter().sum::<usize>() + work + 64 * 1024 + 16 * 64, 8).expect("ggml_init");
    let q = ctx.new_tensor(GgmlType::F32 as u32, [c.dk, c.n_q, h, c.n_seq]);
    let k = ctx.new_tensor(c.kt as u32, [c.dk, c.n_kv, hkv, c.n_seq]);
    let v = ctx.new_tensor(c.vt as u32, [c.dv, c.n_kv, hkv, c.n_seq]);
    let mask = if c.mask == FaMask::None { std::ptr::null_mut() } else { ctx.new_tensor(GgmlType::F16 as u32, [c.n_kv, mask_rows, 1, mask_seqs]) };
    let sinks = if c.sinks { ctx.new_tensor(GgmlType::F32 as u32, [h, 1, 1, 1]) } else { std::ptr::null_mut() };
    let fill_f32 = |t: *mut ggml_tensor, vals: &[f32]| {
        // SAFETY: a contiguous tensor of this context, with data
        let b = unsafe { upstream_lib::tensor_bytes(t) };
        assert_eq!(b.len(), 4 * vals.len());
        for (d, x) in b.chunks_exact_mut(4).zip(vals) {
            d.copy_from_slice(&x.to_le_bytes());
        }
    };
    // Q in [-2, 2] (scores with some spread, new maxima now and then), K and V in [-1, 1], in
    // their types (our quantizers: byte for byte upstream's, `quantize_is_byte_for_byte_upstreams`)
    fill_f32(q, &(0..c.dk * c.n_q * h * c.n_seq).map(|_| r.f32_in(-2.0, 2.0)).collect::<Vec<_>>());
    for (t, ty, n) in [(k, c.kt, c.dk * c.n_kv * hkv * c.n_seq), (v, c.vt, c.dv * c.n_kv * hkv * c.n_seq)] {
        let vals: Vec<f32> = (0..n).map(|_| r.f32_in(-1.0, 1.0)).collect();
        // SAFETY: as above
        quantize_row(ty, &vals, unsafe { upstream_lib::tensor_bytes(t) });
    }
    if !mask.is_null() {
        let past = (c.n_kv - c.n_q).max(0);
        let mut vals = Vec::with_capacity((c.n_kv * mask_rows * mask_seqs) as usize);
        for _ in 0..mask_seqs {
            for iq in 0..mask_rows {
                let mut run = 0;
                for ic in 0..c.n_kv {
                    let x = match c.mask {
                        FaMask::Runs if run > 0 => {
                            run -= 1;
                            f32::NEG_INFINITY
                        }
                        FaMask::Runs if r.next_u64().is_multiple_of(16) => {
                            run = r.i32_in(0, 89);
                            f32::NEG_INFINITY
                        }
                        FaMask::Runs => r.f32_in(-3.0, 0.0),
                        FaMask::Causal if ic > iq + past || iq % 7 == 3 || (64..128).contains(&ic) || (c.n_q == 1 && ic < c.n_kv / 3) => f32::NEG_INFINITY,
                        FaMask::Causal => r.f32_in(-1.0, 0.0),
                        _ => f32::NEG_INFINITY,
                    };
                    vals.push(half::f16::from_f32(x));
                }
            }
        }
        // SAFETY: as above
        let b = unsafe { upstream_lib::tensor_bytes(mask) };
        for (d, x) in b.chunks_exact_mut(2).zip(&vals) {
            d.copy_from_slice(&x.to_bits().to_le_bytes());
        }
    }
    if !sinks.is_null() {
        // some above every score (the sink becomes the maximum), some below
        fill_f32(sinks, &(0..h).map(|_| r.f32_in(-1.0, 3.0)).collect::<Vec<_>>());
    }
    let scale = 1.0 / (c.dk as f32).sqrt();
    let out = ctx.flash_attn_ext(q, k, v, mask, sinks, [scale, c.max_bias, c.softcap], c.prec);
    let graph = ctx.graph(out);
    let bits = |t: *mut ggml_tensor| -> Vec<u32> {
        // SAFETY: as above
        unsafe { upstream_lib::tensor_bytes(t) }.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    assert_eq!(ctx.compute(graph, nth), 0, "upstream's ggml_graph_compute_with_ctx failed: {}", c.describe());
    let theirs = bits(out);
    // SAFETY: as above; NaN everywhere, so an element ours does not write cannot pass
    unsafe { upstream_lib::tensor_bytes(out) }.fill(0xff);
    let status = ggml_rs_cpu::backend::exports::ggml_graph_compute_with_ctx(ctx.as_ptr().cast(), graph, nth as std::ffi::c_int);
    assert_eq!(status, 0, "our ggml_graph_compute_with_ctx failed: {}", c.describe());
    (theirs, bits(out))
}

/// Cases where ours is known to differ from upstream's native build (none so far): the case's
/// description and why. Such a case is still computed and its difference printed.
fn flash_attn_known_difference(_c: &FaCase) -> Option<&'static str> {
    None
}

/// FLASH_ATTN_EXT built and computed by upstream's ggml (its graph, `ggml_graph_compute_with_ctx`
/// with n_threads) and the same graph, on the same bytes, computed by ours with the same thread
/// count. Against the native AVX-512 build (`GGML_RS_UPSTREAM_LIB_DIR=<build-native>/bin`), with
/// our kernels at AVX-512: equal bit for bit, every case of [`flash_attn_cases`] (the orders of
/// `docs/flash-attn-order.md`). Against another build (the stock one is AVX2: other dot and exp
/// orders, no f16 arithmetic), within 1e-4 of the output's largest magnitude (1e-2 where an F16
/// V is accumulated in f16 by both, each its way; measured against the stock build: 6e-7 and
/// 1.4e-3).
#[test]
fn flash_attn_ext_is_upstreams_bit_for_bit() {
    let Some(u) = upstream() else { return };
    let exact = u.avx512_build && ggml_rs_cpu::simd::active() >= Level::Avx512;
    if !exact {
        println!("flash_attn_ext: upstream's library is not an AVX-512 build or ours does not run AVX-512: comparing within tolerance, not bits");
    }
    let mut r = XorShift::new(31);
    let start = std::time::Instant::now();
    let cases = flash_attn_cases();
    let mut per_path = std::collections::BTreeMap::<&str, usize>::new();
    let (mut failures, mut known) = (Vec::new(), Vec::new());
    // the worst errors (non-exact comparisons): F16 V accumulated in f16, everything else
    let (mut worst16, mut worst) = (0f64, 0f64);
    for c in &cases {
        let (theirs, ours) = flash_attn_case(&u, &mut r, c);
        *per_path.entry(c.path()).or_default() += 1;
        let (dv, h, n_q) = (c.dv as usize, c.heads.0 as usize, c.n_q as usize);
        let at = |i: usize| format!("seq {} row {} head {} element {}", i / (dv * h * n_q), (i / (dv * h)) % n_q, (i / dv) % h, i % dv);
        let f = |b: u32| f32::from_bits(b);
        let problem = if exact {
            let diff: Vec<usize> = (0..theirs.len()).filter(|&i| theirs[i] != ours[i]).collect();
            diff.first().map(|&i| {
                format!(
                    "{} of {} elements differ; first at {}: upstream {:e} ({:#010x}), ours {:e} ({:#010x})",
                    diff.len(),
                    theirs.len(),
                    at(i),
                    f(theirs[i]),
                    theirs[i],
                    f(ours[i]),
                    ours[i]
                )
            })
        } else {
            let mag = theirs.iter().map(|&b| f(b).abs() as f64).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
            // an F16 V accumulated in f16 on either side: upstream's one-row paths, ours too; and
            // at the scalar set (no tile kernels) our "tiled" nodes run the older grouped row path,
            // which rounds Q to K's F16 dot type where upstream's tiles keep it f32, and sums V
            // in f16 over all of n_kv (1000 positions: up to 1.2e-2 of the largest output)
            let grouped = c.path() == "tiled" && ggml_rs_cpu::simd::active() < Level::Avx2;
            let f16_acc = c.vt == GgmlType::F16 && (c.path() != "tiled" || grouped);
            let tol = if grouped && f16_acc {
                2e-2
            } else if f16_acc {
                1e-2
            } else {
                1e-4
            };
            let errs: Vec<f64> = theirs.iter().zip(&ours).map(|(&a, &b)| (f(a) as f64 - f(b) as f64).abs() / mag).collect();
            let (i, e) = errs.iter().copied().enumerate().fold((0, 0.0), |m, (i, e)| if e > m.1 || e.is_nan() { (i, e) } else { m });
            if f16_acc {
                worst16 = worst16.max(e);
            } else {
                worst = worst.max(e);
            }
            (e.is_nan() || e > tol)
                .then(|| format!("error {e:.2e} of the largest output (tolerance {tol:e}) at {}: upstream {}, ours {}", at(i), f(theirs[i]), f(ours[i])))
        };
        if let Some(p) = problem {
            match flash_attn_known_difference(c) {
                Some(why) => known.push(format!("{}: {p} (known: {why})", c.describe())),
                None => failures.push(format!("{}: {p}", c.describe())),
            }
        }
    }
    for k in &known {
        println!("known difference: {k}");
    }
    println!(
        "flash_attn_ext: {} cases compared with upstream's {} ({}), {:?}, in {:.1} s{}",
        cases.len(),
        if u.avx512_build { "AVX-512 build" } else { "non-AVX-512 build" },
        if exact { "bit for bit" } else { "within tolerance" },
        per_path,
        start.elapsed().as_secs_f64(),
        if exact { String::new() } else { format!("; worst error of the largest output {worst:.2e}, {worst16:.2e} with an f16 accumulator") }
    );
    assert!(failures.is_empty(), "{} of {} cases differ from upstream's:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// Which rule upstream's library accumulates an F16 V with on its one-row path, read from its
/// bits, against ours (`ops::flash_attn_f16_native_len`, which keys on the CPU having
/// AVX512-FP16). One query row of zeros (every score 0, whatever the dot's order), two KV
/// positions, DV 128, mask `[0, m]`: the accumulator is `V0` after the first position, then
/// either `rne16(V0 + V1·rne16(e))` (f16 arithmetic: a native build with AVX512-FP16) or
/// `rne16(fma(V1, e, V0))` (f32 fused multiply-add: every other build), `e = expf(m)`; the output
/// is that times `1/(1 + e)`. Against the native build on this CPU the rule must be ours;
/// against another build the test says which rule it found.
#[test]
fn flash_attn_ext_f16_rule_probe() {
    use half::f16;
    let Some(u) = upstream() else { return };
    let (dk, dv, n_kv) = (128i64, 128usize, 2i64);
    let mut r = XorShift::new(33);
    let ctx = u.context(1 << 20, 8).expect("ggml_init");
    let q = ctx.new_tensor(GgmlType::F32 as u32, [dk, 1, 1, 1]);
    let k = ctx.new_tensor(GgmlType::F16 as u32, [dk, n_kv, 1, 1]);
    let v = ctx.new_tensor(GgmlType::F16 as u32, [dv as i64, n_kv, 1, 1]);
    let mask = ctx.new_tensor(GgmlType::F16 as u32, [n_kv, 1, 1, 1]);
    // SAFETY: contiguous tensors of this context, each borrowed once at a time
    unsafe {
        upstream_lib::tensor_bytes(q).fill(0);
        for (t, n) in [(k, dk as usize * 2), (v, dv * 2)] {
            let vals: Vec<f32> = (0..n).map(|_| r.f32_in(-1.0, 1.0)).collect();
            quantize_row(GgmlType::F16, &vals, upstream_lib::tensor_bytes(t));
        }
    }
    let m = f16::from_f32(-0.3);
    // SAFETY: as above
    let mb = unsafe { upstream_lib::tensor_bytes(mask) };
    mb[..2].copy_from_slice(&f16::ZERO.to_bits().to_le_bytes());
    mb[2..].copy_from_slice(&m.to_bits().to_le_bytes());
    // SAFETY: as above
    let vh: Vec<f16> = unsafe { upstream_lib::tensor_bytes(v) }.chunks_exact(2).map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]]))).collect();
    let out = ctx.flash_attn_ext(q, k, v, mask, std::ptr::null_mut(), [0.125, 0.0, 0.0], 0);
    let graph = ctx.graph(out);
    let bits = || -> Vec<u32> {
        // SAFETY: as above
        unsafe { upstream_lib::tensor_bytes(out) }.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    assert_eq!(ctx.compute(graph, 1), 0);
    let theirs = bits();
    // SAFETY: as above
    unsafe { upstream_lib::tensor_bytes(out) }.fill(0xff);
    assert_eq!(ggml_rs_cpu::backend::exports::ggml_graph_compute_with_ctx(ctx.as_ptr().cast(), graph, 1), 0);
    let ours = bits();
    // the two candidates (glibc's expf is Rust's f32::exp; S = fma(1, 1, e))
    let e = m.to_f32().exp();
    let inv = 1.0 / 1f32.mul_add(1.0, e);
    let (v0, v1) = (&vh[..dv], &vh[dv..]);
    let eh = f16::from_f32(e).to_f32();
    let f16_arith: Vec<u32> = (0..dv).map(|i| (f16::from_f64(v0[i].to_f64() + f64::from(v1[i].to_f32() * eh)).to_f32() * inv).to_bits()).collect();
    let f32_fma: Vec<u32> = (0..dv).map(|i| (f16::from_f32(v1[i].to_f32().mul_add(e, v0[i].to_f32())).to_f32() * inv).to_bits()).collect();
    let apart = (0..dv).filter(|&i| f16_arith[i] != f32_fma[i]).count();
    assert!(apart > 0, "the probe cannot tell the rules apart: change its values");
    let rule_of = |bits: &[u32]| match (bits == f16_arith.as_slice(), bits == f32_fma.as_slice()) {
        (true, _) => "f16 arithmetic (AVX512-FP16)",
        (_, true) => "f32 fused multiply-add",
        _ => "neither rule",
    };
    let (theirs_rule, ours_rule) = (rule_of(&theirs), rule_of(&ours));
    let our_choice = if ggml_rs_cpu::ops::flash_attn_f16_native_len(dv) == dv { "f16 arithmetic (AVX512-FP16)" } else { "f32 fused multiply-add" };
    println!(
        "f16 rule probe ({apart} of {dv} elements tell the rules apart): upstream's {} library used {theirs_rule}; ours used {ours_rule} (flash_attn_f16_native_len({dv}) = {})",
        if u.avx512_build { "AVX-512" } else { "non-AVX-512" },
        ggml_rs_cpu::ops::flash_attn_f16_native_len(dv)
    );
    assert_eq!(ours_rule, our_choice, "our one-row path did not use the rule flash_attn_f16_native_len chose");
    assert_ne!(theirs_rule, "neither rule", "upstream's output matches neither f16 rule: the probe's model of the one-row path is wrong");
    if u.avx512_build && ggml_rs_cpu::simd::active() >= Level::Avx512 {
        assert_eq!(
            theirs_rule, our_choice,
            "upstream's native library accumulates an F16 V with {theirs_rule}, ours with {our_choice}: flash_attn_f16_native_len keys on the wrong feature for this build"
        );
    } else if theirs_rule != our_choice {
        println!(
            "NOTE: this library (not the native build) uses {theirs_rule} for an F16 V, ours {our_choice}: F16 V with DV >= 128 differs from it by design"
        );
    }
}
