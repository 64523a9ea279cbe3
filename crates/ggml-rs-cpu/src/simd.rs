//! Run-time SIMD selection: the instruction-set levels the kernels come in, detected once.
//! `GGML_RS_CPU_SIMD` caps the level (for comparisons and for machines where a wide path measures
//! slower): `scalar|avx2|avx512|avx512vnni` on x86-64, `scalar|neon|dotprod` on aarch64.
//!
//! The levels of both architectures are one ordered enum, the aarch64 ones between `Scalar` and
//! `Avx2`, so that `level >= Level::Avx2` keeps meaning "an x86 SIMD level" and a machine only
//! ever sees its own architecture's levels ([`Level::available`]).

use std::sync::OnceLock;

/// kernel levels, each a superset of the ones before
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// portable Rust, the reference every other level is tested against
    Scalar,
    /// aarch64 Advanced SIMD (every AArch64 CPU has it)
    Neon,
    /// aarch64 NEON with the dot-product instructions (`sdot`, Armv8.2's DotProd)
    NeonDot,
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
            Level::Neon => "neon",
            Level::NeonDot => "dotprod",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
            Level::Avx512Vnni => "avx512vnni",
        }
    }

    /// the levels of this architecture, lowest first
    pub fn of_this_arch() -> &'static [Level] {
        if cfg!(target_arch = "x86_64") {
            &[Level::Scalar, Level::Avx2, Level::Avx512, Level::Avx512Vnni]
        } else if cfg!(target_arch = "aarch64") {
            &[Level::Scalar, Level::Neon, Level::NeonDot]
        } else {
            &[Level::Scalar]
        }
    }

    fn from_name(s: &str) -> Option<Level> {
        Level::of_this_arch().iter().copied().find(|l| l.name() == s)
    }

    /// every level this CPU runs, lowest first (what the tests iterate over)
    pub fn available() -> Vec<Level> {
        let top = detected();
        Level::of_this_arch().iter().copied().filter(|l| *l <= top).collect()
    }

    /// an aarch64 NEON level
    pub fn is_neon(self) -> bool {
        matches!(self, Level::Neon | Level::NeonDot)
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
        match crate::config::get().simd.as_deref() {
            Some(s) => match Level::from_name(s) {
                Some(l) => l.min(top),
                None => {
                    let names: Vec<&str> = Level::of_this_arch().iter().map(|l| l.name()).collect();
                    eprintln!("ggml-rs-cpu: GGML_RS_CPU_SIMD={s} is not one of {} (this CPU's sets); using {}", names.join(", "), top.name());
                    top
                }
            },
            None => top,
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

#[cfg(target_arch = "aarch64")]
fn detect() -> Level {
    use std::arch::is_aarch64_feature_detected as has;
    if !has!("neon") {
        return Level::Scalar;
    }
    if has!("dotprod") { Level::NeonDot } else { Level::Neon }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect() -> Level {
    Level::Scalar
}

/// whether the CPU has AVX512-FP16 (f16 arithmetic; upstream's native build uses it in flash
/// attention's F16 accumulators)
pub fn has_avx512fp16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx512fp16"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// whether this process runs under user-mode emulation (qemu-user): an aarch64 build whose
/// `/proc/cpuinfo` is an x86 kernel's, or an x86-64 build whose CPU is QEMU's TCG (its CPUID
/// brand string; `qemu-x86_64 -cpu max` is an AVX2 machine without AVX-512, which the suite runs
/// the AVX2 set on). A few tests of the host kernel's behaviour (huge-page advice, which
/// qemu-user accepts and drops) hold only natively.
pub fn emulated() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let mut brand = Vec::with_capacity(48);
        for leaf in 0x8000_0002u32..=0x8000_0004 {
            // SAFETY: CPUID exists on every x86-64 CPU; leaves past the maximum return zeros
            let r = std::arch::x86_64::__cpuid(leaf);
            for v in [r.eax, r.ebx, r.ecx, r.edx] {
                brand.extend_from_slice(&v.to_le_bytes());
            }
        }
        brand.windows(8).any(|w| w == b"QEMU TCG")
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| s.contains("vendor_id"))
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
