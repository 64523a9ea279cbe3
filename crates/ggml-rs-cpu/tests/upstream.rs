//! Against what we did not write: our formats and kernels compared with upstream's stock
//! libggml-base / libggml-cpu (dlopened from `GGML_RS_UPSTREAM_LIB_DIR`; each test prints why
//! and passes when they are not there, unless `GGML_RS_UPSTREAM_REQUIRED=1`).
//!
//! - quantize: `ggml_quantize_chunk` (upstream's reference quantizers) byte for byte;
//! - dequantize: the type's `to_float` bit for bit;
//! - activation quantization: ggml-cpu's `from_float` (Q8_K: the reference; Q8_0: the x86 form);
//! - dot products: ggml-cpu's `vec_dot` — equal where the sum is exact, within float rounding
//!   otherwise.
//!
//! FLASH_ATTN_EXT, the whole op against upstream's, is `upstream_fa.rs`.

#[path = "support/upstream_lib.rs"]
mod upstream_lib;

use ggml_rs_cpu::block::AlignedBytes;
use ggml_rs_cpu::dot::RowDot;
use ggml_rs_cpu::quants::{dequantize_row, quantize_row, quantize_row_q8_0_cpu, quantize_row_q8_1_x86};
use ggml_rs_cpu::rng::XorShift;
use ggml_rs_cpu::simd::Level;
use ggml_rs_cpu::{GgmlType, block};
use upstream_lib::Upstream;

use upstream_lib::load_or_skip as upstream;

const WEIGHT_TYPES: [GgmlType; 18] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4K,
    GgmlType::Q6K,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q5K,
    GgmlType::Tq1_0,
    GgmlType::Tq2_0,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
    GgmlType::Mxfp4,
];

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

