//! The grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) against upstream's
//! libraries (dlopened from `GGML_RS_UPSTREAM_LIB_DIR`; each test prints why and passes when
//! they are not there, unless `GGML_RS_UPSTREAM_REQUIRED=1`): the generated grid tables read
//! back from its `to_float`, dequantization bit for bit on random valid blocks, and the dot
//! products against its `vec_dot`s.

#[path = "support/upstream_lib.rs"]
mod upstream_lib;

use ggml_rs_cpu::GgmlType;
use ggml_rs_cpu::block::AlignedBytes;
use ggml_rs_cpu::kernels;
use ggml_rs_cpu::quants::{dequantize_row, iq_grid, quantize_row};
use ggml_rs_cpu::rng::XorShift;
use ggml_rs_cpu::simd::Level;
use upstream_lib::{VecDot, load_or_skip as upstream};

const F16_ONE: u16 = 0x3c00;
const F16_FOUR: u16 = 0x4400;
const F16_EIGHT: u16 = 0x4800;

/// one block of `ty` (d at offset 0 where it has one) whose slots hold grid indices `idx`
/// (output order), with the scale that makes every multiplier 1 and no sign flips
fn crafted(ty: GgmlType, idx: &[usize]) -> Vec<u8> {
    let mut b = vec![0u8; ty.type_size()];
    let d = |b: &mut Vec<u8>, v: u16| b[..2].copy_from_slice(&v.to_le_bytes());
    match ty {
        GgmlType::Iq2Xxs => {
            d(&mut b, F16_EIGHT);
            for (k, &v) in idx.iter().enumerate() {
                b[2 + 8 * (k / 4) + k % 4] = v as u8;
            }
        }
        GgmlType::Iq2Xs => {
            d(&mut b, F16_EIGHT);
            for (k, &v) in idx.iter().enumerate() {
                b[2 + 2 * k..4 + 2 * k].copy_from_slice(&(v as u16).to_le_bytes());
            }
        }
        GgmlType::Iq2S => {
            d(&mut b, F16_EIGHT);
            for (k, &v) in idx.iter().enumerate() {
                b[2 + k] = v as u8;
                b[2 + 64 + k / 4] |= ((v >> 8) << (2 * (k % 4))) as u8;
            }
        }
        GgmlType::Iq3Xxs => {
            d(&mut b, F16_FOUR);
            for (k, &v) in idx.iter().enumerate() {
                b[2 + k] = v as u8;
            }
        }
        GgmlType::Iq3S => {
            d(&mut b, F16_ONE);
            for (k, &v) in idx.iter().enumerate() {
                b[2 + k] = v as u8;
                b[2 + 64 + k / 8] |= ((v >> 8) << (k % 8)) as u8;
            }
        }
        GgmlType::Iq1S => {
            d(&mut b, F16_ONE);
            for (k, &v) in idx.iter().enumerate() {
                b[2 + k] = v as u8;
                let at = 2 + 32 + 2 * (k / 4);
                let qh = u16::from_le_bytes([b[at], b[at + 1]]) | ((v >> 8) << (3 * (k % 4))) as u16;
                b[at..at + 2].copy_from_slice(&qh.to_le_bytes());
            }
        }
        _ => unreachable!(),
    }
    b
}

/// upstream's grid of `ty` read back through its `to_float`: `n` entries of `w` values each
fn read_grid(u: &upstream_lib::Upstream, ty: GgmlType, n: usize, w: usize) -> Vec<Vec<f32>> {
    let per_block = 256 / w;
    let mut grid = Vec::new();
    for first in (0..n).step_by(per_block) {
        let idx: Vec<usize> = (first..first + per_block).collect();
        let mut y = vec![0f32; 256];
        u.to_float(ty as u32, &crafted(ty, &idx), &mut y);
        grid.extend(y.chunks(w).map(|c| c.to_vec()));
    }
    grid
}

fn as_f32<T: Copy + Into<f32>, const W: usize>(g: &[[T; W]]) -> Vec<Vec<f32>> {
    g.iter().map(|e| e.iter().map(|&v| v.into()).collect()).collect()
}

/// the committed tables (`src/quants/iq_grids.rs`, expanded) are upstream's, entry by entry
#[test]
fn grid_tables_are_upstreams() {
    let Some(u) = upstream() else { return };
    let ours = [
        (GgmlType::Iq2Xxs, as_f32(&iq_grid::IQ2XXS_GRID), 8),
        (GgmlType::Iq2Xs, as_f32(&iq_grid::IQ2XS_GRID), 8),
        (GgmlType::Iq2S, as_f32(&iq_grid::IQ2S_GRID), 8),
        (GgmlType::Iq3Xxs, as_f32(&iq_grid::IQ3XXS_GRID), 4),
        (GgmlType::Iq3S, as_f32(&iq_grid::IQ3S_GRID), 4),
        (GgmlType::Iq1S, iq_grid::IQ1S_GRID.iter().map(|e| e.iter().map(|&v| v as f32 + 0.125).collect()).collect(), 8),
    ];
    for (ty, grid, w) in ours {
        let theirs = read_grid(&u, ty, grid.len(), w);
        assert_eq!(theirs.len(), grid.len());
        for (i, (a, b)) in grid.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{} grid entry {i}", ty.name());
        }
        println!("{}: {} entries equal upstream's", ty.name(), grid.len());
    }
}

