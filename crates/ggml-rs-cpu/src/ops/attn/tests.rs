use super::*;
use crate::ops::unary::kit::testkit::*;
use crate::quants::quantize_row;
use crate::rng::XorShift;

/// attention from its definition, in f64, with K and V as the kernel reads them (after
/// rounding to their type) and Q as given
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    sinks: Option<&[f32]>,
    scale: f32,
    max_bias: f32,
    softcap: f32,
    kv: (&[f32], &[f32]),
) -> Vec<f32> {
    let (qn, kn, vn) = (q.view.ne, k.view.ne, v.view.ne);
    let (dk, dv, n_kv) = (kn[0] as usize, vn[0] as usize, kn[1] as usize);
    let qs = q.to_f32();
    let ms = mask.map(|m| (m.to_f32(), m.view.ne));
    let mut out = vec![0f32; dv * (qn[1] * qn[2] * qn[3]) as usize];
    for iq3 in 0..qn[3] {
        for iq2 in 0..qn[2] {
            for iq1 in 0..qn[1] {
                let qoff = (((iq3 * qn[2] + iq2) * qn[1] + iq1) as usize) * dk;
                let (ik2, ik3) = (iq2 / (qn[2] / kn[2]), iq3 / (qn[3] / kn[3]));
                let slope = alibi_slope(max_bias, qn[2] as u32, iq2 as u32) as f64;
                let mut sc = vec![f64::NEG_INFINITY; n_kv];
                for (ic, s) in sc.iter_mut().enumerate() {
                    let koff = (((ik3 * kn[2] + ik2) * kn[1] + ic as i64) as usize) * dk;
                    let mut x: f64 = (0..dk).map(|i| qs[qoff + i] as f64 * kv.0[koff + i] as f64).sum::<f64>() * scale as f64;
                    if softcap != 0.0 {
                        x = softcap as f64 * (x / softcap as f64).tanh();
                    }
                    if let Some((m, mne)) = &ms {
                        let mi = (((iq3 % mne[3]) * mne[2] + iq2 % mne[2]) * mne[1] + iq1) * mne[0] + ic as i64;
                        x += slope * m[mi as usize] as f64;
                    }
                    *s = x;
                }
                let sink = sinks.map(|s| s[iq2 as usize] as f64);
                let mx = sc.iter().cloned().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = sc.iter().map(|s| if *s == f64::NEG_INFINITY { 0.0 } else { (s - mx).exp() }).collect();
                let sum: f64 = w.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - mx).exp());
                let ooff = (((iq3 * qn[1] + iq1) * qn[2] + iq2) as usize) * dv;
                for i in 0..dv {
                    let mut a = 0f64;
                    for (ic, wi) in w.iter().enumerate() {
                        let voff = (((ik3 * vn[2] + iq2 / (qn[2] / vn[2])) * vn[1] + ic as i64) as usize) * dv;
                        a += wi * kv.1[voff + i] as f64;
                    }
                    out[ooff + i] = if sum == 0.0 { 0.0 } else { (a / sum) as f32 };
                }
            }
        }
    }
    out
}

/// a K or V tensor of block type `t` (packed) from random values, and the values it holds
fn kv_tensor(t: GgmlType, ne: [i64; 4], rng: &mut XorShift) -> (Tensor, Vec<f32>) {
    let n = ne.iter().product::<i64>() as usize;
    let vals: Vec<f32> = (0..n).map(|_| rng.f32_in(-1.0, 1.0)).collect();
    let bytes = t.row_size(n);
    let mut buf = crate::block::AlignedBytes::zeroed(bytes);
    quantize_row(t, &vals, &mut buf);
    let mut back = vec![0f32; n];
    dequantize_row(t, &buf, &mut back);
    let ts = t.type_size();
    let bs = t.block_size() as i64;
    let nb0 = ts;
    let nb1 = ts * (ne[0] / bs) as usize;
    let nb = [nb0, nb1, nb1 * ne[1] as usize, nb1 * (ne[1] * ne[2]) as usize];
    let data = buf.as_mut_ptr();
    (Tensor { buf, view: View { ty: t as i32, ne, nb, data } }, back)
}

