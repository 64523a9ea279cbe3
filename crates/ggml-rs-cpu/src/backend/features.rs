//! What this CPU has, detected at run time (upstream's `ggml_cpu_has_*` answer what its build was
//! compiled for; ours answer what the machine runs, which is what the kernels select on), and the
//! feature list of `ggml_backend_get_features` built from it.
//!
//! Under a cap (`GGML_RS_CPU_SIMD`, [`crate::simd::active`]) the answers are those of upstream
//! built for that set on this machine: a feature beyond the active kernel set is reported absent
//! (at `avx2` no AVX512* / AMX / AVX-VNNI, as upstream's AVX2 build; at `scalar` none of the AVX
//! family). The list ends with `KERNELS`, the active kernel set's name (llama.cpp's
//! `system_info` line prints it as `KERNELS = avx2`).

use std::ffi::{CStr, c_char};
use std::sync::OnceLock;

use ggml_abi::abi_backend::ggml_backend_feature;

/// One feature query of ggml-cpu.h: its name there (after `ggml_cpu_has_`), the name upstream's
/// feature list gives it, and whether this CPU has it.
#[derive(Clone, Copy, Debug)]
pub struct Feature {
    pub query: &'static str,
    pub list_name: &'static CStr,
    pub present: bool,
}

/// the lowest kernel level that may report the x86 feature `query` (its kernels' set, or the
/// set an upstream build that has it is built for)
#[cfg(target_arch = "x86_64")]
fn level_of(query: &str) -> crate::simd::Level {
    use crate::simd::Level;
    match query {
        "sse3" | "ssse3" => Level::Scalar,
        "avx" | "avx2" | "f16c" | "fma" | "bmi2" => Level::Avx2,
        "avx512" | "avx512_vbmi" | "avx512_bf16" => Level::Avx512,
        _ => Level::Avx512Vnni,
    }
}

#[cfg(target_arch = "x86_64")]
fn x86() -> [(&'static str, &'static CStr, bool); 13] {
    let active = crate::simd::active();
    x86_detected().map(|(q, n, present)| (q, n, present && level_of(q) <= active))
}