/// `nb` random valid blocks of `ty`: random bytes, the f16 scale(s) finite and bounded
/// (|d| < 2⁻⁴, or 0 / a subnormal now and then)
fn random_blocks(ty: GgmlType, nb: usize, r: &mut XorShift) -> AlignedBytes {
    let size = ty.type_size();
    let mut b = AlignedBytes::zeroed(nb * size);
    r.fill_bytes(&mut b);
    for blk in b.chunks_exact_mut(size) {
        let d = match r.i32_in(0, 16) {
            0 => 0u16,
            1 => r.i32_in(1, 1023) as u16,
            _ => half::f16::from_f32(r.f32_in(-0.0625, 0.0625)).to_bits(),
        };
        if ty == GgmlType::Iq1M {
            // the f16 is the top nibbles of the four scale words (bytes 48..56)
            for (i, nib) in [d & 15, (d >> 4) & 15, (d >> 8) & 15, d >> 12].into_iter().enumerate() {
                let at = 48 + 2 * i + 1;
                blk[at] = (blk[at] & 0x0f) | ((nib as u8) << 4);
            }
        } else {
            blk[..2].copy_from_slice(&d.to_le_bytes());
        }
    }
    b
}

/// dequantization bit for bit equal to upstream's `to_float` on random valid blocks
#[test]
fn grid_types_dequantize_as_upstream() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(61);
    for ty in GgmlType::GRID {
        assert_eq!(u.type_size(ty as u32), (256, ty.type_size()), "{} block size", ty.name());
        assert_eq!(u.type_name(ty as u32), ty.name());
        let nb = 64;
        let mut differ = 0usize;
        for _ in 0..8 {
            let x = random_blocks(ty, nb, &mut r);
            let (mut ours, mut theirs) = (vec![0f32; nb * 256], vec![0f32; nb * 256]);
            dequantize_row(ty, &x, &mut ours);
            u.to_float(ty as u32, &x, &mut theirs);
            differ += ours.iter().zip(&theirs).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        }
        assert_eq!(differ, 0, "{}: {differ} values differ from upstream's to_float", ty.name());
        println!("{}: {} values bit for bit", ty.name(), 8 * nb * 256);
    }
}

/// model-like activations quantized to Q8_K as upstream's CPU does
fn activations(u: &upstream_lib::Upstream, n: usize, r: &mut XorShift) -> AlignedBytes {
    let a = r.model_like(n);
    let mut q = AlignedBytes::zeroed(GgmlType::Q8K.row_size(n));
    quantize_row(GgmlType::Q8K, &a, &mut q);
    let mut theirs = AlignedBytes::zeroed(q.len());
    u.cpu_from_float(GgmlType::Q8K as u32, &a, &mut theirs);
    assert!(*theirs == *q, "q8_K activations differ from ggml-cpu's from_float");
    q
}

fn generic_symbol(ty: GgmlType) -> String {
    format!("ggml_vec_dot_{}_q8_K_generic\0", ty.name())
}

fn call(f: VecDot, n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut s = 0f32;
    // SAFETY: x holds n elements of the weight type, y n of Q8_K; one result
    unsafe { f(n as i32, &mut s, 0, x.as_ptr().cast(), 0, y.as_ptr().cast(), 0, 1) };
    s
}

