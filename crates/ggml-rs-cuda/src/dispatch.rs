//! Op dispatch: which kernel (or cuBLAS call) computes a node, decided from the node's
//! description alone (op, types, shapes, strides, op_params). `supports_op` is `plan(..).is_ok()`
//! and `graph_compute` runs the same plan, so the backend never claims an op it then cannot run.
//! Pure Rust, no CUDA: the unit tests check it on described nodes.

use ggml_abi::sys::{GGML_MAX_DIMS, ggml_tensor, op};
use ggml_abi::tensor::TensorRef;

pub const T_F32: i32 = 0;
pub const T_F16: i32 = 1;
pub const T_Q4_0: i32 = 2;
pub const T_Q8_0: i32 = 8;
pub const T_I32: i32 = 26;
pub const T_I64: i32 = 27;
pub const T_BF16: i32 = 30;

/// ggml's GGML_ROPE_TYPE_NEOX
pub const ROPE_NEOX: i32 = 2;

/// columns of src1 up to which MUL_MAT runs the mat-vec kernel (weights streamed once per
/// column); above, cuBLAS GEMM
pub const MMV_MAX_COLS: i64 = 8;
/// the largest head size the flash-attention kernel holds in registers (kernels/flash_attn.cu)
pub const FA_MAX_D: i64 = 256;

/// One tensor as the planner sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TDesc {
    pub ty: i32,
    pub ne: [i64; GGML_MAX_DIMS],
    pub nb: [usize; GGML_MAX_DIMS],
}

impl TDesc {
    /// a contiguous tensor of `ty` and `ne`
    pub fn contiguous(ty: i32, ne: [i64; 4]) -> TDesc {
        let (blck, size) = (block_elems(ty), type_size(ty));
        let mut nb = [0usize; 4];
        nb[0] = size;
        nb[1] = size * (ne[0] / blck) as usize;
        nb[2] = nb[1] * ne[1] as usize;
        nb[3] = nb[2] * ne[2] as usize;
        TDesc { ty, ne, nb }
    }

    pub fn nelements(&self) -> i64 {
        self.ne.iter().product()
    }

    /// elements of a row sit next to each other (nb[0] is the element / block size)
    pub fn rows_packed(&self) -> bool {
        self.nb[0] == type_size(self.ty)
    }

    fn from_tensor(t: TensorRef) -> TDesc {
        TDesc { ty: t.type_(), ne: t.ne(), nb: t.nb() }
    }
}

/// A node as the planner sees it: op, op_params, its own description and its sources'.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeDesc {
    pub op: i32,
    pub params: [i32; 16],
    pub dst: TDesc,
    pub src: [Option<TDesc>; 5],
}

impl NodeDesc {
    pub fn from_tensor(t: TensorRef) -> NodeDesc {
        // SAFETY: a TensorRef points to a live tensor; op_params is a plain array, copied out.
        let params = unsafe { (*(t.as_ptr() as *const ggml_tensor)).op_params };
        let mut src = [None; 5];
        for (i, s) in src.iter_mut().enumerate() {
            *s = t.src(i).map(TDesc::from_tensor);
        }
        NodeDesc { op: t.op(), params, dst: TDesc::from_tensor(t), src }
    }

    fn f(&self, i: usize) -> f32 {
        f32::from_bits(self.params[i] as u32)
    }
}

/// bytes of one element (float types) or one block (quantized), as ggml_type_size
pub fn type_size(ty: i32) -> usize {
    match ty {
        T_F32 | T_I32 => 4,
        T_F16 | T_BF16 => 2,
        T_I64 => 8,
        T_Q8_0 => 34,
        T_Q4_0 => 18,
        _ => 0,
    }
}

/// elements per block, as ggml_blck_size
pub fn block_elems(ty: i32) -> i64 {
    if is_quant(ty) { 32 } else { 1 }
}

pub fn is_float(ty: i32) -> bool {
    matches!(ty, T_F32 | T_F16 | T_BF16)
}

pub fn is_quant(ty: i32) -> bool {
    matches!(ty, T_Q8_0 | T_Q4_0)
}

/// How a node is computed.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// views, reshapes, permutes: nothing to run
    Nop,
    Binary {
        op: i32,
    },
    Scale {
        s: f32,
        b: f32,
    },
    Unary {
        op: i32,
    },
    Glu {
        op: i32,
        swapped: bool,
    },
    Cpy,
    GetRows,
    SetRows {
        quant: bool,
    },
    RmsNorm {
        eps: f32,
    },
    Norm {
        eps: f32,
    },
    Rope {
        n_dims: i32,
        /// the first rotated element of a row (op_params[15], ggml_rope_set_offset); the
        /// elements before it and past n_offs + n_dims are copied
        n_offs: i32,
        neox: bool,
        theta_scale: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        corr: [f32; 2],
    },
    SoftMax {
        scale: f32,
        max_bias: f32,
    },
    /// mat-vec kernel (few columns)
    MulMatVec,
    /// cuBLAS GemmEx on `gemm_ty` operands (src0 dequantized to f16 first when quantized; src1
    /// converted to `gemm_ty`)
    MulMatGemm {
        gemm_ty: i32,
        dequant: bool,
    },
    FlashAttn {
        scale: f32,
        max_bias: f32,
        softcap: f32,
        /// warps per query row, each over its own range of the KV ([`fa_splits`]); above 1, a
        /// second kernel combines them from the partial results past dst ([`fa_partial`])
        n_split: i32,
    },
}

