//! Q1_0, Q2_0 and NVFP4 against upstream's libraries (dlopened from `GGML_RS_UPSTREAM_LIB_DIR`;
//! each test prints why and passes when they are not there, unless `GGML_RS_UPSTREAM_REQUIRED=1`):
//! quantized bytes against `ggml_quantize_chunk` and ggml-cpu's `from_float` on model-like and
//! edge rows, dequantization bit for bit on random blocks (any scale bytes), the dot products
//! against its `vec_dot`s and MUL_MAT against its graph compute.

#[path = "support/upstream_lib.rs"]
mod upstream_lib;

use ggml_rs_cpu::GgmlType;
use ggml_rs_cpu::block::AlignedBytes;
use ggml_rs_cpu::kernels;
use ggml_rs_cpu::quants::{dequantize_row, quantize_row, quantize_row_q8_0_cpu};
use ggml_rs_cpu::rng::XorShift;
use ggml_rs_cpu::simd::Level;
use upstream_lib::{VecDot, load_or_skip as upstream};

const LOW_BIT: [GgmlType; 3] = [GgmlType::Q1_0, GgmlType::Q2_0, GgmlType::Nvfp4];

/// rows of 128 elements at the edges of the three formats' arithmetic: zeros and −0, one value,
/// ±infinity, NaN, subnormals, f32's extremes (a Q1_0 / Q2_0 scale that overflows f16), and
/// NVFP4 sub-block maxima on each side of the UE4M3 steps: its subnormal range (amax / 6 below
/// 2⁻⁶), the rounding bit, and 448 · 6 (its largest scale)
fn edge_rows(r: &mut XorShift) -> Vec<Vec<f32>> {
    let n = 128;
    let mut rows = vec![vec![0.0f32; n], vec![-0.0f32; n]];
    let with = |v: f32, at: &[usize]| -> Vec<f32> {
        let mut x: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.37).sin() * 0.01).collect();
        for &i in at {
            x[i] = v;
        }
        x
    };
    for v in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX, -f32::MAX, 65504.0, 1e6, f32::MIN_POSITIVE, 1e-40, -1e-42] {
        rows.push(with(v, &[0, 17, 63, 64, 100]));
        rows.push(vec![v; n]);
    }
    // subnormal-only rows (a Q2_0 scale whose reciprocal overflows)
    rows.push((0..n).map(|i| f32::from_bits(1 + i as u32 * 3)).collect());
    rows.push((0..n).map(|i| -f32::from_bits(7 + i as u32)).collect());
    // NVFP4: amax / 6 across the UE4M3 grid, exact steps and their midpoints
    for e in -10i32..=9 {
        for m in 0..16u32 {
            let base = 2f32.powi(e) * (1.0 + m as f32 / 16.0) * 6.0;
            rows.push((0..n).map(|i| if i % 16 == 0 { base } else { base * r.f32_in(-1.0, 1.0) }).collect());
        }
    }
    rows.push((0..n).map(|i| if i % 16 == 3 { 448.0 * 6.0 } else { r.f32_in(-3000.0, 3000.0) }).collect());
    rows.push((0..n).map(|i| if i % 16 == 3 { 449.0 * 6.0 } else { r.f32_in(-3000.0, 3000.0) }).collect());
    // exact E2M1 multiples and their midpoints under a power-of-two scale (the nearest-code ties)
    rows.push((0..n).map(|i| [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, -6.0][i % 16]).collect());
    // Q2_0's rounding: x / amax at ±0.5 and ±1.5
    rows.push((0..n).map(|i| [2.0, 1.0, -1.0, 3.0, -3.0, 0.5, -0.5, 1.5][i % 8]).collect());
    rows
}

/// quantized bytes equal upstream's `ggml_quantize_chunk` and ggml-cpu's `from_float`, on
/// model-like rows, random rows and [`edge_rows`]
#[test]
fn low_bit_types_quantize_as_upstream() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(71);
    let mut rows = edge_rows(&mut r);
    for _ in 0..64 {
        rows.push(r.model_like(128));
        let s = 2f32.powi(r.i32_in(-30, 30));
        rows.push((0..128).map(|_| r.f32_in(-s, s)).collect());
    }
    for ty in LOW_BIT {
        assert_eq!(u.type_size(ty as u32), (ty.block_size() as i64, ty.type_size()), "{} block size", ty.name());
        assert_eq!(u.type_name(ty as u32), ty.name());
        for (i, x) in rows.iter().enumerate() {
            let mut ours = AlignedBytes::zeroed(ty.row_size(x.len()));
            quantize_row(ty, x, &mut ours);
            let mut chunk = AlignedBytes::zeroed(ours.len());
            u.quantize_chunk(ty as u32, x, x.len(), &mut chunk);
            assert!(*ours == *chunk, "{} row {i} ({:?}...): bytes differ from ggml_quantize_chunk", ty.name(), &x[..4]);
            let mut cpu = AlignedBytes::zeroed(ours.len());
            u.cpu_from_float(ty as u32, x, &mut cpu);
            assert!(*ours == *cpu, "{} row {i}: bytes differ from ggml-cpu's from_float", ty.name());
        }
        println!("{}: {} rows byte for byte", ty.name(), rows.len());
    }
}