/// the scalar references against upstream's generic vec_dots (exported by libggml-cpu): IQ2 /
/// IQ3 bit for bit against its native build, IQ1_S / IQ1_M (and the stock build's) within 2⁻²⁰ of Σ|w·a| (upstream's builds contract their
/// `d · dy · (I + J/8)` step into fused multiply-adds, the reference does not), counted; every kernel set's within 2⁻¹⁸ · Σ|w·a| of upstream's own
/// vec_dot (the set's order) and of the dequantized float product (a wrong block is far off)
#[test]
fn grid_vec_dots_match_upstream() {
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(62);
    let scalar = kernels::at(Level::Scalar);
    for ty in GgmlType::GRID {
        // SAFETY: the generic vec_dots have ggml_vec_dot_t's signature
        let generic: VecDot = unsafe { u.cpu_symbol(generic_symbol(ty).as_bytes()) }.expect("generic vec_dot exported");
        let (mut exact, mut total) = (0usize, 0usize);
        for n in [256usize, 512, 4096] {
            for _ in 0..16 {
                let x = random_blocks(ty, n / 256, &mut r);
                let y = activations(&u, n, &mut r);
                let mut wd = vec![0f32; n];
                dequantize_row(ty, &x, &mut wd);
                let mut yd = vec![0f32; n];
                dequantize_row(GgmlType::Q8K, &y, &mut yd);
                let abs: f64 = wd.iter().zip(&yd).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
                let float: f64 = wd.iter().zip(&yd).map(|(a, b)| *a as f64 * *b as f64).sum();
                let theirs_generic = call(generic, n, &x, &y);
                let ours = scalar.row_dot(ty).dot(&x, &y);
                total += 1;
                exact += (ours.to_bits() == theirs_generic.to_bits()) as usize;
                let tol = abs * 2f64.powi(-20) + 1e-30;
                assert!(((ours as f64) - theirs_generic as f64).abs() <= tol, "{} n={n}: reference {ours}, upstream generic {theirs_generic}", ty.name());
                let theirs = u.vec_dot(ty as u32, n, &x, &y);
                for level in Level::available() {
                    let v = kernels::at(level).row_dot(ty).dot(&x, &y) as f64;
                    let tol = abs * 2f64.powi(-18) + 1e-30;
                    assert!((v - theirs as f64).abs() <= tol, "{} {} n={n}: ours {v}, upstream vec_dot {theirs}", ty.name(), level.name());
                    assert!((v - float).abs() <= tol, "{} {} n={n}: ours {v}, dequantized product {float}", ty.name(), level.name());
                }
            }
        }
        // IQ2 / IQ3: the native build's generic functions sum unfused, as the reference (its
        // stock AVX2 build fuses `sum += d · isum`: a rounding apart, within the bound above)
        if u.avx512_build && !matches!(ty, GgmlType::Iq1S | GgmlType::Iq1M) {
            assert_eq!(exact, total, "{}: the reference differs from upstream's generic vec_dot", ty.name());
        }
        println!("{}: scalar reference equal to upstream's generic vec_dot bit for bit in {exact} of {total} rows", ty.name());
    }
}

/// the sets from AVX2 give upstream's x86 vec_dot (its AVX2 branches, which both its builds
/// take for these types) bit for bit, on random valid blocks and model-like activations (whose
/// largest element is −128: where the x86 kernels' byte negation keeps it −128)
#[test]
fn grid_vec_dots_are_ggml_cpus_x86_order_bit_for_bit() {
    if !cfg!(target_arch = "x86_64") {
        println!("SKIP: upstream's x86 order is checked on x86");
        return;
    }
    let Some(u) = upstream() else { return };
    let levels: Vec<Level> = Level::available().into_iter().filter(|l| *l >= Level::Avx2).collect();
    if levels.is_empty() {
        println!("SKIP: no AVX2 on this CPU");
        return;
    }
    let mut r = XorShift::new(63);
    for ty in GgmlType::GRID {
        let (mut compared, mut reference_differs) = (0usize, 0usize);
        for n in [256usize, 512, 4096, 11008 / 256 * 256] {
            for _ in 0..12 {
                let x = random_blocks(ty, n / 256, &mut r);
                let y = activations(&u, n, &mut r);
                let theirs = u.vec_dot(ty as u32, n, &x, &y);
                reference_differs += (kernels::at(Level::Scalar).row_dot(ty).dot(&x, &y).to_bits() != theirs.to_bits()) as usize;
                for &level in &levels {
                    let ours = kernels::at(level).row_dot(ty).dot(&x, &y);
                    assert_eq!(ours.to_bits(), theirs.to_bits(), "{} {} n={n}: upstream {theirs}, ours {ours}", ty.name(), level.name());
                    compared += 1;
                }
            }
        }
        println!("{}: {compared} dot products bit for bit ({} sets); the scalar reference differs in {reference_differs} rows", ty.name(), levels.len());
    }
}

