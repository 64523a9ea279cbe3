//! The ops of ggml.h beyond arithmetic, as methods of [`Context`]: element-wise activations,
//! gated linear units, soft_max with mask/scale/ALiBi, norms, get/set rows, rope, concat,
//! permute, reshape and copy. Each checks what upstream's constructor asserts on and returns
//! [`Error::Invalid`] instead of letting ggml abort the process.
//!
//! Shapes are ggml's (`ne`, `ne[0]` the row). There is no constructor by name here (the Python
//! package has one, `Context.op`): calling a C function from its name with unchecked arguments
//! cannot be a safe function, and this crate's public API has none that is not.

use std::ffi::c_int;

use crate::context::{Context, Tensor, Type};
use crate::sys::{RawTensor, RopeArgs, UnaryFn, ggml_glu_op, ggml_unary_op};
use crate::{Error, Result};

/// An element-wise op of one tensor (`ggml_unary`'s ops and `sqrt`, `log`, `sin`, `cos`).
///
/// ```
/// # if ggml_rs_api::doctest_skip() { return Ok(()); }
/// use ggml_rs_api::{Backend, Context, GraphAllocator, Unary};
/// let cpu = Backend::cpu()?;
/// let ctx = Context::new()?;
/// let x = ctx.new_f32(&[3])?.input();
/// let y = ctx.unary(Unary::Relu, x)?.output();
/// let graph = ctx.graph(&[y])?;
/// let mut galloc = GraphAllocator::new(&cpu.default_buffer_type())?;
/// let allocated = galloc.alloc(&graph)?;
/// allocated.set(x, &[-1.0f32, 0.5, 2.0])?;
/// allocated.compute(&cpu)?;
/// assert_eq!(allocated.to_vec::<f32>(y)?, [0.0, 0.5, 2.0]);
/// # Ok::<(), ggml_rs_api::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unary {
    Abs,
    Sgn,
    Neg,
    Step,
    Tanh,
    Elu,
    Relu,
    Sigmoid,
    /// gelu, tanh approximation
    Gelu,
    /// x · sigmoid(1.702 x)
    GeluQuick,
    /// gelu with erf
    GeluErf,
    Silu,
    Hardswish,
    Hardsigmoid,
    Exp,
    Expm1,
    Softplus,
    Floor,
    Ceil,
    /// half away from zero
    Round,
    Trunc,
    Sqrt,
    Log,
    Sin,
    Cos,
}

impl Unary {
    /// Every op, in declaration order.
    pub const ALL: [Unary; 25] = [
        Unary::Abs,
        Unary::Sgn,
        Unary::Neg,
        Unary::Step,
        Unary::Tanh,
        Unary::Elu,
        Unary::Relu,
        Unary::Sigmoid,
        Unary::Gelu,
        Unary::GeluQuick,
        Unary::GeluErf,
        Unary::Silu,
        Unary::Hardswish,
        Unary::Hardsigmoid,
        Unary::Exp,
        Unary::Expm1,
        Unary::Softplus,
        Unary::Floor,
        Unary::Ceil,
        Unary::Round,
        Unary::Trunc,
        Unary::Sqrt,
        Unary::Log,
        Unary::Sin,
        Unary::Cos,
    ];

    fn c(self) -> UnaryFn {
        use ggml_unary_op::*;
        UnaryFn::Unary(match self {
            Unary::Abs => GGML_UNARY_OP_ABS,
            Unary::Sgn => GGML_UNARY_OP_SGN,
            Unary::Neg => GGML_UNARY_OP_NEG,
            Unary::Step => GGML_UNARY_OP_STEP,
            Unary::Tanh => GGML_UNARY_OP_TANH,
            Unary::Elu => GGML_UNARY_OP_ELU,
            Unary::Relu => GGML_UNARY_OP_RELU,
            Unary::Sigmoid => GGML_UNARY_OP_SIGMOID,
            Unary::Gelu => GGML_UNARY_OP_GELU,
            Unary::GeluQuick => GGML_UNARY_OP_GELU_QUICK,
            Unary::GeluErf => GGML_UNARY_OP_GELU_ERF,
            Unary::Silu => GGML_UNARY_OP_SILU,
            Unary::Hardswish => GGML_UNARY_OP_HARDSWISH,
            Unary::Hardsigmoid => GGML_UNARY_OP_HARDSIGMOID,
            Unary::Exp => GGML_UNARY_OP_EXP,
            Unary::Expm1 => GGML_UNARY_OP_EXPM1,
            Unary::Softplus => GGML_UNARY_OP_SOFTPLUS,
            Unary::Floor => GGML_UNARY_OP_FLOOR,
            Unary::Ceil => GGML_UNARY_OP_CEIL,
            Unary::Round => GGML_UNARY_OP_ROUND,
            Unary::Trunc => GGML_UNARY_OP_TRUNC,
            Unary::Sqrt => return UnaryFn::Sqrt,
            Unary::Log => return UnaryFn::Log,
            Unary::Sin => return UnaryFn::Sin,
            Unary::Cos => return UnaryFn::Cos,
        })
    }
}