/// `nb` random blocks of `ty`: random bytes; the f16 scale of Q1_0 / Q2_0 finite and small
/// (|d| < 2⁻⁴, or 0 / a subnormal now and then) where `finite`, any bits otherwise; NVFP4's
/// scale bytes any of the 256
fn random_blocks(ty: GgmlType, nb: usize, finite: bool, r: &mut XorShift) -> AlignedBytes {
    let size = ty.type_size();
    let mut b = AlignedBytes::zeroed(nb * size);
    r.fill_bytes(&mut b);
    if ty != GgmlType::Nvfp4 {
        for blk in b.chunks_exact_mut(size) {
            let d = match r.i32_in(0, 16) {
                0 => 0u16,
                1 => r.i32_in(1, 1023) as u16,
                2 if !finite => [0x7c00u16, 0xfc00, 0x7e00, 0xfe01][r.i32_in(0, 3) as usize],
                _ => half::f16::from_f32(r.f32_in(-0.0625, 0.0625)).to_bits(),
            };
            blk[..2].copy_from_slice(&d.to_le_bytes());
        }
    }
    b
}

/// dequantization bit for bit equal to upstream's `to_float` on random blocks (any f16 scale,
/// infinities and NaNs too; every UE4M3 byte, 0x7F and the sign bit included)
#[test]
fn low_bit_types_dequantize_as_upstream() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(72);
    for ty in LOW_BIT {
        let nb = 64;
        let mut n = 0usize;
        for _ in 0..16 {
            let x = random_blocks(ty, nb, false, &mut r);
            let (mut ours, mut theirs) = (vec![0f32; nb * ty.block_size()], vec![0f32; nb * ty.block_size()]);
            dequantize_row(ty, &x, &mut ours);
            u.to_float(ty as u32, &x, &mut theirs);
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{} element {i}: ours {a}, upstream's to_float {b}", ty.name());
            }
            n += ours.len();
        }
        println!("{}: {n} values bit for bit", ty.name());
    }
}

/// model-like activations quantized to Q8_0 as upstream's CPU does
fn activations(u: &upstream_lib::Upstream, n: usize, r: &mut XorShift) -> AlignedBytes {
    let a = r.model_like(n);
    let mut q = AlignedBytes::zeroed(GgmlType::Q8_0.row_size(n));
    quantize_row_q8_0_cpu(&a, ggml_rs_cpu::block::as_blocks_mut(&mut q, "q8_0"));
    let mut theirs = AlignedBytes::zeroed(q.len());
    u.cpu_from_float(GgmlType::Q8_0 as u32, &a, &mut theirs);
    assert!(*theirs == *q, "q8_0 activations differ from ggml-cpu's from_float");
    q
}

/// whether the set `level` sums `ty` in the order of the loaded upstream build: on x86, Q1_0 and
/// NVFP4 from AVX2 (both x86 builds run the same intrinsics), Q2_0's generic C fused by the AVX2
/// build and not by the native one (our avx2 / avx512 sets and the avx512vnni set); on aarch64
/// (upstream's build with DotProd) the dotprod set, and the neon set for NVFP4 (whose lanes are
/// whole sub-blocks either way)
fn same_order(ty: GgmlType, level: Level, avx512_build: bool) -> bool {
    match ty {
        _ if cfg!(target_arch = "aarch64") => level == Level::NeonDot || (ty == GgmlType::Nvfp4 && level == Level::Neon),
        GgmlType::Q2_0 => level >= Level::Avx2 && (level == Level::Avx512Vnni) == avx512_build,
        _ => level >= Level::Avx2,
    }
}

