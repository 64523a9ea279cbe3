//! The CUDA C sources of `kernels/` (embedded, so the library carries them) and their compiled
//! form: NVRTC (`crate::nvrtc`) turns a module's text (`common.cuh` + the file) into a CUBIN for
//! one compute capability (PTX when that fails), and [`KernelCache`] keeps each image in memory
//! and on disk under a key made of the source's hash, the architecture and the NVRTC version, so
//! a changed kernel, another GPU or another NVRTC never reuses a stale file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use crate::nvrtc;
use crate::nvrtc::Image;

/// One kernel file of `kernels/`: its name and the kernels (`extern "C" __global__`) it defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    Elementwise,
    Rows,
    Norm,
    Rope,
    Softmax,
    Matmul,
    FlashAttn,
}

const COMMON: &str = include_str!("../../../kernels/common.cuh");

impl Module {
    pub const ALL: [Module; 7] = [Module::Elementwise, Module::Rows, Module::Norm, Module::Rope, Module::Softmax, Module::Matmul, Module::FlashAttn];

    pub fn name(self) -> &'static str {
        match self {
            Module::Elementwise => "elementwise",
            Module::Rows => "rows",
            Module::Norm => "norm",
            Module::Rope => "rope",
            Module::Softmax => "softmax",
            Module::Matmul => "matmul",
            Module::FlashAttn => "flash_attn",
        }
    }

    fn file(self) -> &'static str {
        match self {
            Module::Elementwise => include_str!("../../../kernels/elementwise.cu"),
            Module::Rows => include_str!("../../../kernels/rows.cu"),
            Module::Norm => include_str!("../../../kernels/norm.cu"),
            Module::Rope => include_str!("../../../kernels/rope.cu"),
            Module::Softmax => include_str!("../../../kernels/softmax.cu"),
            Module::Matmul => include_str!("../../../kernels/matmul.cu"),
            Module::FlashAttn => include_str!("../../../kernels/flash_attn.cu"),
        }
    }

    /// the kernels the backend launches from this module (each must be defined by its source:
    /// a test checks them against the text, and the GPU path looks each up by name)
    pub fn kernels(self) -> &'static [&'static str] {
        match self {
            Module::Elementwise => &["binary_op", "scale_f32", "unary_op", "glu_op", "cpy_f", "to_contiguous", "dequant_to_f16"],
            Module::Rows => &["get_rows", "set_rows_f", "set_rows_q8_0"],
            Module::Norm => &["rms_norm_f32", "norm_f32"],
            Module::Rope => &["rope_op"],
            Module::Softmax => &["soft_max_f32"],
            Module::Matmul => &["mul_mat_vec"],
            Module::FlashAttn => &["flash_attn_ext", "flash_attn_reduce"],
        }
    }

    /// the text NVRTC compiles: the shared header, then the file
    pub fn source(self) -> String {
        format!("// ggml-rs CUDA module {}\n{COMMON}\n#line 1 \"{}.cu\"\n{}", self.name(), self.name(), self.file())
    }
}

/// FNV-1a, 64 bits: a hash that is the same in every build and on every machine (std's hasher
/// is not promised to be), which is what a key of files on disk needs.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What a compiled module depends on: its source, the device's compute capability, the NVRTC
/// version that compiled it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    pub module: &'static str,
    pub source_hash: u64,
    pub source_len: usize,
    /// compute capability as major*10 + minor (90 for Hopper)
    pub arch: u32,
    pub nvrtc: (i32, i32),
}

impl CacheKey {
    pub fn new(module: Module, arch: u32, nvrtc: (i32, i32)) -> CacheKey {
        let src = module.source();
        CacheKey { module: module.name(), source_hash: fnv1a64(src.as_bytes()), source_len: src.len(), arch, nvrtc }
    }

    /// the file name of this key's image (CUBIN or PTX) in the disk cache
    pub fn file_name(&self) -> String {
        format!("{}-sm{}-nvrtc{}.{}-{:016x}-{}.img", self.module, self.arch, self.nvrtc.0, self.nvrtc.1, self.source_hash, self.source_len)
    }
}

/// The disk cache's folder: `GGML_RS_CUDA_CACHE` (empty or `off`: no disk cache), else
/// `$XDG_CACHE_HOME/ggml-rs-cuda`, else `$HOME/.cache/ggml-rs-cuda`.
pub fn default_cache_dir() -> Option<PathBuf> {
    cache_dir_from(|k| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned()))
}