/// MUL_MAT of grid weights with 8 activation rows: upstream's x86 builds take their tiled
/// K-quant path, whose order is `Dots::row(ty, Order::Tiled)`'s (`iq_grid::*_q8_k_tiled`);
/// checked bit for bit against upstream's graph compute, as our backend's MUL_MAT of the same
/// graph (from the avx2 set), and how often vec_dot's order differs
#[test]
fn grid_prompt_mul_mat_is_the_tiled_order() {
    use ggml_rs_cpu::dot::Order;
    if !cfg!(target_arch = "x86_64") {
        println!("SKIP: upstream's tiled path is in its x86 builds only");
        return;
    }
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(64);
    let (rows, k, cols) = (16usize, 4096usize, 8usize);
    let dots = &kernels::active().dot;
    for ty in GgmlType::GRID {
        if ggml_rs_cpu::simd::active() >= Level::Avx2 {
            assert!(Order::tiled(ty, cols as i64, true, dots), "{}: 8 F32 rows take the tiled order", ty.name());
        }
        let rs = ty.row_size(k);
        let w = random_blocks(ty, rows * k / 256, &mut r);
        let x = r.model_like(k * cols);
        // our backend on the same graph: bit for bit from the avx2 set
        let (theirs, ours_op) = upstream_lib::mul_mat_theirs_and_ours(&u, ty as u32, &w, &x, k, 1);
        if ggml_rs_cpu::simd::active() >= Level::Avx2 {
            for (i, (t, o)) in theirs.iter().zip(&ours_op).enumerate() {
                assert_eq!(o.to_bits(), t.to_bits(), "{} output {i}: our MUL_MAT {o}, upstream's {t}", ty.name());
            }
        }
        let tiled = kernels::at(Level::Scalar).dot.row(ty, Order::Tiled);
        let (mut vec_dot_differs, mut n) = (0usize, 0usize);
        for j in 0..cols {
            let mut aq = AlignedBytes::zeroed(GgmlType::Q8K.row_size(k));
            quantize_row(GgmlType::Q8K, &x[j * k..(j + 1) * k], &mut aq);
            for i in 0..rows {
                let wr = &w[i * rs..(i + 1) * rs];
                let ours = tiled.dot(wr, &aq);
                let t = theirs[j * rows + i];
                assert_eq!(ours.to_bits(), t.to_bits(), "{} row {i} col {j}: upstream's MUL_MAT {t}, the tiled order {ours}", ty.name());
                vec_dot_differs += (u.vec_dot(ty as u32, k, wr, &aq).to_bits() != t.to_bits()) as usize;
                n += 1;
            }
        }
        println!("{}: {n} outputs of the tiled order bit for bit; vec_dot's order differs in {vec_dot_differs}", ty.name());
    }
}

/// MUL_MAT_ID of grid experts: an expert with 8 or more routed rows in the tiled path's order, one
/// with fewer in vec_dot's (12 / 8 / 4 / 0 and 12 / 7 / 5 / 0 rows), our backend on upstream's graph
/// bit for bit from the avx2 set
#[test]
fn grid_mul_mat_id_sums_each_expert_in_upstreams_order() {
    if !cfg!(target_arch = "x86_64") || ggml_rs_cpu::simd::active() < Level::Avx2 {
        println!("SKIP: upstream's x86 orders are checked from the avx2 set on x86");
        return;
    }
    let Some(u) = upstream() else { return };
    let mut r = XorShift::new(65);
    let (k, rows, n_exp, n_used, n_tok) = (512usize, 16usize, 4usize, 2usize, 12usize);
    let mut n = 0usize;
    for ty in GgmlType::GRID {
        for second in [8usize, 7] {
            let rs = ty.row_size(k);
            let ctx = u.context(n_exp * rows * rs + 4 * k * n_used * n_tok + 4 * rows * n_used * n_tok + (8 << 20), 4).expect("context");
            let a = ctx.new_tensor(ty as u32, [k as i64, rows as i64, n_exp as i64, 1]);
            let b = ctx.new_tensor(GgmlType::F32 as u32, [k as i64, n_used as i64, n_tok as i64, 1]);
            let ids = ctx.new_tensor(26 /* GGML_TYPE_I32 */, [n_used as i64, n_tok as i64, 1, 1]);
            let w = random_blocks(ty, n_exp * rows * k / 256, &mut r);
            let x = r.model_like(k * n_used * n_tok);
            let routes: Vec<i32> = (0..n_tok).flat_map(|t| [0, if t < second { 1 } else { 2 }]).collect();
            // SAFETY: contiguous tensors of these sizes, not otherwise borrowed
            unsafe {
                upstream_lib::tensor_bytes(a).copy_from_slice(&w);
                upstream_lib::tensor_bytes(b).copy_from_slice(ggml_rs_cpu::block::as_bytes(&x));
                let id_bytes: Vec<u8> = routes.iter().flat_map(|e| e.to_ne_bytes()).collect();
                upstream_lib::tensor_bytes(ids).copy_from_slice(&id_bytes);
            }
            let out = ctx.mul_mat_id(a, b, ids);
            let (theirs, ours) = upstream_lib::theirs_and_ours(&ctx, ctx.graph(out), out, 2);
            for (i, (t, o)) in theirs.iter().zip(&ours).enumerate() {
                assert_eq!(o.to_bits(), t.to_bits(), "{} (second expert {second} rows) output {i}: upstream {t}, ours {o}", ty.name());
                n += 1;
            }
        }
    }
    println!("MUL_MAT_ID: {n} outputs of grid experts bit for bit upstream's");
}
