//! Run-time SIMD selection: the instruction-set levels the kernels come in, detected once.
//! `GGML_RS_CPU_SIMD=scalar|avx2|avx512|avx512vnni` caps the level (for comparisons and for
//! machines where a wide path measures slower).

use std::sync::OnceLock;

/// kernel levels, each a superset of the ones before
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// portable Rust, the reference every other level is tested against
    Scalar,
    /// AVX2 + FMA + F16C
    Avx2,
    /// AVX-512 F/BW/VL on top of AVX2
    Avx512,
    /// AVX-512 VNNI on top of AVX512 (vpdpbusd)
    Avx512Vnni,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
            Level::Avx512Vnni => "avx512vnni",
        }
    }

    fn from_name(s: &str) -> Option<Level> {
        [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Vnni].into_iter().find(|l| l.name() == s)
    }

    /// every level this CPU runs, lowest first (what the tests iterate over)
    pub fn available() -> Vec<Level> {
        let top = detected();
        [Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Vnni].into_iter().filter(|l| *l <= top).collect()
    }
}

/// the highest level this CPU supports
pub fn detected() -> Level {
    static DETECTED: OnceLock<Level> = OnceLock::new();
    *DETECTED.get_or_init(detect)
}

/// the level the kernels run at: the detected one, capped by `GGML_RS_CPU_SIMD`
pub fn active() -> Level {
    static ACTIVE: OnceLock<Level> = OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let top = detected();
        match std::env::var("GGML_RS_CPU_SIMD") {
            Ok(s) => match Level::from_name(&s) {
                Some(l) => l.min(top),
                None => {
                    eprintln!("ggml-rs-cpu: GGML_RS_CPU_SIMD={s} is not one of scalar, avx2, avx512, avx512vnni; using {}", top.name());
                    top
                }
            },
            Err(_) => top,
        }
    })
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    use std::arch::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma") && has!("f16c")) {
        return Level::Scalar;
    }
    if !(has!("avx512f") && has!("avx512bw") && has!("avx512vl")) {
        return Level::Avx2;
    }
    if has!("avx512vnni") { Level::Avx512Vnni } else { Level::Avx512 }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Scalar
}

/// whether this is an AMD CPU (CPUID's vendor string "AuthenticAMD"): a few memory-access
/// choices differ by vendor (`dot::gemv`'s one-stream rows)
pub fn cpu_vendor_is_amd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: CPUID leaf 0 exists on every x86-64 CPU
        let r = std::arch::x86_64::__cpuid(0);
        let mut v = [0u8; 12];
        v[..4].copy_from_slice(&r.ebx.to_le_bytes());
        v[4..8].copy_from_slice(&r.edx.to_le_bytes());
        v[8..].copy_from_slice(&r.ecx.to_le_bytes());
        &v == b"AuthenticAMD"
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}
