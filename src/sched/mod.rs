//! ggml_backend_sched: backend assignment (`assign`, on the dense `index` of the graph), splits
//! and copies (`splits`), compute (`compute`), diagnostics (`debug`), and the scheduler object
//! that ties them to the graph allocator (`scheduler`); an unchanged graph's allocation is repeated
//! (`memo`), a graph built anew with the same structure keeps the last split plan (`reuse`).

pub mod assign;
pub mod compute;
pub mod debug;
pub mod index;
pub mod memo;
pub mod reuse;
pub mod scheduler;
pub mod splits;