fn cache_dir_from(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(v) = env("GGML_RS_CUDA_CACHE") {
        return (!v.is_empty() && v != "off").then(|| PathBuf::from(v));
    }
    if let Some(x) = env("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Some(Path::new(&x).join("ggml-rs-cuda"));
    }
    env("HOME").filter(|h| !h.is_empty()).map(|h| Path::new(&h).join(".cache").join("ggml-rs-cuda"))
}

/// Where a module's image came from (the tests and the debug log tell the three apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Memory,
    Disk,
    Compiled,
}

/// Compiled images by key, in memory and (when a folder is given) on disk.
pub struct KernelCache {
    dir: Option<PathBuf>,
    mem: Mutex<HashMap<CacheKey, Arc<Image>>>,
}

impl KernelCache {
    pub fn new(dir: Option<PathBuf>) -> KernelCache {
        KernelCache { dir, mem: Mutex::new(HashMap::new()) }
    }

    /// the image of `key`: from memory, else from disk, else `compile()`'s (then stored in both;
    /// a disk that cannot be written only costs the next process a compile, so it is not an
    /// error)
    pub fn get_or_compile(&self, key: &CacheKey, compile: impl FnOnce() -> Result<Image, String>) -> Result<(Arc<Image>, Origin), String> {
        if let Some(p) = self.mem.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
            return Ok((p.clone(), Origin::Memory));
        }
        let path = self.dir.as_ref().map(|d| d.join(key.file_name()));
        let (image, origin) = match path.as_ref().and_then(|p| std::fs::read(p).ok()).and_then(Image::from_bytes) {
            Some(image) => (image, Origin::Disk),
            None => {
                let image = compile()?;
                if let (Some(dir), Some(path)) = (&self.dir, &path) {
                    // write beside, then rename: a reader never sees half a file
                    let tmp = dir.join(format!(".{}.{}.tmp", key.file_name(), std::process::id()));
                    if std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&tmp, &image.bytes)).and_then(|_| std::fs::rename(&tmp, path)).is_err() {
                        let _ = std::fs::remove_file(&tmp);
                    }
                }
                (image, Origin::Compiled)
            }
        };
        let image = Arc::new(image);
        self.mem.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), image.clone());
        Ok((image, origin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_the_backend_launches_is_defined_in_its_module() {
        for m in Module::ALL {
            let src = m.source();
            for k in m.kernels() {
                assert!(src.contains(&format!("__global__ void {k}(")), "{}: no kernel {k}", m.name());
            }
        }
    }

    #[test]
    fn the_cache_key_changes_with_source_arch_and_nvrtc_and_only_then() {
        let a = CacheKey::new(Module::Norm, 90, (13, 0));
        assert_eq!(a, CacheKey::new(Module::Norm, 90, (13, 0)));
        assert_ne!(a.file_name(), CacheKey::new(Module::Norm, 89, (13, 0)).file_name());
        assert_ne!(a.file_name(), CacheKey::new(Module::Norm, 90, (13, 1)).file_name());
        assert_ne!(a.file_name(), CacheKey::new(Module::Rope, 90, (13, 0)).file_name());
        // a one-byte edit of the source is another key
        assert_ne!(fnv1a64(b"kernel a"), fnv1a64(b"kernel b"));
        // FNV-1a's published test vectors: the hash is the same on every machine
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn the_cache_folder_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        assert_eq!(cache_dir_from(env(&[("GGML_RS_CUDA_CACHE", "/x"), ("HOME", "/h")])), Some(PathBuf::from("/x")));
        assert_eq!(cache_dir_from(env(&[("GGML_RS_CUDA_CACHE", "off"), ("HOME", "/h")])), None);
        assert_eq!(cache_dir_from(env(&[("GGML_RS_CUDA_CACHE", ""), ("HOME", "/h")])), None);
        assert_eq!(cache_dir_from(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")])), Some(PathBuf::from("/c/ggml-rs-cuda")));
        assert_eq!(cache_dir_from(env(&[("HOME", "/h")])), Some(PathBuf::from("/h/.cache/ggml-rs-cuda")));
        assert_eq!(cache_dir_from(env(&[])), None);
    }

    #[test]
    fn the_cache_compiles_once_then_serves_memory_then_disk() {
        let dir = std::env::temp_dir().join(format!("ggml-rs-cuda-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = CacheKey::new(Module::Softmax, 90, (13, 0));
        let fake_ptx = || Ok::<_, String>(Image { target: nvrtc::Target::Ptx, bytes: b".version 8.0\n.entry soft_max_f32()\n".to_vec() });
        let c1 = KernelCache::new(Some(dir.clone()));
        let (p1, o1) = c1.get_or_compile(&key, fake_ptx).unwrap();
        assert_eq!(o1, Origin::Compiled);
        let (p2, o2) = c1.get_or_compile(&key, || panic!("compiled twice")).unwrap();
        assert_eq!((o2, &*p2), (Origin::Memory, &*p1));
        assert!(dir.join(key.file_name()).is_file());
        // a new process (a new cache) reads the file
        let c2 = KernelCache::new(Some(dir.clone()));
        let (p3, o3) = c2.get_or_compile(&key, || panic!("compiled although on disk")).unwrap();
        assert_eq!((o3, &*p3), (Origin::Disk, &*p1));
        // another arch is another file: compiled again
        let other = CacheKey::new(Module::Softmax, 80, (13, 0));
        assert_eq!(c2.get_or_compile(&other, fake_ptx).unwrap().1, Origin::Compiled);
        // a compile error is returned, and nothing is stored
        let bad = CacheKey::new(Module::Rope, 90, (13, 0));
        assert!(c2.get_or_compile(&bad, || Err("nvrtc says no".into())).is_err());
        assert!(!dir.join(bad.file_name()).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Compiles every module to PTX for sm_90 (the H200) with the NVRTC on the loader's path: no
    /// GPU or driver is needed. Skips, saying so, where no libnvrtc is found (put the wheel's lib
    /// folder on LD_LIBRARY_PATH: scripts/cuda-nvrtc.sh).
    #[test]
    fn every_module_compiles_to_ptx_for_sm_90() {
        if !nvrtc::available() {
            // the suite (scripts/test.sh step 14) sets GGML_RS_CUDA_NVRTC_REQUIRED: there a skip is a failure
            assert!(std::env::var("GGML_RS_CUDA_NVRTC_REQUIRED").as_deref() != Ok("1"), "GGML_RS_CUDA_NVRTC_REQUIRED=1 and no libnvrtc was found");
            eprintln!("SKIP every_module_compiles_to_ptx_for_sm_90: no libnvrtc on the loader's path (LD_LIBRARY_PATH; scripts/cuda-nvrtc.sh fetches one)");
            return;
        }
        let v = nvrtc::version().unwrap();
        eprintln!("NVRTC {}.{}", v.0, v.1);
        for m in Module::ALL {
            // the backend loads a CUBIN for the device (sm_90 here)
            let img = nvrtc::compile(m.name(), &m.source(), 90).unwrap_or_else(|e| panic!("{e}"));
            assert!(img.target == nvrtc::Target::Cubin && img.bytes.starts_with(b"\x7fELF"), "{}: not an sm_90 CUBIN", m.name());
            // the PTX fallback compiles as well
            let (ptx, _) = nvrtc::compile_target(m.name(), &m.source(), nvrtc::Target::Ptx, 90, &[]).unwrap_or_else(|e| panic!("{e}"));
            let ptx = String::from_utf8(ptx).unwrap();
            assert!(ptx.contains(".target sm_90"), "{}: PTX for another target", m.name());
            for k in m.kernels() {
                assert!(ptx.contains(&format!(".entry {k}(")), "{}: PTX lacks the entry {k}", m.name());
            }
            // and the PTX assembles to sm_90 machine code (NVRTC's own ptxas): no spills
            let (size, log) = nvrtc::compile_cubin(m.name(), &m.source(), 90).unwrap_or_else(|e| panic!("{e}"));
            let spills: Vec<&str> = log.lines().filter(|l| l.contains("spill") && !l.contains(" 0 bytes spill stores, 0 bytes spill loads")).collect();
            let regs: Vec<String> = log.lines().filter_map(|l| l.split("Used ").nth(1).and_then(|r| r.split(' ').next()).map(String::from)).collect();
            eprintln!("{}: CUBIN {size} bytes, registers per kernel {regs:?}", m.name());
            assert!(spills.is_empty(), "{}: register spills: {spills:?}", m.name());
        }
    }
}
