//! The GPU half of the crate's unit tests (scripts/gpu-check.sh runs it on a machine with a
//! device; without one it skips, saying why, unless GGML_RS_CUDA_REQUIRE_GPU=1): every module
//! loaded on the device, and kernels of each path against host references.

use cudarc::driver::result;

use crate::dispatch::{self, NodeDesc, Plan, T_F16, T_F32, TDesc};
use crate::kernels::Module;
use crate::runtime::{Gpu, Stream, cublas_available, probe};

/// On a machine with a GPU (scripts/gpu-check.sh): every module compiles for the device's
/// architecture and loads, and kernels of each path give what a host reference computes (ADD
/// broadcast, RMS_NORM, SOFT_MAX with scale, ROPE NEOX with frequency factors, YaRN and an
/// offset, FLASH_ATTN_EXT decode split over the KV and in one pass (GQA, mask, sinks), MUL_MAT
/// Q8_0 by the mat-vec kernel and by cuBLAS after dequantization into dst's scratch). Skips,
/// saying why, without a device, unless GGML_RS_CUDA_REQUIRE_GPU=1.
#[test]
fn gpu_modules_load_and_kernels_match_host_references() {
    let mut lines = Vec::new();
    let gpus = probe(&mut |l| lines.push(l));
    let Some(gpu) = gpus.into_iter().next() else {
        assert!(std::env::var("GGML_RS_CUDA_REQUIRE_GPU").as_deref() != Ok("1"), "GGML_RS_CUDA_REQUIRE_GPU=1 and no device: {lines:?}");
        eprintln!("SKIP gpu_modules_load_and_kernels_match_host_references: {}", lines.concat().trim());
        return;
    };
    let gpu: &'static Gpu = Box::leak(Box::new(gpu));
    eprintln!("GPU {} sm_{}", gpu.description.to_string_lossy(), gpu.arch());
    for m in Module::ALL {
        for k in m.kernels() {
            gpu.function(m, k).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let mut s = Stream::new(gpu).unwrap();
    let up = |bytes: &[u8]| -> u64 {
        // SAFETY: a fresh allocation of the slice's size, filled from it.
        unsafe {
            let p = result::malloc_sync(bytes.len().max(1)).unwrap();
            result::memcpy_htod_sync(p, bytes).unwrap();
            p
        }
    };
    let down = |p: u64, n: usize| -> Vec<f32> {
        let mut v = vec![0f32; n];
        // SAFETY: p holds at least n floats (allocated by `up` for the result).
        unsafe { result::memcpy_dtoh_sync(&mut v, p).unwrap() };
        v
    };
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut rng = 1u32;
    let mut rand = move || {
        rng = rng.wrapping_mul(1664525).wrapping_add(1013904223);
        (rng >> 8) as f32 / 16777216.0 - 0.5
    };
    let close = |what: &str, got: &[f32], want: &[f32], tol: f32| {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: {g} vs {w}");
        }
    };
    let node = |op: i32, dst: TDesc, srcs: &[TDesc], params: &[(usize, i32)]| {
        let mut src = [None; 5];
        for (i, t) in srcs.iter().enumerate() {
            src[i] = Some(*t);
        }
        let mut p = [0i32; 16];
        for &(i, v) in params {
            p[i] = v;
        }
        NodeDesc { op, params: p, dst, src }
    };
    let c = TDesc::contiguous;

    // ADD, src1 broadcast over rows
    let a: Vec<f32> = (0..24).map(|_| rand()).collect();
    let b: Vec<f32> = (0..8).map(|_| rand()).collect();
    let (pa, pb, pd) = (up(&f32s(&a)), up(&f32s(&b)), up(&[0u8; 96]));
    s.run(&node(ggml_abi::sys::op::ADD, c(T_F32, [8, 3, 1, 1]), &[c(T_F32, [8, 3, 1, 1]), c(T_F32, [8, 1, 1, 1])], &[]), &[pd, pa, pb, 0, 0, 0]).unwrap();
    s.synchronize().unwrap();
    let want: Vec<f32> = (0..24).map(|i| a[i] + b[i % 8]).collect();
    close("ADD", &down(pd, 24), &want, 1e-6);

    // RMS_NORM over rows of 64
    let x: Vec<f32> = (0..256).map(|_| rand()).collect();
    let (px, py) = (up(&f32s(&x)), up(&[0u8; 1024]));
    let eps = 1e-5f32;
    s.run(&node(ggml_abi::sys::op::RMS_NORM, c(T_F32, [64, 4, 1, 1]), &[c(T_F32, [64, 4, 1, 1])], &[(0, eps.to_bits() as i32)]), &[py, px, 0, 0, 0, 0])
        .unwrap();
    s.synchronize().unwrap();
    let mut want = vec![0f32; 256];
    for r in 0..4 {
        let row = &x[r * 64..(r + 1) * 64];
        let k = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / 64.0 + eps).sqrt();
        for i in 0..64 {
            want[r * 64 + i] = row[i] * k;
        }
    }
    close("RMS_NORM", &down(py, 256), &want, 1e-5);

    // SOFT_MAX with scale 0.5 over rows of 40
    let x: Vec<f32> = (0..120).map(|_| 4.0 * rand()).collect();
    let (px, py) = (up(&f32s(&x)), up(&[0u8; 480]));
    s.run(&node(ggml_abi::sys::op::SOFT_MAX, c(T_F32, [40, 3, 1, 1]), &[c(T_F32, [40, 3, 1, 1])], &[(0, 0.5f32.to_bits() as i32)]), &[py, px, 0, 0, 0, 0])
        .unwrap();
    s.synchronize().unwrap();
    let mut want = vec![0f32; 120];
    for r in 0..3 {
        let row = &x[r * 40..(r + 1) * 40];
        let m = row.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v * 0.5));
        let e: Vec<f32> = row.iter().map(|v| (v * 0.5 - m).exp()).collect();
        let sum: f32 = e.iter().sum();
        for i in 0..40 {
            want[r * 40 + i] = e[i] / sum;
        }
    }
    close("SOFT_MAX", &down(py, 120), &want, 1e-5);

    // ROPE NEOX with frequency factors, YaRN and a rotated section at n_offs 8 of rows of 64
    // (ggml-cpu's rope cache: theta = pos * theta_scale^(i/2) / ff[i/2], by multiplication)
    let (ne0, heads, toks, n_dims, n_offs) = (64usize, 2usize, 3usize, 32usize, 8usize);
    let x: Vec<f32> = (0..ne0 * heads * toks).map(|_| rand()).collect();
    let pos: Vec<u8> = [3i32, 17, 1000].iter().flat_map(|p| p.to_le_bytes()).collect();
    let ff: Vec<f32> = (0..n_dims / 2).map(|i| 1.0 + i as f32 * 0.25).collect();
    let (px, pp, pf, py) = (up(&f32s(&x)), up(&pos), up(&f32s(&ff)), up(&vec![0u8; x.len() * 4]));
    let mut rn = crate::dispatch::tests::rope_node(crate::dispatch::ROPE_NEOX, n_dims as i32, Some(c(T_F32, [16, 1, 1, 1])));
    (rn.params[7], rn.params[15]) = (1f32.to_bits() as i32, n_offs as i32); // ext_factor 1, n_offs
    rn.params[6] = 0.5f32.to_bits() as i32; // freq_scale
    s.run(&rn, &[py, px, pp, pf, 0, 0]).unwrap();
    s.synchronize().unwrap();
    let Plan::Rope { theta_scale, corr, .. } = dispatch::plan(&rn).unwrap() else { unreachable!() };
    let mut want = x.clone();
    for t in 0..toks {
        let mut theta = [3f32, 17.0, 1000.0][t];
        for i in (0..n_dims).step_by(2) {
            let (extrap, fs) = (theta / ff[i / 2], 0.5f32);
            let ramp = 1.0 - ((((i / 2) as f32 - corr[0]) / (corr[1] - corr[0]).max(0.001)).clamp(0.0, 1.0));
            let th = fs * extrap * (1.0 - ramp) + extrap * ramp;
            let ms = 1.0 + 0.1 * (1.0 / fs).ln();
            let (cs, sn) = (th.cos() * ms, th.sin() * ms);
            for h in 0..heads {
                let row = (t * heads + h) * ne0 + n_offs;
                let (a, b) = (x[row + i / 2], x[row + i / 2 + n_dims / 2]);
                want[row + i / 2] = a * cs - b * sn;
                want[row + i / 2 + n_dims / 2] = a * sn + b * cs;
            }
            theta *= theta_scale;
        }
    }
    close("ROPE neox n_offs 8 + freq factors + YaRN", &down(py, x.len()), &want, 1e-4);

    // FLASH_ATTN_EXT decode, 4 heads on 2 KV heads (f16), a mask with -inf, sinks: split
    // over the KV (1024 rows: 8 splits and the reduce kernel) and in one pass (200 rows)
    for n_kv in [1024usize, 200] {
        let (dh, heads) = (64usize, 4usize);
        let h16 = |v: &[f32]| v.iter().flat_map(|x| half::f16::from_f32(*x).to_bits().to_le_bytes()).collect::<Vec<u8>>();
        let q: Vec<f32> = (0..dh * heads).map(|_| rand()).collect();
        let k: Vec<f32> = (0..dh * n_kv * 2).map(|_| half::f16::from_f32(rand()).to_f32()).collect();
        let v: Vec<f32> = (0..dh * n_kv * 2).map(|_| half::f16::from_f32(rand()).to_f32()).collect();
        let mask: Vec<f32> = (0..n_kv).map(|i| if i % 7 == 3 { f32::NEG_INFINITY } else { 0.0 }).collect();
        let sinks: Vec<f32> = (0..heads).map(|h| h as f32 * 0.5 - 1.0).collect();
        let mut n = node(
            ggml_abi::sys::op::FLASH_ATTN_EXT,
            c(T_F32, [dh as i64, heads as i64, 1, 1]),
            &[
                c(T_F32, [dh as i64, 1, heads as i64, 1]),
                c(T_F16, [dh as i64, n_kv as i64, 2, 1]),
                c(T_F16, [dh as i64, n_kv as i64, 2, 1]),
                c(T_F16, [n_kv as i64, 1, 1, 1]),
                c(T_F32, [heads as i64, 1, 1, 1]),
            ],
            &[(0, 0.125f32.to_bits() as i32)],
        );
        n.params[3] = 10; // GGML_PREC_F32
        let Ok(Plan::FlashAttn { n_split, .. }) = dispatch::plan(&n) else { panic!("FA plan") };
        assert_eq!(n_split > 1, n_kv == 1024);
        let ptrs = [up(&vec![0u8; dispatch::alloc_size(&n)]), up(&f32s(&q)), up(&h16(&k)), up(&h16(&v)), up(&h16(&mask)), up(&f32s(&sinks))];
        s.run(&n, &ptrs).unwrap();
        s.synchronize().unwrap();
        let mut want = vec![0f32; dh * heads];
        for h in 0..heads {
            let (kh, qh) = (h / 2, &q[h * dh..(h + 1) * dh]);
            let sc: Vec<f32> = (0..n_kv).map(|i| 0.125 * (0..dh).map(|e| qh[e] * k[(kh * n_kv + i) * dh + e]).sum::<f32>() + mask[i]).collect();
            let m = sc.iter().fold(sinks[h], |a, &b| a.max(b));
            let w: Vec<f32> = sc.iter().map(|x| (x - m).exp()).collect();
            let sum = w.iter().sum::<f32>() + (sinks[h] - m).exp();
            for e in 0..dh {
                want[h * dh + e] = (0..n_kv).map(|i| w[i] * v[(kh * n_kv + i) * dh + e]).sum::<f32>() / sum;
            }
        }
        close(&format!("FLASH_ATTN_EXT n_kv {n_kv} (n_split {n_split})"), &down(ptrs[0], dh * heads), &want, 1e-4);
    }

    // MUL_MAT: Q8_0 weights [K=256, M=48], by the mat-vec kernel (1 column) and cuBLAS (16)
    let (k, m) = (256usize, 48usize);
    let w: Vec<f32> = (0..k * m).map(|_| rand()).collect();
    let mut q = Vec::new();
    let mut wq = vec![0f32; k * m]; // the dequantized weights: the reference multiplies these
    for (bi, blk) in w.chunks(32).enumerate() {
        let amax = blk.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let dh = half::f16::from_f32(d);
        q.extend_from_slice(&dh.to_bits().to_le_bytes());
        for (j, v) in blk.iter().enumerate() {
            let qi = (v * id).round() as i8;
            q.push(qi as u8);
            wq[bi * 32 + j] = dh.to_f32() * qi as f32;
        }
    }
    let pw = up(&q);
    for cols in [1usize, 16] {
        let xs: Vec<f32> = (0..k * cols).map(|_| rand()).collect();
        let n = node(
            ggml_abi::sys::op::MUL_MAT,
            c(T_F32, [m as i64, cols as i64, 1, 1]),
            &[c(dispatch::T_Q8_0, [k as i64, m as i64, 1, 1]), c(T_F32, [k as i64, cols as i64, 1, 1])],
            &[],
        );
        // dst as the device buffer type allocates it: with the GEMM's scratch after it
        let (px, py) = (up(&f32s(&xs)), up(&vec![0u8; dispatch::alloc_size(&n)]));
        let plan = dispatch::plan(&n).unwrap();
        if matches!(plan, Plan::MulMatGemm { .. }) && !cublas_available() {
            eprintln!("SKIP MUL_MAT by cuBLAS: no libcublas");
            continue;
        }
        s.run(&n, &[py, pw, px, 0, 0, 0]).unwrap();
        s.synchronize().unwrap();
        let mut want = vec![0f32; m * cols];
        for j in 0..cols {
            for i in 0..m {
                want[j * m + i] = (0..k).map(|t| wq[i * k + t] * xs[j * k + t]).sum();
            }
        }
        // the cuBLAS path rounds x to f16: a looser bound there
        let tol = if cols == 1 { 1e-4 } else { 2e-2 };
        close(&format!("MUL_MAT Q8_0 x {cols} ({plan:?})"), &down(py, m * cols), &want, tol);
    }
}
