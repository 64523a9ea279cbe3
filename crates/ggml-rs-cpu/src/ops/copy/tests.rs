//! The copy kernels against naive references written from upstream's semantics: element k of
//! the source (logical order) is element k of the destination; rows picked by indices.

use super::elem::testing::*;
use super::elem::{Scalar, type_size};
use super::*;
use crate::quants::{dequantize_row, quantize_row};
use crate::rng::XorShift;
use raw_type::{BF16, F16, F32, I32, I64};

/// `v` rounded to type `ty` and back (what a store then a load gives)
fn round(ty: i32, v: f32) -> f32 {
    let s = Scalar::of(ty).unwrap();
    let mut b = [0u8; 4];
    // SAFETY: 4 bytes
    unsafe {
        s.store(b.as_mut_ptr(), v);
        s.load(b.as_ptr())
    }
}

/// layouts of one logical shape: contiguous, rows padded, dims 1 and 2 swapped in memory
fn layouts(ty: i32, ne: [i64; 4]) -> Vec<T> {
    vec![T::new(ty, ne), T::padded(ty, ne, 8), T::permuted(ty, ne, [0, 2, 1, 3]), T::permuted(ty, ne, [0, 3, 2, 1]), T::new(ty, ne).shifted(2)]
}

#[test]
fn dup_converts_every_float_pair_in_logical_order_for_any_layout() {
    let mut r = XorShift::new(1);
    let pairs = [(F32, F32), (F32, F16), (F32, BF16), (F16, F32), (F16, BF16), (BF16, F16), (BF16, F32), (F16, F16), (BF16, BF16), (F32, I32), (I32, F32)];
    for (st, dt) in pairs {
        for (sne, dne) in [([5, 3, 2, 2], [5, 3, 2, 2]), ([6, 4, 3, 1], [4, 6, 1, 3]), ([7, 1, 3, 2], [42, 1, 1, 1])] {
            for mut s in layouts(st, sne) {
                s.fill(&mut r, -100.0, 100.0);
                for d in layouts(dt, dne) {
                    for op in [Op::Dup, Op::Cpy, Op::Cont] {
                        for threads in [1, 3] {
                            let node = node(op, &d, &[&s], &[]);
                            run(&node, threads);
                            let want: Vec<f32> = s.values().iter().map(|v| round(dt, if dt == I32 { v.trunc() } else { *v })).collect();
                            assert_eq!(d.values(), want, "{op:?} {st} -> {dt} {sne:?} nb {:?} -> {dne:?} nb {:?}", s.nb, d.nb);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn dup_of_a_block_type_copies_blocks_in_logical_order() {
    let mut r = XorShift::new(2);
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K] {
        let ne = [256, 3, 2, 1];
        let x = r.model_like(256 * 6);
        let s = T::quantized(ty, ne, &x, 0);
        for d in [T::padded(ty as i32, ne, 6), T::permuted(ty as i32, ne, [0, 2, 1, 3]), T::new(ty as i32, [512, 3, 1, 1])] {
            run(&node(Op::Cpy, &d, &[&s], &[]), 2);
            // dequantized in logical order, both sides
            let deq = |t: &T| {
                let n = t.ne[0] as usize;
                let mut all = vec![];
                for r in 0..(t.ne[1] * t.ne[2] * t.ne[3]) as usize {
                    let (i1, i2, i3) = unravel(r, t.ne[1] as usize, t.ne[2] as usize);
                    let at = i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
                    let mut row = vec![0f32; n];
                    dequantize_row(ty, &t.buf[at..at + ty.row_size(n)], &mut row);
                    all.extend(row);
                }
                all
            };
            assert_eq!(deq(&d), deq(&s), "{} to nb {:?}", ty.name(), d.nb);
        }
    }
}

#[test]
fn dup_quantizes_float_rows_as_upstreams_cpu_and_dequantizes_blocks() {
    let mut r = XorShift::new(3);
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4K, GgmlType::Q6K] {
        let n = 256;
        for st in [F32, F16] {
            let mut s = T::padded(st, [n as i64, 3, 2, 1], 4);
            for (k, i) in s.indices().into_iter().enumerate() {
                let v = r.model_like(1)[0] + (k % 7) as f32 * 0.01;
                s.set(i, v);
            }
            let d = T::new(ty as i32, [n as i64, 3, 2, 1]);
            run(&node(Op::Cpy, &d, &[&s], &[]), 3);
            let vals = s.values();
            for (row, x) in vals.chunks(n).enumerate() {
                let mut want = crate::block::AlignedBytes::zeroed(ty.row_size(n));
                if ty == GgmlType::Q8_0 {
                    crate::quants::quantize_row_q8_0_cpu(x, crate::block::as_blocks_mut(&mut want, "q8_0"));
                } else {
                    quantize_row(ty, x, &mut want);
                }
                let rs = ty.row_size(n);
                assert_eq!(&d.buf[row * rs..(row + 1) * rs], &want[..], "{} row {row} from {st}", ty.name());
            }
            // and back: dequantized block by block into a padded F32 destination
            let back = T::padded(F32, [n as i64, 3, 2, 1], 12);
            run(&node(Op::Cpy, &back, &[&d], &[]), 2);
            let mut want = vec![0f32; n * 6];
            for (row, out) in want.chunks_mut(n).enumerate() {
                let rs = ty.row_size(n);
                dequantize_row(ty, &d.buf[row * rs..(row + 1) * rs], out);
            }
            assert_eq!(back.values(), want, "{} back to f32", ty.name());
        }
    }
}

/// the grid types (no `from_float` upstream) are read (GET_ROWS, CPY to F32) and never written
/// (SET_ROWS, CPY into them)
#[test]
fn grid_types_are_read_never_written() {
    for ty in GgmlType::GRID {
        let q = T::new(ty as i32, [256, 2, 1, 1]);
        let f32t = T::new(F32, [256, 2, 1, 1]);
        let idx = T::new(I32, [2, 1, 1, 1]);
        assert!(supports(&node(Op::Cpy, &f32t, &[&q], &[])), "{} -> f32", ty.name());
        assert!(supports(&node(Op::GetRows, &f32t, &[&q, &idx], &[])), "get_rows {}", ty.name());
        assert!(!supports(&node(Op::Cpy, &q, &[&f32t], &[])), "f32 -> {}", ty.name());
        assert!(!supports(&node(Op::Cpy, &q, &[&T::new(ty as i32, [256, 2, 1, 1])], &[])), "{} -> {}", ty.name(), ty.name());
        assert!(supports(&node(Op::Cont, &q, &[&T::new(ty as i32, [256, 2, 1, 1])], &[])), "cont {}", ty.name());
        assert!(!supports(&node(Op::SetRows, &q, &[&f32t, &idx], &[])), "set_rows into {}", ty.name());
    }
    // and a type with a quantizer is written (Q4_0: on every architecture; IQ4_XS is declined
    // on aarch64, GgmlType::quantizes_as_upstream)
    let q = T::new(GgmlType::Q4_0 as i32, [256, 2, 1, 1]);
    assert!(supports(&node(Op::Cpy, &q, &[&T::new(F32, [256, 2, 1, 1])], &[])));
}

#[test]
fn dup_claims_only_what_it_computes() {
    let q = T::new(GgmlType::Q4_0 as i32, [32, 2, 1, 1]);
    let f16 = T::new(F16, [32, 2, 1, 1]);
    let i32t = T::new(I32, [32, 2, 1, 1]);
    let padded_q = T::padded(GgmlType::Q8_0 as i32, [32, 2, 1, 1], 2);
    let f32t = T::new(F32, [32, 2, 1, 1]);
    assert!(!supports(&node(Op::Cpy, &f16, &[&q], &[])), "q4_0 -> f16 is not upstream's");
    assert!(!supports(&node(Op::Cpy, &f16, &[&i32t], &[])), "i32 -> f16 is not upstream's");
    assert!(!supports(&node(Op::Cpy, &padded_q, &[&f32t], &[])), "quantizing needs a contiguous destination");
    assert!(!supports(&node(Op::Cpy, &T::new(F32, [31, 2, 1, 1]), &[&f32t], &[])), "element counts differ");
}

#[test]
fn get_rows_picks_rows_of_every_type_by_a_3d_index() {
    let mut r = XorShift::new(4);
    let types = [
        F32,
        I32,
        F16,
        BF16,
        GgmlType::Q8_0 as i32,
        GgmlType::Q4_0 as i32,
        GgmlType::Q4K as i32,
        GgmlType::Q6K as i32,
        GgmlType::Iq2Xxs as i32,
        GgmlType::Iq3S as i32,
    ];
    for ty in types {
        let n = 256usize;
        let ne = [n as i64, 5, 3, 2];
        let x = r.model_like(n * 30);
        let a = match GgmlType::from_raw(ty).filter(|_| ty != F32 && ty != F16 && ty != BF16) {
            // the grid types have no quantizer: random blocks with a small f16 scale
            Some(q) if !q.has_from_float() => {
                let mut t = T::new(ty, ne);
                r.fill_bytes(&mut t.buf);
                for blk in t.buf.chunks_exact_mut(q.type_size()) {
                    blk[1] &= 0x3f;
                }
                t
            }
            Some(q) => T::quantized(q, ne, &x, 0),
            None => {
                let mut t = T::padded(ty, ne, 8);
                for (i, v) in t.indices().into_iter().zip(&x) {
                    t.set(i, if ty == I32 { (v * 1000.0).round() } else { *v });
                }
                t
            }
        };
        let mut b = T::new(I32, [4, 3, 2, 1]);
        for i in b.indices() {
            b.set(i, r.i32_in(0, 4) as f32);
        }
        let dt = if ty == I32 { I32 } else { F32 };
        let d = T::padded(dt, [n as i64, 4, 3, 2], 4);
        run(&node(Op::GetRows, &d, &[&a, &b], &[]), 3);
        for i in b.indices() {
            let row = b.get(i) as usize;
            let want: Vec<f32> = if let Some(q) = GgmlType::from_raw(ty).filter(|_| ty > F16 && ty != BF16) {
                let at = row * a.nb[1] + i[1] * a.nb[2] + i[2] * a.nb[3];
                let mut v = vec![0f32; n];
                dequantize_row(q, &a.buf[at..at + q.row_size(n)], &mut v);
                v
            } else {
                (0..n).map(|k| a.get([k, row, i[1], i[2]])).collect()
            };
            let got: Vec<f32> = (0..n).map(|k| d.get([k, i[0], i[1], i[2]])).collect();
            assert_eq!(got, want, "type {ty} index {i:?}");
        }
    }
}

#[test]
fn get_rows_rejects_an_index_out_of_range_by_name() {
    let a = T::new(F32, [4, 3, 1, 1]);
    let mut b = T::new(I32, [2, 1, 1, 1]);
    b.set([1, 0, 0, 0], 3.0);
    let d = T::new(F32, [4, 2, 1, 1]);
    let n = node(Op::GetRows, &d, &[&a, &b], &[]);
    let mut pool = crate::pool::ThreadPool::new(1);
    let mut scratch = crate::block::AlignedBytes::default();
    let err = crate::ops::compute(&n, &mut Exec::new(&mut pool, &mut scratch)).unwrap_err();
    assert!(err.0.contains("row index 3 at (1, 0, 0) is outside 0..3"), "{err}");
}

#[test]
fn set_rows_converts_rows_into_every_cache_type_with_broadcast_indices() {
    let mut r = XorShift::new(5);
    let dts = [F32, F16, BF16, GgmlType::Q8_0 as i32, GgmlType::Q4_0 as i32, GgmlType::Q4K as i32, GgmlType::Q6K as i32];
    for st in [F32, F16] {
        for dt in dts {
            for it in [I64, I32] {
                let n = 256usize;
                // 3 source rows in each of 4 × 2 slabs, indices [3, 2, 1]: broadcast over dim 2
                let a = T::padded(st, [n as i64, 3, 4, 2], 8).random(&mut r);
                let mut b = T::new(it, [3, 2, 1, 1]);
                for s in 0..2 {
                    let perm = [[4, 0, 2], [1, 3, 5]][s];
                    for (k, p) in perm.iter().enumerate() {
                        if it == I64 { b.set_i64([k, s, 0, 0], *p) } else { b.set([k, s, 0, 0], *p as f32) }
                    }
                }
                let d = T::new(dt, [n as i64, 6, 4, 2]);
                run(&node(Op::SetRows, &d, &[&a, &b], &[]), 2);
                let rs = type_size(dt).map(|(bl, sz)| n / bl * sz).unwrap();
                for i3 in 0..2 {
                    for i2 in 0..4 {
                        for i in 0..3 {
                            let idx = [[4, 0, 2], [1, 3, 5]][i2 % 2][i];
                            let x: Vec<f32> = (0..n).map(|k| a.get([k, i, i2, i3])).collect();
                            let mut want = crate::block::AlignedBytes::zeroed(rs);
                            let ty = GgmlType::from_raw(dt).unwrap();
                            if ty == GgmlType::Q8_0 {
                                crate::quants::quantize_row_q8_0_cpu(&x, crate::block::as_blocks_mut(&mut want, "q8_0"));
                            } else {
                                quantize_row(ty, &x, &mut want);
                            }
                            let at = idx * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
                            assert_eq!(&d.buf[at..at + rs], &want[..], "{st} -> {dt} ({it}) row {i} slab ({i2}, {i3})");
                        }
                    }
                }
            }
        }
    }
}

/// the transposed V cache's SET_ROWS (flash attention off): rows of one element (and other
/// short and long rows), F32 into F16, each element where its index puts it, rounded to nearest even
#[test]
fn set_rows_f32_to_f16_rows_of_one_element_and_more() {
    let mut r = XorShift::new(8);
    // 150 rows: one-element rows go in runs of 64 (two whole runs and a part)
    for (n, rows) in [(1usize, 50i64), (1, 150), (3, 50), (8, 50), (37, 50)] {
        let a = T::new(F32, [n as i64, rows, 1, 1]).random(&mut r);
        let mut b = T::new(I64, [rows, 1, 1, 1]);
        // distinct destination rows: 7 is prime to 160
        for i in 0..rows as usize {
            b.set_i64([i, 0, 0, 0], ((i * 7) % 160) as i64);
        }
        let d = T::new(F16, [n as i64, 160, 1, 1]);
        run(&node(Op::SetRows, &d, &[&a, &b], &[]), 2);
        for i in 0..rows as usize {
            for k in 0..n {
                let want = half::f16::from_f32_const(a.get([k, i, 0, 0])).to_f32();
                assert_eq!(d.get([k, (i * 7) % 160, 0, 0]), want, "n={n} row {i} element {k}");
            }
        }
    }
}

/// rows numbered across slabs: chunks start and end inside a slab (dims 1 and 2 of the source,
/// the index tensor broadcast over both), the short rows many chunks of the transposed V cache at
/// prompt sizes; every row lands where its index says, whatever the thread count (SET_ROWS steps
/// (i, i02, i03) along a chunk's rows instead of dividing each row's number)
#[test]
fn set_rows_chunks_cross_slab_boundaries() {
    let mut r = XorShift::new(9);
    // 10570 rows of one element: 3 chunks of 3524 rows, each starting inside both slabs
    let (n, nr, ne02, ne03) = (1usize, 7usize, 5usize, 302usize);
    let a = T::new(F32, [n as i64, nr as i64, ne02 as i64, ne03 as i64]).random(&mut r);
    // indices [7, 1, 2, 1]: broadcast over dim 2 (5 = 1 × 5) and dim 3 (302 = 2 × 151)
    let mut b = T::new(I32, [nr as i64, 1, 2, 1]);
    // distinct within each slab: rows 0..7 to 0..7 or 2..9
    let idx = |i: usize, i03: usize| i + 2 * (i03 % 2);
    for i in 0..nr {
        for s in 0..2 {
            b.set([i, 0, s, 0], idx(i, s) as f32);
        }
    }
    for threads in [1, 2, 3] {
        let d = T::new(F16, [n as i64, 9, ne02 as i64, ne03 as i64]);
        run(&node(Op::SetRows, &d, &[&a, &b], &[]), threads);
        for i3 in 0..ne03 {
            for i2 in 0..ne02 {
                for i in 0..nr {
                    let want = half::f16::from_f32_const(a.get([0, i, i2, i3])).to_f32();
                    assert_eq!(d.get([0, idx(i, i3), i2, i3]), want, "{threads} threads: row {i} slab ({i2}, {i3})");
                }
            }
        }
    }
}

#[test]
fn get_rows_back_sums_repeated_rows() {
    let mut r = XorShift::new(6);
    for st in [F32, F16] {
        let a = T::new(st, [37, 5, 1, 1]).random(&mut r);
        let mut b = T::new(I32, [5, 1, 1, 1]);
        for (k, v) in [2, 0, 2, 3, 2].iter().enumerate() {
            b.set([k, 0, 0, 0], *v as f32);
        }
        let mut d = T::new(F32, [37, 4, 1, 1]);
        d.fill(&mut r, 5.0, 6.0); // overwritten
        run(&node(Op::GetRowsBack, &d, &[&a, &b], &[]), 3);
        for row in 0..4 {
            for k in 0..37 {
                let mut want = 0f32;
                for i in 0..5 {
                    if b.get([i, 0, 0, 0]) as usize == row {
                        want += a.get([k, i, 0, 0]);
                    }
                }
                assert_eq!(d.get([k, row, 0, 0]), want, "{st} row {row} col {k}");
            }
        }
    }
}

/// upstream's test with a view of the indices: only the first nelements(src1) rows of src0 count
#[test]
fn get_rows_back_uses_as_many_rows_as_there_are_indices() {
    let mut r = XorShift::new(9);
    let a = T::new(F32, [16, 4, 2, 1]).random(&mut r);
    let mut b = T::new(I32, [3, 1, 1, 1]);
    for (k, v) in [1, 1, 0].iter().enumerate() {
        b.set([k, 0, 0, 0], *v as f32);
    }
    let d = T::new(F32, [16, 2, 1, 1]);
    let n = node(Op::GetRowsBack, &d, &[&a, &b], &[]);
    assert!(supports(&n), "3 indices for 8 rows");
    run(&n, 2);
    for k in 0..16 {
        assert_eq!(d.get([k, 0, 0, 0]), a.get([k, 2, 0, 0]));
        assert_eq!(d.get([k, 1, 0, 0]), a.get([k, 0, 0, 0]) + a.get([k, 1, 0, 0]));
    }
}

#[test]
fn set_overwrites_a_strided_region_and_keeps_the_rest() {
    let mut r = XorShift::new(7);
    for ty in [F32, I32] {
        let mut a = T::new(ty, [10, 6, 2, 1]);
        for i in a.indices() {
            a.set(i, r.i32_in(-50, 50) as f32);
        }
        let mut b = T::new(ty, [3, 2, 2, 1]);
        for i in b.indices() {
            b.set(i, r.i32_in(100, 200) as f32);
        }
        // region: rows 1..3 of each matrix, columns 4..7 (offset = 1 row + 4 elements)
        let (nb1, nb2) = (40, 240);
        let params = [nb1, nb2, 480, 40 + 16, 0];
        for inplace in [false, true] {
            let d = T::new(ty, [10, 6, 2, 1]);
            let mut p = params;
            p[4] = inplace as i32;
            let (dst, src0) = if inplace { (&a, &a) } else { (&d, &a) };
            let before = a.values();
            run(&node(Op::Set, dst, &[src0, &b], &p), 2);
            for i in a.indices() {
                let inside = (4..7).contains(&i[0]) && (1..3).contains(&i[1]);
                let want = if inside { b.get([i[0] - 4, i[1] - 1, i[2], 0]) } else { before[i[0] + 10 * (i[1] + 6 * i[2])] };
                assert_eq!(dst.get(i), want, "{ty} inplace={inplace} at {i:?}");
            }
        }
    }
}

#[test]
fn diag_mask_sets_everything_right_of_the_shifted_diagonal() {
    let mut r = XorShift::new(8);
    for (op, value) in [(Op::DiagMaskInf, f32::NEG_INFINITY), (Op::DiagMaskZero, 0.0)] {
        for n_past in [0, 2] {
            let a = T::new(F32, [7, 5, 3, 2]).random(&mut r);
            let d = T::new(F32, [7, 5, 3, 2]);
            run(&node(op, &d, &[&a], &[n_past]), 3);
            for i in a.indices() {
                let want = if i[0] > n_past as usize + i[1] { value } else { a.get(i) };
                assert_eq!(d.get(i), want, "{op:?} n_past {n_past} at {i:?}");
            }
        }
    }
}
