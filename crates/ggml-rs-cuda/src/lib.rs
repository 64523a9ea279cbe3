//! ggml-rs's CUDA backend (issue 16), `libggml_rs_cuda.so`.
pub mod dispatch;
pub mod kernels;
pub mod launch;
