//! Flash attention's accumulator kernels (`y = y·s + x·v` over a V row), bit for bit upstream's
//! native build: an F16 accumulator is kept in **f16**, rounded at every position. Where the CPU
//! has AVX512-FP16, upstream's native build adds the first `DV & !127` elements in f16 arithmetic
//! (one rounding of `y + x·f16(vs)`), the others as the scalar tail (an `f32` fused multiply-add,
//! then rounded to f16). [`mad16_def`] and [`scale16_def`] define both; the AVX-512 and AVX2
//! kernels equal them bit for bit. F32 accumulators take fused multiply-adds (`mad32_def`).
//! [`AccOps`] is one kernel set's choice ([`crate::kernels::Kernels::acc`]).

use half::f16;

/// `x` rounded once to f16 (nearest, ties to even): through f32 rounded to odd, which keeps the
/// sticky bit (24 bits ≥ 11 + 2), then f32 → f16 nearest-even
pub fn rne16_f64(x: f64) -> f16 {
    let mut f = x as f32;
    if f.is_finite() && (f as f64).abs() > x.abs() {
        // rounded away from zero: the truncation is one below in magnitude
        f = f32::from_bits(f.to_bits() - 1);
    }
    if f.is_finite() && f as f64 != x {
        f = f32::from_bits(f.to_bits() | 1);
    }
    f16::from_f32(f)
}

/// upstream's `ggml_vec_scale_f16(y, ms)` on its native build: the first `np` elements
/// `rne16(y · rne16(ms))` (the product of two f16 is exact in f32), the rest `rne16(f32(y) · ms)`
pub fn scale16_def(y: &mut [f16], ms: f32, np: usize) {
    let h = f16::from_f32(ms).to_f32();
    for (i, e) in y.iter_mut().enumerate() {
        *e = f16::from_f32(e.to_f32() * if i < np { h } else { ms });
    }
}

/// upstream's `ggml_vec_mad_f16(y, x, vs)` on its native build: the first `np` elements
/// `rne16(y + x · rne16(vs))` with one rounding, the rest `rne16(fma(f32(x), vs, f32(y)))`
pub fn mad16_def(y: &mut [f16], x: &[f16], vs: f32, np: usize) {
    let h = f16::from_f32(vs).to_f32();
    for (i, (e, xv)) in y.iter_mut().zip(x).enumerate() {
        *e = if i < np {
            // x·h is exact in f32; the f64 sum of it and an f16 is exact or far below an f16 ulp
            rne16_f64(e.to_f64() + f64::from(xv.to_f32() * h))
        } else {
            f16::from_f32(xv.to_f32().mul_add(vs, e.to_f32()))
        };
    }
}

/// `y[i] = fma(x[i], s, y[i])` (upstream's `ggml_vec_mad_f32`, its tail fused by GCC too)
fn mad32_def(y: &mut [f32], x: &[f32], s: f32) {
    y.iter_mut().zip(x).for_each(|(a, b)| *a = b.mul_add(s, *a));
}

/// [`dot_rows_def`]'s signature: `(q, d, k0, stride, live, out)`
pub type DotRowsFn = unsafe fn(*const f32, usize, *const u8, usize, u64, *mut f32);

/// flash attention's accumulator kernels of one kernel set ([`crate::kernels::Kernels::acc`]), bit
/// for bit the definitions above. The pointers' instruction set is the table's; `scale16` and
/// `mad16` take `np` (`ops::attn`'s `f16_native_len`) and whether to do that part in AVX512-FP16 instructions.
#[derive(Clone, Copy)]
pub struct AccOps {
    pub(crate) scale16: unsafe fn(&mut [f16], f32, usize, bool),
    /// unsafe: `x` as long as `y` (checked by [`AccOps::mad16`])
    pub(crate) mad16: unsafe fn(&mut [f16], &[f16], f32, usize, bool),
    /// unsafe: `x` as long as `y` (checked by [`AccOps::mad32`])
    pub(crate) mad32: unsafe fn(&mut [f32], &[f32], f32),
    /// the CPU has AVX512-FP16: upstream's native build adds the first [`f16_native_len`]
    /// elements of F16 accumulators in f16 arithmetic, which every set reproduces (emulated
    /// exactly in f64 below AVX-512)
    pub(crate) f16_native: bool,
    /// that part in AVX512-FP16 instructions (the AVX-512 sets on such a CPU)
    pub(crate) fp16: bool,
    /// the prompt blocks' helpers (`ops/attn/tiles.rs`): a mask row's live positions, scores of
    /// K rows by direct dots (`W` 0 f32, 1 f16, 2 bf16), a score row's scaling, mask and maximum;
    /// their definitions or the AVX-512 forms, the same bits
    pub(crate) live_bits: unsafe fn(*const u16, usize) -> u64,
    pub(crate) dot_rows: [DotRowsFn; 3],
    pub(crate) prep_row: unsafe fn(*mut f32, u64, *const u16, f32, f32, bool) -> f32,
}