/// upstream's aarch64 build (GCC, FMA in the baseline) fuses multiply-adds in the scale searches
/// of the K-quants (`make_qkx2_quants`, `make_qx_quants`) and of IQ4_NL / IQ4_XS
/// (`quantize_row_iq4_nl_impl`); ours give the unfused x86 build's bytes
fn fused_search_on_aarch64(ty: GgmlType) -> bool {
    cfg!(target_arch = "aarch64") && matches!(ty, GgmlType::Q2K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K | GgmlType::Iq4Nl | GgmlType::Iq4Xs)
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

/// `row` quantized by ours as `ggml_quantize_chunk` does it (IQ4_NL: its chunk form, which
/// searches further than the type's from_float), asserted byte for byte upstream's (`what`
/// names the row in the message)
fn quantized_as_chunk(u: &Upstream, ty: GgmlType, row: &[f32], what: &str) -> AlignedBytes {
    let n = row.len();
    let mut theirs = AlignedBytes::zeroed(ty.row_size(n));
    let mut ours = AlignedBytes::zeroed(ty.row_size(n));
    u.quantize_chunk(ty as u32, row, n, &mut theirs);
    if ty == GgmlType::Iq4Nl {
        ggml_rs_cpu::quants::quantize_iq4_nl_chunk(row, block::as_blocks_mut(&mut ours, "iq4_nl"));
    } else {
        quantize_row(ty, row, &mut ours);
    }
    if let Some(at) = theirs.iter().zip(ours.iter()).position(|(a, b)| a != b) {
        panic!("{} {what}: first different byte {at} (block {}): upstream {:#04x}, ours {:#04x}", ty.name(), at / ty.type_size(), theirs[at], ours[at]);
    }
    ours
}

#[test]
fn quantize_is_byte_for_byte_upstreams() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(11);
    let mut compared = 0usize;
    for ty in WEIGHT_TYPES {
        if fused_search_on_aarch64(ty) {
            println!("SKIP {}: upstream's aarch64 build fuses its scale search's multiply-adds (ours: the x86 build's bytes)", ty.name());
            continue;
        }
        for n in [256, 4096] {
            for (k, row) in test_rows(&mut r, n).iter().enumerate() {
                compared += quantized_as_chunk(&u, ty, row, &format!("row {k} (n={n})")).len();
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
                let mut mag: f64 = wd.iter().zip(&ad).map(|(x, y)| (*x as f64 * *y as f64).abs()).sum();
                if matches!(ty, GgmlType::Tq1_0 | GgmlType::Tq2_0) {
                    // upstream's x86 kernels sum `(t + 1)·a` per lane, subtract the activations'
                    // sums and round each lane's product with `d` before the lanes are added: their
                    // error scales with `d · Σ|a|`, even where every `t·a` is zero
                    let wmax = wd.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
                    mag = mag.max(wmax * ad.iter().map(|v| v.abs() as f64).sum::<f64>());
                }
                for level in Level::available() {
                    let ours = ggml_rs_cpu::kernels::at(level).row_dot(ty).dot(&wq, &aq) as f64;
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
                let ours = ggml_rs_cpu::kernels::at(Level::NeonDot).row_dot(ty).dot(&wq, &aq);
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
/// (each kind of tail) and models' rows; BF16 too, in the table's `bf16_native` order (FLASH_ATTN_EXT's
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
                    let ours = ggml_rs_cpu::kernels::at(level).row_dot(ty).dot(&wq, &aq);
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
            let ours = RowDot::Bf16(ggml_rs_cpu::kernels::at(level).dot.bf16_native).dot(&wq, &aq);
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
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q2K, GgmlType::Q3K, GgmlType::Q5K] {
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
                GgmlType::Q4K | GgmlType::Q6K | GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q5K => {
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
                GgmlType::Q2K => {
                    for b in block::as_blocks_mut::<block::BlockQ2K>(&mut wq, "q2_K") {
                        b.d = half::f16::from_f32(1.0);
                        b.dmin = half::f16::from_f32(1.0);
                    }
                }
                GgmlType::Q3K => {
                    for b in block::as_blocks_mut::<block::BlockQ3K>(&mut wq, "q3_K") {
                        b.d = half::f16::from_f32(1.0);
                    }
                }
                GgmlType::Q5K => {
                    for b in block::as_blocks_mut::<block::BlockQ5K>(&mut wq, "q5_K") {
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
                let ours = ggml_rs_cpu::kernels::at(level).row_dot(ty).dot(&wq, &aq);
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{} {}: upstream {theirs}, ours {ours}", ty.name(), level.name());
            }
        }
    }
}

/// the row-parallel MUL_MAT against upstream's own recipe: ggml-cpu's `from_float` on the
/// activations, then its `vec_dot` per row; within float rounding (2⁻¹⁸ · Σ|w·a|)
/// SILU and SWIGLU rows as upstream's CPU computes them (its build's vector exp in blocks, libm
/// for the tail), bit for bit: our rows at the level of the build loaded (AVX-512 for a native
/// AVX-512 build, AVX2 for an AVX2 build: `expf`'s two definitions; NEON for an aarch64
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
        ggml_rs_cpu::kernels::at(level).vec.silu_row(&mut ours, &x, gated.then_some(&g[..]));
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
                let ours = ggml_rs_cpu::kernels::at(level).row_dot(ty).dot(&wq, &aq);
                assert_eq!(ours.to_bits(), theirs.to_bits(), "q6_K {} n={n}: upstream {theirs}, ours {ours}", level.name());
            }
        }
    }
}

