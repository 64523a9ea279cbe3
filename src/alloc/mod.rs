//! ggml-alloc: the linear tensor allocator (`tallocr`), the graph allocator (`gallocr`: planning
//! in `plan` over the `model` of a graph numbered through `addr_index`, with `dyn_tallocr`
//! bookkeeping and `offline` placement, `residency` to know what its memory holds, `placed` to
//! recognise the graph it placed last, `recycle` keeping its largest arrays between plans,
//! `unlisted` refusing sources the graph never computes, `inputs` for inputs that already hold
//! bytes when placed anew), and
//! context allocation (`ctx_tensors`).

pub mod addr_index;
pub mod ctx_tensors;
pub mod gallocr;
pub mod inplace;
pub mod inputs;
pub mod placed;
pub mod poison;
pub mod tallocr;
pub mod unlisted;

// the pure half of the allocator: the planning crate
pub use ggml_plan::{dyn_tallocr, model, plan, residency};

// the planning crate's copies of ggml's limits
const _: () = assert!(ggml_plan::MAX_SRC == crate::ggml::sys::GGML_MAX_SRC);
const _: () = assert!(ggml_plan::MAX_NAME == crate::ggml::sys::GGML_MAX_NAME);
const _: () = assert!(ggml_plan::MAX_DIMS == crate::ggml::sys::GGML_MAX_DIMS);
