//! The ggml types this crate implements, with ggml's numbering (`enum ggml_type` in ggml.h), block
//! sizes and the activation type each weight type's dot product pairs with (upstream's
//! `vec_dot_type` in ggml-cpu.c).

use crate::block::*;

/// A ggml tensor type; the discriminant is upstream's `enum ggml_type` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GgmlType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2K = 10,
    Q3K = 11,
    Q4K = 12,
    Q5K = 13,
    Q6K = 14,
    Q8K = 15,
    Iq2Xxs = 16,
    Iq2Xs = 17,
    Iq3Xxs = 18,
    Iq1S = 19,
    Iq4Nl = 20,
    Iq3S = 21,
    Iq2S = 22,
    Iq4Xs = 23,
    Iq1M = 29,
    BF16 = 30,
    Tq1_0 = 34,
    Tq2_0 = 35,
    Mxfp4 = 39,
    Nvfp4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
}

impl GgmlType {
    pub const ALL: [GgmlType; 30] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4K,
        GgmlType::Q6K,
        GgmlType::Q8K,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_1,
        GgmlType::Q4_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q5K,
        GgmlType::Iq4Nl,
        GgmlType::Iq4Xs,
        GgmlType::Tq1_0,
        GgmlType::Tq2_0,
        GgmlType::Mxfp4,
        GgmlType::Iq2Xxs,
        GgmlType::Iq2Xs,
        GgmlType::Iq2S,
        GgmlType::Iq3Xxs,
        GgmlType::Iq3S,
        GgmlType::Iq1S,
        GgmlType::Iq1M,
        GgmlType::Q1_0,
        GgmlType::Q2_0,
        GgmlType::Nvfp4,
    ];

    /// the grid types (IQ1 / IQ2 / IQ3), which upstream's CPU reads but cannot write: no
    /// `from_float` (SET_ROWS, CPY into them), quantizing them needs an importance matrix
    pub const GRID: [GgmlType; 7] = [GgmlType::Iq2Xxs, GgmlType::Iq2Xs, GgmlType::Iq2S, GgmlType::Iq3Xxs, GgmlType::Iq3S, GgmlType::Iq1S, GgmlType::Iq1M];

    /// whether upstream's CPU can quantize rows into this type (its `from_float`): all but
    /// [`GgmlType::GRID`]
    pub const fn has_from_float(self) -> bool {
        !matches!(self, GgmlType::Iq2Xxs | GgmlType::Iq2Xs | GgmlType::Iq2S | GgmlType::Iq3Xxs | GgmlType::Iq3S | GgmlType::Iq1S | GgmlType::Iq1M)
    }

    /// the type upstream numbers `v`, if this crate has its block format
    pub fn from_raw(v: i32) -> Option<GgmlType> {
        GgmlType::ALL.into_iter().find(|t| *t as i32 == v)
    }

    /// upstream's `type_name`
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::BF16 => "bf16",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_1 => "q8_1",
            GgmlType::Q4K => "q4_K",
            GgmlType::Q6K => "q6_K",
            GgmlType::Q8K => "q8_K",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q2K => "q2_K",
            GgmlType::Q3K => "q3_K",
            GgmlType::Q5K => "q5_K",
            GgmlType::Iq4Nl => "iq4_nl",
            GgmlType::Iq4Xs => "iq4_xs",
            GgmlType::Tq1_0 => "tq1_0",
            GgmlType::Tq2_0 => "tq2_0",
            GgmlType::Mxfp4 => "mxfp4",
            GgmlType::Iq2Xxs => "iq2_xxs",
            GgmlType::Iq2Xs => "iq2_xs",
            GgmlType::Iq2S => "iq2_s",
            GgmlType::Iq3Xxs => "iq3_xxs",
            GgmlType::Iq3S => "iq3_s",
            GgmlType::Iq1S => "iq1_s",
            GgmlType::Iq1M => "iq1_m",
            GgmlType::Q1_0 => "q1_0",
            GgmlType::Q2_0 => "q2_0",
            GgmlType::Nvfp4 => "nvfp4",
        }
    }

    /// elements per block
    pub fn block_size(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q8_0 => QK8_0,
            GgmlType::Q4_0 => QK4_0,
            GgmlType::Q5_0 => QK5_0,
            GgmlType::Q5_1 => QK5_1,
            GgmlType::Q8_1 => QK8_1,
            GgmlType::Q4_1 => QK4_1,
            GgmlType::Iq4Nl => QK4_NL,
            GgmlType::Mxfp4 => QK_MXFP4,
            GgmlType::Q1_0 => QK1_0,
            GgmlType::Q2_0 => QK2_0,
            GgmlType::Nvfp4 => QK_NVFP4,
            GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K | GgmlType::Q8K => QK_K,
            GgmlType::Iq4Xs | GgmlType::Tq1_0 | GgmlType::Tq2_0 => QK_K,
            GgmlType::Iq2Xxs | GgmlType::Iq2Xs | GgmlType::Iq2S | GgmlType::Iq3Xxs | GgmlType::Iq3S | GgmlType::Iq1S | GgmlType::Iq1M => QK_K,
        }
    }

    /// bytes per block
    pub fn type_size(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q8_0 => size_of::<BlockQ8_0>(),
            GgmlType::Q4_0 => size_of::<BlockQ4_0>(),
            GgmlType::Q5_0 => size_of::<BlockQ5_0>(),
            GgmlType::Q5_1 => size_of::<BlockQ5_1>(),
            GgmlType::Q8_1 => size_of::<BlockQ8_1>(),
            GgmlType::Q4K => size_of::<BlockQ4K>(),
            GgmlType::Q6K => size_of::<BlockQ6K>(),
            GgmlType::Q8K => size_of::<BlockQ8K>(),
            GgmlType::Q4_1 => size_of::<BlockQ4_1>(),
            GgmlType::Q2K => size_of::<BlockQ2K>(),
            GgmlType::Q3K => size_of::<BlockQ3K>(),
            GgmlType::Q5K => size_of::<BlockQ5K>(),
            GgmlType::Iq4Nl => size_of::<BlockIq4Nl>(),
            GgmlType::Iq4Xs => size_of::<BlockIq4Xs>(),
            GgmlType::Tq1_0 => size_of::<BlockTq1_0>(),
            GgmlType::Tq2_0 => size_of::<BlockTq2_0>(),
            GgmlType::Mxfp4 => size_of::<BlockMxfp4>(),
            GgmlType::Iq2Xxs => size_of::<BlockIq2Xxs>(),
            GgmlType::Iq2Xs => size_of::<BlockIq2Xs>(),
            GgmlType::Iq2S => size_of::<BlockIq2S>(),
            GgmlType::Iq3Xxs => size_of::<BlockIq3Xxs>(),
            GgmlType::Iq3S => size_of::<BlockIq3S>(),
            GgmlType::Iq1S => size_of::<BlockIq1S>(),
            GgmlType::Iq1M => size_of::<BlockIq1M>(),
            GgmlType::Q1_0 => size_of::<BlockQ1_0>(),
            GgmlType::Q2_0 => size_of::<BlockQ2_0>(),
            GgmlType::Nvfp4 => size_of::<BlockNvfp4>(),
        }
    }

    /// bytes of a row of `n` elements (`n` a multiple of the block size)
    pub fn row_size(self, n: usize) -> usize {
        assert!(n.is_multiple_of(self.block_size()), "row of {n} {} elements is not whole blocks", self.name());
        n / self.block_size() * self.type_size()
    }

    /// whether rows quantized into this type (SET_ROWS, CPY) get upstream's bytes on this
    /// architecture: not on aarch64 for the types whose scale search upstream's aarch64 build
    /// compiles with fused multiply-adds (ours is its x86 build's, unfused: other levels and
    /// scales now and then, which a low-bit type turns into differences `test-backend-ops`
    /// fails); Q4_K / Q6_K differ there too, but within its tolerance; never for the types
    /// without a `from_float` ([`GgmlType::has_from_float`])
    pub const fn quantizes_as_upstream(self) -> bool {
        self.has_from_float() && !(cfg!(target_arch = "aarch64") && matches!(self, GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q5K | GgmlType::Iq4Xs))
    }

    /// the type the activations are converted to for this weight type's dot product, `None` for
    /// a type that is only ever an activation (Q8_K, Q8_1)
    pub const fn vec_dot_type(self) -> Option<GgmlType> {
        match self {
            GgmlType::F32 => Some(GgmlType::F32),
            GgmlType::F16 => Some(GgmlType::F16),
            GgmlType::BF16 => Some(GgmlType::BF16),
            GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Iq4Nl | GgmlType::Mxfp4 => Some(GgmlType::Q8_0),
            GgmlType::Q1_0 | GgmlType::Q2_0 | GgmlType::Nvfp4 => Some(GgmlType::Q8_0),
            GgmlType::Q4_1 | GgmlType::Q5_1 => Some(GgmlType::Q8_1),
            GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => Some(GgmlType::Q8K),
            GgmlType::Iq4Xs | GgmlType::Tq1_0 | GgmlType::Tq2_0 => Some(GgmlType::Q8K),
            GgmlType::Iq2Xxs | GgmlType::Iq2Xs | GgmlType::Iq2S | GgmlType::Iq3Xxs | GgmlType::Iq3S | GgmlType::Iq1S | GgmlType::Iq1M => Some(GgmlType::Q8K),
            GgmlType::Q8K | GgmlType::Q8_1 => None,
        }
    }
}