impl AccOps {
    /// the definitions (the scalar set's kernels; the table sets `f16_native` from the CPU)
    pub fn scalar() -> AccOps {
        AccOps {
            scale16: |y, ms, np, _| scale16_def(y, ms, np),
            mad16: |y, x, vs, np, _| mad16_def(y, x, vs, np),
            mad32: mad32_def,
            f16_native: false,
            fp16: false,
            live_bits: live_bits_def,
            dot_rows: [dot_rows_def::<0>, dot_rows_def::<1>, dot_rows_def::<2>],
            prep_row: prep_row_def,
        }
    }

    /// `y = rne16(y · ms)` as upstream's native build computes it (`np`: the f16-arithmetic part,
    /// [`scale16_def`]; a multiple of 32 within `y`)
    pub fn scale16(&self, y: &mut [f16], ms: f32, np: usize) {
        assert!(np <= y.len() && np.is_multiple_of(32), "attn scale16: an f16 part of {np} in {} elements", y.len());
        // SAFETY: the table's set runs on this CPU; np checked
        unsafe { (self.scale16)(y, ms, np, self.fp16) }
    }

    /// `y = rne16(y + x · vs)` as upstream's native build computes it ([`mad16_def`]; `np` as in
    /// [`AccOps::scale16`])
    pub fn mad16(&self, y: &mut [f16], x: &[f16], vs: f32, np: usize) {
        assert_eq!(y.len(), x.len(), "attn mad16: lengths differ");
        assert!(np <= y.len() && np.is_multiple_of(32), "attn mad16: an f16 part of {np} in {} elements", y.len());
        // SAFETY: the table's set runs on this CPU; the lengths are equal, np checked
        unsafe { (self.mad16)(y, x, vs, np, self.fp16) }
    }

    /// [`live_bits_def`] in the set's form
    ///
    /// # Safety
    /// as [`live_bits_def`]
    pub unsafe fn live_bits(&self, p: *const u16, n: usize) -> u64 {
        assert!(n <= KB, "attn live_bits: {n} positions");
        // SAFETY: the table's set runs on this CPU; the caller's contract
        unsafe { (self.live_bits)(p, n) }
    }

    /// [`dot_rows_def`] in the set's form, for K of `kt` (F32, F16 or BF16)
    ///
    /// # Safety
    /// every row of `q.len()` elements at `k0 + j·stride` for a bit j of `live` readable
    pub unsafe fn dot_rows(&self, kt: crate::GgmlType, q: &[f32], k0: *const u8, stride: usize, live: u64, out: &mut [f32]) {
        assert!(out.len() >= KB, "attn dot_rows: a score row of {} floats", out.len());
        let w = match kt {
            crate::GgmlType::F32 => 0,
            crate::GgmlType::F16 => 1,
            crate::GgmlType::BF16 => 2,
            _ => panic!("attn dot_rows: K of {}", kt.name()),
        };
        // SAFETY: the table's set runs on this CPU; q holds the row's length, out KB floats; the
        // caller's contract for the rows
        unsafe { (self.dot_rows[w])(q.as_ptr(), q.len(), k0, stride, live, out.as_mut_ptr()) }
    }

    /// [`prep_row_def`] in the set's form
    ///
    /// # Safety
    /// `mask` is null or readable at every live position
    pub unsafe fn prep_row(&self, s: &mut [f32], live: u64, mask: *const u16, slope: f32, scale: f32, rounded: bool) -> f32 {
        assert!(s.len() >= KB, "attn prep_row: a score row of {} floats", s.len());
        // SAFETY: the table's set runs on this CPU; s holds KB floats; the caller's contract
        unsafe { (self.prep_row)(s.as_mut_ptr(), live, mask, slope, scale, rounded) }
    }

    pub fn mad32(&self, y: &mut [f32], x: &[f32], s: f32) {
        assert_eq!(y.len(), x.len(), "attn mad32: lengths differ");
        // SAFETY: as in mad16
        unsafe { (self.mad32)(y, x, s) }
    }
}

/// the KV positions of one tile of flash attention's prompt blocks (`ops/attn/tiles.rs`'s KB)
pub const KB: usize = 64;

/// F16's `-inf`
const NEG_INF_F16: u16 = 0xfc00;