/// the node on `q`, `k`, `v` (holding the values `kv`), the mask and the sinks (the tensor
/// and its values), with op params [scale, max_bias, softcap], run on a pool of `threads`:
/// its output, then the reference's
#[allow(clippy::too_many_arguments)]
fn run_case(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    kv: (&[f32], &[f32]),
    mask: Option<&Tensor>,
    sinks: Option<(&Tensor, &[f32])>,
    params: [f32; 3],
    threads: usize,
) -> (Vec<f32>, Vec<f32>) {
    let (qn, dv) = (q.view.ne, v.view.ne[0]);
    let dst = Tensor::new(raw_type::F32, [dv, qn[2], qn[1], qn[3]], Layout::Contig);
    let n = node(Op::FlashAttnExt, &dst, &[Some(q), Some(k), Some(v), mask, sinks.map(|s| s.0)], &params.map(f));
    assert!(supports(&n), "{:?}", refusal(&n));
    run(&n, threads).unwrap();
    let [scale, max_bias, softcap] = params;
    (dst.to_f32(), reference(q, k, v, mask, sinks.map(|s| s.1), scale, max_bias, softcap, kv))
}

#[test]
fn flash_attn_matches_reference() {
    let mut rng = XorShift::new(41);
    let types = [GgmlType::F16, GgmlType::F32, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0];
    for (case, &kt) in types.iter().cycle().take(15).enumerate() {
        let vt = if case % 2 == 0 { kt } else { GgmlType::F16 };
        let dk = if case % 3 == 0 { 64 } else { 32 };
        let dv = if case % 4 == 1 { 64 } else { dk };
        let n_kv = [1, 7, 70, 130][case % 4];
        // more queries than a group (QT) in some cases
        let (n_q, n_head, n_head_kv, n_seq) =
            (if case % 5 == 0 { 37 } else { rng.i32_in(1, 5) as i64 }, 4, if case % 2 == 0 { 2 } else { 4 }, 1 + (case % 2) as i64);
        let q = Tensor::random(raw_type::F32, [dk, n_q, n_head, n_seq], if case % 3 == 2 { Layout::Permuted } else { Layout::Contig }, &mut rng, -1.0, 1.0);
        let (k, kvals) = kv_tensor(kt, [dk, n_kv, n_head_kv, n_seq], &mut rng);
        let (v, vvals) = kv_tensor(vt, [dv, n_kv, n_head_kv, n_seq], &mut rng);
        let with_mask = case % 3 != 1;
        // a causal-looking mask with -inf, padded rows, one mask for all heads
        let mvals: Vec<f32> =
            (0..n_kv * (n_q + 3)).map(|i| if (i % n_kv) > (i / n_kv) + n_kv / 2 { f32::NEG_INFINITY } else { rng.f32_in(-1.0, 0.0) }).collect();
        let mask = Tensor::from_f32(raw_type::F16, [n_kv, n_q + 3, 1, 1], Layout::Contig, &mvals);
        let sinks: Vec<f32> = (0..n_head).map(|_| rng.f32_in(-1.0, 1.0)).collect();
        let sk = Tensor::from_f32(raw_type::F32, [n_head, 1, 1, 1], Layout::Contig, &sinks);
        let with_sinks = case % 4 == 3;
        let (scale, max_bias, softcap) = (1.0 / (dk as f32).sqrt(), if case % 5 == 4 { 8.0 } else { 0.0 }, if case % 6 == 5 { 30.0 } else { 0.0 });
        let (got, want) =
            run_case(&q, &k, &v, (&kvals, &vvals), with_mask.then_some(&mask), with_sinks.then_some((&sk, &sinks[..])), [scale, max_bias, softcap], 3);
        // Q is rounded to K's dot type by the kernel: a loose tolerance for the quantized K;
        // an F16 V is accumulated in f16 (upstream's one-row path)
        let tol = match kt {
            GgmlType::F32 if vt != GgmlType::F16 => 1e-5,
            GgmlType::F32 | GgmlType::F16 => 2e-3,
            _ => 2e-2,
        };
        assert_close(&format!("case {case}: K {kt:?} V {vt:?} dk {dk} dv {dv} n_kv {n_kv} mask {with_mask} sinks {with_sinks}"), &got, &want, tol);
    }
}

