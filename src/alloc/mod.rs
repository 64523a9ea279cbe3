//! ggml-alloc: the linear tensor allocator (`tallocr`), the graph allocator (`gallocr`: planning
//! in `plan` over the `model` of a graph numbered through `addr_index`, with `dyn_tallocr`
//! bookkeeping and `offline` placement, `residency` to know what its memory holds, `placed` to
//! recognise the graph it placed last, `recycle` keeping its largest arrays between plans,
//! `unlisted` refusing sources the graph never computes, `inputs` for inputs that already hold
//! bytes when placed anew), and
//! context allocation (`ctx_tensors`).

pub mod addr_index;
pub mod ctx_tensors;
pub mod dyn_tallocr;
pub mod gallocr;
pub mod inplace;
pub mod inputs;
pub mod model;
pub mod offline;
pub mod placed;
pub mod plan;
pub mod poison;
pub mod recycle;
pub mod residency;
pub mod tallocr;
pub mod unlisted;

#[cfg(test)]
mod plan_tests;
