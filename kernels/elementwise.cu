// Element-wise ops: ADD/SUB/MUL/DIV with ggml's broadcasting, SCALE, UNARY, GLU, and CPY/CONT/DUP
// (a strided copy with type conversion). One thread per destination element, grid-stride loops,
// so any shape launches with the grid the host computes (launch.rs: elementwise_grid).

#define BIN_ADD 0
#define BIN_SUB 1
#define BIN_MUL 2
#define BIN_DIV 3

// dst = src0 (op) src1, src1 repeated along every dimension where it is smaller (ggml_can_repeat)
extern "C" __global__ void binary_op(const char *a, TD ta, int type_a, const char *b, TD tb, int type_b, char *d, TD td, int type_d, int op) {
    const i64 n = td.ne[0] * td.ne[1] * td.ne[2] * td.ne[3];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ix[4];
        unravel(i, td.ne, ix);
        const float x = load_f(a + offs(ta, ix[0], ix[1], ix[2], ix[3]), type_a);
        const float y = load_f(b + offs(tb, ix[0] % tb.ne[0], ix[1] % tb.ne[1], ix[2] % tb.ne[2], ix[3] % tb.ne[3]), type_b);
        float r;
        switch (op) {
            case BIN_ADD: r = x + y; break;
            case BIN_SUB: r = x - y; break;
            case BIN_MUL: r = x * y; break;
            default: r = x / y; break;
        }
        store_f(d + offs(td, ix[0], ix[1], ix[2], ix[3]), type_d, r);
    }
}

// SCALE: dst = src * s + b
extern "C" __global__ void scale_f32(const char *a, TD ta, char *d, TD td, float s, float b) {
    const i64 n = td.ne[0] * td.ne[1] * td.ne[2] * td.ne[3];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ix[4];
        unravel(i, td.ne, ix);
        const float x = *(const float *)(a + offs(ta, ix[0], ix[1], ix[2], ix[3]));
        *(float *)(d + offs(td, ix[0], ix[1], ix[2], ix[3])) = x * s + b;
    }
}

// ggml_unary_op values (ggml.h)
#define U_ABS 0
#define U_SGN 1
#define U_NEG 2
#define U_STEP 3
#define U_TANH 4
#define U_ELU 5
#define U_RELU 6
#define U_SIGMOID 7
#define U_GELU 8
#define U_GELU_QUICK 9
#define U_SILU 10
#define U_EXP 13
#define U_GELU_ERF 16

// ggml's tanh approximation of GELU (GELU_COEF_A, SQRT_2_OVER_PI)
__device__ __forceinline__ float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
}
__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }
__device__ __forceinline__ float gelu_quick(float x) { return x * (1.0f / (1.0f + expf(-1.702f * x))); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float unary_apply(int op, float x) {
    switch (op) {
        case U_ABS: return fabsf(x);
        case U_SGN: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
        case U_NEG: return -x;
        case U_STEP: return x > 0.0f ? 1.0f : 0.0f;
        case U_TANH: return tanhf(x);
        case U_ELU: return x > 0.0f ? x : expm1f(x);
        case U_RELU: return fmaxf(x, 0.0f);
        case U_SIGMOID: return 1.0f / (1.0f + expf(-x));
        case U_GELU: return gelu_tanh(x);
        case U_GELU_QUICK: return gelu_quick(x);
        case U_SILU: return silu(x);
        case U_EXP: return expf(x);
        default: return gelu_erf(x); // U_GELU_ERF (the host dispatches no other value)
    }
}

extern "C" __global__ void unary_op(const char *a, TD ta, int type_a, char *d, TD td, int type_d, int op) {
    const i64 n = td.ne[0] * td.ne[1] * td.ne[2] * td.ne[3];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ix[4];
        unravel(i, td.ne, ix);
        const float x = load_f(a + offs(ta, ix[0], ix[1], ix[2], ix[3]), type_a);
        store_f(d + offs(td, ix[0], ix[1], ix[2], ix[3]), type_d, unary_apply(op, x));
    }
}

// ggml_glu_op values (ggml.h)
#define G_REGLU 0
#define G_GEGLU 1
#define G_SWIGLU 2
#define G_GEGLU_ERF 4
#define G_GEGLU_QUICK 5

// GLU: dst = act(x) * g. With one source (b == NULL) x and g are the two halves of each row of a
// (swapped: g first); with two, x comes from a and g from b.
extern "C" __global__ void glu_op(const char *a, TD ta, const char *b, TD tb, int type_ab, char *d, TD td, int type_d, int op, int swapped) {
    const i64 n = td.ne[0] * td.ne[1] * td.ne[2] * td.ne[3];
    const i64 nc = td.ne[0];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ix[4];
        unravel(i, td.ne, ix);
        float x, g;
        if (b == 0) {
            const char *row = a + offs(ta, 0, ix[1], ix[2], ix[3]);
            const i64 ox = swapped ? ix[0] + nc : ix[0];
            const i64 og = swapped ? ix[0] : ix[0] + nc;
            x = load_f(row + ox * ta.nb[0], type_ab);
            g = load_f(row + og * ta.nb[0], type_ab);
        } else {
            x = load_f(a + offs(ta, ix[0], ix[1], ix[2], ix[3]), type_ab);
            g = load_f(b + offs(tb, ix[0], ix[1], ix[2], ix[3]), type_ab);
        }
        float r;
        switch (op) {
            case G_REGLU: r = fmaxf(x, 0.0f); break;
            case G_GEGLU: r = gelu_tanh(x); break;
            case G_SWIGLU: r = silu(x); break;
            case G_GEGLU_ERF: r = gelu_erf(x); break;
            default: r = gelu_quick(x); break;
        }
        store_f(d + offs(td, ix[0], ix[1], ix[2], ix[3]), type_d, r * g);
    }
}

// CPY / CONT / DUP between float types: element i of src (in ggml's row-major element order) goes
// to element i of dst, whatever the two shapes (ggml_cpy only asks for equal element counts).
extern "C" __global__ void cpy_f(const char *a, TD ta, int type_a, char *d, TD td, int type_d) {
    const i64 n = td.ne[0] * td.ne[1] * td.ne[2] * td.ne[3];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 is[4], id[4];
        unravel(i, ta.ne, is);
        unravel(i, td.ne, id);
        store_f(d + offs(td, id[0], id[1], id[2], id[3]), type_d, load_f(a + offs(ta, is[0], is[1], is[2], is[3]), type_a));
    }
}

// a float tensor to a contiguous buffer of f16 / bf16 / f32 (the GEMM path's operand conversion)
extern "C" __global__ void to_contiguous(const char *a, TD ta, int type_a, char *d, int type_d) {
    const i64 n = ta.ne[0] * ta.ne[1] * ta.ne[2] * ta.ne[3];
    const int sz = type_d == T_F32 ? 4 : 2;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ix[4];
        unravel(i, ta.ne, ix);
        store_f(d + i * sz, type_d, load_f(a + offs(ta, ix[0], ix[1], ix[2], ix[3]), type_a));
    }
}

// rows of a Q8_0 / Q4_0 matrix to contiguous f16 (the prompt path: cuBLAS multiplies f16)
extern "C" __global__ void dequant_to_f16(const char *a, TD ta, int type_a, u16 *d) {
    const i64 n = ta.ne[0] * ta.ne[1] * ta.ne[2] * ta.ne[3];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 ix[4];
        unravel(i, ta.ne, ix);
        d[i] = f2h(row_at(a + offs(ta, 0, ix[1], ix[2], ix[3]), type_a, ix[0]));
    }
}
