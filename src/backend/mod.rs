//! ggml-backend without the scheduler and the allocator (nothing here imports them): buffer types
//! and buffers (`buffer`, the CPU ones in `cpu_buffer`), tensor data access (`tensor_io`),
//! backends, devices and events (`stream`), and the poison debug mode (`poison`: filled by the
//! allocators, checked before each node is computed).

pub mod buffer;
pub mod cpu_buffer;
pub mod poison;
pub mod stream;
pub mod tensor_io;