/// the positions 0..n (n <= 64) of a mask row of F16 that are not `-inf`, as bits
///
/// # Safety
/// `p` readable for `n` 16-bit values
pub unsafe fn live_bits_def(p: *const u16, n: usize) -> u64 {
    let mut bits = 0u64;
    for j in 0..n.min(KB) {
        // SAFETY: j < n values (caller)
        if unsafe { p.add(j).read_unaligned() } != NEG_INF_F16 {
            bits |= 1 << j;
        }
    }
    bits
}

/// `out[j] = q · k_j` for each bit j of `live`, k_j the row of `d` elements stored as `W` (0 f32,
/// 1 f16, 2 bf16) at `k0 + j·stride`: the AVX-512 form's order lane for lane (16 lanes, blocks of
/// 16 alternating between two accumulators by fused multiply-adds, added lane-wise, then reduced
/// as `_mm512_reduce_add_ps`)
///
/// # Safety
/// `q` readable for `d` floats, `out` writable for 64, every such row readable
pub unsafe fn dot_rows_def<const W: u8>(q: *const f32, d: usize, k0: *const u8, stride: usize, live: u64, out: *mut f32) {
    let eb = if W == 0 { 4 } else { 2 };
    let mut bits = live;
    while bits != 0 {
        let j = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let k = k0.wrapping_add(j * stride);
        let mut acc = [[0f32; 16]; 2];
        for i in 0..d {
            // SAFETY: element i < d of the row and of q (caller)
            let (kv, qv) = unsafe {
                let p = k.add(eb * i);
                let kv = match W {
                    0 => p.cast::<f32>().read_unaligned(),
                    1 => half::f16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                    _ => half::bf16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                };
                (kv, q.add(i).read())
            };
            let a = &mut acc[(i / 16) % 2][i % 16];
            *a = qv.mul_add(kv, *a);
        }
        let v: [f32; 16] = std::array::from_fn(|l| acc[0][l] + acc[1][l]);
        // SAFETY: j < 64 (caller: out holds 64)
        unsafe { *out.add(j) = crate::expf::reduce_add16(&v) };
    }
}

/// `s[j] = s[j]·scale + slope·mask[j]` where `live` has bit j, `-inf` elsewhere (KB positions);
/// returns the row's maximum. `rounded`: `slope·mask` rounded before it is added (upstream's
/// order), else one fused multiply-add
///
/// # Safety
/// `s` writable for KB floats; `mask` is null or readable at every live position
pub unsafe fn prep_row_def(s: *mut f32, live: u64, mask: *const u16, slope: f32, scale: f32, rounded: bool) -> f32 {
    let mut mx = f32::NEG_INFINITY;
    for j in 0..KB {
        // SAFETY: j < KB floats of s; the mask read at live positions only (caller)
        unsafe {
            let x = if live >> j & 1 == 1 { prep_live(s.add(j).read(), mask, j, slope, scale, rounded) } else { f32::NEG_INFINITY };
            s.add(j).write(x);
            // vmaxps: the first operand when it is greater, else the second
            mx = if mx > x { mx } else { x };
        }
    }
    mx
}