#[cfg(target_arch = "x86_64")]
fn x86_detected() -> [(&'static str, &'static CStr, bool); 13] {
    use std::arch::is_x86_feature_detected as has;
    // AMX-INT8: CPUID.(EAX=7,ECX=0):EDX[25] (std does not detect AMX on stable Rust); a CPU
    // without leaf 7 answers zeros, read as absent
    let amx_int8 = std::arch::x86_64::__cpuid_count(7, 0).edx & (1 << 25) != 0;
    [
        ("sse3", c"SSE3", has!("sse3")),
        ("ssse3", c"SSSE3", has!("ssse3")),
        ("avx", c"AVX", has!("avx")),
        ("avx_vnni", c"AVX_VNNI", has!("avxvnni")),
        ("avx2", c"AVX2", has!("avx2")),
        ("f16c", c"F16C", has!("f16c")),
        ("fma", c"FMA", has!("fma")),
        ("bmi2", c"BMI2", has!("bmi2")),
        ("avx512", c"AVX512", has!("avx512f")),
        ("avx512_vbmi", c"AVX512_VBMI", has!("avx512vbmi")),
        ("avx512_vnni", c"AVX512_VNNI", has!("avx512vnni")),
        ("avx512_bf16", c"AVX512_BF16", has!("avx512bf16")),
        ("amx_int8", c"AMX_INT8", amx_int8),
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn x86() -> [(&'static str, &'static CStr, bool); 0] {
    []
}

/// the aarch64 queries, in upstream's list order, each reported when the CPU has it and the
/// active kernel set reaches it: NEON and ARM_FMA from `neon`, DOTPROD from `dotprod`; FP16_VA,
/// MATMUL_INT8 and SVE (which no kernel of ours uses yet) only at the top set, as
/// upstream's native build on the machine reports them
#[cfg(target_arch = "aarch64")]
fn arm() -> Vec<(&'static str, &'static CStr, bool)> {
    use std::arch::is_aarch64_feature_detected as has;

    use crate::simd::Level;
    let active = crate::simd::active();
    let top = active == crate::simd::detected();
    vec![
        ("neon", c"NEON", has!("neon") && active >= Level::Neon),
        ("arm_fma", c"ARM_FMA", has!("neon") && active >= Level::Neon),
        ("fp16_va", c"FP16_VA", has!("fp16") && top && active >= Level::Neon),
        ("matmul_int8", c"MATMUL_INT8", has!("i8mm") && top && active >= Level::Neon),
        ("sve", c"SVE", has!("sve") && top && active >= Level::Neon),
        ("dotprod", c"DOTPROD", has!("dotprod") && active >= Level::NeonDot),
    ]
}

#[cfg(not(target_arch = "aarch64"))]
fn arm() -> Vec<(&'static str, &'static CStr, bool)> {
    Vec::new()
}

/// every feature this backend knows of, in upstream's list order
pub fn all() -> &'static [Feature] {
    static ALL: OnceLock<Vec<Feature>> = OnceLock::new();
    ALL.get_or_init(|| {
        #[allow(unused_mut)]
        let mut v: Vec<Feature> = x86().into_iter().map(|(query, list_name, present)| Feature { query, list_name, present }).collect();
        v.extend(arm().into_iter().map(|(query, list_name, present)| Feature { query, list_name, present }));
        v
    })
}

/// `ggml_cpu_has_<query>()`: 1 when present
pub fn has(query: &str) -> i32 {
    all().iter().any(|f| f.query == query && f.present) as i32
}

/// `ggml_backend_get_features`: the present features, each with value "1", then `KERNELS` (the
/// active kernel set's name), then a NULL entry.
pub fn list() -> *const ggml_backend_feature {
    struct List(Vec<ggml_backend_feature>);
    // SAFETY: the entries point to static C strings only.
    unsafe impl Send for List {}
    // SAFETY: as above; never written after it is built.
    unsafe impl Sync for List {}
    static LIST: OnceLock<List> = OnceLock::new();
    LIST.get_or_init(|| {
        let mut v: Vec<ggml_backend_feature> =
            all().iter().filter(|f| f.present).map(|f| ggml_backend_feature { name: f.list_name.as_ptr(), value: c"1".as_ptr() }).collect();
        v.push(ggml_backend_feature { name: c"KERNELS".as_ptr(), value: kernels_name().as_ptr() });
        v.push(ggml_backend_feature { name: std::ptr::null::<c_char>(), value: std::ptr::null() });
        List(v)
    })
    .0
    .as_ptr()
}

/// the active kernel set's name, NUL-terminated ([`crate::simd::Level::name`])
fn kernels_name() -> &'static CStr {
    use crate::simd::Level;
    match crate::simd::active() {
        Level::Scalar => c"scalar",
        Level::Neon => c"neon",
        Level::NeonDot => c"dotprod",
        Level::Avx2 => c"avx2",
        Level::Avx512 => c"avx512",
        Level::Avx512Vnni => c"avx512vnni",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queries_agree_with_the_kernels_level_and_the_list() {
        // the kernels' active set (simd::active: detected, capped) and these queries must not
        // contradict
        let level = crate::simd::active();
        if level >= crate::simd::Level::Avx2 {
            assert_eq!((has("avx2"), has("fma"), has("f16c")), (1, 1, 1));
        }
        assert_eq!(has("avx512") == 1, level >= crate::simd::Level::Avx512);
        if level < crate::simd::Level::Avx2 {
            assert_eq!((has("avx2"), has("fma"), has("avx")), (0, 0, 0));
        }
        assert_eq!(has("avx512_vnni") == 1, level >= crate::simd::Level::Avx512Vnni);
        // aarch64: NEON (and its FMA) from the neon set, DOTPROD from the dotprod set
        assert_eq!(has("neon") == 1, level.is_neon());
        assert_eq!(has("arm_fma") == 1, level.is_neon());
        assert_eq!(has("dotprod") == 1, level == crate::simd::Level::NeonDot);
        assert_eq!(has("no_such_feature"), 0);
        // the list holds exactly the present ones, NULL-terminated
        let mut n = 0;
        // SAFETY: `list` is NULL-terminated.
        unsafe {
            let mut p = list();
            while !(*p).name.is_null() {
                let name = CStr::from_ptr((*p).name);
                if name == c"KERNELS" {
                    assert_eq!(CStr::from_ptr((*p).value).to_str().unwrap(), level.name());
                } else {
                    assert!(all().iter().any(|f| f.present && f.list_name == name), "{name:?}");
                }
                n += 1;
                p = p.add(1);
            }
        }
        assert_eq!(n, all().iter().filter(|f| f.present).count() + 1);
    }
}
