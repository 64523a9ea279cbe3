"""The ops of ggml.h beyond arithmetic: activations, gated units, soft_max, norms, rows, rope,
concat, permute, and `Context.op`, the way to any other `ggml_*` constructor by name.

`Ops` is a base class of `Context`: each method checks the asserts upstream's constructor would
abort on and raises `ValueError` (or `TypeError` for a wrong type) instead, then makes the node
with `Context._new`. `Context.op` is the exception: it checks nothing but its arguments' kinds.
"""

import ctypes
import re

from ._lib import GGML_MAX_DIMS, GLU_OPS, UNARY_OPS, GgmlError, lib
from ._owner import context_of, lifecycle

# ggml_type values of ggml.h
F32, F16, I32, I64 = 0, 1, 26, 27
ROPE_MODES = {"normal": 0, "neox": 2}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _op(method):
    """Runs a Context method inside one `lifecycle.using()` section (checks and the call)."""
    def run(self, *args, **kwargs):
        with lifecycle.using():
            return method(self, *args, **kwargs)
    run.__name__, run.__doc__ = method.__name__, method.__doc__
    return run


def _fn(name, what):
    return lib().require(f"ggml_{name}", what)


def _type_name(t):
    return lib().ggml_type_name(t).decode()


def _need(cond, what, message):
    if not cond:
        raise ValueError(f"{what}: {message}")


def _need_type(t, types, what, role):
    kind = t._read(lambda s: s.type)
    if kind not in types:
        names = " or ".join(_type_name(k) for k in types)
        raise TypeError(f"{what}: {role} '{t.name}' is {_type_name(kind)}, it must be {names}")


def _contiguous_rows(t, what):
    """ggml_is_contiguous_rows: each row packed (the asserts of the unary ops)."""
    _need(lib().ggml_is_contiguous_rows(t.ptr), what, f"tensor '{t.name}' must have contiguous rows (use cont())")


def _contiguous_1(t, what):
    _need(lib().ggml_is_contiguous_1(t.ptr), what, f"tensor '{t.name}' must be contiguous in its outer dimensions (use cont())")