/// one live position of [`prep_row_def`]: `x·scale`, plus `slope·mask[j]` where there is a mask
/// (rounded first, or fused); the AVX2 form's mixed groups take this step too
///
/// # Safety
/// `mask` is null or readable at `j`
#[inline(always)]
pub(crate) unsafe fn prep_live(x: f32, mask: *const u16, j: usize, slope: f32, scale: f32, rounded: bool) -> f32 {
    let x = x * scale;
    if mask.is_null() {
        return x;
    }
    // SAFETY: readable at j (caller)
    let mv = half::f16::from_bits(unsafe { mask.add(j).read_unaligned() }).to_f32();
    if rounded { x + mv * slope } else { mv.mul_add(slope, x) }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{mad16_def, scale16_def};
    use half::f16;
    use std::arch::x86_64::*;

    const RNE: i32 = _MM_FROUND_TO_NEAREST_INT;

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn scale16_512(y: &mut [f16], ms: f32, np: usize, fp16: bool) {
        let n = y.len();
        let n16 = n - n % 16;
        let h = f16::from_f32(ms).to_f32();
        let mut i = 0;
        if np > 0 && fp16 && np <= n {
            // SAFETY: np (a multiple of 128) f16; the CPU has AVX512-FP16
            unsafe { fp16_native(0, y.as_mut_ptr(), std::ptr::null(), np, f16::from_f32(ms)) };
            i = np;
        }
        while i < n16 {
            let s = _mm512_set1_ps(if i < np { h } else { ms });
            // SAFETY: i + 16 <= n16 <= y.len(): 16 f16, 32 bytes; np is a multiple of 128
            unsafe {
                let p = y.as_mut_ptr().add(i) as *mut __m256i;
                _mm256_storeu_si256(p, _mm512_cvtps_ph::<RNE>(_mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(p)), s)));
            }
            i += 16;
        }
        scale16_def(&mut y[n16..], ms, np.saturating_sub(n16));
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn scale16_256(y: &mut [f16], ms: f32, np: usize, _fp16: bool) {
        let n = y.len();
        let n8 = n - n % 8;
        let h = f16::from_f32(ms).to_f32();
        let mut i = 0;
        while i < n8 {
            let s = _mm256_set1_ps(if i < np { h } else { ms });
            // SAFETY: i + 8 <= n8 <= y.len(): 8 f16, 16 bytes
            unsafe {
                let p = y.as_mut_ptr().add(i) as *mut __m128i;
                _mm_storeu_si128(p, _mm256_cvtps_ph::<RNE>(_mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(p)), s)));
            }
            i += 8;
        }
        scale16_def(&mut y[n8..], ms, np.saturating_sub(n8));
    }

    /// `y[i..i + 8] = rne16(y + x·h)` with one rounding: the exact sum in f64, truncated to f32
    /// with the sticky bit ORed in (round to odd), then rounded to f16
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    fn mad16_native8(y: *mut f16, x: *const f16, h: __m256) {
        // SAFETY: the caller's: 8 f16 at y and at x
        unsafe {
            let yf = _mm256_cvtph_ps(_mm_loadu_si128(y as *const __m128i));
            let p = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(x as *const __m128i)), h);
            let sum = _mm512_add_pd(_mm512_cvtps_pd(yf), _mm512_cvtps_pd(p));
            let t = _mm512_cvt_roundpd_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(sum);
            let inexact = _mm512_cmp_pd_mask::<_CMP_NEQ_OQ>(_mm512_cvtps_pd(t), sum);
            let ti = _mm256_castps_si256(t);
            let odd = _mm256_mask_or_epi32(ti, inexact, ti, _mm256_set1_epi32(1));
            _mm_storeu_si128(y as *mut __m128i, _mm256_cvtps_ph::<RNE>(_mm256_castsi256_ps(odd)));
        }
    }

    /// `n` (a multiple of 32, > 0) f16 at `y`: `y = y·h` (`op` 0, `vmulph`) or `y = y + x·h`
    /// (`op` 1, `vfmadd231ph`), in AVX512-FP16 arithmetic as upstream's native build does
    ///
    /// # Safety
    /// The CPU has AVX512-FP16 (and AVX-512 F/BW); `n` f16 readable at `x` (op 1) and readable and
    /// writable at `y`
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn fp16_native(op: u8, y: *mut f16, x: *const f16, n: usize, h: f16) {
        debug_assert!(n > 0 && n.is_multiple_of(32));
        // SAFETY: the caller's; the loop reads and writes n f16 (64 bytes a step) at y and x
        unsafe {
            if op == 0 {
                std::arch::asm!(
                    "vpbroadcastw {hv}, {hs:e}",
                    "2:",
                    "vmulph {a}, {hv}, zmmword ptr [{y}]",
                    "vmovdqu16 zmmword ptr [{y}], {a}",
                    "add {y}, 64",
                    "sub {n}, 32",
                    "jnz 2b",
                    y = inout(reg) y => _, n = inout(reg) n => _, hs = in(reg) u32::from(h.to_bits()),
                    hv = out(zmm_reg) _, a = out(zmm_reg) _,
                    options(nostack),
                );
            } else {
                std::arch::asm!(
                    "vpbroadcastw {hv}, {hs:e}",
                    "2:",
                    "vmovdqu16 {a}, zmmword ptr [{y}]",
                    "vfmadd231ph {a}, {hv}, zmmword ptr [{x}]",
                    "vmovdqu16 zmmword ptr [{y}], {a}",
                    "add {y}, 64",
                    "add {x}, 64",
                    "sub {n}, 32",
                    "jnz 2b",
                    y = inout(reg) y => _, x = inout(reg) x => _, n = inout(reg) n => _, hs = in(reg) u32::from(h.to_bits()),
                    hv = out(zmm_reg) _, a = out(zmm_reg) _,
                    options(nostack),
                );
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(crate) fn mad16_512(y: &mut [f16], x: &[f16], vs: f32, np: usize, fp16: bool) {
        let n = y.len();
        let n16 = n - n % 16;
        let h = _mm256_set1_ps(f16::from_f32(vs).to_f32());
        let v = _mm512_set1_ps(vs);
        let mut i = 0;
        if np > 0 && fp16 && np <= n {
            // SAFETY: np (a multiple of 128) f16 of both; the CPU has AVX512-FP16
            unsafe { fp16_native(1, y.as_mut_ptr(), x.as_ptr(), np, f16::from_f32(vs)) };
            i = np;
        }
        while i < np.min(n16) {
            // SAFETY: i + 16 <= n16 <= both lengths (np is a multiple of 128)
            unsafe {
                mad16_native8(y.as_mut_ptr().add(i), x.as_ptr().add(i), h);
                mad16_native8(y.as_mut_ptr().add(i + 8), x.as_ptr().add(i + 8), h);
            }
            i += 16;
        }
        while i < n16 {
            // SAFETY: i + 16 <= n16 <= both lengths
            unsafe {
                let p = y.as_mut_ptr().add(i) as *mut __m256i;
                let xf = _mm512_cvtph_ps(_mm256_loadu_si256(x.as_ptr().add(i) as *const __m256i));
                _mm256_storeu_si256(p, _mm512_cvtps_ph::<RNE>(_mm512_fmadd_ps(xf, v, _mm512_cvtph_ps(_mm256_loadu_si256(p)))));
            }
            i += 16;
        }
        mad16_def(&mut y[n16..], &x[n16..], vs, np.saturating_sub(n16));
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn mad16_256(y: &mut [f16], x: &[f16], vs: f32, np: usize, _fp16: bool) {
        let n = y.len();
        // the f16-arithmetic part as defined (a CPU with AVX512-FP16 run at the AVX2 level)
        let np = np.min(n);
        mad16_def(&mut y[..np], &x[..np], vs, np);
        let n8 = np + (n - np) / 8 * 8;
        let v = _mm256_set1_ps(vs);
        let mut i = np;
        while i < n8 {
            // SAFETY: i + 8 <= n8 <= both lengths
            unsafe {
                let p = y.as_mut_ptr().add(i) as *mut __m128i;
                let xf = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(i) as *const __m128i));
                _mm_storeu_si128(p, _mm256_cvtps_ph::<RNE>(_mm256_fmadd_ps(xf, v, _mm256_cvtph_ps(_mm_loadu_si128(p)))));
            }
            i += 8;
        }
        mad16_def(&mut y[n8..], &x[n8..], vs, 0);
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn mad32_fma(y: &mut [f32], x: &[f32], s: f32) {
        let n = y.len();
        let n8 = n - n % 8;
        let sv = _mm256_set1_ps(s);
        for i in (0..n8).step_by(8) {
            // SAFETY: i + 8 <= n8 <= both lengths
            unsafe {
                let p = y.as_mut_ptr().add(i);
                _mm256_storeu_ps(p, _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr().add(i)), sv, _mm256_loadu_ps(p)));
            }
        }
        y[n8..].iter_mut().zip(&x[n8..]).for_each(|(a, b)| *a = b.mul_add(s, *a));
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod blocks512 {
    use std::arch::x86_64::*;

    use super::{KB, NEG_INF_F16};

    /// the first `r` lanes of 32
    fn lanes32(r: usize) -> __mmask32 {
        if r >= 32 { u32::MAX } else { (1u32 << r) - 1 }
    }

    /// # Safety
    /// AVX-512 F/BW/VL; `q` readable for `d` floats, `out` writable for 64, the row of `d`
    /// elements at `k0 + j·stride` (stored as `W`: 0 f32, 1 f16, 2 bf16) readable for each bit j
    /// of `live`
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
    pub(crate) unsafe fn dot_rows<const W: u8>(q: *const f32, d: usize, k0: *const u8, stride: usize, live: u64, out: *mut f32) {
        let eb = if W == 0 { 4 } else { 2 };
        let mut bits = live;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let k = k0.wrapping_add(j * stride);
            let (mut a0, mut a1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            let mut i = 0;
            while i < d {
                let m = if d - i >= 16 { 0xffff } else { ((1u32 << (d - i)) - 1) as __mmask16 };
                // SAFETY: lanes past d are masked off
                unsafe {
                    let p = k.add(eb * i);
                    let kv = match W {
                        0 => _mm512_maskz_loadu_ps(m, p.cast()),
                        1 => _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast())),
                        _ => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p.cast())))),
                    };
                    let qv = _mm512_maskz_loadu_ps(m, q.add(i));
                    if (i / 16) % 2 == 0 {
                        a0 = _mm512_fmadd_ps(qv, kv, a0);
                    } else {
                        a1 = _mm512_fmadd_ps(qv, kv, a1);
                    }
                }
                i += 16;
            }
            // SAFETY: j < 64
            unsafe { *out.add(j) = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) };
        }
    }

    /// # Safety
    /// AVX-512 F/BW/VL; `p` readable for `n <= 64` values
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(crate) unsafe fn live_bits(p: *const u16, n: usize) -> u64 {
        let ninf = _mm512_set1_epi16(NEG_INF_F16 as i16);
        let (k0, k1) = (lanes32(n), lanes32(n.saturating_sub(32)));
        // SAFETY: the masked loads read the first n values only
        let (a, b) = unsafe { (_mm512_maskz_loadu_epi16(k0, p.cast()), _mm512_maskz_loadu_epi16(k1, p.add(32).cast())) };
        let lo = _mm512_mask_cmpneq_epi16_mask(k0, a, ninf);
        let hi = _mm512_mask_cmpneq_epi16_mask(k1, b, ninf);
        lo as u64 | (hi as u64) << 32
    }

    /// # Safety
    /// as [`super::AccOps::prep_row`], `s` KB floats
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
    pub(crate) unsafe fn prep_row(s: *mut f32, live: u64, mask: *const u16, slope: f32, scale: f32, rounded: bool) -> f32 {
        let (sc, sl, ninf) = (_mm512_set1_ps(scale), _mm512_set1_ps(slope), _mm512_set1_ps(f32::NEG_INFINITY));
        let mut mx = ninf;
        for t in 0..KB / 16 {
            let k = (live >> (16 * t)) as __mmask16;
            // SAFETY: s holds KB floats; the mask is read at live positions only
            unsafe {
                let mut x = _mm512_mul_ps(_mm512_loadu_ps(s.add(16 * t)), sc);
                if !mask.is_null() {
                    let mv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, mask.add(16 * t).cast()));
                    x = if rounded { _mm512_add_ps(x, _mm512_mul_ps(mv, sl)) } else { _mm512_fmadd_ps(mv, sl, x) };
                }
                let x = _mm512_mask_blend_ps(k, ninf, x);
                _mm512_storeu_ps(s.add(16 * t), x);
                mx = _mm512_max_ps(mx, x);
            }
        }
        _mm512_reduce_max_ps(mx)
    }
}

