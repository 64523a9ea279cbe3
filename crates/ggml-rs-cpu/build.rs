//! Build script of ggml-rs-cpu: the cdylib binds its own exported functions to themselves
//! (`-Bsymbolic`). Loaded beside upstream's libggml-cpu (which exports the same names, e.g.
//! `ggml_backend_cpu_set_n_threads` handed out by our `get_proc_address`), a reference of this
//! library to one of its own exports must not resolve to upstream's.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    }
}