/// decode shapes: one query row, heads grouped over a shared K/V head, the KV positions split
/// into chunks whose partial softmaxes are combined (the path a single group takes when the
/// threads would otherwise idle), on one and on several threads
#[test]
fn grouped_heads_and_kv_chunks_match_reference() {
    let mut rng = XorShift::new(43);
    for (case, (kt, n_kv, n_q, n_head, n_head_kv, threads)) in [
        (GgmlType::F16, 600i64, 1i64, 8i64, 1i64, 3usize),
        (GgmlType::F16, 1000, 1, 8, 2, 1),
        (GgmlType::Q8_0, 700, 1, 4, 1, 2),
        (GgmlType::F16, 513, 3, 6, 3, 2),
        (GgmlType::F32, 300, 2, 32, 1, 3),
    ]
    .into_iter()
    .enumerate()
    {
        let dk = 64;
        let q = Tensor::random(raw_type::F32, [dk, n_q, n_head, 1], Layout::Contig, &mut rng, -1.0, 1.0);
        let (k, kvals) = kv_tensor(kt, [dk, n_kv, n_head_kv, 1], &mut rng);
        let (v, vvals) = kv_tensor(kt, [dk, n_kv, n_head_kv, 1], &mut rng);
        // the first positions masked for every row (a whole KV chunk may see only -inf), then
        // every third one (a sparse mask: the tiled path leaves those positions out)
        let mvals: Vec<f32> =
            (0..n_kv * n_q).map(|i| if (i % n_kv) < 350 || (i % n_kv) % 3 == 1 { f32::NEG_INFINITY } else { rng.f32_in(-1.0, 0.0) }).collect();
        let mask = Tensor::from_f32(raw_type::F16, [n_kv, n_q, 1, 1], Layout::Contig, &mvals);
        let sinks: Vec<f32> = (0..n_head).map(|_| rng.f32_in(-1.0, 1.0)).collect();
        let sk = Tensor::from_f32(raw_type::F32, [n_head, 1, 1, 1], Layout::Contig, &sinks);
        let with_sinks = case % 2 == 0;
        let max_bias = if case == 3 { 8.0 } else { 0.0 };
        let dst = Tensor::new(raw_type::F32, [dk, n_head, n_q, 1], Layout::Contig);
        let n = node(Op::FlashAttnExt, &dst, &[Some(&q), Some(&k), Some(&v), Some(&mask), with_sinks.then_some(&sk)], &[f(0.125), f(max_bias), f(0.0)]);
        run(&n, threads).unwrap();
        let want = reference(&q, &k, &v, Some(&mask), with_sinks.then_some(&sinks[..]), 0.125, max_bias, 0.0, (&kvals, &vvals));
        let tol = if kt == GgmlType::Q8_0 { 2e-2 } else { 2e-3 };
        assert_close(&format!("case {case}: K {kt:?} n_kv {n_kv} heads {n_head}/{n_head_kv} threads {threads}"), &dst.to_f32(), &want, tol);
    }
}