/// The prompt blocks' mask helpers at AVX2 (+F16C, FMA): [`live_bits_def`] and [`prep_row_def`]
/// bit for bit. AVX2 has no 16-bit masked loads, so a group of 8 positions is read as a vector
/// only when all of it is readable (live_bits) or live (prep_row); other groups take the
/// definition's per-element steps.
#[cfg(target_arch = "x86_64")]
pub(crate) mod blocks256 {
    use std::arch::x86_64::*;

    use super::{KB, NEG_INF_F16};

    /// # Safety
    /// AVX2; `p` readable for `n <= 64` values
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn live_bits(p: *const u16, n: usize) -> u64 {
        let ninf = _mm256_set1_epi16(NEG_INF_F16 as i16);
        let n = n.min(KB);
        let mut bits = 0u64;
        let mut i = 0;
        while i + 32 <= n {
            // SAFETY: values i..i + 32 < n
            let (a, b) = unsafe { (_mm256_loadu_si256(p.add(i).cast()), _mm256_loadu_si256(p.add(i + 16).cast())) };
            // -inf lanes as 0xffff, packed to bytes (packs works per 128-bit half: a0 b0 a1 b1,
            // put back in order by the 64-bit permute), one bit per value
            let eq = _mm256_packs_epi16(_mm256_cmpeq_epi16(a, ninf), _mm256_cmpeq_epi16(b, ninf));
            let eq = _mm256_permute4x64_epi64::<0b11_01_10_00>(eq);
            bits |= u64::from(!(_mm256_movemask_epi8(eq) as u32)) << i;
            i += 32;
        }
        if i < n {
            // SAFETY: the values from i on, fewer than 32, below n
            bits |= unsafe { super::live_bits_def(p.add(i), n - i) } << i;
        }
        bits
    }

