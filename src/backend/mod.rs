//! ggml-backend without the scheduler: buffer types and buffers (`buffer`, the CPU ones in
//! `cpu_buffer`), tensor data access (`tensor_io`), backends, devices and events (`stream`), and
//! graph copies (`graph_copy`).

pub mod buffer;
pub mod cpu_buffer;
pub mod graph_copy;
pub mod stream;
pub mod tensor_io;