/// the query blocks of the prompt path (tiles.rs) against the f64 reference: blocks of 64
/// rows and a partial one, KV lengths that are not a multiple of the 64-position tile (and a
/// tile whose second half is past the end), heads sharing a K/V head (few rows: 4 heads in
/// a block), causal masks with rows that see nothing (all `-inf`) and tiles no row of a
/// block sees, per-head masks, ALiBi, soft-cap, sinks, a V head size that is not a multiple
/// of the 32-wide strips, F32 / F16 / BF16 K and V, on one and on three threads
#[test]
fn query_blocks_match_reference() {
    let mut rng = XorShift::new(47);
    #[rustfmt::skip]
    let cases = [
        // (K type, V type, dk, dv, n_kv, n_q, n_head, n_head_kv, n_seq, mask heads, threads)
        (GgmlType::F16, GgmlType::F16, 64, 64, 200i64, 100i64, 4i64, 2i64, 1i64, 1i64, 3usize),
        (GgmlType::F16, GgmlType::F16, 64, 64, 64, 64, 2, 1, 1, 1, 1),
        (GgmlType::F32, GgmlType::F32, 32, 48, 33, 9, 2, 2, 2, 1, 2),
        (GgmlType::F16, GgmlType::F32, 80, 40, 130, 70, 3, 3, 1, 3, 1),
        (GgmlType::BF16, GgmlType::BF16, 64, 64, 96, 9, 8, 2, 1, 1, 2),
        (GgmlType::F16, GgmlType::F16, 128, 128, 300, 12, 16, 1, 1, 1, 3),
    ];
    for (case, &(kt, vt, dk, dv, n_kv, n_q, n_head, n_head_kv, n_seq, mask_heads, threads)) in cases.iter().enumerate() {
        let q = Tensor::random(raw_type::F32, [dk, n_q, n_head, n_seq], if case % 2 == 1 { Layout::Permuted } else { Layout::Contig }, &mut rng, -1.0, 1.0);
        let (k, kvals) = kv_tensor(kt, [dk, n_kv, n_head_kv, n_seq], &mut rng);
        let (v, vvals) = kv_tensor(vt, [dv, n_kv, n_head_kv, n_seq], &mut rng);
        // causal, as a prompt after n_kv - n_q cached positions; every 7th row sees nothing;
        // padded rows past n_q
        let past = (n_kv - n_q).max(0);
        let mvals: Vec<f32> = (0..n_kv * (n_q + 5) * mask_heads)
            .map(|i| {
                let (ic, iq) = (i % n_kv, (i / n_kv) % (n_q + 5));
                if ic > iq + past || iq % 7 == 3 { f32::NEG_INFINITY } else { rng.f32_in(-1.0, 0.0) }
            })
            .collect();
        let mask = Tensor::from_f32(raw_type::F16, [n_kv, n_q + 5, mask_heads, 1], Layout::Contig, &mvals);
        let sinks: Vec<f32> = (0..n_head).map(|_| rng.f32_in(-1.0, 1.0)).collect();
        let sk = Tensor::from_f32(raw_type::F32, [n_head, 1, 1, 1], Layout::Contig, &sinks);
        let (with_mask, with_sinks) = (case != 1, case % 3 == 0);
        let (max_bias, softcap) = (if case == 3 { 8.0 } else { 0.0 }, if case == 2 || case == 5 { 20.0 } else { 0.0 });
        let scale = 1.0 / (dk as f32).sqrt();
        // the blocks run where upstream takes its tiled path (64+ rows, K and V both F32 or
        // both F16) in a set with the float tiles (x86 from AVX2; elsewhere this checks the
        // row paths, which round Q to K's dot type and accumulate an F16 V in f16)
        let kern = crate::kernels::active();
        let tiled = rows::path(&q.view, &k.view, kt, vt, kern) == rows::Path::Tiled;
        assert_eq!(tiled, kt == vt && kt != GgmlType::BF16 && n_q >= 64 && !kern.is_reference(), "case {case}");
        let blocks = tiled && kern.gemm.fgemm.is_some();
        assert_eq!(blocks, tiled && tiles::applies(kt, vt, &q.view, &k.view, &v.view, kern, threads), "case {case}");
        let tol = match kt {
            _ if blocks => 1e-4,
            GgmlType::F32 if vt != GgmlType::F16 => 1e-5,
            GgmlType::F32 | GgmlType::F16 => 2e-3,
            _ => 2e-2,
        };
        let (got, want) =
            run_case(&q, &k, &v, (&kvals, &vvals), with_mask.then_some(&mask), with_sinks.then_some((&sk, &sinks[..])), [scale, max_bias, softcap], threads);
        assert_close(&format!("case {case}: K {kt:?} V {vt:?} dk {dk} dv {dv} n_kv {n_kv} n_q {n_q} heads {n_head}/{n_head_kv}"), &got, &want, tol);
        // the rows that see nothing are 0 (without sinks: with them, the sink's share of 0)
        if with_mask && !with_sinks {
            let row = |iq1: i64, h: i64, s: i64| (((s * n_q + iq1) * n_head + h) * dv) as usize;
            assert!(got[row(3, 0, 0)..row(3, 0, 0) + dv as usize].iter().all(|&x| x == 0.0), "case {case}: a row that sees nothing");
        }
    }
}

/// the prompt path on the medium model's attention shape (8 heads of 64, F16 cache, causal
/// 512 × 512), against the row-by-row path: `cargo test --release -p ggml-rs-cpu
/// bench_prompt_attention -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_prompt_attention() {
    let mut rng = XorShift::new(5);
    let (dk, n_kv, n_q, n_head) = (64i64, 512i64, 512i64, 8i64);
    let q = Tensor::random(raw_type::F32, [dk, n_q, n_head, 1], Layout::Permuted, &mut rng, -1.0, 1.0);
    let (k, _) = kv_tensor(GgmlType::F16, [dk, n_kv, n_head, 1], &mut rng);
    let (v, _) = kv_tensor(GgmlType::F16, [dk, n_kv, n_head, 1], &mut rng);
    let mvals: Vec<f32> = (0..n_kv * n_q).map(|i| if (i % n_kv) > (i / n_kv) { f32::NEG_INFINITY } else { 0.0 }).collect();
    let mask = Tensor::from_f32(raw_type::F16, [n_kv, n_q, 1, 1], Layout::Contig, &mvals);
    let dst = Tensor::new(raw_type::F32, [dk, n_head, n_q, 1], Layout::Contig);
    let n = node(Op::FlashAttnExt, &dst, &[Some(&q), Some(&k), Some(&v), Some(&mask)], &[f(0.125)]);
    time_node(&n, 1, 20, &format!("flash_attn_ext F16 {n_q}x{n_kv} {n_head} heads"));
}