/// A gated linear unit: act(x) · g, act being relu, gelu, silu, gelu with erf, quick gelu.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Glu {
    Reglu,
    Geglu,
    Swiglu,
    GegluErf,
    GegluQuick,
}

impl Glu {
    fn c(self) -> ggml_glu_op::Type {
        use ggml_glu_op::*;
        match self {
            Glu::Reglu => GGML_GLU_OP_REGLU,
            Glu::Geglu => GGML_GLU_OP_GEGLU,
            Glu::Swiglu => GGML_GLU_OP_SWIGLU,
            Glu::GegluErf => GGML_GLU_OP_GEGLU_ERF,
            Glu::GegluQuick => GGML_GLU_OP_GEGLU_QUICK,
        }
    }
}

/// Which pairs of a head [`Context::rope`] rotates: neighbours (`Normal`) or elements
/// `n_dims / 2` apart (`Neox`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RopeMode {
    #[default]
    Normal,
    Neox,
}

/// The numbers of [`Context::rope`] (`ggml_rope_ext`'s): `Rope::new(n_dims)` has llama.cpp's
/// defaults (base 10000, no YaRN); set the fields to change them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    pub n_dims: i32,
    pub mode: RopeMode,
    pub n_ctx_orig: i32,
    pub freq_base: f32,
    pub freq_scale: f32,
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
}

impl Rope {
    pub fn new(n_dims: i32) -> Rope {
        Rope {
            n_dims,
            mode: RopeMode::Normal,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
        }
    }
}

fn invalid<T>(what: &str, message: String) -> Result<T> {
    Err(Error::Invalid(format!("{what}: {message}")))
}

fn need(cond: bool, what: &str, message: impl FnOnce() -> String) -> Result<()> {
    if cond { Ok(()) } else { invalid(what, message()) }
}

fn need_type(t: Tensor<'_>, types: &[Type], what: &str, role: &str) -> Result<()> {
    need(types.contains(&t.ty()), what, || format!("{role} '{}' is {}, it must be one of {types:?}", t.name(), t.ty()))
}

impl Context {
    fn made<'a>(&'a self, what: &'static str, make: impl FnOnce() -> Option<RawTensor>) -> Result<Tensor<'a>> {
        self.room(self.api.tensor_overhead(), what)?;
        self.wrap(crate::logged(make), what)
    }

    fn rows_contiguous(&self, what: &str, a: Tensor<'_>) -> Result<()> {
        need(self.api.is_contiguous_rows(a.raw), what, || format!("'{}' must have contiguous rows (use cont)", a.name()))
    }