/// bytes a tensor spans, as ggml_nbytes
pub fn nbytes(t: &TDesc) -> usize {
    if t.ne.iter().any(|&n| n <= 0) {
        return 0;
    }
    let blck = block_elems(t.ty);
    let first = if blck == 1 { type_size(t.ty) } else { (t.ne[0] / blck) as usize * t.nb[0] };
    let rest: usize = (if blck == 1 { 0 } else { 1 }..4).map(|i| (t.ne[i] - 1) as usize * t.nb[i]).sum();
    first + rest
}

/// alignment of the GEMM scratch inside the destination's allocation (the device buffers'
/// tensor alignment)
pub const SCRATCH_ALIGN: usize = crate::backend::ALIGNMENT;

/// Where the cuBLAS path of MUL_MAT keeps its converted operands: past the destination's bytes,
/// inside the destination's own allocation, which the device buffer type's get_alloc_size makes
/// `end` bytes long (upstream's TAG_ALLOC_SIZE_EXPAND, as its flash attention does for its f16
/// K/V), so the scratch is in ggml's buffer sizes and lives exactly as long as the node needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmScratch {
    /// src0 dequantized to f16 (`a_bytes` 0 when src0 is used as it is)
    pub a_off: usize,
    pub a_bytes: usize,
    /// src1 converted to the GEMM type, contiguous
    pub b_off: usize,
    pub b_bytes: usize,
    /// the allocation's size
    pub end: usize,
}

pub fn gemm_scratch(n: &NodeDesc, gemm_ty: i32, dequant: bool) -> GemmScratch {
    let up = |v: usize| v.div_ceil(SCRATCH_ALIGN) * SCRATCH_ALIGN;
    let (a, b) = (n.src[0].map(|t| t.nelements().max(0) as usize), n.src[1].map(|t| t.nelements().max(0) as usize));
    let a_off = up(nbytes(&n.dst));
    let a_bytes = if dequant { a.unwrap_or(0) * 2 } else { 0 };
    let b_off = up(a_off + a_bytes);
    let b_bytes = b.unwrap_or(0) * type_size(gemm_ty);
    GemmScratch { a_off, a_bytes, b_off, b_bytes, end: b_off + b_bytes }
}

/// Flash attention's split of the KV: the query rows (rows x heads x sequences) are one warp
/// each; when they are too few to fill the GPU (token generation) and the KV is long, each row
/// gets up to FA_MAX_SPLIT warps of at least FA_SPLIT_MIN_KV KV rows each, so about
/// FA_TARGET_WARPS warps read the KV at once (an H200 holds 132 SMs x 32 one-warp blocks).
pub fn fa_splits(rows: i64, n_kv: i64) -> i32 {
    if rows <= 0 || rows >= FA_TARGET_WARPS {
        return 1;
    }
    (FA_TARGET_WARPS / rows).min(n_kv / FA_SPLIT_MIN_KV).clamp(1, FA_MAX_SPLIT) as i32
}

pub const FA_TARGET_WARPS: i64 = 4096;
pub const FA_SPLIT_MIN_KV: i64 = 128;
pub const FA_MAX_SPLIT: i64 = 64;

/// (offset past dst, bytes) of the split flash attention's partial results in dst's allocation:
/// per query row, head, sequence and split, Dv accumulator floats, M and S (kernels/flash_attn.cu)
pub fn fa_partial(n: &NodeDesc, n_split: i32) -> (usize, usize) {
    let up = |v: usize| v.div_ceil(SCRATCH_ALIGN) * SCRATCH_ALIGN;
    let (q, dv) = (n.src[0].map(|t| t.ne).unwrap_or([0; 4]), n.src[2].map(|t| t.ne[0]).unwrap_or(0));
    let records = (q[1] * q[2] * q[3]).max(0) as usize * n_split.max(0) as usize;
    (up(nbytes(&n.dst)), records * (dv.max(0) as usize + 2) * 4)
}

/// The device buffer type's get_alloc_size: ggml_nbytes, and past it the scratch a plan uses: a
/// MUL_MAT on cuBLAS its converted operands ([`gemm_scratch`]), a split flash attention its
/// partial results ([`fa_partial`]).
pub fn alloc_size(n: &NodeDesc) -> usize {
    match plan(n) {
        Ok(Plan::MulMatGemm { gemm_ty, dequant }) => gemm_scratch(n, gemm_ty, dequant).end,
        Ok(Plan::FlashAttn { n_split, .. }) if n_split > 1 => {
            let (off, bytes) = fa_partial(n, n_split);
            off + bytes
        }
        _ => nbytes(&n.dst),
    }
}

fn need(cond: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(why()) }
}

fn src(n: &NodeDesc, i: usize) -> Result<TDesc, String> {
    n.src[i].ok_or_else(|| format!("source {i} missing"))
}

/// ggml_can_repeat(b, a): every dimension of a is a multiple of b's
fn can_repeat(b: &TDesc, a: &TDesc) -> bool {
    (0..4).all(|i| b.ne[i] > 0 && a.ne[i] % b.ne[i] == 0)
}

/// ggml's ggml_rope_yarn_corr_dims
pub fn rope_yarn_corr_dims(n_dims: i32, n_ctx_orig: i32, freq_base: f32, beta_fast: f32, beta_slow: f32) -> [f32; 2] {
    let corr_dim = |n_rot: f32| n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * freq_base.ln());
    let start = corr_dim(beta_fast).floor();
    let end = corr_dim(beta_slow).ceil();
    [start.max(0.0), end.min(n_dims as f32 - 1.0)]
}

