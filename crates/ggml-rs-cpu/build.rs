//! Build script of ggml-rs-cpu: the cdylib gets its soname (`libggml_rs_cpu.so`, what programs
//! linked to it record) and binds its own exported functions to themselves (`-Bsymbolic`). Loaded beside upstream's libggml-cpu (which exports the same names, e.g.
//! `ggml_backend_cpu_set_n_threads` handed out by our `get_proc_address`), a reference of this
//! library to one of its own exports must not resolve to upstream's.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=GGML_RS_CPU_F32_FUSED_TAIL={}", f32_fused_tail());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libggml_rs_cpu.so");
    }
}

/// How many values at the end of an F32 row upstream's `ggml_vec_dot_f32` adds as one fused
/// multiply-add each, when GGML_NATIVE=ON builds it on this machine (what our AVX-512 F32 kernel
/// follows, so that the two agree bit for bit). GCC vectorises the C's leftover loop at the
/// host tuning's preferred width (products rounded, then added in order), then one step of half
/// that width, and contracts what is left to `vfmadd231ss`: 8 values at 512 bits (generic
/// tuning), 4 at 256 (`-mprefer-vector-width=256`, the Intel AVX-512 cores GCC knows by model).
/// Read from `$CXX -march=native -Q --help=target` (ggml-cpu's vec.cpp is C++); 8 where that
/// says nothing (another compiler, another target); `GGML_RS_CPU_F32_FUSED_TAIL` overrides.
fn f32_fused_tail() -> usize {
    println!("cargo:rerun-if-env-changed=GGML_RS_CPU_F32_FUSED_TAIL");
    println!("cargo:rerun-if-env-changed=CXX");
    if let Some(n) = std::env::var("GGML_RS_CPU_F32_FUSED_TAIL").ok().and_then(|v| v.parse().ok()) {
        assert!([1, 2, 4, 8, 16].contains(&n), "GGML_RS_CPU_F32_FUSED_TAIL={n}: one of 1, 2, 4, 8, 16");
        return n;
    }
    let native = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64") && std::env::var("HOST") == std::env::var("TARGET");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = native.then(|| Command::new(&cxx).args(["-march=native", "-Q", "--help=target"]).output().ok()).flatten();
    let width = out.and_then(|o| {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines().find_map(|l| l.trim_start().strip_prefix("-mprefer-vector-width=").map(|v| v.trim().to_string()))
    });
    match width.as_deref() {
        Some("128") => 2,
        Some("256") => 4,
        _ => 8,
    }
}