/// Q2_K, Q3_K, Q5_K, TQ1_0 and TQ2_0 · Q8_K: every x86 set from avx2 up gives what ggml-cpu's
/// vec_dot gives (its AVX2 branches, which its AVX2 and native builds both compile for these
/// types) bit for bit, on the weights of [`test_rows`] and model-like activations
#[test]
fn k_and_ternary_vec_dots_are_ggml_cpus_x86_order_bit_for_bit() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(17);
    let levels: Vec<Level> = Level::available().into_iter().filter(|l| *l >= Level::Avx2).collect();
    if levels.is_empty() {
        println!("SKIP: no AVX2 on this CPU");
        return;
    }
    let (mut compared, mut reference_differs) = (0usize, 0usize);
    for ty in [GgmlType::Q2K, GgmlType::Q3K, GgmlType::Q5K, GgmlType::Tq1_0, GgmlType::Tq2_0] {
        for n in [256, 512, 4096, 11008] {
            for (k, w) in test_rows(&mut r, n).iter().enumerate() {
                let mut wq = AlignedBytes::zeroed(ty.row_size(n));
                quantize_row(ty, w, &mut wq);
                let a = r.model_like(n);
                let aq = activations(ty, &a);
                // the activations are ggml-cpu's own (its Q8_K from_float is the reference)
                let mut theirs_aq = AlignedBytes::zeroed(aq.len());
                u.cpu_from_float(GgmlType::Q8K as u32, &a, &mut theirs_aq);
                assert!(*theirs_aq == *aq, "q8_K activations differ from ggml-cpu's from_float");
                let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
                // the scalar references sum in upstream's generic order: mostly other bits
                let reference = ggml_rs_cpu::kernels::at(Level::Scalar).row_dot(ty).dot(&wq, &aq);
                reference_differs += (reference.to_bits() != theirs.to_bits()) as usize;
                for &level in &levels {
                    let ours = ggml_rs_cpu::kernels::at(level).row_dot(ty).dot(&wq, &aq);
                    assert_eq!(ours.to_bits(), theirs.to_bits(), "{} {} n={n} row {k}: upstream {theirs}, ours {ours}", ty.name(), level.name());
                    compared += 1;
                }
            }
        }
    }
    println!(
        "{compared} dot products equal to ggml-cpu's vec_dot bit for bit ({} sets); the scalar references differ in {reference_differs} of {} rows",
        levels.len(),
        compared / levels.len()
    );
}

/// IQ4_NL, IQ4_XS and MXFP4 on rows at the edges of their scale arithmetic, byte for byte and
/// dequantized bit for bit: MXFP4 blocks whose largest magnitude lies just below or at a power
/// of two from 2⁻¹⁴⁹ to 2¹²⁷ (where `log2f` rounds up to the next integer, and where the scale
/// byte leaves 0..=255 and upstream keeps the low byte of the truncating conversion), denormal
/// and huge rows (scales overflowing f16, sums overflowing f32), mixed signs of zero, and the
/// level table's exact ties
#[test]
fn iq4_and_mxfp4_edges_are_upstreams() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(21);
    let n = 256;
    let mut rows: Vec<Vec<f32>> = Vec::new();
    // per block of 32 one exponent: the block's values model-like, its largest magnitude just
    // below 2^k (or exactly 2^k for odd rows)
    for (first, exact) in [(-149i32, false), (-149, true), (-110, false), (-40, false), (-40, true), (40, false), (96, false), (120, true)] {
        let mut row = r.model_like(n);
        for b in 0..n / 32 {
            let k = (first + 4 * b as i32).min(127);
            let p = 2f32.powi(k.max(-126)) * if k < -126 { 2f32.powi(k + 126) } else { 1.0 };
            let top = if exact || p == 0.0 { p } else { f32::from_bits(p.to_bits() - 1) };
            let bmax = row[32 * b..32 * b + 32].iter().fold(0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE);
            for v in &mut row[32 * b..32 * b + 32] {
                *v = *v / bmax * top;
            }
            row[32 * b + b % 32] = if b % 2 == 0 { top } else { -top };
        }
        rows.push(row);
    }
    rows.push((0..n).map(|i| ((i % 64) as f32 - 31.5) * 1e-40).collect());
    rows.push((0..n).map(|_| r.f32_in(-3e38, 3e38)).collect());
    rows.push(
        (0..n)
            .map(|i| {
                if i % 32 == 3 {
                    f32::MAX
                } else if i % 32 == 4 {
                    -f32::MAX
                } else {
                    r.f32_in(-1e38, 1e38)
                }
            })
            .collect(),
    );
    rows.push((0..n).map(|i| if i % 3 == 0 { -0.0 } else { 0.0 }).collect());
    rows.push(
        (0..n)
            .map(|i| {
                [-127.0f32, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0][i % 16]
                    + if i % 5 == 0 { 0.5 } else { 0.0 }
            })
            .collect(),
    );
    rows.push((0..n).map(|i| (i % 9) as f32 * 0.25 - 1.0).collect());
    let mut compared = 0usize;
    for ty in [GgmlType::Iq4Nl, GgmlType::Iq4Xs, GgmlType::Mxfp4] {
        if fused_search_on_aarch64(ty) {
            println!("SKIP {}: upstream's aarch64 build fuses its scale search's multiply-adds", ty.name());
            continue;
        }
        for (k, row) in rows.iter().enumerate() {
            let ours = quantized_as_chunk(&u, ty, row, &format!("edge row {k}"));
            compared += ours.len();
            let (mut dt, mut d) = (vec![0f32; n], vec![0f32; n]);
            u.to_float(ty as u32, &ours, &mut dt);
            dequantize_row(ty, &ours, &mut d);
            for i in 0..n {
                assert_eq!(dt[i].to_bits(), d[i].to_bits(), "{} edge row {k} element {i}: upstream {} ours {}", ty.name(), dt[i], d[i]);
            }
        }
    }
    // every E8M0 byte and every code, dequantized
    let mut all = AlignedBytes::zeroed(GgmlType::Mxfp4.row_size(256 * 32));
    for (e, b) in all.chunks_exact_mut(17).enumerate() {
        b[0] = e as u8;
        for (j, q) in b[1..].iter_mut().enumerate() {
            *q = (j as u8) | (((j as u8) ^ 0xf) << 4);
        }
    }
    let (mut dt, mut d) = (vec![0f32; 256 * 32], vec![0f32; 256 * 32]);
    u.to_float(GgmlType::Mxfp4 as u32, &all, &mut dt);
    dequantize_row(GgmlType::Mxfp4, &all, &mut d);
    for i in 0..d.len() {
        assert_eq!(dt[i].to_bits(), d[i].to_bits(), "mxfp4 e={} element {}: upstream {} ours {}", i / 32, i % 32, dt[i], d[i]);
    }
    println!("iq4/mxfp4 edges: {compared} bytes equal to ggml_quantize_chunk's");
}

