//! ggml's block layouts (`ggml-common.h` at the pin), `#[repr(C)]` so a row of blocks has the
//! same bytes as upstream's, and the checked byte views the rest of the crate reads rows through.

use half::f16;

pub const QK8_0: usize = 32;
pub const QK4_0: usize = 32;
pub const QK5_0: usize = 32;
pub const QK5_1: usize = 32;
pub const QK8_1: usize = 32;
pub const QK4_1: usize = 32;
/// block size of IQ4_NL (and of IQ4_XS's sub-blocks)
pub const QK4_NL: usize = 32;
pub const QK_MXFP4: usize = 32;
/// block size of Q1_0
pub const QK1_0: usize = 128;
/// block size of Q2_0
pub const QK2_0: usize = 64;
/// block size of NVFP4, and of its sub-blocks (one scale each)
pub const QK_NVFP4: usize = 64;
pub const QK_NVFP4_SUB: usize = 16;
/// super-block size of the K-quants
pub const QK_K: usize = 256;
pub const K_SCALE_SIZE: usize = 12;

/// 32 weights: `x[i] = d * qs[i]`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; QK8_0],
}

/// 32 weights: `x[j] = d * ((qs[j] & 15) - 8)`, `x[j + 16] = d * ((qs[j] >> 4) - 8)`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ4_0 {
    pub d: f16,
    pub qs: [u8; QK4_0 / 2],
}

/// 32 weights: 4-bit quants q (packed as in Q4_0), `x = d * q + m`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ4_1 {
    pub d: f16,
    pub m: f16,
    pub qs: [u8; QK4_1 / 2],
}

/// 32 weights: 4-bit indices into a fixed table of 16 non-uniform levels (`IQ4_NL_LEVELS`),
/// `x = d * level[q]`, packed as in Q4_0
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq4Nl {
    pub d: f16,
    pub qs: [u8; QK4_NL / 2],
}

/// 256 weights in 8 sub-blocks of 32: IQ4_NL's levels with a 6-bit scale per sub-block
/// (`x = d * (ls - 32) * level[q]`; the low 4 bits of `ls` in `scales_l`, two per byte, the high 2
/// in `scales_h`, two bits per sub-block)
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq4Xs {
    pub d: f16,
    pub scales_h: u16,
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

/// 32 weights: 4-bit E2M1 codes (packed as in Q4_0) with a shared power-of-two scale `e` (E8M0),
/// `x = 2^(e - 127) * e2m1[q]`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockMxfp4 {
    pub e: u8,
    pub qs: [u8; QK_MXFP4 / 2],
}

/// 128 weights of one bit each: `x[j] = d` where bit j of `qs` (bit j % 8 of byte j / 8) is set,
/// `-d` where it is clear
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ1_0 {
    pub d: f16,
    pub qs: [u8; QK1_0 / 8],
}

/// 64 weights of two bits each: `x[j] = d * (q - 1)`, q in bits `2 (j % 4)` of byte `j / 4`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ2_0 {
    pub d: f16,
    pub qs: [u8; QK2_0 / 4],
}

/// 64 weights in 4 sub-blocks of 16, each with a UE4M3 scale byte `d[s]`; 4-bit E2M1 codes,
/// element j of sub-block s in the low nibble of byte `8 s + j`, element j + 8 in its high nibble
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockNvfp4 {
    pub d: [u8; QK_NVFP4 / QK_NVFP4_SUB],
    pub qs: [u8; QK_NVFP4 / 2],
}

/// 256 ternary weights, `x = d * (t - 1)` with t in {0, 1, 2}: 240 packed five to a byte in `qs`
/// (base 3, scaled to a byte), the last 16 four to a byte in `qh`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockTq1_0 {
    pub qs: [u8; (QK_K - 4 * QK_K / 64) / 5],
    pub qh: [u8; QK_K / 64],
    pub d: f16,
}

/// 256 ternary weights, `x = d * (t - 1)`, t in 2 bits
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockTq2_0 {
    pub qs: [u8; QK_K / 4],
    pub d: f16,
}

/// 256 weights in 16 sub-blocks of 16: `x = d * (sc & 15) * q - dmin * (sc >> 4)`, q 2 bits
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: f16,
    pub dmin: f16,
}

