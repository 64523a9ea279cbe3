//! ggml-rs's CUDA backend (issue 16), `libggml_rs_cuda.so`.
pub mod kernels;
