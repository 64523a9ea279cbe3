//! Against what we did not write: whole ops built with upstream's ggml and computed by its
//! libggml-cpu (`ggml_graph_compute_with_ctx`) and by ours on the same graph and bytes (dlopened
//! from `GGML_RS_UPSTREAM_LIB_DIR`; each test prints why and passes when they are not there,
//! unless `GGML_RS_UPSTREAM_REQUIRED=1`).

#[path = "support/upstream_lib.rs"]
mod upstream_lib;

use ggml_rs_cpu::GgmlType;
use ggml_rs_cpu::block::{self, AlignedBytes};
use ggml_rs_cpu::quants::quantize_row;
use ggml_rs_cpu::rng::XorShift;
use ggml_rs_cpu::simd::Level;
use upstream_lib::load_or_skip as upstream;

/// MUL_MAT_ID of K-quant / IQ4_XS experts (weights outside a repack buffer, as
/// `ggml_graph_compute_with_ctx` has them): upstream sends an expert with 8 or more routed rows
/// through its tiled K-quant path and one with fewer through `vec_dot`, deciding per expert.
/// Routed 12 / 8 / 4 / 0 rows and 12 / 7 / 5 / 0 rows (both sides of the threshold), checked
/// bit for bit from the avx2 set on x86 (the tiled and `vec_dot` orders are the same in
/// upstream's AVX2 and AVX-512 builds); Q6_K's tiled order exists in the sets whose table has
/// it (`Dots::q6_k_tiled_path`), elsewhere, and on other architectures, within 1e-4 of the
/// largest output. Q8_0 experts (no tiled path) ride along: `vec_dot`'s order at any count.
#[test]
fn mul_mat_id_sums_each_expert_in_upstreams_order() {
    let Some(u) = upstream() else { return };
    let x86 = cfg!(target_arch = "x86_64") && ggml_rs_cpu::simd::active() >= Level::Avx2;
    let dots = &ggml_rs_cpu::kernels::active().dot;
    let mut types = vec![GgmlType::Q3K, GgmlType::Q5K, GgmlType::Q6K, GgmlType::Iq4Xs, GgmlType::Q8_0];
    // Q2_K experts are repacked where the set follows upstream's AVX-512 build (its repack
    // buffer's order, which this graph without one does not take)
    if !dots.repacks_q2_k {
        types.push(GgmlType::Q2K);
    }
    let mut r = XorShift::new(44);
    let (k, rows, n_exp, n_used) = (512usize, 16usize, 4usize, 2usize);
    let (mut exact_n, mut near_n) = (0usize, 0usize);
    for ty in types {
        for second in [8usize, 7] {
            // slot 0 of every token to expert 0; slot 1 of the first `second` tokens to expert 1,
            // of the others to expert 2; expert 3 gets none
            let n_tok = 12usize;
            let rs = ty.row_size(k);
            // the work buffer comes from the context: upstream reserves 512 KiB per thread for its
            // tiled path
            let ctx = u.context(n_exp * rows * rs + 4 * k * n_used * n_tok + 4 * rows * n_used * n_tok + (8 << 20), 4).expect("context");
            let a = ctx.new_tensor(ty as u32, [k as i64, rows as i64, n_exp as i64, 1]);
            let b = ctx.new_tensor(GgmlType::F32 as u32, [k as i64, n_used as i64, n_tok as i64, 1]);
            let ids = ctx.new_tensor(26 /* GGML_TYPE_I32 */, [n_used as i64, n_tok as i64, 1, 1]);
            let mut w = AlignedBytes::zeroed(n_exp * rows * rs);
            for i in 0..n_exp * rows {
                quantize_row(ty, &r.model_like(k), &mut w[i * rs..(i + 1) * rs]);
            }
            let x = r.model_like(k * n_used * n_tok);
            let routes: Vec<i32> = (0..n_tok).flat_map(|t| [0, if t < second { 1 } else { 2 }]).collect();
            // SAFETY: contiguous tensors of these sizes, not otherwise borrowed
            unsafe {
                upstream_lib::tensor_bytes(a).copy_from_slice(&w);
                upstream_lib::tensor_bytes(b).copy_from_slice(block::as_bytes(&x));
                let id_bytes: Vec<u8> = routes.iter().flat_map(|e| e.to_ne_bytes()).collect();
                upstream_lib::tensor_bytes(ids).copy_from_slice(&id_bytes);
            }
            let out = ctx.mul_mat_id(a, b, ids);
            let (theirs, ours) = upstream_lib::theirs_and_ours(&ctx, ctx.graph(out), out, 2);
            let scale = theirs.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (i, (t, o)) in theirs.iter().zip(&ours).enumerate() {
                let (slot, tok) = ((i / rows) % n_used, i / (rows * n_used));
                let expert = routes[tok * n_used + slot];
                let routed = routes.iter().filter(|&&e| e == expert).count();
                let exact = x86 && !(ty == GgmlType::Q6K && routed >= 8 && !dots.q6_k_tiled_path);
                let at = format!("{} (second expert's rows {second}) row {} slot {slot} token {tok} (expert {expert}, {routed} rows)", ty.name(), i % rows);
                if exact {
                    assert_eq!(o.to_bits(), t.to_bits(), "{at}: upstream {t}, ours {o}");
                    exact_n += 1;
                } else {
                    assert!((o - t).abs() <= 1e-4 * scale, "{at}: upstream {t}, ours {o} (largest {scale})");
                    near_n += 1;
                }
            }
        }
    }
    println!("MUL_MAT_ID: {exact_n} outputs bit for bit upstream's, {near_n} within 1e-4");
}