/// 256 weights in 16 sub-blocks of 16: `x = d * (sc - 32) * (q - 4·!hbit)`, q's low 2 bits in
/// `qs`, its high bit in `hmask`, the 6-bit scales packed into 12 bytes
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: f16,
}

/// 256 weights in 8 sub-blocks of 32: as Q4_K with a fifth bit per quant in `qh`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

/// 32 weights: 5-bit quants q, `x = d * (q - 16)`; the low 4 bits as in Q4_0 (element j in the
/// low nibble of `qs[j]`, element j + 16 in its high nibble), bit 4 of element j in bit j of the
/// little-endian u32 `qh`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ5_0 {
    pub d: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK5_0 / 2],
}

/// 32 weights: 5-bit quants q (packed as in Q5_0), `x = d * q + m`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK5_1 / 2],
}

/// 32 activations: `x = d * qs`, and `s = d * Σ qs` (for the min term of Q5_1 · Q8_1)
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8_1 {
    pub d: f16,
    pub s: f16,
    pub qs: [i8; QK8_1],
}

/// 256 weights in 8 sub-blocks of 32: `x = d * sc[j] * q - dmin * m[j]`, the 6-bit scales and
/// mins packed into 12 bytes, 4-bit quants (each 32 bytes hold two sub-blocks: low nibbles, then
/// high nibbles)
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qs: [u8; QK_K / 2],
}

/// 256 weights in 16 sub-blocks of 16: `x = d * scales[j] * (q - 32)`, q 6 bits (low 4 in `ql`,
/// high 2 in `qh`)
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: f16,
}

/// 256 activations: `x = d * qs`, with the sums of each 16 quants (for the K-quants' mins)
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

/// 256 weights in 8 groups of 32, each of four 8-element vectors from `IQ2XXS_GRID` (256
/// entries): per group two little-endian u32s (`qs[4g..4g + 4]`), the first holding the four
/// grid indices (a byte each), the second four 7-bit sign codes (bits 7l..7l + 7; the eighth
/// sign makes the count of minus signs even) and a 4-bit scale `s` (top 4 bits);
/// `x = d · (0.5 + s) · 0.25 · grid[j] · sign[j]`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq2Xxs {
    pub d: f16,
    pub qs: [u16; QK_K / 8],
}

/// 256 weights, 32 vectors of 8: `qs[k]` a 9-bit index into `IQ2XS_GRID` (512 entries) and a
/// 7-bit sign code above it; a 4-bit scale per 16 weights (nibbles of `scales`, low first),
/// `x = d · (0.5 + s) · 0.25 · grid[j] · sign[j]`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq2Xs {
    pub d: f16,
    pub qs: [u16; QK_K / 8],
    pub scales: [u8; QK_K / 32],
}

/// 256 weights, 32 vectors of 8: a 10-bit index into `IQ2S_GRID` (1024 entries; the low 8 bits
/// in `qs[k]`, the top 2 the bit pair 2(k % 4) of `qh[k / 4]`), 8 explicit signs per vector
/// (`signs[k]`, bit j for element j), scales as IQ2_XS's
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq2S {
    pub d: f16,
    pub qs: [u8; QK_K / 8],
    pub signs: [u8; QK_K / 8],
    pub qh: [u8; QK_K / 32],
    pub scales: [u8; QK_K / 32],
}

/// 256 weights in 8 groups of 32: 64 byte indices into `IQ3XXS_GRID` (256 entries of 4), 8 per
/// group, then per group a little-endian u32 of four 7-bit sign codes (as IQ2_XXS's, one per 8
/// weights) and a 4-bit scale `s` on top; `x = d · (0.5 + s) · 0.5 · grid[j] · sign[j]`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq3Xxs {
    pub d: f16,
    pub qs: [u8; QK_K / 4],
    pub scales_signs: [u8; QK_K / 8],
}

/// 256 weights, 64 vectors of 4: a 9-bit index into `IQ3S_GRID` (512 entries; low 8 bits in
/// `qs[k]`, the ninth bit k % 8 of `qh[k / 8]`), explicit signs (`signs[m]`, bit j for element j of
/// the 8 weights m), a 4-bit scale `s` per 32 weights (nibbles of `scales`, low first),
/// `x = d · (1 + 2s) · grid[j] · sign[j]`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq3S {
    pub d: f16,
    pub qs: [u8; QK_K / 4],
    pub qh: [u8; QK_K / 32],
    pub signs: [u8; QK_K / 8],
    pub scales: [u8; QK_K / 64],
}