    /// # Safety
    /// as [`super::AccOps::prep_row`], `s` KB floats
    #[target_feature(enable = "avx2,f16c,fma")]
    pub(crate) unsafe fn prep_row(s: *mut f32, live: u64, mask: *const u16, slope: f32, scale: f32, rounded: bool) -> f32 {
        let (sc, sl, ninf) = (_mm256_set1_ps(scale), _mm256_set1_ps(slope), _mm256_set1_ps(f32::NEG_INFINITY));
        let mut mx = ninf;
        for t in 0..KB / 8 {
            let byte = (live >> (8 * t)) as u8;
            // SAFETY: s holds KB floats; the mask is read at live positions only (a whole group
            // of 8 when all of it is live)
            unsafe {
                let p = s.add(8 * t);
                let x = match byte {
                    0 => ninf,
                    0xff => {
                        let x = _mm256_mul_ps(_mm256_loadu_ps(p), sc);
                        if mask.is_null() {
                            x
                        } else {
                            let mv = _mm256_cvtph_ps(_mm_loadu_si128(mask.add(8 * t).cast()));
                            if rounded { _mm256_add_ps(x, _mm256_mul_ps(mv, sl)) } else { _mm256_fmadd_ps(mv, sl, x) }
                        }
                    }
                    _ => {
                        let mut v = [f32::NEG_INFINITY; 8];
                        for (l, o) in v.iter_mut().enumerate() {
                            if byte >> l & 1 == 1 {
                                *o = super::prep_live(p.add(l).read(), mask, 8 * t + l, slope, scale, rounded);
                            }
                        }
                        _mm256_loadu_ps(v.as_ptr())
                    }
                };
                _mm256_storeu_ps(p, x);
                mx = _mm256_max_ps(mx, x);
            }
        }
        let m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps::<1>(mx));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::XorShift;
    use crate::simd::Level;