    /// `op` of every element of `a` (a's rows contiguous).
    pub fn unary<'a>(&'a self, op: Unary, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.rows_contiguous("ggml_unary", a)?;
        self.made("ggml_unary", || self.api.unary(self.raw, op.c(), a.raw))
    }

    /// `max(a, 0)`.
    pub fn relu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(Unary::Relu, a)
    }

    /// gelu (tanh approximation).
    pub fn gelu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(Unary::Gelu, a)
    }

    /// `a · sigmoid(a)`.
    pub fn silu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.unary(Unary::Silu, a)
    }

    /// `a` where positive, else `negative_slope · a`.
    pub fn leaky_relu<'a>(&'a self, a: Tensor<'a>, negative_slope: f32) -> Result<Tensor<'a>> {
        self.rows_contiguous("ggml_leaky_relu", a)?;
        self.made("ggml_leaky_relu", || self.api.leaky_relu(self.raw, a.raw, negative_slope))
    }

    /// `a` limited to `[min, max]`.
    pub fn clamp<'a>(&'a self, a: Tensor<'a>, min: f32, max: f32) -> Result<Tensor<'a>> {
        need(min <= max, "ggml_clamp", || format!("min {min} is above max {max}"))?;
        self.made("ggml_clamp", || self.api.clamp(self.raw, a.raw, min, max))
    }

    /// A gated unit on rows holding both halves: `act(first half) · second half` (`swapped`:
    /// `act(second) · first`); the result's rows are half as long.
    pub fn glu<'a>(&'a self, op: Glu, a: Tensor<'a>, swapped: bool) -> Result<Tensor<'a>> {
        let what = "ggml_glu";
        self.contiguous_1(what, a)?;
        need(a.shape()[0] % 2 == 0, what, || format!("'{}' has rows of {}, an odd length", a.name(), a.shape()[0]))?;
        self.made(what, || self.api.glu(self.raw, op.c(), a.raw, None, swapped))
    }

    /// A gated unit of two tensors of the same shape and type: `act(a) · b`.
    pub fn glu_split<'a>(&'a self, op: Glu, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        let what = "ggml_glu_split";
        self.contiguous_1(what, a)?;
        self.contiguous_1(what, b)?;
        need(self.api.same_shape(a.raw, b.raw) && a.ty() == b.ty(), what, || {
            format!("'{}' {} {:?} and '{}' {} {:?} differ", a.name(), a.ty(), a.shape(), b.name(), b.ty(), b.shape())
        })?;
        self.made(what, || self.api.glu(self.raw, op.c(), a.raw, Some(b.raw), false))
    }

    /// LLaMA's feed-forward gate: `silu(first half) · second half` of each row.
    pub fn swiglu<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.glu(Glu::Swiglu, a, false)
    }

    fn contiguous_1(&self, what: &str, a: Tensor<'_>) -> Result<()> {
        need(self.api.is_contiguous_1(a.raw), what, || format!("'{}' must be contiguous in dimensions 1 to 3 (use cont)", a.name()))
    }

    /// `softmax(a · scale + slope · mask)` over each row (`ggml_soft_max_ext`): `mask` F32 or
    /// F16, rows as long as a's, at least as many rows, dimensions 2 and 3 dividing a's;
    /// `max_bias > 0` is ALiBi (a slope per a's dimension 2) and needs a mask.
    pub fn soft_max_ext<'a>(&'a self, a: Tensor<'a>, mask: Option<Tensor<'a>>, scale: f32, max_bias: f32) -> Result<Tensor<'a>> {
        let what = "ggml_soft_max_ext";
        self.check_contiguous(what, a)?;
        if let Some(m) = mask {
            need_type(m, &[Type::F32, Type::F16], what, "mask")?;
            self.check_contiguous(what, m)?;
            let (s, sm) = (a.shape(), m.shape());
            need(sm[0] == s[0] && sm[1] >= s[1] && s[2] % sm[2] == 0 && s[3] % sm[3] == 0, what, || {
                format!("mask '{}' {sm:?} does not fit '{}' {s:?}", m.name(), a.name())
            })?;
        }
        need(max_bias <= 0.0 || mask.is_some(), what, || "max_bias > 0 (ALiBi) needs a mask".into())?;
        self.made(what, || self.api.soft_max_ext(self.raw, a.raw, mask.map(|m| m.raw), scale, max_bias))
    }

    /// `(a - mean) / sqrt(variance + eps)` over each row.
    pub fn norm<'a>(&'a self, a: Tensor<'a>, eps: f32) -> Result<Tensor<'a>> {
        self.made("ggml_norm", || self.api.norm(self.raw, a.raw, eps, false))
    }

    /// `a / sqrt(mean(a²) + eps)` over each row.
    pub fn rms_norm<'a>(&'a self, a: Tensor<'a>, eps: f32) -> Result<Tensor<'a>> {
        self.made("ggml_rms_norm", || self.api.norm(self.raw, a.raw, eps, true))
    }

    /// The rows of `a` at the I32 indices `ids` (an embedding lookup): for a `[k, n]` and ids
    /// `[m]`, `[k, m]`; F32 (I32 for an I32 `a`).
    pub fn get_rows<'a>(&'a self, a: Tensor<'a>, ids: Tensor<'a>) -> Result<Tensor<'a>> {
        let what = "ggml_get_rows";
        need_type(ids, &[Type::I32], what, "index tensor")?;
        let (s, si) = (a.shape(), ids.shape());
        need(s[2] == si[1] && s[3] == si[2] && si[3] == 1, what, || format!("indices {si:?} do not fit '{}' {s:?}", a.name()))?;
        self.made(what, || self.api.get_rows(self.raw, a.raw, ids.raw))
    }

    /// `a` with row `ids[i]` replaced by row `i` of `b` (F32 or F16); a view of `a`.
    pub fn set_rows<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>, ids: Tensor<'a>) -> Result<Tensor<'a>> {
        let what = "ggml_set_rows";
        need_type(b, &[Type::F32, Type::F16], what, "source")?;
        need_type(ids, &[Type::I32, Type::I64], what, "index tensor")?;
        let (s, sb, si) = (a.shape(), b.shape(), ids.shape());
        need(s[0] == sb[0] && s[2] == sb[2] && s[3] == sb[3], what, || format!("rows of {sb:?} do not fit '{}' {s:?}", a.name()))?;
        need(sb[1] == si[0] && sb[2] % si[1] == 0 && sb[3] % si[2] == 0 && si[3] == 1, what, || {
            format!("indices {si:?} do not fit the source {sb:?} (one per row)")
        })?;
        self.rows_contiguous(what, a)?;
        self.rows_contiguous(what, b)?;
        self.made(what, || self.api.set_rows(self.raw, a.raw, b.raw, ids.raw))
    }

    /// Rotary position embedding (`ggml_rope_ext`) of `a` `[head_size, heads, tokens]` with I32
    /// `positions` (one per token) and optional F32 `freq_factors` (n_dims/2 or more).
    pub fn rope<'a>(&'a self, a: Tensor<'a>, positions: Tensor<'a>, freq_factors: Option<Tensor<'a>>, rope: &Rope) -> Result<Tensor<'a>> {
        let what = "ggml_rope_ext";
        need_type(positions, &[Type::I32], what, "positions")?;
        let s = a.shape();
        need(self.api.is_vector(positions.raw) && positions.shape()[0] == s[2], what, || {
            format!("positions {:?}: one per token of '{}' {s:?} (its dimension 2)", positions.shape(), a.name())
        })?;
        need(rope.n_dims > 0 && rope.n_dims % 2 == 0 && i64::from(rope.n_dims) <= s[0], what, || {
            format!("n_dims {}: even, 2 to the head size {}", rope.n_dims, s[0])
        })?;
        if let Some(f) = freq_factors {
            need_type(f, &[Type::F32], what, "freq_factors")?;
            need(f.shape()[0] >= i64::from(rope.n_dims / 2), what, || format!("freq_factors has {} entries, fewer than n_dims/2", f.shape()[0]))?;
        }
        let args = RopeArgs {
            n_dims: rope.n_dims,
            mode: if rope.mode == RopeMode::Neox { 2 } else { 0 },
            n_ctx_orig: rope.n_ctx_orig,
            floats: [rope.freq_base, rope.freq_scale, rope.ext_factor, rope.attn_factor, rope.beta_fast, rope.beta_slow],
        };
        self.made(what, || self.api.rope_ext(self.raw, a.raw, positions.raw, freq_factors.map(|f| f.raw), &args))
    }

    /// `a` and `b` joined along ggml dimension `dim` (0 to 3); the others must agree.
    pub fn concat<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>, dim: usize) -> Result<Tensor<'a>> {
        let what = "ggml_concat";
        need(dim < 4, what, || format!("dimension {dim} is not 0 to 3"))?;
        let (s, sb) = (a.shape(), b.shape());
        need(a.ty() == b.ty() && (0..4).all(|d| d == dim || s[d] == sb[d]), what, || {
            format!("'{}' {} {s:?} and '{}' {} {sb:?} differ outside dimension {dim}", a.name(), a.ty(), b.name(), b.ty())
        })?;
        self.made(what, || self.api.concat(self.raw, a.raw, b.raw, dim as c_int))
    }

    /// A view of `a` whose dimension `d` becomes dimension `axes[d]` (`ggml_permute`).
    pub fn permute<'a>(&'a self, a: Tensor<'a>, axes: [usize; 4]) -> Result<Tensor<'a>> {
        let mut sorted = axes;
        sorted.sort_unstable();
        need(sorted == [0, 1, 2, 3], "ggml_permute", || format!("{axes:?} is not a permutation of 0..4"))?;
        self.made("ggml_permute", || self.api.permute(self.raw, a.raw, axes.map(|x| x as c_int)))
    }

    /// A view of the contiguous `a` with shape `ne` (1 to 4 dimensions, as many elements).
    pub fn reshape<'a>(&'a self, a: Tensor<'a>, ne: &[i64]) -> Result<Tensor<'a>> {
        let what = "ggml_reshape_4d";
        need(!ne.is_empty() && ne.len() <= 4 && ne.iter().all(|&n| n > 0), what, || format!("shape {ne:?}: 1 to 4 dimensions, each at least 1"))?;
        let mut full = [1i64; 4];
        full[..ne.len()].copy_from_slice(ne);
        need(full.iter().product::<i64>() == a.nelements(), what, || format!("{} elements into {ne:?}", a.nelements()))?;
        self.check_contiguous(what, a)?;
        self.made(what, || self.api.reshape(self.raw, a.raw, full))
    }

    /// Copies `a` into `b` (converting the type); the result is a view of `b`.
    pub fn cpy<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        need(a.nelements() == b.nelements(), "ggml_cpy", || format!("{} elements into {}", a.nelements(), b.nelements()))?;
        self.made("ggml_cpy", || self.api.cpy(self.raw, a.raw, b.raw))
    }
}
