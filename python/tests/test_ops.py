"""Every wrapped op against numpy, on upstream's CPU backend and on the Rust CPU backend (RSCPU,
$GGML_RS_CPU_LIBRARY), and `Context.op`, the way to an op by name. An op a backend does not
support is skipped with its name; a wrong argument is a Python exception, never an abort."""

import ctypes
import math

import numpy as np
import pytest

import ggml_rs as g
from helpers import rust_cpu_path

rng = np.random.default_rng(5)
SQRT_2_PI = math.sqrt(2 / math.pi)
_erf = np.vectorize(math.erf, otypes=[np.float32])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(SQRT_2_PI * (x + 0.044715 * x ** 3)))


def gelu_quick(x):
    return x * sigmoid(1.702 * x)


def gelu_erf(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def silu(x):
    return x * sigmoid(x)


def hardsigmoid(x):
    return np.clip((x + 3) / 6, 0, 1)


UNARY = {
    "abs": np.abs, "sgn": np.sign, "neg": np.negative, "step": lambda x: (x > 0).astype(np.float32),
    "tanh": np.tanh, "elu": lambda x: np.where(x > 0, x, np.expm1(x)), "relu": relu, "sigmoid": sigmoid,
    "gelu": gelu, "gelu_quick": gelu_quick, "gelu_erf": gelu_erf, "silu": silu,
    "hardswish": lambda x: x * hardsigmoid(x), "hardsigmoid": hardsigmoid, "exp": np.exp, "expm1": np.expm1,
    "softplus": lambda x: np.log1p(np.exp(x)), "floor": np.floor, "ceil": np.ceil,
    "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "trunc": np.trunc,
    "sqrt": np.sqrt, "log": np.log, "sin": np.sin, "cos": np.cos,
}
GLU = {"reglu": relu, "geglu": gelu, "swiglu": silu, "geglu_erf": gelu_erf, "geglu_quick": gelu_quick}
# ggml's CPU computes the gelu family from an f16 table
LOOSE = {"gelu", "gelu_quick", "geglu", "geglu_quick"}


@pytest.fixture(params=["CPU", "RSCPU"])
def backend(request):
    if request.param == "CPU":
        with g.Backend.cpu(n_threads=1) as b:
            yield b
        return
    with g.Backend.rust_cpu(rust_cpu_path(), n_threads=2) as b:
        yield b


def compute(backend, ctx, out, inputs):
    """Allocates the graph of `out` on `backend`, sets `inputs` {tensor: array}, computes and
    returns out's data; skips when the backend does not support a node."""
    out.set_output()
    graph = ctx.graph(out)
    unsupported = sorted({n.op for n in graph.nodes if not backend.supports(n)})
    if unsupported:
        pytest.skip(f"{backend.name} does not support {', '.join(unsupported)}")
    with g.GraphAllocator(backend) as ga:
        ga.alloc(graph)
        for t, v in inputs.items():
            t.set(v)
        backend.compute(graph)
        return out.get()


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check(got, want, loose=False, err_msg=""):
    assert got.shape == want.shape, (got.shape, want.shape)
    tol = 3e-3 if loose else 1e-4
    np.testing.assert_allclose(got, np.asarray(want, np.float32), rtol=tol, atol=tol, err_msg=err_msg)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(backend, ctx, op):
    xv = 3 * randn(4, 7)
    if op in ("sqrt", "log"):
        xv = np.abs(xv) + 0.1
    x = ctx.tensor(xv.shape, name="x").set_input()
    got = compute(backend, ctx, getattr(ctx, op)(x), {x: xv})
    check(got, UNARY[op](xv), op in LOOSE, op)
    # the same op through unary() and through the escape hatch
    assert ctx.unary(op, x).op == ctx.op(op, x).op


def test_leaky_relu_and_clamp(backend, ctx):
    xv = randn(3, 8)
    # each graph its own input: the first allocator's memory is gone when the second allocates
    x, x2 = (ctx.tensor(xv.shape, name="x").set_input() for _ in range(2))
    check(compute(backend, ctx, ctx.leaky_relu(x, 0.1), {x: xv}), np.where(xv > 0, xv, 0.1 * xv))
    check(compute(backend, ctx, ctx.clamp(x2, -0.5, 0.25), {x2: xv}), np.clip(xv, -0.5, 0.25))


@pytest.mark.parametrize("op", sorted(GLU))
@pytest.mark.parametrize("form", ["fused", "swapped", "split"])
def test_glu(backend, ctx, op, form):
    act = GLU[op]
    if form == "split":
        av, bv = randn(3, 6), randn(3, 6)
        a, b = ctx.tensor(av.shape, name="a").set_input(), ctx.tensor(bv.shape, name="b").set_input()
        got = compute(backend, ctx, ctx.glu(op, a, b), {a: av, b: bv})
        want = act(av) * bv
    else:
        av = randn(3, 12)
        a = ctx.tensor(av.shape, name="a").set_input()
        got = compute(backend, ctx, getattr(ctx, op)(a, swapped=form == "swapped"), {a: av})
        first, second = av[:, :6], av[:, 6:]
        want = act(second) * first if form == "swapped" else act(first) * second
    check(got, want, op in LOOSE, f"{op} {form}")


def test_swiglu_oai(backend, ctx):
    av, bv = 4 * randn(2, 8), 4 * randn(2, 8)
    a, b = ctx.tensor(av.shape, name="a").set_input(), ctx.tensor(bv.shape, name="b").set_input()
    got = compute(backend, ctx, ctx.swiglu_oai(a, b, alpha=1.5, limit=3.0), {a: av, b: bv})
    x, y = np.minimum(av, 3.0), np.clip(bv, -3.0, 3.0)
    check(got, x * sigmoid(1.5 * x) * (y + 1))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def alibi_slopes(n_head, max_bias):
    """ALiBi's slope of each head, as ggml's soft_max computes it."""
    n_log2 = 2 ** math.floor(math.log2(n_head))
    m0, m1 = 2 ** (-max_bias / n_log2), 2 ** (-max_bias / 2 / n_log2)
    return np.array([m0 ** (h + 1) if h < n_log2 else m1 ** (2 * (h - n_log2) + 1) for h in range(n_head)], np.float32)


def test_soft_max(backend, ctx):
    xv = randn(5, 9)
    x = ctx.tensor(xv.shape, name="x").set_input()
    check(compute(backend, ctx, ctx.soft_max(x), {x: xv}), softmax(xv))


@pytest.mark.parametrize("mask_dtype", [np.float32, np.float16])
@pytest.mark.parametrize("max_bias", [0.0, 8.0])
def test_soft_max_ext(backend, ctx, mask_dtype, max_bias):
    # 3 heads of 4 rows of 6, one mask for every head with more rows than needed (causal)
    xv, mv = randn(3, 4, 6), np.triu(np.full((5, 6), -np.inf, np.float32), k=3)
    mv = mv.astype(mask_dtype)
    x = ctx.tensor(xv.shape, name="x").set_input()
    m = ctx.tensor(mv.shape, mask_dtype, name="mask").set_input()
    got = compute(backend, ctx, ctx.soft_max(x, mask=m, scale=0.5, max_bias=max_bias), {x: xv, m: mv})
    slope = alibi_slopes(3, max_bias)[:, None, None] if max_bias else 1.0
    check(got, softmax(xv * 0.5 + slope * mv[:4].astype(np.float32)), mask_dtype == np.float16)


def test_norms(backend, ctx):
    xv = randn(4, 16) * 2 + 1
    x, x2 = (ctx.tensor(xv.shape, name="x").set_input() for _ in range(2))
    mean, var = xv.mean(-1, keepdims=True), xv.var(-1, keepdims=True)
    check(compute(backend, ctx, ctx.norm(x, eps=1e-5), {x: xv}), (xv - mean) / np.sqrt(var + 1e-5))
    check(compute(backend, ctx, ctx.rms_norm(x2, eps=1e-6), {x2: xv}), xv / np.sqrt((xv ** 2).mean(-1, keepdims=True) + 1e-6))


def test_mul_mat_broadcast(backend, ctx):
    # 2 weight matrices for 4 batches: batch i uses weight i // 2
    wv, av = randn(2, 5, 8), randn(4, 3, 8)
    w, a = ctx.tensor(wv.shape, name="w").set_input(), ctx.tensor(av.shape, name="a").set_input()
    got = compute(backend, ctx, ctx.mul_mat(w, a), {w: wv, a: av})
    check(got, av @ np.repeat(wv, 2, axis=0).transpose(0, 2, 1))


def test_get_rows(backend, ctx):
    ev, iv = randn(10, 4), np.array([3, 0, 9, 3], np.int32)
    e, i = ctx.tensor(ev.shape, name="emb").set_input(), ctx.tensor(iv.shape, np.int32, name="ids").set_input()
    check(compute(backend, ctx, ctx.get_rows(e, i), {e: ev, i: iv}), ev[iv])


@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_set_rows(backend, ctx, index_dtype):
    dv, sv, iv = randn(6, 4), randn(2, 4), np.array([4, 1], index_dtype)
    d = ctx.tensor(dv.shape, name="dst").set_input()
    s = ctx.tensor(sv.shape, name="src").set_input()
    i = ctx.tensor(iv.shape, index_dtype, name="ids").set_input()
    want = dv.copy()
    want[iv] = sv
    check(compute(backend, ctx, ctx.set_rows(d, s, i), {d: dv, s: sv, i: iv}), want)


def test_cpy_into_f16(backend, ctx):
    xv = randn(3, 5)
    x = ctx.tensor(xv.shape, name="x").set_input()
    got = compute(backend, ctx, ctx.cpy(x, ctx.tensor(xv.shape, np.float16, name="half")), {x: xv})
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, xv.astype(np.float16))