/// The plan for `n`, or why this backend does not compute it (including a launch grid past
/// CUDA's limits: `launch::for_plan` is asked here, before `supports_op` answers).
pub fn plan(n: &NodeDesc) -> Result<Plan, String> {
    let p = plan_op(n)?;
    crate::launch::for_plan(&p, n)?;
    Ok(p)
}

fn plan_op(n: &NodeDesc) -> Result<Plan, String> {
    let d = n.dst;
    match n.op {
        op::NONE | op::RESHAPE | op::VIEW | op::PERMUTE | op::TRANSPOSE => Ok(Plan::Nop),
        op::ADD | op::SUB | op::MUL | op::DIV => {
            let (a, b) = (src(n, 0)?, src(n, 1)?);
            need(is_float(a.ty) && is_float(b.ty) && is_float(d.ty), || "types other than F32/F16/BF16".into())?;
            need(a.ne == d.ne, || "dst shape differs from src0".into())?;
            need(can_repeat(&b, &a), || "src1 does not repeat into src0".into())?;
            Ok(Plan::Binary { op: n.op })
        }
        op::SCALE => {
            let a = src(n, 0)?;
            need(a.ty == T_F32 && d.ty == T_F32 && a.ne == d.ne, || "SCALE of non-F32".into())?;
            Ok(Plan::Scale { s: n.f(0), b: n.f(1) })
        }
        op::UNARY => {
            let a = src(n, 0)?;
            let u = n.params[0];
            need(matches!(u, 0..=10 | 13 | 16), || format!("unary op {u}"))?;
            need(is_float(a.ty) && is_float(d.ty) && a.ne == d.ne, || "UNARY types/shape".into())?;
            Ok(Plan::Unary { op: u })
        }
        op::GLU => {
            let a = src(n, 0)?;
            let g = n.params[0];
            need(matches!(g, 0 | 1 | 2 | 4 | 5), || format!("glu op {g}"))?;
            need(is_float(a.ty) && is_float(d.ty), || "GLU types".into())?;
            match n.src[1] {
                Some(b) => need(b.ty == a.ty && b.ne == d.ne && a.ne == d.ne, || "GLU split halves differ".into())?,
                None => need(a.ne[0] == 2 * d.ne[0] && a.ne[1..] == d.ne[1..], || "GLU: src0 is not two halves of dst".into())?,
            }
            Ok(Plan::Glu { op: g, swapped: n.params[1] != 0 })
        }
        op::CPY | op::CONT | op::DUP => {
            let a = src(n, 0)?;
            need(is_float(a.ty) && is_float(d.ty), || "CPY other than between F32/F16/BF16".into())?;
            need(a.nelements() == d.nelements(), || "CPY element counts differ".into())?;
            Ok(Plan::Cpy)
        }
        op::GET_ROWS => {
            let (a, i) = (src(n, 0)?, src(n, 1)?);
            need(is_float(a.ty) || is_quant(a.ty), || "GET_ROWS of this type".into())?;
            need(i.ty == T_I32, || "GET_ROWS index type".into())?;
            need(is_float(d.ty), || "GET_ROWS dst type".into())?;
            need(a.rows_packed(), || "GET_ROWS src rows not packed".into())?;
            Ok(Plan::GetRows)
        }
        op::SET_ROWS => {
            let (a, i) = (src(n, 0)?, src(n, 1)?);
            need(a.ty == T_F32, || "SET_ROWS source type".into())?;
            need(i.ty == T_I64 || i.ty == T_I32, || "SET_ROWS index type".into())?;
            need(i.ne[0] == a.ne[1] && i.ne[1] > 0 && i.ne[2] > 0 && a.ne[2] % i.ne[1] == 0 && a.ne[3] % i.ne[2] == 0, || "SET_ROWS index shape".into())?;
            if d.ty == T_Q8_0 {
                need(a.ne[0] % 32 == 0 && a.nb[0] == 4, || "SET_ROWS Q8_0 row".into())?;
                return Ok(Plan::SetRows { quant: true });
            }
            need(is_float(d.ty), || "SET_ROWS dst type".into())?;
            Ok(Plan::SetRows { quant: false })
        }
        op::RMS_NORM | op::NORM => {
            let a = src(n, 0)?;
            need(a.ty == T_F32 && d.ty == T_F32 && a.ne == d.ne, || "NORM of non-F32".into())?;
            let eps = n.f(0);
            Ok(if n.op == op::RMS_NORM { Plan::RmsNorm { eps } } else { Plan::Norm { eps } })
        }
        op::ROPE => {
            let (a, p) = (src(n, 0)?, src(n, 1)?);
            let (n_dims, mode, n_ctx_orig) = (n.params[1], n.params[2], n.params[4]);
            need(mode == 0 || mode == ROPE_NEOX, || format!("ROPE mode {mode}"))?;
            need((a.ty == T_F32 || a.ty == T_F16) && d.ty == a.ty && a.ne == d.ne, || "ROPE types".into())?;
            need(p.ty == T_I32 && p.ne[0] == a.ne[2], || "ROPE positions".into())?;
            // the kernel indexes positions and frequency factors as packed arrays
            need(p.nb[0] == 4, || "ROPE positions not packed".into())?;
            need(n_dims > 0 && n_dims % 2 == 0 && n_dims as i64 <= a.ne[0] && a.ne[0] % 2 == 0, || format!("ROPE n_dims {n_dims}"))?;
            // ggml_rope_set_offset: rotate [n_offs, n_offs + n_dims) of each row (0 unless set)
            let n_offs = n.params[15];
            need(n_offs >= 0 && n_offs % 2 == 0 && n_offs as i64 + n_dims as i64 <= a.ne[0], || format!("ROPE n_offs {n_offs} with n_dims {n_dims}"))?;
            if let Some(ff) = n.src[2] {
                need(ff.ty == T_F32 && ff.ne[0] >= n_dims as i64 / 2 && ff.nb[0] == 4, || "ROPE freq factors".into())?;
            }
            let (freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow) = (n.f(5), n.f(6), n.f(7), n.f(8), n.f(9), n.f(10));
            Ok(Plan::Rope {
                n_dims,
                n_offs,
                neox: mode == ROPE_NEOX,
                theta_scale: freq_base.powf(-2.0 / n_dims as f32),
                freq_scale,
                ext_factor,
                attn_factor,
                corr: rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow),
            })
        }
        op::SOFT_MAX => {
            let a = src(n, 0)?;
            need(a.ty == T_F32 && d.ty == T_F32 && a.ne == d.ne, || "SOFT_MAX of non-F32".into())?;
            if let Some(m) = n.src[1] {
                need(m.ty == T_F32 || m.ty == T_F16, || "SOFT_MAX mask type".into())?;
                need(m.ne[0] == a.ne[0] && m.ne[1] >= a.ne[1] && a.ne[2] % m.ne[2] == 0 && a.ne[3] % m.ne[3] == 0, || "SOFT_MAX mask shape".into())?;
            }
            if let Some(s) = n.src[2] {
                need(s.ty == T_F32 && s.ne[0] >= a.ne[2], || "SOFT_MAX sinks".into())?;
            }
            Ok(Plan::SoftMax { scale: n.f(0), max_bias: n.f(1) })
        }
        op::MUL_MAT => {
            let (a, b) = (src(n, 0)?, src(n, 1)?);
            need(is_float(a.ty) || is_quant(a.ty), || "MUL_MAT weight type".into())?;
            need(is_float(b.ty) && d.ty == T_F32, || "MUL_MAT src1/dst types".into())?;
            need(a.rows_packed() && a.nb[1] >= a.nb[0], || "MUL_MAT src0 rows not packed".into())?;
            need(a.ne[0] == b.ne[0] && d.ne == [a.ne[1], b.ne[1], b.ne[2], b.ne[3]], || "MUL_MAT shapes".into())?;
            need(b.ne[2] % a.ne[2] == 0 && b.ne[3] % a.ne[3] == 0, || "MUL_MAT broadcast".into())?;
            need(d.nb[0] == 4, || "MUL_MAT dst not packed".into())?;
            // the mat-vec kernel reads quantized blocks as 16-bit words: their strides must be even
            // (whole 34- / 18-byte blocks always are; an odd view is left to the GEMM path)
            let halfword_aligned = !is_quant(a.ty) || a.nb.iter().all(|nb| nb % 2 == 0);
            // the mat-vec grid's z is src1's planes (at most 65535); cuBLAS loops over planes
            let planes_fit = (b.ne[2] * b.ne[3]) as u64 <= crate::launch::GRID_YZ_MAX;
            if b.ne[1] <= MMV_MAX_COLS && b.ty == T_F32 && b.rows_packed() && halfword_aligned && planes_fit {
                return Ok(Plan::MulMatVec);
            }
            let float_rows_ok = is_quant(a.ty) || a.nb[1] % type_size(a.ty) == 0;
            need(float_rows_ok, || "MUL_MAT src0 row stride".into())?;
            need(d.nb[1] == 4 * d.ne[0] as usize, || "MUL_MAT dst rows not packed".into())?;
            // cuBLAS takes m, n, k and the leading dimensions as int
            let fits = |v: i64| v <= i32::MAX as i64;
            need(fits(a.ne[0]) && fits(a.ne[1]) && fits(b.ne[1]) && fits(a.nb[1] as i64 / type_size(a.ty) as i64) && fits(d.ne[0]), || {
                "MUL_MAT dimensions past cuBLAS's int".into()
            })?;
            let gemm_ty = if a.ty == T_F32 || a.ty == T_BF16 { a.ty } else { T_F16 };
            Ok(Plan::MulMatGemm { gemm_ty, dequant: is_quant(a.ty) })
        }
        op::FLASH_ATTN_EXT => {
            let (q, k, v) = (src(n, 0)?, src(n, 1)?, src(n, 2)?);
            need(q.ty == T_F32 && d.ty == T_F32, || "FLASH_ATTN_EXT q/dst type".into())?;
            need((is_float(k.ty) || is_quant(k.ty)) && (is_float(v.ty) || is_quant(v.ty)), || "FLASH_ATTN_EXT k/v types".into())?;
            need(k.rows_packed() && v.rows_packed(), || "FLASH_ATTN_EXT k/v rows".into())?;
            need(q.ne[0] == k.ne[0] && q.ne[0] <= FA_MAX_D && v.ne[0] <= FA_MAX_D, || format!("FLASH_ATTN_EXT head size {} / {}", q.ne[0], v.ne[0]))?;
            need(k.ne[1] == v.ne[1] && q.ne[2] % k.ne[2] == 0 && q.ne[2] % v.ne[2] == 0 && q.ne[3] % k.ne[3] == 0, || "FLASH_ATTN_EXT shapes".into())?;
            if let Some(m) = n.src[3] {
                need(m.ty == T_F16 && m.ne[0] >= k.ne[1] && m.ne[1] >= q.ne[1], || "FLASH_ATTN_EXT mask".into())?;
            }
            if let Some(s) = n.src[4] {
                need(s.ty == T_F32, || "FLASH_ATTN_EXT sinks".into())?;
            }
            need(n.params[3] == 0 || n.params[3] == 10, || "FLASH_ATTN_EXT precision".into())?;
            let n_split = fa_splits(q.ne[1] * q.ne[2] * q.ne[3], k.ne[1]);
            Ok(Plan::FlashAttn { scale: n.f(0), max_bias: n.f(1), softcap: n.f(2), n_split })
        }
        other => Err(format!("op {other} has no CUDA kernel here")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn node(op: i32, dst: TDesc, srcs: &[TDesc]) -> NodeDesc {
        let mut src = [None; 5];
        for (i, s) in srcs.iter().enumerate() {
            src[i] = Some(*s);
        }
        NodeDesc { op, params: [0; 16], dst, src }
    }

    fn c(ty: i32, ne: [i64; 4]) -> TDesc {
        TDesc::contiguous(ty, ne)
    }

    #[test]
    fn mul_mat_takes_the_mat_vec_kernel_for_few_columns_and_cublas_above() {
        let w = c(T_Q8_0, [4096, 4096, 1, 1]);
        let tg = node(op::MUL_MAT, c(T_F32, [4096, 1, 1, 1]), &[w, c(T_F32, [4096, 1, 1, 1])]);
        assert_eq!(plan(&tg), Ok(Plan::MulMatVec));
        let pp = node(op::MUL_MAT, c(T_F32, [4096, 512, 1, 1]), &[w, c(T_F32, [4096, 512, 1, 1])]);
        assert_eq!(plan(&pp), Ok(Plan::MulMatGemm { gemm_ty: T_F16, dequant: true }));
        let f32w = node(op::MUL_MAT, c(T_F32, [64, 512, 1, 1]), &[c(T_F32, [128, 64, 1, 1]), c(T_F32, [128, 512, 1, 1])]);
        assert_eq!(plan(&f32w), Ok(Plan::MulMatGemm { gemm_ty: T_F32, dequant: false }));
        let bf = node(op::MUL_MAT, c(T_F32, [64, 512, 1, 1]), &[c(T_BF16, [128, 64, 1, 1]), c(T_F32, [128, 512, 1, 1])]);
        assert_eq!(plan(&bf), Ok(Plan::MulMatGemm { gemm_ty: T_BF16, dequant: false }));
        // the boundary column count is the mat-vec's, one more is the GEMM's
        // a quantized view with an odd stride goes to the GEMM path (dequantized first)
        let mut odd = c(T_Q8_0, [64, 3, 1, 1]);
        odd.nb[1] = 69;
        let n_odd = node(op::MUL_MAT, c(T_F32, [3, 1, 1, 1]), &[odd, c(T_F32, [64, 1, 1, 1])]);
        assert_eq!(plan(&n_odd), Ok(Plan::MulMatGemm { gemm_ty: T_F16, dequant: true }));
        let at = |cols| node(op::MUL_MAT, c(T_F32, [64, cols, 1, 1]), &[c(T_F16, [128, 64, 1, 1]), c(T_F32, [128, cols, 1, 1])]);
        assert_eq!(plan(&at(MMV_MAX_COLS)), Ok(Plan::MulMatVec));
        assert!(matches!(plan(&at(MMV_MAX_COLS + 1)), Ok(Plan::MulMatGemm { .. })));
    }

    #[test]
    fn unsupported_nodes_are_refused_with_a_reason() {
        // a K-quant weight: no kernel yet
        let q4k = node(op::MUL_MAT, c(T_F32, [256, 1, 1, 1]), &[c(12, [256, 256, 1, 1]), c(T_F32, [256, 1, 1, 1])]);
        assert!(plan(&q4k).unwrap_err().contains("weight type"));
        // shapes that do not broadcast
        let bad = node(op::MUL_MAT, c(T_F32, [64, 4, 3, 1]), &[c(T_F32, [128, 64, 2, 1]), c(T_F32, [128, 4, 3, 1])]);
        assert!(plan(&bad).is_err());
        let add = node(op::ADD, c(T_F32, [8, 4, 1, 1]), &[c(T_F32, [8, 4, 1, 1]), c(T_F32, [3, 1, 1, 1])]);
        assert!(plan(&add).unwrap_err().contains("repeat"));
        // GLU_SWIGLU_OAI (3) and SWIGLU_CLAMP (6) have parameters this kernel does not take
        let mut glu = node(op::GLU, c(T_F32, [8, 2, 1, 1]), &[c(T_F32, [16, 2, 1, 1])]);
        glu.params[0] = 3;
        assert!(plan(&glu).is_err());
        glu.params[0] = 2;
        assert_eq!(plan(&glu), Ok(Plan::Glu { op: 2, swapped: false }));
        // ROPE multi-section (8) is not here
        let mut rope = node(op::ROPE, c(T_F32, [64, 4, 3, 1]), &[c(T_F32, [64, 4, 3, 1]), c(T_I32, [3, 1, 1, 1])]);
        rope.params[1] = 64;
        rope.params[2] = 8;
        assert!(plan(&rope).unwrap_err().contains("mode"));
        rope.params[2] = ROPE_NEOX;
        rope.params[5] = 10000f32.to_bits() as i32;
        rope.params[6] = 1f32.to_bits() as i32;
        assert!(matches!(plan(&rope), Ok(Plan::Rope { neox: true, n_dims: 64, .. })));
        // head size above the kernel's registers
        let q = c(T_F32, [512, 1, 8, 1]);
        let fa = node(op::FLASH_ATTN_EXT, c(T_F32, [512, 8, 1, 1]), &[q, c(T_F16, [512, 256, 8, 1]), c(T_F16, [512, 256, 8, 1])]);
        assert!(plan(&fa).unwrap_err().contains("head size"));
        let other = node(op::ARGSORT, c(T_I32, [8, 1, 1, 1]), &[c(T_F32, [8, 1, 1, 1])]);
        assert!(plan(&other).is_err());
    }

    #[test]
    fn params_are_read_as_ggml_lays_them_out() {
        let mut sm = node(op::SOFT_MAX, c(T_F32, [32, 4, 2, 1]), &[c(T_F32, [32, 4, 2, 1]), c(T_F16, [32, 8, 1, 1])]);
        sm.params[0] = 0.125f32.to_bits() as i32;
        sm.params[1] = 8f32.to_bits() as i32;
        assert_eq!(plan(&sm), Ok(Plan::SoftMax { scale: 0.125, max_bias: 8.0 }));
        let mut sc = node(op::SCALE, c(T_F32, [4, 1, 1, 1]), &[c(T_F32, [4, 1, 1, 1])]);
        sc.params[0] = 2f32.to_bits() as i32;
        sc.params[1] = (-1f32).to_bits() as i32;
        assert_eq!(plan(&sc), Ok(Plan::Scale { s: 2.0, b: -1.0 }));
    }

    #[test]
    fn launch_grids_past_cudas_limits_are_refused_by_the_plan() {
        // flash attention: heads are grid.y (at most 65535)
        let fa = |heads: i64| {
            let q = c(T_F32, [64, 1, heads, 1]);
            let kv = c(T_F16, [64, 256, heads, 1]);
            node(op::FLASH_ATTN_EXT, c(T_F32, [64, heads, 1, 1]), &[q, kv, kv])
        };
        assert!(matches!(plan(&fa(65535)), Ok(Plan::FlashAttn { .. })));
        assert!(plan(&fa(65536)).unwrap_err().contains("exceeds"));
        // one block per row: rows are grid.x (at most 2^31 - 1)
        let rows = |n1: i64| {
            let x = c(T_F32, [8, n1, 65536, 1]);
            node(op::SOFT_MAX, x, &[x])
        };
        assert!(matches!(plan(&rows(32767)), Ok(Plan::SoftMax { .. })));
        assert!(plan(&rows(32768)).unwrap_err().contains("rows"));
        let mut norm = rows(32768);
        norm.op = op::RMS_NORM;
        assert!(plan(&norm).is_err());
        let gr = |n: i64| node(op::GET_ROWS, c(T_F32, [8, n, 1, 1]), &[c(T_F32, [8, 4, 1, 1]), c(T_I32, [n, 1, 1, 1])]);
        assert!(matches!(plan(&gr(1 << 20)), Ok(Plan::GetRows)));
        assert!(plan(&gr(1 << 31)).is_err());
        // the mat-vec's planes are grid.z: past 65535 the node goes to cuBLAS, which loops over them
        let mm = |planes: i64| node(op::MUL_MAT, c(T_F32, [16, 1, planes, 1]), &[c(T_F16, [32, 16, 1, 1]), c(T_F32, [32, 1, planes, 1])]);
        assert_eq!(plan(&mm(65535)), Ok(Plan::MulMatVec));
        assert!(matches!(plan(&mm(65536)), Ok(Plan::MulMatGemm { .. })));
        // and what the plan accepts, the launch shape takes
        for n in [fa(7), rows(3), gr(5), mm(9)] {
            let p = plan(&n).unwrap();
            let s = crate::launch::for_plan(&p, &n).unwrap();
            assert!(s.grid.1 as u64 <= crate::launch::GRID_YZ_MAX && s.grid.2 as u64 <= crate::launch::GRID_YZ_MAX);
        }
    }

    /// a ROPE node as ggml_rope_ext builds it: [64, 4 heads, 3 tokens], positions, optional
    /// frequency factors
    pub(crate) fn rope_node(mode: i32, n_dims: i32, ff: Option<TDesc>) -> NodeDesc {
        let x = c(T_F32, [64, 4, 3, 1]);
        let mut srcs = vec![x, c(T_I32, [3, 1, 1, 1])];
        srcs.extend(ff);
        let mut n = node(op::ROPE, x, &srcs);
        n.params[1] = n_dims;
        n.params[2] = mode;
        n.params[4] = 4096;
        n.params[5] = 10000f32.to_bits() as i32;
        n.params[6] = 1f32.to_bits() as i32;
        n.params[8] = 1f32.to_bits() as i32;
        n.params[9] = 32f32.to_bits() as i32;
        n.params[10] = 1f32.to_bits() as i32;
        n
    }

    #[test]
    fn rope_offsets_and_frequency_factors_are_taken_or_refused() {
        // op_params[15] (ggml_rope_set_offset) reaches the plan
        let mut r = rope_node(ROPE_NEOX, 32, Some(c(T_F32, [16, 1, 1, 1])));
        r.params[15] = 16;
        assert!(matches!(plan(&r), Ok(Plan::Rope { n_offs: 16, n_dims: 32, neox: true, .. })), "{:?}", plan(&r));
        r.params[15] = 32; // 32 + 32 = the whole row: still inside
        assert!(matches!(plan(&r), Ok(Plan::Rope { n_offs: 32, .. })));
        // past the row, odd, negative: refused (the CPU asserts on them)
        for bad in [34, 3, -2] {
            r.params[15] = bad;
            assert!(plan(&r).unwrap_err().contains("n_offs"), "n_offs {bad}");
        }
        r.params[15] = 0;
        assert!(matches!(plan(&r), Ok(Plan::Rope { n_offs: 0, .. })));
        // frequency factors: F32, at least n_dims/2 of them, packed
        let short = rope_node(0, 32, Some(c(T_F32, [15, 1, 1, 1])));
        assert!(plan(&short).unwrap_err().contains("freq factors"));
        let f16 = rope_node(0, 32, Some(c(T_F16, [16, 1, 1, 1])));
        assert!(plan(&f16).unwrap_err().contains("freq factors"));
        let mut strided = c(T_F32, [16, 1, 1, 1]);
        strided.nb[0] = 8;
        assert!(plan(&rope_node(0, 32, Some(strided))).unwrap_err().contains("freq factors"));
        // strided positions: refused
        let mut p = rope_node(0, 32, None);
        p.src[1].as_mut().unwrap().nb[0] = 8;
        assert!(plan(&p).unwrap_err().contains("positions"));
        // the multi-section modes (MROPE 8, VISION 24, IMROPE 40) are not here
        for mode in [8, 24, 40] {
            assert!(plan(&rope_node(mode, 32, None)).unwrap_err().contains("mode"));
        }
    }

    #[test]
    fn yarn_corr_dims_match_ggml_for_a_llama_setting() {
        // n_dims 128, n_ctx_orig 4096, base 10000, beta 32 / 1: ggml's formula by hand
        let dims = rope_yarn_corr_dims(128, 4096, 10000.0, 32.0, 1.0);
        let cd = |b: f32| 128.0 * (4096.0 / (b * 2.0 * std::f32::consts::PI)).ln() / (2.0 * 10000f32.ln());
        assert_eq!(dims, [cd(32.0).floor().max(0.0), cd(1.0).ceil().min(127.0)]);
        assert!(dims[0] < dims[1] && dims[1] <= 127.0);
    }

    /// `enum ggml_op` of a ggml.h: the enumerators in order (GGML_OP_NONE = 0, then one more each)
    fn header_ops(text: &str) -> Vec<String> {
        let body = &text[text.find("enum ggml_op {").expect("enum ggml_op in ggml.h")..];
        let body = &body[..body.find("};").unwrap()];
        body.lines()
            .map(|l| l.split("//").next().unwrap().trim())
            .filter_map(|l| l.strip_prefix("GGML_OP_"))
            .map(|l| l.split([',', ' ', '=']).next().unwrap().to_string())
            .collect()
    }

    /// Every op id the planner matches is the value `enum ggml_op` of the profile ggml-abi was
    /// built for gives it: 0.25.3's header from GGML_RS_UPSTREAM_TREE (the llama.cpp folder),
    /// 0.9.8's from GGML_RS_UPSTREAM_GGML_0_9_8 (its ggml folder; the crate builds at the
    /// default pin only today). Without the tree it says why and passes, unless
    /// GGML_RS_UPSTREAM_REQUIRED=1 (step 15 of scripts/test.sh).
    #[test]
    fn op_ids_are_those_of_the_profiles_header() {
        let (var, sub) = if op::COUNT == 96 { ("GGML_RS_UPSTREAM_GGML_0_9_8", "include/ggml.h") } else { ("GGML_RS_UPSTREAM_TREE", "ggml/include/ggml.h") };
        let text = match std::env::var_os(var).map(|d| std::path::PathBuf::from(d).join(sub)) {
            Some(path) => std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            None => {
                assert!(std::env::var("GGML_RS_UPSTREAM_REQUIRED").as_deref() != Ok("1"), "{var} is not set (GGML_RS_UPSTREAM_REQUIRED=1)");
                eprintln!("SKIP op_ids_are_those_of_the_profiles_header: {var} is not set");
                return;
            }
        };
        let ops = header_ops(&text);
        assert_eq!(ops.last().map(String::as_str), Some("COUNT"));
        assert_eq!(ops.len() as i32 - 1, op::COUNT, "GGML_OP_COUNT");
        #[rustfmt::skip]
        let claimed = [
            (op::NONE, "NONE"), (op::DUP, "DUP"), (op::ADD, "ADD"), (op::SUB, "SUB"), (op::MUL, "MUL"), (op::DIV, "DIV"),
            (op::NORM, "NORM"), (op::RMS_NORM, "RMS_NORM"), (op::MUL_MAT, "MUL_MAT"), (op::SCALE, "SCALE"), (op::CPY, "CPY"),
            (op::CONT, "CONT"), (op::RESHAPE, "RESHAPE"), (op::VIEW, "VIEW"), (op::PERMUTE, "PERMUTE"), (op::TRANSPOSE, "TRANSPOSE"),
            (op::GET_ROWS, "GET_ROWS"), (op::SET_ROWS, "SET_ROWS"), (op::SOFT_MAX, "SOFT_MAX"), (op::ROPE, "ROPE"),
            (op::FLASH_ATTN_EXT, "FLASH_ATTN_EXT"), (op::UNARY, "UNARY"), (op::GLU, "GLU"), (op::ARGSORT, "ARGSORT"),
        ];
        for (id, name) in claimed {
            assert_eq!(ops.get(id as usize).map(String::as_str), Some(name), "op id {id}");
        }
    }

    #[test]
    fn the_gemm_scratch_follows_the_destination_inside_its_allocation() {
        // Q8_0 weights [4096, 1024] x 512 columns: dst 1024 x 512 f32, then the f16 weights, then
        // src1 in f16
        let pp = node(op::MUL_MAT, c(T_F32, [1024, 512, 1, 1]), &[c(T_Q8_0, [4096, 1024, 1, 1]), c(T_F32, [4096, 512, 1, 1])]);
        let Ok(Plan::MulMatGemm { gemm_ty, dequant }) = plan(&pp) else { panic!("{:?}", plan(&pp)) };
        let g = gemm_scratch(&pp, gemm_ty, dequant);
        assert_eq!(g.a_off, 1024 * 512 * 4);
        assert_eq!(g.a_bytes, 4096 * 1024 * 2);
        assert_eq!(g.b_off, g.a_off + g.a_bytes);
        assert_eq!(g.b_bytes, 4096 * 512 * 2);
        assert_eq!(alloc_size(&pp), g.end);
        assert_eq!(g.end, g.b_off + g.b_bytes);
        // regions are aligned and do not overlap the destination or each other
        let odd = node(op::MUL_MAT, c(T_F32, [3, 9, 1, 1]), &[c(T_F32, [5, 3, 1, 1]), c(T_F32, [5, 9, 1, 1])]);
        let Ok(Plan::MulMatGemm { gemm_ty, dequant: false }) = plan(&odd) else { panic!() };
        let g = gemm_scratch(&odd, gemm_ty, false);
        assert_eq!((g.a_off % SCRATCH_ALIGN, g.b_off % SCRATCH_ALIGN), (0, 0));
        assert!(g.a_off >= nbytes(&odd.dst) && g.a_bytes == 0 && g.b_off >= g.a_off);
        assert_eq!(g.b_bytes, 5 * 9 * 4);
        // the mat-vec path and other ops: ggml_nbytes, nothing more
        let tg = node(op::MUL_MAT, c(T_F32, [1024, 1, 1, 1]), &[c(T_Q8_0, [4096, 1024, 1, 1]), c(T_F32, [4096, 1, 1, 1])]);
        assert_eq!(alloc_size(&tg), 4096);
        let add = node(op::ADD, c(T_F32, [8, 4, 1, 1]), &[c(T_F32, [8, 4, 1, 1]), c(T_F32, [8, 1, 1, 1])]);
        assert_eq!(alloc_size(&add), 128);
        // ggml_nbytes of views and quantized rows
        assert_eq!(nbytes(&c(T_Q8_0, [64, 3, 1, 1])), 3 * 68);
        let mut v = c(T_F32, [4, 3, 1, 1]);
        v.nb[1] = 64;
        assert_eq!(nbytes(&v), 2 * 64 + 4 * 4);
    }

    #[test]
    fn flash_attention_splits_the_kv_for_token_generation_only() {
        let fa = |n_q: i64, heads: i64, n_kv: i64| {
            let q = c(T_F32, [128, n_q, heads, 1]);
            let kv = c(T_F16, [128, n_kv, 8, 1]);
            node(op::FLASH_ATTN_EXT, c(T_F32, [128, heads, n_q, 1]), &[q, kv, kv])
        };
        let split = |n: &NodeDesc| match plan(n) {
            Ok(Plan::FlashAttn { n_split, .. }) => n_split,
            other => panic!("{other:?}"),
        };
        // one token, 32 heads, 4096 cached: 32 splits of 128 KV rows (1024 warps)
        let tg = fa(1, 32, 4096);
        assert_eq!(split(&tg), 32);
        // a long cache: capped at FA_MAX_SPLIT, and no more warps than the target
        assert_eq!(split(&fa(1, 32, 1 << 20)), 64);
        assert_eq!(split(&fa(1, 128, 1 << 20)), 32);
        // a short cache or a prompt: one pass
        assert_eq!(split(&fa(1, 32, 200)), 1);
        assert_eq!(split(&fa(512, 32, 4096)), 1);
        assert_eq!(fa_splits(0, 4096), 1);
        // every split has at least FA_SPLIT_MIN_KV rows, and none is empty (the kernel's ranges
        // are ceil(n_kv / n_split) long)
        for (rows, n_kv) in [(1, 256), (32, 4096), (7, 1000), (100, 100_000), (1, 8191)] {
            let s = fa_splits(rows, n_kv) as i64;
            assert!(s == 1 || n_kv / s >= FA_SPLIT_MIN_KV, "{rows} {n_kv}: {s}");
            let chunk = (n_kv + s - 1) / s;
            assert!((s - 1) * chunk < n_kv, "{rows} {n_kv}: split {s} is empty");
        }
        // the partial results lie past dst: n_q x heads x splits records of Dv + 2 floats
        let (off, bytes) = fa_partial(&tg, 32);
        assert_eq!(off, 128 * 32 * 4);
        assert_eq!(bytes, 32 * 32 * 130 * 4);
        assert_eq!(alloc_size(&tg), off + bytes);
        assert_eq!(alloc_size(&fa(512, 32, 4096)), 128 * 32 * 512 * 4);
        // the split launch: n_q x n_split blocks in x
        let s = crate::launch::for_plan(&plan(&tg).unwrap(), &tg).unwrap();
        assert_eq!(s.grid, (32, 32, 1));
    }

    #[test]
    fn contiguous_descriptions_have_ggml_strides() {
        let q = TDesc::contiguous(T_Q8_0, [64, 3, 2, 1]);
        assert_eq!(q.nb, [34, 68, 204, 408]);
        let f = TDesc::contiguous(T_F16, [5, 3, 1, 1]);
        assert_eq!(f.nb, [2, 10, 30, 30]);
    }
}