/// prints three timings of `reps` runs of `n` on a pool of `threads`, per run
fn time_node(n: &Node, threads: usize, reps: u32, what: &str) {
    let mut pool = crate::pool::ThreadPool::new(threads);
    let mut scratch = crate::block::AlignedBytes::default();
    let mut exec = Exec::new(&mut pool, &mut scratch);
    for _ in 0..3 {
        let t = std::time::Instant::now();
        for _ in 0..reps {
            crate::ops::compute(n, &mut exec).unwrap();
        }
        eprintln!("{what}: {:.2} us", t.elapsed().as_secs_f64() * 1e6 / reps as f64);
    }
}

/// token generation on the medium model's shape (8 heads of 64, F16 cache of 256 positions
/// of which the first 128 are seen), per node: `cargo test --release -p ggml-rs-cpu
/// bench_decode_attention -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_decode_attention() {
    let mut rng = XorShift::new(6);
    for (dk, n_head, n_head_kv, threads) in [(64i64, 8i64, 8i64, 1usize), (64, 8, 8, 2), (128, 16, 8, 1), (128, 16, 8, 2)] {
        let n_kv = 256i64;
        let q = Tensor::random(raw_type::F32, [dk, 1, n_head, 1], Layout::Permuted, &mut rng, -1.0, 1.0);
        let (k, _) = kv_tensor(GgmlType::F16, [dk, n_kv, n_head_kv, 1], &mut rng);
        let (v, _) = kv_tensor(GgmlType::F16, [dk, n_kv, n_head_kv, 1], &mut rng);
        let mvals: Vec<f32> = (0..n_kv).map(|i| if i >= 128 { f32::NEG_INFINITY } else { 0.0 }).collect();
        let mask = Tensor::from_f32(raw_type::F16, [n_kv, 1, 1, 1], Layout::Contig, &mvals);
        let dst = Tensor::new(raw_type::F32, [dk, n_head, 1, 1], Layout::Contig);
        let n = node(Op::FlashAttnExt, &dst, &[Some(&q), Some(&k), Some(&v), Some(&mask)], &[f(0.125)]);
        time_node(&n, threads, 2000, &format!("decode dk {dk} heads {n_head}/{n_head_kv} threads {threads}"));
    }
}

#[test]
fn a_fully_masked_row_is_zero_and_bad_shapes_are_refused() {
    let mut rng = XorShift::new(42);
    let q = Tensor::random(raw_type::F32, [32, 1, 2, 1], Layout::Contig, &mut rng, -1.0, 1.0);
    let (k, _) = kv_tensor(GgmlType::F16, [32, 4, 2, 1], &mut rng);
    let (v, _) = kv_tensor(GgmlType::F16, [32, 4, 2, 1], &mut rng);
    let mask = Tensor::from_f32(raw_type::F16, [4, 1, 1, 1], Layout::Contig, &[f32::NEG_INFINITY; 4]);
    let dst = Tensor::random(raw_type::F32, [32, 2, 1, 1], Layout::Contig, &mut rng, 1.0, 2.0);
    run(&node(Op::FlashAttnExt, &dst, &[Some(&q), Some(&k), Some(&v), Some(&mask)], &[f(1.0)]), 1).unwrap();
    assert!(dst.to_f32().iter().all(|&x| x == 0.0));
    let bad = Tensor::new(raw_type::F32, [32, 1, 2, 1], Layout::Contig);
    let n = node(Op::FlashAttnExt, &bad, &[Some(&q), Some(&k), Some(&v)], &[f(1.0)]);
    assert!(!supports(&n));
    assert!(refusal(&n).unwrap().contains("output shape"));
    assert!(run(&n, 1).is_err());
}