def rope_reference(x, pos, n_dims, neox, base, factors=None):
    """x: (tokens, heads, head_size); the first n_dims of each head rotated by pos * base^(-2i/n_dims)."""
    out = x.copy()
    half = n_dims // 2
    i = np.arange(half)
    theta = pos[:, None].astype(np.float64) * base ** (-2.0 * i / n_dims)
    if factors is not None:
        theta = theta / factors[:half]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    lo, hi = (slice(0, half), slice(half, n_dims)) if neox else (slice(0, n_dims, 2), slice(1, n_dims, 2))
    x0, x1 = x[..., lo], x[..., hi]
    out[..., lo], out[..., hi] = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    return out


@pytest.mark.parametrize("mode", ["normal", "neox"])
@pytest.mark.parametrize("with_factors", [False, True], ids=["plain", "freq_factors"])
def test_rope(backend, ctx, mode, with_factors):
    xv, pv = randn(5, 2, 8), np.array([0, 1, 2, 7, 30], np.int32)
    fv = rng.uniform(1, 4, 3).astype(np.float32)
    x = ctx.tensor(xv.shape, name="x").set_input()
    p = ctx.tensor(pv.shape, np.int32, name="pos").set_input()
    inputs = {x: xv, p: pv}
    f = None
    if with_factors:
        f = ctx.tensor(fv.shape, name="factors").set_input()
        inputs[f] = fv
    got = compute(backend, ctx, ctx.rope(x, p, n_dims=6, mode=mode, freq_factors=f, freq_base=100.0), inputs)
    check(got, rope_reference(xv, pv, 6, mode == "neox", 100.0, fv if with_factors else None))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(backend, ctx, axis):
    av, bv = randn(2, 3, 4), randn(2, 3, 4)
    a, b = ctx.tensor(av.shape, name="a").set_input(), ctx.tensor(bv.shape, name="b").set_input()
    check(compute(backend, ctx, ctx.concat(a, b, axis=axis), {a: av, b: bv}), np.concatenate([av, bv], axis=axis))


