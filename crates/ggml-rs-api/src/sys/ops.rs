//! The C calls of the op constructors beyond `Op1`/`Op2` (`crate::ops`), the shape predicates
//! their checks use, and the memory plan report. Every constructor here asserts in C on bad
//! input: the safe layer checks first, and each `// SAFETY:` line below relies on that.

use std::ffi::{CStr, c_int};

use super::bindings::*;
use super::{Api, RawCtx, RawGallocr, RawSched, RawTensor};

/// One-tensor element-wise ops: `ggml_unary` with a `ggml_unary_op`, or a dedicated function.
#[derive(Clone, Copy)]
pub(crate) enum UnaryFn {
    Unary(ggml_unary_op::Type),
    Sqrt,
    Log,
    Sin,
    Cos,
}

/// `ggml_rope_ext`'s numbers after the tensors.
pub(crate) struct RopeArgs {
    pub(crate) n_dims: c_int,
    pub(crate) mode: c_int,
    pub(crate) n_ctx_orig: c_int,
    /// freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow
    pub(crate) floats: [f32; 6],
}

fn opt(t: Option<RawTensor>) -> *mut ggml_tensor {
    t.map_or(std::ptr::null_mut(), |t| t.ptr())
}

/// The op functions the safe layer calls without asking first (all in ggml 0.25.3).
pub(super) fn missing(g: &Ggml) -> Vec<&'static str> {
    let mut missing = Vec::new();
    macro_rules! required {
        ($($f:ident),* $(,)?) => { $( if g.$f.is_err() { missing.push(stringify!($f)); } )* };
    }
    required!(
        ggml_unary,
        ggml_sqrt,
        ggml_log,
        ggml_sin,
        ggml_cos,
        ggml_leaky_relu,
        ggml_clamp,
        ggml_glu,
        ggml_glu_split,
        ggml_soft_max_ext,
        ggml_norm,
        ggml_rms_norm,
        ggml_get_rows,
        ggml_set_rows,
        ggml_rope_ext,
        ggml_concat,
        ggml_permute,
        ggml_reshape_4d,
        ggml_cpy,
        ggml_is_contiguous_rows,
        ggml_is_contiguous_1,
        ggml_are_same_shape,
        ggml_is_vector,
    );
    missing
}