/// IQ4_NL, IQ4_XS and MXFP4 dot products on random weight bytes with power-of-two scales and
/// small activations: every float operation exact, so ours at every level is ggml-cpu's to the bit
#[test]
fn iq4_and_mxfp4_integer_sums_equal_ggml_cpus() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(22);
    for n in [256, 4096, 256 * 43] {
        for ty in [GgmlType::Iq4Nl, GgmlType::Iq4Xs, GgmlType::Mxfp4] {
            for _ in 0..8 {
                let mut wq = AlignedBytes::zeroed(ty.row_size(n));
                r.fill_bytes(&mut wq);
                let a: Vec<f32> = (0..n).map(|_| r.i32_in(-3, 3) as f32).collect();
                let mut aq = activations(ty, &a);
                match ty {
                    GgmlType::Iq4Nl => {
                        for b in block::as_blocks_mut::<block::BlockIq4Nl>(&mut wq, "iq4_nl") {
                            b.d = half::f16::from_f32(0.125);
                        }
                    }
                    GgmlType::Mxfp4 => {
                        for b in block::as_blocks_mut::<block::BlockMxfp4>(&mut wq, "mxfp4") {
                            b.e = 127 + b.e % 4;
                        }
                    }
                    _ => {
                        for b in block::as_blocks_mut::<block::BlockIq4Xs>(&mut wq, "iq4_xs") {
                            b.d = half::f16::from_f32(0.5);
                        }
                    }
                }
                if ty == GgmlType::Iq4Xs {
                    for b in block::as_blocks_mut::<block::BlockQ8K>(&mut aq, "q8_K") {
                        b.d = 0.25;
                    }
                } else {
                    for b in aq.chunks_exact_mut(34) {
                        b[..2].copy_from_slice(&half::f16::from_f32(0.25).to_bits().to_le_bytes());
                    }
                }
                let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
                for level in Level::available() {
                    let ours = ggml_rs_cpu::kernels::at(level).row_dot(ty).dot(&wq, &aq);
                    assert_eq!(ours.to_bits(), theirs.to_bits(), "{} {} n={n}: upstream {theirs}, ours {ours}", ty.name(), level.name());
                }
            }
        }
    }
}