@pytest.mark.parametrize("axes", [(1, 0, 2), (2, 0, 1), (0, 2, 1), (2, 1, 0)])
def test_permute(backend, ctx, axes):
    xv = randn(2, 3, 4)
    x = ctx.tensor(xv.shape, name="x").set_input()
    p = ctx.permute(x, axes)
    assert p.shape == np.transpose(xv, axes).shape
    check(compute(backend, ctx, ctx.cont(p), {x: xv}), np.transpose(xv, axes))


def test_layout_ops(backend, ctx):
    xv = randn(4, 6)
    x = ctx.tensor(xv.shape, name="x").set_input()
    y = ctx.cont(ctx.transpose(ctx.reshape(ctx.view(x, (2, 6), offset=6 * 4), (3, 4))))
    check(compute(backend, ctx, y, {x: xv}), xv[1:3].reshape(3, 4).T)


def test_op_by_name(backend, ctx):
    xv, iv = randn(5, 3), np.array([4, 2], np.int32)
    x = ctx.tensor(xv.shape, name="x").set_input()
    i = ctx.tensor(iv.shape, np.int32, name="ids").set_input()
    # ggml_leaky_relu(ctx, a, float, bool), ggml_scale(ctx, a, float), ggml_get_rows(ctx, a, b)
    y = ctx.op("ggml_get_rows", ctx.op("scale", ctx.op("leaky_relu", x, 0.5, False), 2.0), i, out_name="y")
    assert y.name == "y" and y.shape == (2, 3)
    check(compute(backend, ctx, y, {x: xv, i: iv}), 2 * np.where(xv > 0, xv, 0.5 * xv)[iv])
    # an int64_t argument as a ctypes value: ggml_reshape_2d(ctx, a, int64 ne0, int64 ne1)
    r = ctx.op("reshape_2d", x, ctypes.c_int64(5), ctypes.c_int64(3), ndim=2)
    assert r.shape == (3, 5)