impl Api {
    pub(crate) fn unary(&self, ctx: RawCtx, op: UnaryFn, a: RawTensor) -> Option<RawTensor> {
        let (c, a) = (ctx.ptr(), a.ptr());
        // SAFETY: a live context with room and a live tensor with contiguous rows (checked by
        // the caller); the op number is one of ggml_unary_op's.
        RawTensor::new(unsafe {
            match op {
                UnaryFn::Unary(op) => self.g.ggml_unary(c, a, op),
                UnaryFn::Sqrt => self.g.ggml_sqrt(c, a),
                UnaryFn::Log => self.g.ggml_log(c, a),
                UnaryFn::Sin => self.g.ggml_sin(c, a),
                UnaryFn::Cos => self.g.ggml_cos(c, a),
            }
        })
    }
    pub(crate) fn leaky_relu(&self, ctx: RawCtx, a: RawTensor, slope: f32) -> Option<RawTensor> {
        // SAFETY: a live context with room and a live tensor with contiguous rows.
        RawTensor::new(unsafe { self.g.ggml_leaky_relu(ctx.ptr(), a.ptr(), slope, false) })
    }
    pub(crate) fn clamp(&self, ctx: RawCtx, a: RawTensor, min: f32, max: f32) -> Option<RawTensor> {
        // SAFETY: a live context with room and a live tensor.
        RawTensor::new(unsafe { self.g.ggml_clamp(ctx.ptr(), a.ptr(), min, max) })
    }
    /// `ggml_glu` (b None) or `ggml_glu_split`.
    pub(crate) fn glu(&self, ctx: RawCtx, op: ggml_glu_op::Type, a: RawTensor, b: Option<RawTensor>, swapped: bool) -> Option<RawTensor> {
        // SAFETY: a live context with room, live tensors contiguous in dimensions 1..3, of the
        // same shape and type when there are two (checked by the caller).
        RawTensor::new(unsafe {
            match b {
                None => self.g.ggml_glu(ctx.ptr(), a.ptr(), op, swapped),
                Some(b) => self.g.ggml_glu_split(ctx.ptr(), a.ptr(), b.ptr(), op),
            }
        })
    }
    pub(crate) fn soft_max_ext(&self, ctx: RawCtx, a: RawTensor, mask: Option<RawTensor>, scale: f32, max_bias: f32) -> Option<RawTensor> {
        // SAFETY: a live context with room, a contiguous tensor and NULL or a contiguous F32/F16
        // mask that fits it, a mask whenever max_bias > 0 (checked by the caller).
        RawTensor::new(unsafe { self.g.ggml_soft_max_ext(ctx.ptr(), a.ptr(), opt(mask), scale, max_bias) })
    }
    pub(crate) fn norm(&self, ctx: RawCtx, a: RawTensor, eps: f32, rms: bool) -> Option<RawTensor> {
        // SAFETY: a live context with room and a live tensor.
        RawTensor::new(unsafe { if rms { self.g.ggml_rms_norm(ctx.ptr(), a.ptr(), eps) } else { self.g.ggml_norm(ctx.ptr(), a.ptr(), eps) } })
    }
    pub(crate) fn get_rows(&self, ctx: RawCtx, a: RawTensor, ids: RawTensor) -> Option<RawTensor> {
        // SAFETY: a live context with room, live tensors whose shapes and index type the caller checked.
        RawTensor::new(unsafe { self.g.ggml_get_rows(ctx.ptr(), a.ptr(), ids.ptr()) })
    }
    pub(crate) fn set_rows(&self, ctx: RawCtx, a: RawTensor, b: RawTensor, ids: RawTensor) -> Option<RawTensor> {
        // SAFETY: as for get_rows.
        RawTensor::new(unsafe { self.g.ggml_set_rows(ctx.ptr(), a.ptr(), b.ptr(), ids.ptr()) })
    }
    pub(crate) fn rope_ext(&self, ctx: RawCtx, a: RawTensor, pos: RawTensor, factors: Option<RawTensor>, r: &RopeArgs) -> Option<RawTensor> {
        let [base, scale, ext, attn, fast, slow] = r.floats;
        // SAFETY: a live context with room, live tensors: I32 positions, one per a's dimension
        // 2; NULL or F32 factors, n_dims/2 or more; a mode without bit 0 (checked by the caller).
        RawTensor::new(unsafe {
            self.g.ggml_rope_ext(ctx.ptr(), a.ptr(), pos.ptr(), opt(factors), r.n_dims, r.mode, r.n_ctx_orig, base, scale, ext, attn, fast, slow)
        })
    }
    pub(crate) fn concat(&self, ctx: RawCtx, a: RawTensor, b: RawTensor, dim: c_int) -> Option<RawTensor> {
        // SAFETY: a live context with room, same-typed tensors equal outside `dim` < 4 (checked).
        RawTensor::new(unsafe { self.g.ggml_concat(ctx.ptr(), a.ptr(), b.ptr(), dim) })
    }
    pub(crate) fn permute(&self, ctx: RawCtx, a: RawTensor, axes: [c_int; 4]) -> Option<RawTensor> {
        // SAFETY: a live context with room, a live tensor, a permutation of 0..4 (checked).
        RawTensor::new(unsafe { self.g.ggml_permute(ctx.ptr(), a.ptr(), axes[0], axes[1], axes[2], axes[3]) })
    }
    pub(crate) fn reshape(&self, ctx: RawCtx, a: RawTensor, ne: [i64; 4]) -> Option<RawTensor> {
        // SAFETY: a live context with room, a contiguous tensor of as many elements (checked).
        RawTensor::new(unsafe { self.g.ggml_reshape_4d(ctx.ptr(), a.ptr(), ne[0], ne[1], ne[2], ne[3]) })
    }
    pub(crate) fn cpy(&self, ctx: RawCtx, a: RawTensor, b: RawTensor) -> Option<RawTensor> {
        // SAFETY: a live context with room, live tensors of as many elements (checked).
        RawTensor::new(unsafe { self.g.ggml_cpy(ctx.ptr(), a.ptr(), b.ptr()) })
    }

    // -- shape predicates (plain reads of a live tensor)
    pub(crate) fn is_contiguous_rows(&self, t: RawTensor) -> bool {
        // SAFETY: a live tensor.
        unsafe { self.g.ggml_is_contiguous_rows(t.ptr()) }
    }
    pub(crate) fn is_contiguous_1(&self, t: RawTensor) -> bool {
        // SAFETY: a live tensor.
        unsafe { self.g.ggml_is_contiguous_1(t.ptr()) }
    }
    pub(crate) fn same_shape(&self, a: RawTensor, b: RawTensor) -> bool {
        // SAFETY: live tensors.
        unsafe { self.g.ggml_are_same_shape(a.ptr(), b.ptr()) }
    }
    pub(crate) fn is_vector(&self, t: RawTensor) -> bool {
        // SAFETY: a live tensor.
        unsafe { self.g.ggml_is_vector(t.ptr()) }
    }

    // -- the memory plan report (None over upstream's libraries)
    pub(crate) fn gallocr_write_report(&self, a: RawGallocr, path: &CStr, svg: bool) -> Option<bool> {
        let ext = self.ext.as_ref()?;
        // SAFETY: a live allocator whose planned graph's tensors are alive (the caller holds the
        // allocation, which borrows the graph and its context); a NUL-terminated path.
        Some(unsafe { ext.ggml_rs_gallocr_write_report(a.ptr(), path.as_ptr(), c_int::from(svg)) })
    }
    pub(crate) fn sched_write_report(&self, s: RawSched, path: &CStr, svg: bool) -> Option<bool> {
        let ext = self.ext.as_ref()?;
        // SAFETY: as for gallocr_write_report, for a live scheduler.
        Some(unsafe { ext.ggml_rs_sched_write_report(s.ptr(), path.as_ptr(), c_int::from(svg)) })
    }
}