/// MUL_MAT of Q2_K, Q3_K, Q5_K and Q6_K weights with 8 or more activation rows: upstream's
/// tiled K-quant path, in its AVX2 build as in its native one (weights outside the repack
/// buffer, as here), whose order is `kquants::q*_k_q8_k_tiled`'s (`q6_k::q6_k_q8_k_tiled`);
/// checked bit for bit, and how often the row kernels' (vec_dot) order differs counted
#[test]
fn k_quant_prompt_mul_mat_is_the_tiled_order() {
    if !cfg!(target_arch = "x86_64") {
        println!("SKIP: upstream's tiled K-quant path is in its x86 builds only");
        return;
    }
    use ggml_rs_cpu::dot::iq4::iq4_xs_q8_k_tiled;
    use ggml_rs_cpu::dot::kquants::{q2_k_q8_k_tiled, q3_k_q8_k_tiled, q5_k_q8_k_tiled};
    use ggml_rs_cpu::dot::q6_k::q6_k_q8_k_tiled;
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(18);
    let (rows, k, cols) = (16usize, 4096usize, 8usize);
    for ty in [GgmlType::Q2K, GgmlType::Q3K, GgmlType::Q5K, GgmlType::Q6K, GgmlType::Iq4Xs] {
        let rs = ty.row_size(k);
        let mut w = AlignedBytes::zeroed(rows * rs);
        for i in 0..rows {
            quantize_row(ty, &r.model_like(k), &mut w[i * rs..(i + 1) * rs]);
        }
        let x = r.model_like(k * cols);
        let ctx = u.context(rows * rs + 4 * k * cols + 4 * rows * cols + (1 << 20), 4).expect("context");
        let (a, b) = (ctx.new_tensor(ty as u32, [k as i64, rows as i64, 1, 1]), ctx.new_tensor(GgmlType::F32 as u32, [k as i64, cols as i64, 1, 1]));
        // SAFETY: contiguous tensors of these sizes, not otherwise borrowed
        unsafe {
            upstream_lib::tensor_bytes(a).copy_from_slice(&w);
            upstream_lib::tensor_bytes(b).copy_from_slice(block::as_bytes(&x));
        }
        let out = ctx.mul_mat(a, b);
        assert_eq!(ctx.compute(ctx.graph(out), 1), 0, "upstream's compute");
        // SAFETY: the result, rows · cols floats
        let theirs: Vec<f32> = unsafe { upstream_lib::tensor_bytes(out) }.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect();
        let (mut vec_dot_differs, mut n) = (0usize, 0usize);
        for j in 0..cols {
            // the activations as upstream's from_float writes them
            let mut aq = AlignedBytes::zeroed(GgmlType::Q8K.row_size(k));
            u.cpu_from_float(GgmlType::Q8K as u32, &x[j * k..(j + 1) * k], &mut aq);
            let yb: &[block::BlockQ8K] = block::as_blocks(&aq, "q8_K");
            for i in 0..rows {
                let wr = &w[i * rs..(i + 1) * rs];
                let tiled = match ty {
                    GgmlType::Q2K => q2_k_q8_k_tiled(block::as_blocks(wr, "q2_K"), yb),
                    GgmlType::Q3K => q3_k_q8_k_tiled(block::as_blocks(wr, "q3_K"), yb),
                    GgmlType::Q5K => q5_k_q8_k_tiled(block::as_blocks(wr, "q5_K"), yb),
                    GgmlType::Iq4Xs => iq4_xs_q8_k_tiled(block::as_blocks(wr, "iq4_xs"), yb),
                    _ => q6_k_q8_k_tiled(block::as_blocks(wr, "q6_K"), yb),
                };
                let t = theirs[j * rows + i];
                assert_eq!(tiled.to_bits(), t.to_bits(), "{} row {i} col {j}: upstream's MUL_MAT {t}, the tiled order {tiled}", ty.name());
                vec_dot_differs += (u.vec_dot(ty as u32, k, wr, &aq).to_bits() != t.to_bits()) as usize;
                n += 1;
            }
        }
        println!("{}: {n} outputs of the tiled order bit for bit; vec_dot's order differs in {vec_dot_differs}", ty.name());
    }
}