def test_op_by_name_errors(ctx):
    x = ctx.tensor((2, 3), name="x")
    with pytest.raises(g.GgmlError, match="no ggml_no_such_op"):
        ctx.op("no_such_op", x)
    with pytest.raises(ValueError, match="not a ggml function name"):
        ctx.op("relu(x); ", x)
    with pytest.raises(TypeError, match="argument 2 of ggml_scale is a str"):
        ctx.op("scale", x, "2")
    with pytest.raises(ValueError, match="is not one of"):
        ctx.unary("no_such", x)


def test_wrong_arguments_raise(ctx):
    a = ctx.tensor((3, 5), name="a")
    cases = [
        (lambda: ctx.swiglu(a), ValueError, "odd number"),
        (lambda: ctx.swiglu(a, ctx.tensor((3, 4))), ValueError, "differ"),
        (lambda: ctx.glu("swiglu", a, ctx.tensor((3, 5), np.float16)), TypeError, "different types"),
        (lambda: ctx.soft_max(a, mask=ctx.tensor((2, 5))), ValueError, "does not fit"),
        (lambda: ctx.soft_max(a, mask=ctx.tensor((3, 5), np.int32)), TypeError, "mask"),
        (lambda: ctx.soft_max(a, max_bias=1.0), ValueError, "needs a mask"),
        (lambda: ctx.soft_max(ctx.transpose(a)), ValueError, "not contiguous"),
        (lambda: ctx.relu(ctx.transpose(a)), ValueError, "contiguous rows"),
        (lambda: ctx.get_rows(a, ctx.tensor((2,), np.int64)), TypeError, "must be i32"),
        (lambda: ctx.get_rows(a, ctx.tensor((2, 2), np.int32)), ValueError, "does not fit"),
        (lambda: ctx.set_rows(a, ctx.tensor((2, 4)), ctx.tensor((2,), np.int64)), ValueError, "do not fit"),
        (lambda: ctx.set_rows(a, ctx.tensor((2, 5)), ctx.tensor((3,), np.int64)), ValueError, "one index per row"),
        (lambda: ctx.rope(ctx.tensor((4, 2, 8)), ctx.tensor((3,), np.int32), 8), ValueError, "one per token"),
        (lambda: ctx.rope(ctx.tensor((4, 2, 8)), ctx.tensor((4,), np.int32), 10), ValueError, "n_dims"),
        (lambda: ctx.rope(ctx.tensor((4, 2, 8)), ctx.tensor((4,), np.int32), 8, mode="mrope"), ValueError, "mode"),
        (lambda: ctx.concat(a, ctx.tensor((4, 4)), axis=0), ValueError, "differ outside"),
        (lambda: ctx.concat(a, ctx.tensor((3, 5)), axis=2), ValueError, "out of range"),
        (lambda: ctx.permute(a, (0, 0)), ValueError, "not a permutation"),
        (lambda: ctx.clamp(a, 1.0, 0.0), ValueError, "above max"),
    ]
    for make, exc, text in cases:
        with pytest.raises(exc, match=text):
            make()
