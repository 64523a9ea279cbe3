//! Build script of ggml-rs-cuda: the cdylib's soname, and `-Bsymbolic` so that its references to
//! its own exports (`ggml_backend_cuda_*`, also exported by upstream's libggml-cuda) bind to
//! itself when both are loaded. Also tells the kernels' folder to the crate (`GGML_RS_KERNELS_DIR`).
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libggml_rs_cuda.so");
    }
    println!("cargo:rerun-if-changed=../../kernels");
}