    fn bits(y: &[f16]) -> Vec<u16> {
        y.iter().map(|h| h.to_bits()).collect()
    }

    /// rounding once to f16 from f64: ties to even, the sticky bit kept across the f32 step
    /// (a value just above an f16 midpoint that f32 alone would round onto the midpoint)
    #[test]
    fn rne16_f64_rounds_once() {
        // 1 + 2^-11 is the midpoint between 1 and 1 + 2^-10: ties to even gives 1
        assert_eq!(rne16_f64(1.0 + 2f64.powi(-11)).to_bits(), f16::ONE.to_bits());
        // just above the midpoint, by less than f32 keeps: must round up
        let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(above as f32, 1.0 + 2f32.powi(-11), "f32 alone lands on the midpoint");
        assert_eq!(rne16_f64(above).to_bits(), f16::from_f32(1.0 + 2f32.powi(-10)).to_bits());
        assert_ne!(f16::from_f32(above as f32).to_bits(), rne16_f64(above).to_bits(), "double rounding differs here");
        assert_eq!(rne16_f64(-above).to_bits(), (-f16::from_f32(1.0 + 2f32.powi(-10))).to_bits());
        assert_eq!(rne16_f64(1e6).to_bits(), f16::INFINITY.to_bits());
        assert_eq!(rne16_f64(0.0).to_bits(), 0);
    }

    /// the f16-arithmetic rule and the scalar-tail rule give different bits on the same inputs
    /// (so a test at np = 0 and one at np = dv check different things), and every kernel level
    /// equals the definition bit for bit, for lengths around the 8-, 16- and 128-element steps
    #[test]
    fn f16_accumulator_kernels_equal_their_definition() {
        let mut rng = XorShift::new(71);
        let mut differ = 0;
        for dv in [1usize, 8, 15, 16, 40, 64, 80, 128, 136, 192, 256, 260] {
            for np in [0, dv & !127] {
                let x: Vec<f16> = (0..dv).map(|_| f16::from_f32(rng.f32_in(-2.0, 2.0))).collect();
                let y0: Vec<f16> = (0..dv).map(|_| f16::from_f32(rng.f32_in(-30.0, 30.0))).collect();
                let (vs, ms) = (rng.f32_in(0.0, 1.0), rng.f32_in(0.0, 1.0));
                let mut want = y0.clone();
                mad16_def(&mut want, &x, vs, np);
                scale16_def(&mut want, ms, np);
                mad16_def(&mut want, &x, 1.0, np);
                if np > 0 {
                    let mut other = y0.clone();
                    mad16_def(&mut other, &x, vs, 0);
                    scale16_def(&mut other, ms, 0);
                    mad16_def(&mut other, &x, 1.0, 0);
                    differ += bits(&other).iter().zip(bits(&want)).filter(|(a, b)| *a != b).count();
                }
                // the AVX-512 level twice: the f16 part emulated, and in AVX512-FP16 instructions
                // where the CPU has them
                for (level, fp16) in [(Level::Scalar, false), (Level::Avx2, false), (Level::Avx512, false), (Level::Avx512, true)] {
                    if level > crate::simd::detected() || (fp16 && !crate::simd::has_avx512fp16()) {
                        continue;
                    }
                    let ops = AccOps { fp16, ..crate::kernels::at(level).acc };
                    let mut got = y0.clone();
                    ops.mad16(&mut got, &x, vs, np);
                    ops.scale16(&mut got, ms, np);
                    ops.mad16(&mut got, &x, 1.0, np);
                    assert_eq!(bits(&got), bits(&want), "dv {dv} np {np} level {level:?} fp16 {fp16}");
                }
            }
        }
        assert!(differ > 0, "the two f16 rules never differed");
    }

