//! Launch shapes: the grid and block each kernel of `kernels/` is launched with, as plain
//! arithmetic on the node's shape (no CUDA here), so the unit tests check the limits the
//! hardware sets (grid.y and grid.z at most 65535, a block at most 1024 threads) and that every
//! element is covered.

use crate::dispatch::{NodeDesc, Plan, TDesc};

/// (grid, block) in CUDA's (x, y, z) order
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
}

/// threads per block of the element-wise kernels
pub const ELEMENTWISE_BLOCK: u32 = 256;
/// the most blocks an element-wise launch asks for: the kernels loop (grid-stride), so more
/// blocks than the GPU holds at once would only add scheduling
pub const ELEMENTWISE_MAX_BLOCKS: u64 = 65535;
/// grid.y / grid.z limit of CUDA
pub const GRID_YZ_MAX: u64 = 65535;
/// grid.x limit of CUDA
pub const GRID_X_MAX: u64 = (1 << 31) - 1;
/// warps per block of the mat-vec kernel (MMV_WARPS of kernels/matmul.cu)
pub const MMV_WARPS: u32 = 4;

/// element-wise kernels (grid-stride loops): enough blocks for `n` elements, capped
pub fn elementwise(n: u64) -> Shape {
    let blocks = n.div_ceil(ELEMENTWISE_BLOCK as u64).clamp(1, ELEMENTWISE_MAX_BLOCKS);
    Shape { grid: (blocks as u32, 1, 1), block: (ELEMENTWISE_BLOCK, 1, 1) }
}

/// one block per row (norms, soft_max, get/set_rows): a multiple of 32 threads, at most 1024 and
/// no more than the row needs (rounded up to a warp)
pub fn per_row(n_rows: u64, row_len: u64) -> Result<Shape, String> {
    if n_rows > GRID_X_MAX {
        return Err(format!("{n_rows} rows: more than one launch's grid"));
    }
    let threads = row_len.div_ceil(32).clamp(1, 32) * 32;
    Ok(Shape { grid: (n_rows.max(1) as u32, 1, 1), block: (threads as u32, 1, 1) })
}

/// mat-vec: MMV_WARPS rows of src0 per block; y = columns of src1; z = its planes
pub fn mul_mat_vec(rows: u64, cols: u64, planes: u64) -> Result<Shape, String> {
    if cols > GRID_YZ_MAX || planes > GRID_YZ_MAX {
        return Err(format!("mat-vec of {cols} columns x {planes} planes exceeds the grid"));
    }
    Ok(Shape { grid: (rows.div_ceil(MMV_WARPS as u64).max(1) as u32, cols.max(1) as u32, planes.max(1) as u32), block: (32 * MMV_WARPS, 1, 1) })
}

/// flash attention: one warp per (query row or row x split, head, sequence)
pub fn flash_attn(n_q: u64, n_head: u64, n_seq: u64) -> Result<Shape, String> {
    if n_head > GRID_YZ_MAX || n_seq > GRID_YZ_MAX || n_q > GRID_X_MAX {
        return Err(format!("flash attention grid {n_q} x {n_head} x {n_seq} exceeds CUDA's limits"));
    }
    Ok(Shape { grid: (n_q.max(1) as u32, n_head.max(1) as u32, n_seq.max(1) as u32), block: (32, 1, 1) })
}

