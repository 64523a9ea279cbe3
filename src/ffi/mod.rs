//! The `extern "C"` surface: every exported function validates its arguments, converts raw
//! pointers into typed handles, runs inside the panic boundary (`boundary`), and calls the safe
//! implementation in `alloc`, `backend` or `sched`. The allocator and scheduler objects C holds
//! as opaque pointers go through one helper (`handle`).

pub mod alloc;
pub mod backend;
pub mod boundary;
pub mod buffer;
pub mod ext;
pub mod graph_copy;
pub mod handle;
pub mod impl_api;
pub mod sched;
pub mod tensor;