    #[test]
    fn mad32_is_fused() {
        let mut rng = XorShift::new(72);
        for n in [1usize, 7, 8, 33] {
            let x: Vec<f32> = (0..n).map(|_| rng.f32_in(-1.0, 1.0)).collect();
            let y0: Vec<f32> = (0..n).map(|_| rng.f32_in(-1.0, 1.0)).collect();
            let mut want = y0.clone();
            mad32_def(&mut want, &x, 0.3);
            for level in [Level::Scalar, Level::Avx2] {
                if level > crate::simd::detected() {
                    continue;
                }
                let mut got = y0.clone();
                crate::kernels::at(level).acc.mad32(&mut got, &x, 0.3);
                assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "n {n}");
            }
        }
    }

    /// the prompt blocks' helpers of every set equal their definitions bit for bit: live
    /// positions of mask rows with `-inf`s, direct dots of F32 / F16 / BF16 rows (lengths 1 to
    /// 130), score rows scaled and masked in both orders, with and without a mask
    #[test]
    fn the_block_helpers_equal_their_definitions() {
        let mut r = XorShift::new(74);
        let ninf = half::f16::NEG_INFINITY.to_bits();
        for k in crate::kernels::available() {
            let a = &k.acc;
            for n in [1usize, 7, 16, 31, 32, 33, 63, 64] {
                let m: Vec<u16> = (0..n).map(|i| if (i * 7 + n) % 5 == 0 { ninf } else { half::f16::from_f32(r.f32_in(-2.0, 0.0)).to_bits() }).collect();
                // SAFETY: n values
                let (got, want) = unsafe { (a.live_bits(m.as_ptr(), n), live_bits_def(m.as_ptr(), n)) };
                assert_eq!(got, want, "{} live_bits n={n}", k.set.name());
            }
            for d in [1usize, 15, 16, 17, 64, 72, 130] {
                let q: Vec<f32> = (0..d).map(|_| r.f32_in(-1.0, 1.0)).collect();
                let rows = 64;
                let stride = 4 * d + 8;
                // 64 rows of d values, stride bytes apart: F32, and F16 (read as BF16 too)
                let f32_rows: Vec<u8> = (0..rows * stride / 4).flat_map(|_| r.f32_in(-1.0, 1.0).to_le_bytes()).collect();
                let f16_rows: Vec<u8> = (0..rows * stride / 2).flat_map(|_| half::f16::from_f32(r.f32_in(-1.0, 1.0)).to_le_bytes()).collect();
                let live = r.next_u64() | 1;
                for (kt, buf) in [(crate::GgmlType::F32, &f32_rows), (crate::GgmlType::F16, &f16_rows), (crate::GgmlType::BF16, &f16_rows)] {
                    let (mut got, mut want) = (vec![0f32; 64], vec![0f32; 64]);
                    // SAFETY: 64 rows of d elements stride apart in buf; q holds d floats
                    unsafe {
                        a.dot_rows(kt, &q, buf.as_ptr(), stride, live, &mut got);
                        match kt {
                            crate::GgmlType::F32 => dot_rows_def::<0>(q.as_ptr(), d, buf.as_ptr(), stride, live, want.as_mut_ptr()),
                            crate::GgmlType::F16 => dot_rows_def::<1>(q.as_ptr(), d, buf.as_ptr(), stride, live, want.as_mut_ptr()),
                            _ => dot_rows_def::<2>(q.as_ptr(), d, buf.as_ptr(), stride, live, want.as_mut_ptr()),
                        }
                    }
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{} dot_rows {} d={d}", k.set.name(), kt.name());
                }
            }
            for rounded in [false, true] {
                let s0: Vec<f32> = (0..KB).map(|_| r.f32_in(-8.0, 8.0)).collect();
                let mask: Vec<u16> = (0..KB).map(|i| if i % 9 == 4 { ninf } else { half::f16::from_f32(r.f32_in(-3.0, 0.0)).to_bits() }).collect();
                let byte_runs = (0..8).filter(|_| !r.next_u64().is_multiple_of(3)).fold(0u64, |b, t| b | 0xff << (8 * t));
                for (live, mp) in [r.next_u64(), u64::MAX, byte_runs].into_iter().flat_map(|l| [(l, std::ptr::null()), (l, mask.as_ptr())]) {
                    let (mut got, mut want) = (s0.clone(), s0.clone());
                    // SAFETY: KB floats; the mask KB values or null
                    let (mg, mw) =
                        unsafe { (a.prep_row(&mut got, live, mp, 0.75, 0.125, rounded), prep_row_def(want.as_mut_ptr(), live, mp, 0.75, 0.125, rounded)) };
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!((bits(&got), mg.to_bits()), (bits(&want), mw.to_bits()), "{} prep_row rounded={rounded} mask={}", k.set.name(), !mp.is_null());
                }
            }
        }
    }
}
