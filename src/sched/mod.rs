//! ggml_backend_sched: backend assignment (`assign`, on the dense `index` of the graph), splits
//! and copies (`splits`), compute (`compute`), diagnostics (`debug`), and the scheduler object
//! that ties them to the graph allocator (`scheduler`).

pub mod assign;
pub mod compute;
pub mod debug;
pub mod index;
pub mod memo;
pub mod scheduler;
pub mod splits;