class Ops:
    """The op methods of `Context` (see the module doc)."""

    def _unary(self, name, a, out_name):
        _contiguous_rows(a, name)
        return self._new(name, _fn(name, name), a, ndim=a.ndim, name=out_name)

    @_op
    def unary(self, op, a, name=None):
        """The element-wise op `op` (a name of `UNARY_OPS`: "relu", "gelu", "silu", ...) of a."""
        if op not in UNARY_OPS:
            raise ValueError(f"unary: {op!r} is not one of {', '.join(UNARY_OPS)}")
        return self._unary(op, a, name)

    @_op
    def leaky_relu(self, a, negative_slope=0.01, name=None):
        """a where a > 0, else negative_slope * a (ggml_leaky_relu)."""
        _contiguous_rows(a, "leaky_relu")
        return self._new("leaky_relu", _fn("leaky_relu", "leaky_relu"), a, float(negative_slope), False, ndim=a.ndim, name=name)

    @_op
    def clamp(self, a, min, max, name=None):
        """a limited to [min, max] (ggml_clamp)."""
        _need(min <= max, "clamp", f"min {min} is above max {max}")
        return self._new("clamp", _fn("clamp", "clamp"), a, float(min), float(max), ndim=a.ndim, name=name)

    # ---- gated linear units ----------------------------------------------------------------

    @_op
    def glu(self, op, a, b=None, swapped=False, name=None):
        """A gated linear unit `op` ("reglu", "geglu", "swiglu", "geglu_erf", "geglu_quick").

        Without b, each row of a holds both halves: the result is act(first half) * second half
        (act(second) * first with `swapped`), half as wide as a. With b (the `_split` form, same
        shape as a): act(a) * b."""
        if op not in GLU_OPS:
            raise ValueError(f"glu: {op!r} is not one of {', '.join(GLU_OPS)}")
        _contiguous_1(a, op)
        if b is None:
            _need(a.ne[0] % 2 == 0, op, f"tensor '{a.name}' has {a.ne[0]} columns, an odd number (the two halves must match)")
            tail = "_swapped" if swapped else ""
            return self._new(op, _fn(op + tail, op), a, ndim=a.ndim, name=name)
        _need(not swapped, op, "swapped is for the form without b (swap a and b instead)")
        self._check_split(op, a, b)
        return self._new(op, _fn(op + "_split", op), a, b, ndim=a.ndim, name=name)

    def _check_split(self, what, a, b):
        _contiguous_1(b, what)
        _need(lib().ggml_are_same_shape(a.ptr, b.ptr), what, f"shapes {a.shape} and {b.shape} differ")
        if a._read(lambda s: s.type) != b._read(lambda s: s.type):
            raise TypeError(f"{what}: tensors '{a.name}' and '{b.name}' have different types ({a.type_name}, {b.type_name})")

    def reglu(self, a, b=None, swapped=False, name=None):
        """relu-gated unit (see `glu`)."""
        return self.glu("reglu", a, b, swapped, name)

    def geglu(self, a, b=None, swapped=False, name=None):
        """gelu-gated unit (see `glu`)."""
        return self.glu("geglu", a, b, swapped, name)

    def swiglu(self, a, b=None, swapped=False, name=None):
        """silu-gated unit, as in LLaMA's feed-forward (see `glu`)."""
        return self.glu("swiglu", a, b, swapped, name)

    def geglu_erf(self, a, b=None, swapped=False, name=None):
        """gelu_erf-gated unit (see `glu`)."""
        return self.glu("geglu_erf", a, b, swapped, name)

    def geglu_quick(self, a, b=None, swapped=False, name=None):
        """gelu_quick-gated unit (see `glu`)."""
        return self.glu("geglu_quick", a, b, swapped, name)

    @_op
    def swiglu_oai(self, a, b, alpha=1.702, limit=7.0, name=None):
        """gpt-oss's unit (ggml_swiglu_oai): x = min(a, limit), y = clamp(b, -limit, limit),
        x * sigmoid(alpha * x) * (y + 1)."""
        _contiguous_1(a, "swiglu_oai")
        self._check_split("swiglu_oai", a, b)
        return self._new("swiglu_oai", _fn("swiglu_oai", "swiglu_oai"), a, b, float(alpha), float(limit), ndim=a.ndim, name=name)

    # ---- soft_max and norms (along rows, the last numpy axis) ------------------------------

    @_op
    def soft_max(self, a, mask=None, scale=1.0, max_bias=0.0, name=None):
        """softmax(a * scale + mask * slope) along rows (ggml_soft_max, or ggml_soft_max_ext
        with a mask, a scale or max_bias). mask: f32 or f16, as wide as a, at least as many rows,
        its outer dimensions dividing a's; max_bias > 0 (ALiBi, slope per a's dimension 2)
        needs a mask."""
        _need(lib().ggml_is_contiguous(a.ptr), "soft_max", f"tensor '{a.name}' is not contiguous (use cont())")
        if mask is None and scale == 1.0 and max_bias == 0.0:
            return self._new("soft_max", _fn("soft_max", "soft_max"), a, ndim=a.ndim, name=name)
        if mask is not None:
            _need_type(mask, (F32, F16), "soft_max", "mask")
            _need(lib().ggml_is_contiguous(mask.ptr), "soft_max", f"mask '{mask.name}' is not contiguous (use cont())")
            an, mn = a.ne, mask.ne
            _need(mn[0] == an[0] and mn[1] >= an[1] and an[2] % mn[2] == 0 and an[3] % mn[3] == 0, "soft_max",
                  f"mask shape {mask.shape} does not fit {a.shape} (same row length, at least as many rows, outer dimensions dividing)")
        _need(max_bias == 0.0 or mask is not None, "soft_max", "max_bias > 0 (ALiBi) needs a mask")
        return self._new("soft_max", _fn("soft_max_ext", "soft_max"), a, mask, float(scale), float(max_bias), ndim=a.ndim, name=name)

    @_op
    def norm(self, a, eps=1e-5, name=None):
        """(a - mean) / sqrt(variance + eps) along rows (ggml_norm)."""
        return self._new("norm", _fn("norm", "norm"), a, float(eps), ndim=a.ndim, name=name)

    @_op
    def rms_norm(self, a, eps=1e-6, name=None):
        """a / sqrt(mean(a^2) + eps) along rows (ggml_rms_norm)."""
        return self._new("rms_norm", _fn("rms_norm", "rms_norm"), a, float(eps), ndim=a.ndim, name=name)

    # ---- rows ------------------------------------------------------------------------------

    @_op
    def get_rows(self, a, rows, name=None):
        """The rows of a at the int32 indices `rows` (ggml_get_rows: an embedding lookup).
        For 2-D a (n, k) and 1-D rows (m,): a[rows], (m, k), f32 (int32 for an int32 a)."""
        _need_type(rows, (I32,), "get_rows", "index tensor")
        an, rn = a.ne, rows.ne
        _need(an[2] == rn[1] and an[3] == rn[2] and rn[3] == 1, "get_rows",
              f"index shape {rows.shape} does not fit {a.shape} (one index row per matrix of a)")
        return self._new("get_rows", _fn("get_rows", "get_rows"), a, rows, ndim=max(a.ndim, rows.ndim + 1), name=name)

    @_op
    def set_rows(self, a, b, rows, name=None):
        """a with a[rows[i]] = b[i] (ggml_set_rows): the result is a view of a. b: f32 or f16
        rows as wide as a's; rows: int64 or int32 indices, one per row of b."""
        _need_type(b, (F32, F16), "set_rows", "source")
        _need_type(rows, (I64, I32), "set_rows", "index tensor")
        an, bn, cn = a.ne, b.ne, rows.ne
        _need(an[0] == bn[0] and an[2] == bn[2] and an[3] == bn[3], "set_rows", f"rows of {b.shape} do not fit {a.shape}")
        _need(bn[1] == cn[0] and bn[2] % cn[1] == 0 and bn[3] % cn[2] == 0 and cn[3] == 1, "set_rows",
              f"index shape {rows.shape} does not fit the source {b.shape} (one index per row)")
        for t in (a, b):
            _contiguous_rows(t, "set_rows")
        return self._new("set_rows", _fn("set_rows", "set_rows"), a, b, rows, ndim=a.ndim, name=name)

    # ---- rope ------------------------------------------------------------------------------

    @_op
    def rope(self, a, positions, n_dims, mode="normal", freq_factors=None, n_ctx_orig=0, freq_base=10000.0,
             freq_scale=1.0, ext_factor=0.0, attn_factor=1.0, beta_fast=32.0, beta_slow=1.0, name=None):
        """Rotary position embedding (ggml_rope_ext) of a, numpy shape (tokens, heads, head_size):
        the first `n_dims` of each head rotated by position * freq_base^(-2i/n_dims).
        positions: int32, one per token; mode "normal" (pairs of neighbours) or "neox" (pairs
        n_dims/2 apart); freq_factors: optional f32 divisors of the angles (n_dims/2 or more);
        the YaRN parameters as llama.cpp passes them (ext_factor 0 turns YaRN off)."""
        if mode not in ROPE_MODES:
            raise ValueError(f"rope: mode {mode!r} is not one of {sorted(ROPE_MODES)} (the multi-section modes are not wrapped)")
        _need_type(positions, (I32,), "rope", "positions")
        _need(lib().ggml_is_vector(positions.ptr) and positions.ne[0] == a.ne[2], "rope",
              f"positions {positions.shape}: one per token of {a.shape} (its first numpy axis of three)")
        _need(0 < n_dims <= a.ne[0] and n_dims % 2 == 0, "rope", f"n_dims {n_dims}: even, 2 to the head size {a.ne[0]}")
        if freq_factors is not None:
            _need_type(freq_factors, (F32,), "rope", "freq_factors")
            _need(freq_factors.ne[0] >= n_dims // 2, "rope", f"freq_factors has {freq_factors.ne[0]} entries, fewer than n_dims/2")
        floats = (freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)
        return self._new("rope", _fn("rope_ext", "rope"), a, positions, freq_factors, int(n_dims), ROPE_MODES[mode],
                         int(n_ctx_orig), *(float(f) for f in floats), ndim=a.ndim, name=name)

    # ---- layout ----------------------------------------------------------------------------

    @_op
    def concat(self, a, b, axis=0, name=None):
        """a and b joined along numpy `axis` (ggml_concat); the other dimensions must agree."""
        nd = max(a.ndim, b.ndim)
        _need(-nd <= axis < nd, "concat", f"axis {axis} is out of range for {nd} dimensions")
        dim = nd - 1 - (axis % nd)
        if a._read(lambda s: s.type) != b._read(lambda s: s.type):
            raise TypeError(f"concat: tensors '{a.name}' and '{b.name}' have different types ({a.type_name}, {b.type_name})")
        an, bn = a.ne, b.ne
        _need(all(an[d] == bn[d] for d in range(GGML_MAX_DIMS) if d != dim), "concat",
              f"shapes {a.shape} and {b.shape} differ outside axis {axis}")
        return self._new("concat", _fn("concat", "concat"), a, b, dim, ndim=nd, name=name)

    @_op
    def permute(self, a, axes, name=None):
        """A view of a with its numpy axes reordered as numpy.transpose(a, axes) (ggml_permute)."""
        nd = a.ndim
        axes = [int(x) for x in axes]
        _need(sorted(axes) == list(range(nd)), "permute", f"axes {tuple(axes)} are not a permutation of {nd} axes")
        # numpy axis i of the result is numpy axis axes[i] of a; ggml wants, for each ggml
        # dimension d of a, the ggml dimension it goes to
        to = list(range(GGML_MAX_DIMS))
        for i, src in enumerate(axes):
            to[nd - 1 - src] = nd - 1 - i
        return self._new("permute", _fn("permute", "permute"), a, *to, ndim=nd, name=name)

    # ---- any other constructor -------------------------------------------------------------

    @_op
    def op(self, name, *args, ndim=None, out_name=None):
        """Calls the ggml constructor `ggml_<name>(ctx, *args)` of the loaded library and returns
        its tensor: the way to an op this package does not wrap.

        args: Tensors (passed as `struct ggml_tensor *`), None (NULL), bool (bool), int (C int),
        float (C float), or ctypes values for any other C type (ctypes.c_int64(n) for an int64_t,
        ctypes.c_size_t for a size_t, ctypes.c_double). Nothing else is checked: the arguments
        must match the C declaration in ggml.h, and an assert of the constructor aborts the
        process as it would in C. Raises GgmlError for a name the library does not export, and
        when the function returns no tensor of this context."""
        if not isinstance(name, str) or not _NAME.match(name.removeprefix("ggml_")):
            raise ValueError(f"op: {name!r} is not a ggml function name")
        full = name if name.startswith("ggml_") else f"ggml_{name}"
        fn = lib().function(full)
        if fn is None:
            raise GgmlError(f"op: the loaded library has no {full}; loaded: {lib().paths}")
        fn.restype = ctypes.c_void_p
        cargs = [_c_arg(full, i, a) for i, a in enumerate(args)]
        # no argtypes: every argument goes as the ctypes value it is, the context as a pointer
        t = self._new(full, lambda ctx, *rest: fn(ctypes.c_void_p(ctx), *rest), *cargs, ndim=ndim, name=out_name)
        if context_of(t._ptr) is not self:
            raise GgmlError(f"op: {full} returned no tensor of this context")
        return t


def _c_arg(what, i, a):
    from .graph import Tensor
    if isinstance(a, Tensor):
        return ctypes.c_void_p(a.ptr)
    if a is None or isinstance(a, ctypes._SimpleCData):
        return a
    if isinstance(a, bool):
        return ctypes.c_bool(a)
    if isinstance(a, int):
        return ctypes.c_int(a)
    if isinstance(a, float):
        return ctypes.c_float(a)
    raise TypeError(f"op: argument {i + 1} of {what} is a {type(a).__name__}: pass a Tensor, None, bool, int, float or a ctypes value")


def _unary_method(op):
    def method(self, a, name=None):
        with lifecycle.using():
            return self._unary(op, a, name)
    method.__name__ = op
    method.__doc__ = f"ggml_{op} of a, element-wise."
    return method


for _u in UNARY_OPS:
    setattr(Ops, _u, _unary_method(_u))
