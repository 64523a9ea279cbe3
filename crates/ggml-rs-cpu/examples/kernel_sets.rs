//! The kernel sets this CPU runs below the one it would choose (`GGML_RS_CPU_SIMD` values a
//! developer can cap the backend at to test or measure them), one name a line; the suite loops
//! over them.
//!
//!     cargo run --release -p ggml-rs-cpu --example kernel_sets

fn main() {
    let top = ggml_rs_cpu::simd::detected();
    for level in ggml_rs_cpu::simd::Level::available() {
        if level < top {
            println!("{}", level.name());
        }
    }
}