/// every set's dot product within 2⁻¹⁸ · Σ|w·a| of upstream's vec_dot and of the dequantized
/// product; bit for bit where the set sums in the loaded build's order ([`same_order`]); the
/// scalar set (the definitions, unfused) against upstream's exported `*_generic` (which its x86
/// builds compile with some steps fused), counted
#[test]
fn low_bit_vec_dots_match_upstream() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(73);
    for ty in LOW_BIT {
        let generic_name = format!("ggml_vec_dot_{}_q8_0_generic\0", ty.name());
        // SAFETY: the generic vec_dots have ggml_vec_dot_t's signature
        let generic: Option<VecDot> = unsafe { u.cpu_symbol(generic_name.as_bytes()) };
        let (mut exact, mut generic_exact, mut total) = (0usize, 0usize, 0usize);
        for n in [128usize, 256, 4096, 11008] {
            for _ in 0..24 {
                let x = random_blocks(ty, n / ty.block_size(), true, &mut r);
                let y = activations(&u, n, &mut r);
                let (mut wd, mut yd) = (vec![0f32; n], vec![0f32; n]);
                dequantize_row(ty, &x, &mut wd);
                dequantize_row(GgmlType::Q8_0, &y, &mut yd);
                let abs: f64 = wd.iter().zip(&yd).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
                let float: f64 = wd.iter().zip(&yd).map(|(a, b)| *a as f64 * *b as f64).sum();
                let tol = abs * 2f64.powi(-18) + 1e-30;
                let theirs = u.vec_dot(ty as u32, n, &x, &y);
                for level in Level::available() {
                    let v = kernels::at(level).row_dot(ty).dot(&x, &y);
                    assert!((v as f64 - theirs as f64).abs() <= tol, "{} {} n={n}: ours {v}, upstream vec_dot {theirs}", ty.name(), level.name());
                    assert!((v as f64 - float).abs() <= tol, "{} {} n={n}: ours {v}, dequantized product {float}", ty.name(), level.name());
                    if same_order(ty, level, u.avx512_build) {
                        assert_eq!(v.to_bits(), theirs.to_bits(), "{} {} n={n}: ours {v}, upstream vec_dot {theirs}", ty.name(), level.name());
                        exact += 1;
                    }
                }
                if let Some(g) = generic {
                    let mut s = 0f32;
                    // SAFETY: x holds n elements of ty, y n of Q8_0; one result
                    unsafe { g(n as i32, &mut s, 0, x.as_ptr().cast(), 0, y.as_ptr().cast(), 0, 1) };
                    let ours = kernels::at(Level::Scalar).row_dot(ty).dot(&x, &y);
                    assert!((ours as f64 - s as f64).abs() <= tol, "{} n={n}: scalar {ours}, upstream generic {s}", ty.name());
                    generic_exact += (ours.to_bits() == s.to_bits()) as usize;
                }
                total += 1;
            }
        }
        let generic = match generic {
            Some(_) => format!("the scalar set equals its generic C in {generic_exact} of {total} rows"),
            None => "its generic C is not exported (its vec_dot is that C)".to_string(),
        };
        println!("{}: {exact} dot products bit for bit upstream's vec_dot; {generic}", ty.name());
    }
}

/// MUL_MAT of low-bit weights (1 and 9 activation rows: upstream's x86 builds neither repack nor
/// tile these types, every row is vec_dot's) through our backend on upstream's graph, bit for bit
/// where the active set sums in the loaded build's order
#[test]
fn low_bit_mul_mat_is_upstreams() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(74);
    let (rows, k) = (16usize, 1024usize);
    let level = ggml_rs_cpu::simd::active();
    for ty in LOW_BIT {
        for cols in [1usize, 9] {
            let w = random_blocks(ty, rows * k / ty.block_size(), true, &mut r);
            let x = r.model_like(k * cols);
            let (theirs, ours) = upstream_lib::mul_mat_theirs_and_ours(&u, ty as u32, &w, &x, k, 2);
            let exact = ours.iter().zip(&theirs).filter(|(o, t)| o.to_bits() == t.to_bits()).count();
            for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
                let tol = 1e-3 * t.abs().max(1.0);
                assert!((o - t).abs() <= tol, "{} output {i}: ours {o}, upstream's {t}", ty.name());
            }
            if same_order(ty, level, u.avx512_build) {
                assert_eq!(exact, ours.len(), "{} ({} set, {cols} rows): outputs differ from upstream's MUL_MAT", ty.name(), level.name());
            }
            println!("{} ({} set, {cols} rows): {exact} of {} outputs bit for bit", ty.name(), level.name(), ours.len());
        }
    }
}
