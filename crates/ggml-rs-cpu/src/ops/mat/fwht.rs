//! MUL_MAT by a Hadamard matrix (the `GGML_HINT_SRC0_IS_HADAMARD` hint in op_params[1], which
//! llama.cpp sets on the rotation it applies to Q, K and V ahead of a quantized KV cache): as
//! upstream's CPU does outside use_ref, src0 is not read; each src1 row (F32 or F16, a power of 2
//! long) is scaled by `1 / sqrt(n)`, then transformed in place by the fast Walsh-Hadamard
//! butterflies (`u + v`, `u - v`, half-lengths 1, 2, 4, ... in turn). Every butterfly rounds once,
//! as upstream's vector passes do (their `u - v` is an fma with -1, also one rounding), so the
//! result is theirs bit for bit whatever the vector width.

use super::super::unary::kit::set;
use super::super::unary::kit::{get, par_rows, unflatten};
use super::super::{Exec, View, raw_type};

/// op_params[1] of a MUL_MAT whose src0 is a (normalised) Hadamard matrix
pub const HINT_SRC0_IS_HADAMARD: i32 = 1;

/// whether the transform computes this MUL_MAT: the hint, F32 weights and output, F32 / F16 rows
/// of a power-of-2 length
pub fn applies(a: &View, b: &View, d: &View, params: &[i32]) -> bool {
    params.get(1) == Some(&HINT_SRC0_IS_HADAMARD)
        && a.ty == raw_type::F32
        && d.ty == raw_type::F32
        && matches!(b.ty, raw_type::F32 | raw_type::F16)
        && b.ne[0] > 0
        && (b.ne[0] as u64).is_power_of_two()
        && d.ne[0] == b.ne[0]
}

/// the transform of one row, in place
pub fn transform(row: &mut [f32]) {
    let n = row.len();
    let mut len = 1;
    while len < n {
        for block in row.chunks_exact_mut(2 * len) {
            let (lo, hi) = block.split_at_mut(len);
            for (u, v) in lo.iter_mut().zip(hi.iter_mut()) {
                let (a, b) = (*u, *v);
                *u = a + b;
                *v = a - b;
            }
        }
        len <<= 1;
    }
}

/// `d` = the transform of every row of `b`, scaled by `1 / sqrt(n)`
pub fn compute(b: &View, d: &View, exec: &mut Exec) {
    let n = b.ne[0];
    let scale = 1.0 / (n as f32).sqrt();
    let rows = b.ne[1] * b.ne[2] * b.ne[3];
    par_rows(exec, rows, n, |r0, r1| {
        let mut buf = vec![0f32; n as usize];
        for r in r0..r1 {
            let (i1, i2, i3) = unflatten(r, &b.ne);
            for (j, o) in buf.iter_mut().enumerate() {
                *o = get(b, j as i64, i1, i2, i3) * scale;
            }
            transform(&mut buf);
            for (j, &x) in buf.iter().enumerate() {
                set(d, j as i64, i1, i2, i3, x);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::transform;

    /// the butterflies equal the product with the Sylvester Hadamard matrix (entries ±1, the sign
    /// the parity of the set bits of `i & j`), exactly on small integers
    #[test]
    fn the_butterflies_are_the_hadamard_product() {
        for n in [1usize, 2, 4, 8, 64, 256] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 7 + 3) % 11) as f32 - 5.0).collect();
            let mut y = x.clone();
            transform(&mut y);
            for (i, &yi) in y.iter().enumerate() {
                let want: f32 = x.iter().enumerate().map(|(j, &xj)| if (i & j).count_ones() % 2 == 0 { xj } else { -xj }).sum();
                assert_eq!(yi, want, "n={n} element {i}");
            }
        }
    }
}