/// 256 weights in 8 groups of 32, 4 vectors of 8 from `IQ1S_GRID` (2048 entries of −1, 0, 1)
/// each: low 8 index bits in `qs`, per group `qh[g]` holds the top 3 bits of each of its four
/// indices (bits 3l..3l + 3), a 3-bit scale `s` (bits 12..15) and the delta's sign (bit 15);
/// `x = d · (2s + 1) · (grid[j] ± 1/8)`
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq1S {
    pub d: f16,
    pub qs: [u8; QK_K / 8],
    pub qh: [u16; QK_K / 32],
}

/// 256 weights, IQ1_S's grid without a stored f16: per 8 weights an 11-bit index (low 8 bits in
/// `qs`, the top 3 a nibble of `qh`, low nibble first) whose fourth nibble bit gives the delta's
/// sign; a 3-bit scale per 16 weights in the four little-endian u16s of `scales` (bits 0..12 of
/// each), whose top nibbles together are the f16 super-scale
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockIq1M {
    pub qs: [u8; QK_K / 8],
    pub qh: [u8; QK_K / 16],
    pub scales: [u8; QK_K / 32],
}

// upstream's static_asserts (ggml-common.h)
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ4K>() == 144);
const _: () = assert!(size_of::<BlockQ6K>() == 210);
const _: () = assert!(size_of::<BlockQ8K>() == 292);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockIq4Nl>() == 18);
const _: () = assert!(size_of::<BlockIq4Xs>() == 136);
const _: () = assert!(size_of::<BlockMxfp4>() == 17);
const _: () = assert!(size_of::<BlockQ1_0>() == 18);
const _: () = assert!(size_of::<BlockQ2_0>() == 18);
const _: () = assert!(size_of::<BlockNvfp4>() == 36);
const _: () = assert!(size_of::<BlockTq1_0>() == 54);
const _: () = assert!(size_of::<BlockTq2_0>() == 66);
const _: () = assert!(size_of::<BlockQ2K>() == 84);
const _: () = assert!(size_of::<BlockQ3K>() == 110);
const _: () = assert!(size_of::<BlockQ5K>() == 176);
const _: () = assert!(size_of::<BlockIq2Xxs>() == 66);
const _: () = assert!(size_of::<BlockIq2Xs>() == 74);
const _: () = assert!(size_of::<BlockIq2S>() == 82);
const _: () = assert!(size_of::<BlockIq3Xxs>() == 98);
const _: () = assert!(size_of::<BlockIq3S>() == 110);
const _: () = assert!(size_of::<BlockIq1S>() == 50);
const _: () = assert!(size_of::<BlockIq1M>() == 56);

/// A block type whose every bit pattern is a valid value and that has no padding, so a byte
/// slice of the right length and alignment can be viewed as blocks and back.
///
/// # Safety
/// Implement only for `#[repr(C)]` structs of integer / f16 / f32 fields without padding.
pub unsafe trait Block: Copy + 'static {}

