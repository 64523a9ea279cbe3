//! ggml-alloc: the linear tensor allocator (`tallocr`), the graph allocator (`gallocr`, reading
//! a graph into the planner's model through `addr_index`; the planning, the model, `dyn_tallocr`
//! bookkeeping, offline placement and `residency` are the `ggml-plan` crate's), `placed` to
//! recognise the graph it placed last, `unlisted` refusing sources the graph never computes,
//! `inputs` for inputs that already hold bytes when placed anew, context allocation
//! (`ctx_tensors`), and graph copies to another backend (`graph_copy`: it allocates a context's
//! tensors, so it sits above the backend layer).

pub mod addr_index;
pub mod ctx_tensors;
pub mod gallocr;
pub mod graph_copy;
pub mod inplace;
pub mod inputs;
pub mod placed;
pub mod tallocr;
pub mod unlisted;

// the pure half of the allocator: the planning crate
pub use ggml_plan::{dyn_tallocr, model, plan, residency};

// the planning crate's copies of ggml's limits
const _: () = assert!(ggml_plan::MAX_SRC == crate::ggml::sys::GGML_MAX_SRC);
const _: () = assert!(ggml_plan::MAX_NAME == crate::ggml::sys::GGML_MAX_NAME);
const _: () = assert!(ggml_plan::MAX_DIMS == crate::ggml::sys::GGML_MAX_DIMS);