/// IQ4_NL, IQ4_XS and MXFP4 on model-like data: our kernels are ggml-cpu's x86 `vec_dot` bit
/// for bit (its order: `dot::iq4`'s module text), odd block counts included: the avx2 and avx512
/// sets against its AVX2 build (whose odd last block is one fma), the avx512vnni set against its
/// native AVX-512 build (whose odd last block is rounded twice)
#[test]
fn iq4_and_mxfp4_vec_dot_is_ggml_cpus_x86_order_bit_for_bit() {
    let Some(u) = upstream() else { return };
    let levels: Vec<Level> = if u.avx512_build {
        Level::available().into_iter().filter(|l| *l == Level::Avx512Vnni).collect()
    } else {
        Level::available().into_iter().filter(|l| matches!(l, Level::Avx2 | Level::Avx512)).collect()
    };
    if levels.is_empty() {
        println!("SKIP: none of this CPU's sets sums in this build's order");
        return;
    }
    let mut r = XorShift::new(23);
    for ty in [GgmlType::Iq4Nl, GgmlType::Iq4Xs, GgmlType::Mxfp4] {
        for n in [256, 256 + 32, 4096, 11008, 11008 + 32] {
            if n % ty.block_size() != 0 {
                continue;
            }
            for _ in 0..8 {
                let (w, a) = (r.model_like(n), r.model_like(n));
                let mut wq = AlignedBytes::zeroed(ty.row_size(n));
                quantize_row(ty, &w, &mut wq);
                let aq = activations(ty, &a);
                let theirs = u.vec_dot(ty as u32, n, &wq, &aq);
                for &level in &levels {
                    let ours = ggml_rs_cpu::kernels::at(level).row_dot(ty).dot(&wq, &aq);
                    assert_eq!(ours.to_bits(), theirs.to_bits(), "{} {} n={n}: upstream {theirs}, ours {ours}", ty.name(), level.name());
                }
            }
        }
    }
}

/// every weight type's `from_float` of ggml-cpu (what SET_ROWS and CPY quantize with, a quantized
/// KV cache among them) is our `quantize_row` byte for byte (IQ4_NL: its `_ref` form, which
/// searches less than `ggml_quantize_chunk`), except the activation-side forms of Q8_0 / Q8_1 /
/// Q8_K, compared in `activation_quantization_is_ggml_cpus`
#[test]
fn from_float_is_ggml_cpus() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(19);
    let mut compared = 0usize;
    for ty in WEIGHT_TYPES.into_iter().filter(|t| !matches!(t, GgmlType::F32 | GgmlType::Q8_0)) {
        if fused_search_on_aarch64(ty) {
            continue;
        }
        for row in test_rows(&mut r, 512).iter().take(24) {
            let mut theirs = AlignedBytes::zeroed(ty.row_size(512));
            let mut ours = AlignedBytes::zeroed(ty.row_size(512));
            u.cpu_from_float(ty as u32, row, &mut theirs);
            quantize_row(ty, row, &mut ours);
            if ty == GgmlType::Iq4Nl {
                // the levels of a block of scale 0 are whatever upstream's buffer held: values compared
                let (mut a, mut b) = (vec![0f32; 512], vec![0f32; 512]);
                u.to_float(ty as u32, &theirs, &mut a);
                dequantize_row(ty, &ours, &mut b);
                // (the sign of a zero from a zero scale is that of the leftover level)
                if let Some(i) = a.iter().zip(&b).position(|(x, y)| x.to_bits() != y.to_bits() && !(*x == 0.0 && *y == 0.0)) {
                    let bl = i / 32 * 18;
                    panic!(
                        "iq4_nl from_float element {i} differs: upstream {} ours {}; blocks {:?} vs {:?}",
                        a[i],
                        b[i],
                        &theirs[bl..bl + 18],
                        &ours[bl..bl + 18]
                    );
                }
                for (bt, bo) in theirs.chunks_exact(ty.type_size()).zip(ours.chunks_exact(ty.type_size())) {
                    if bt[..2] != [0, 0] {
                        assert_eq!(bt, bo, "iq4_nl from_float block differs");
                    }
                }
            } else {
                assert!(*theirs == *ours, "{} from_float differs from ggml-cpu's", ty.name());
            }
            compared += ours.len();
        }
    }
    println!("from_float: {compared} bytes equal to ggml-cpu's");
}