/// The launch shape of the kernel a plan runs (`Stream::run`), or why the grid would exceed
/// CUDA's limits: `dispatch::plan` asks this, so `supports_op` refuses such a node rather than
/// `graph_compute` failing on it. Nothing launched (views) and the cuBLAS path (its conversion
/// kernels are element-wise, any size) answer with a one-block shape.
pub fn for_plan(plan: &Plan, n: &NodeDesc) -> Result<Shape, String> {
    let s = |i: usize| n.src[i].ok_or_else(|| format!("source {i} missing"));
    let count = n.dst.nelements().max(0) as u64;
    let rows = |t: &TDesc| (t.ne[1] * t.ne[2] * t.ne[3]).max(0) as u64;
    match plan {
        Plan::Nop | Plan::MulMatGemm { .. } => Ok(elementwise(1)),
        Plan::Binary { .. } | Plan::Scale { .. } | Plan::Unary { .. } | Plan::Glu { .. } | Plan::Cpy => Ok(elementwise(count)),
        Plan::Rope { .. } => Ok(elementwise(count / 2)),
        Plan::GetRows => {
            let (a, i) = (s(0)?, s(1)?);
            per_row((i.ne[0] * i.ne[1] * i.ne[2]).max(0) as u64, a.ne[0].max(0) as u64)
        }
        Plan::SetRows { quant } => {
            let a = s(0)?;
            per_row(rows(&a), a.ne[0].max(0) as u64 / if *quant { 32 } else { 1 })
        }
        Plan::RmsNorm { .. } | Plan::Norm { .. } | Plan::SoftMax { .. } => {
            let a = s(0)?;
            per_row(rows(&a), a.ne[0].max(0) as u64)
        }
        Plan::MulMatVec => {
            let (a, b) = (s(0)?, s(1)?);
            mul_mat_vec(a.ne[1].max(0) as u64, b.ne[1].max(0) as u64, (b.ne[2] * b.ne[3]).max(0) as u64)
        }
        Plan::FlashAttn { n_split, .. } => {
            // the first pass: n_split warps per query row (the second pass is one per row)
            let q = s(0)?;
            flash_attn(q.ne[1].max(0) as u64 * (*n_split).max(1) as u64, q.ne[2].max(0) as u64, q.ne[3].max(0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn threads(s: &Shape) -> u64 {
        (s.grid.0 as u64 * s.grid.1 as u64 * s.grid.2 as u64) * (s.block.0 as u64 * s.block.1 as u64 * s.block.2 as u64)
    }

    #[test]
    fn elementwise_covers_small_sizes_exactly_and_caps_large_ones() {
        assert_eq!(elementwise(1).grid.0, 1);
        assert_eq!(elementwise(256).grid.0, 1);
        assert_eq!(elementwise(257).grid.0, 2);
        for n in [1u64, 255, 256, 257, 4096 * 11, 1 << 20] {
            assert!(threads(&elementwise(n)) >= n, "{n}");
        }
        // above the cap the grid-stride loop does the rest: the grid stays legal
        assert_eq!(elementwise(1 << 40).grid.0 as u64, ELEMENTWISE_MAX_BLOCKS);
        assert_eq!(elementwise(0).grid.0, 1);
    }

    #[test]
    fn per_row_blocks_are_whole_warps_within_1024() {
        assert_eq!(per_row(10, 1).unwrap().block.0, 32);
        assert_eq!(per_row(10, 33).unwrap().block.0, 64);
        assert_eq!(per_row(10, 4096).unwrap().block.0, 1024);
        assert_eq!(per_row(10, 100_000).unwrap().block.0, 1024);
        for len in [1u64, 31, 32, 33, 100, 1000, 1024, 5000] {
            let b = per_row(1, len).unwrap().block.0;
            assert!(b.is_multiple_of(32) && (32..=1024).contains(&b));
        }
        assert!(per_row(GRID_X_MAX + 1, 8).is_err());
    }

    #[test]
    fn mat_vec_covers_every_row_and_respects_grid_limits() {
        let s = mul_mat_vec(4097, 1, 1).unwrap();
        assert_eq!(s.grid, (1025, 1, 1));
        assert!(s.grid.0 as u64 * MMV_WARPS as u64 >= 4097);
        assert_eq!(s.block.0, 128);
        assert!(mul_mat_vec(10, 70_000, 1).is_err());
        assert_eq!(mul_mat_vec(64, 8, 32).unwrap().grid, (16, 8, 32));
    }

    #[test]
    fn flash_attn_grid_is_rows_heads_sequences() {
        assert_eq!(flash_attn(7, 32, 2).unwrap().grid, (7, 32, 2));
        assert!(flash_attn(7, 70_000, 1).is_err());
    }
}