// SAFETY: repr(C), fields f16/i8/u8/i16/f32 only, sizes asserted above equal the field sums.
unsafe impl Block for BlockQ8_0 {}
// SAFETY: as above
unsafe impl Block for BlockQ4_0 {}
// SAFETY: as above
unsafe impl Block for BlockQ5_0 {}
// SAFETY: as above
unsafe impl Block for BlockQ5_1 {}
// SAFETY: as above
unsafe impl Block for BlockQ8_1 {}
// SAFETY: as above
unsafe impl Block for BlockQ4K {}
// SAFETY: as above
unsafe impl Block for BlockQ6K {}
// SAFETY: as above
unsafe impl Block for BlockQ8K {}
// SAFETY: as above
unsafe impl Block for BlockQ4_1 {}
// SAFETY: as above
unsafe impl Block for BlockIq4Nl {}
// SAFETY: as above (u16 is an integer)
unsafe impl Block for BlockIq4Xs {}
// SAFETY: as above
unsafe impl Block for BlockMxfp4 {}
// SAFETY: as above
unsafe impl Block for BlockQ1_0 {}
// SAFETY: as above
unsafe impl Block for BlockQ2_0 {}
// SAFETY: as above
unsafe impl Block for BlockNvfp4 {}
// SAFETY: as above
unsafe impl Block for BlockTq1_0 {}
// SAFETY: as above
unsafe impl Block for BlockTq2_0 {}
// SAFETY: as above
unsafe impl Block for BlockQ2K {}
// SAFETY: as above
unsafe impl Block for BlockQ3K {}
// SAFETY: as above
unsafe impl Block for BlockQ5K {}
// SAFETY: as above (u16 is an integer)
unsafe impl Block for BlockIq2Xxs {}
// SAFETY: as above
unsafe impl Block for BlockIq2Xs {}
// SAFETY: as above
unsafe impl Block for BlockIq2S {}
// SAFETY: as above
unsafe impl Block for BlockIq3Xxs {}
// SAFETY: as above
unsafe impl Block for BlockIq3S {}
// SAFETY: as above
unsafe impl Block for BlockIq1S {}
// SAFETY: as above
unsafe impl Block for BlockIq1M {}
// SAFETY: plain numbers
unsafe impl Block for f32 {}
// SAFETY: repr(transparent) over u16
unsafe impl Block for f16 {}
// SAFETY: repr(transparent) over u16
unsafe impl Block for half::bf16 {}

/// `bytes` as blocks; panics (naming `what`) if the length is not whole blocks or the address is
/// not aligned for `T`
pub fn as_blocks<'a, T: Block>(bytes: &'a [u8], what: &str) -> &'a [T] {
    check_view::<T>(bytes.as_ptr() as usize, bytes.len(), what);
    // SAFETY: length and alignment checked; T: Block accepts any bit pattern; the lifetime and
    // immutability are those of `bytes`.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size_of::<T>()) }
}

/// `bytes` as mutable blocks (see [`as_blocks`])
pub fn as_blocks_mut<'a, T: Block>(bytes: &'a mut [u8], what: &str) -> &'a mut [T] {
    check_view::<T>(bytes.as_ptr() as usize, bytes.len(), what);
    // SAFETY: as in as_blocks; the exclusive borrow of `bytes` moves to the result.
    unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / size_of::<T>()) }
}

/// blocks as their bytes
pub fn as_bytes<T: Block>(blocks: &[T]) -> &[u8] {
    // SAFETY: T: Block has no padding, so every byte is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), size_of_val(blocks)) }
}

/// blocks as their mutable bytes (any bytes written make valid blocks: T: Block)
pub fn as_bytes_mut<T: Block>(blocks: &mut [T]) -> &mut [u8] {
    // SAFETY: as in as_bytes; every bit pattern is a valid T, so writes through the bytes keep
    // the blocks valid.
    unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast::<u8>(), size_of_val(blocks)) }
}

fn check_view<T>(addr: usize, len: usize, what: &str) {
    assert!(len.is_multiple_of(size_of::<T>()), "{what}: {len} bytes are not whole blocks of {} bytes", size_of::<T>());
    assert!(addr.is_multiple_of(align_of::<T>()), "{what}: address {addr:#x} is not aligned to {} bytes", align_of::<T>());
}

// SAFETY: plain number
unsafe impl Block for u64 {}

/// A byte buffer aligned to 8 bytes, so rows of any block type can be viewed in it (a `Vec<u8>`
/// promises only 1).
#[derive(Clone, Default)]
pub struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    pub fn zeroed(len: usize) -> AlignedBytes {
        AlignedBytes { words: vec![0; len.div_ceil(8)], len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// grows or shrinks to `len` bytes (new bytes are zero), keeping the allocation when it fits
    pub fn resize(&mut self, len: usize) {
        self.words.resize(len.div_ceil(8), 0);
        self.len = len;
    }
}

impl std::ops::Deref for AlignedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &as_bytes(&self.words)[..self.len]
    }
}

impl std::ops::DerefMut for AlignedBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut as_bytes_mut(&mut self.words)[..self.len]
    }
}
