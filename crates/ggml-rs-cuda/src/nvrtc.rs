//! NVRTC, loaded on first use by cudarc (dlopen of libnvrtc.so.13 etc. on the loader's path).
//!
//! Modules are compiled to machine code for the device (CUBIN for `sm_XX`, NVRTC runs ptxas
//! itself) and fall back to PTX for `compute_XX` only when that fails: PTX from an NVRTC newer
//! than the driver is refused at load (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`), a CUBIN is not.
//! NVRTC needs its builtins library (`libnvrtc-builtins.so.<ver>`) at compile time, which it
//! opens by name: [`self_check`] loads the one next to libnvrtc by its full path first (so any
//! way libnvrtc was found works) and compiles a one-line kernel, so a broken installation is
//! one clear line at backend init instead of a failure at the first graph.

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{result, sys};

/// What NVRTC is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// machine code for one compute capability (`--gpu-architecture=sm_XX`)
    Cubin,
    /// PTX for the virtual architecture (`compute_XX`), which the driver assembles at load
    Ptx,
}

/// A compiled module as cuModuleLoadData takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub target: Target,
    pub bytes: Vec<u8>,
}

impl Image {
    /// recognizes a stored image: a CUBIN is an ELF file, PTX is text with an `.entry`
    pub fn from_bytes(bytes: Vec<u8>) -> Option<Image> {
        if bytes.starts_with(b"\x7fELF") {
            return Some(Image { target: Target::Cubin, bytes });
        }
        let text = std::str::from_utf8(&bytes).ok()?;
        text.contains(".entry").then_some(Image { target: Target::Ptx, bytes })
    }

    /// the bytes cuModuleLoadData reads: the CUBIN as it is, the PTX NUL-terminated
    pub fn load_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match self.target {
            Target::Cubin => self.bytes.as_slice().into(),
            Target::Ptx => {
                let mut v = self.bytes.clone();
                v.push(0);
                v.into()
            }
        }
    }
}

/// whether a libnvrtc can be loaded (cudarc panics on a missing library: ask first)
pub fn available() -> bool {
    // SAFETY: only tries dlopen on cudarc's candidate names.
    unsafe { sys::is_culib_present() }
}

/// (major, minor) of the loaded NVRTC
pub fn version() -> Result<(i32, i32), String> {
    if !available() {
        return Err("libnvrtc not found on the loader's path".into());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-parameters of nvrtcVersion.
    let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    if r != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("nvrtcVersion failed: {r:?}"));
    }
    Ok((major, minor))
}

/// the options a module is compiled with for compute capability `arch` (major*10 + minor)
pub fn options(target: Target, arch: u32) -> Vec<String> {
    let gpu = match target {
        Target::Cubin => format!("--gpu-architecture=sm_{arch}"),
        Target::Ptx => format!("--gpu-architecture=compute_{arch}"),
    };
    vec![gpu, "--std=c++17".into(), "-default-device".into()]
}

/// One NVRTC run: the CUBIN or PTX bytes and NVRTC's log; Err carries the log.
pub fn compile_target(name: &str, source: &str, target: Target, arch: u32, extra: &[&str]) -> Result<(Vec<u8>, String), String> {
    if !available() {
        return Err("libnvrtc not found on the loader's path".into());
    }
    let src = CString::new(source).map_err(|_| format!("{name}: source has a NUL byte"))?;
    let cname = CString::new(format!("{name}.cu")).map_err(|_| format!("{name}: bad name"))?;
    let prog = result::create_program(&src, Some(&cname)).map_err(|e| format!("{name}: nvrtcCreateProgram: {e:?}"))?;
    let mut opts = options(target, arch);
    opts.extend(extra.iter().map(|s| s.to_string()));
    let what = match target {
        Target::Cubin => format!("sm_{arch}"),
        Target::Ptx => format!("compute_{arch}"),
    };
    // SAFETY: prog was created above and is destroyed once, at the end; the out-buffers are
    // sized by the matching *Size call.
    unsafe {
        let compiled = result::compile_program(prog, &opts);
        let log = result::get_program_log(prog).map(|l| c_chars_to_string(&l)).unwrap_or_default();
        let r = match (compiled, target) {
            (Err(e), _) => Err(format!("{name}: NVRTC failed for {what} ({e:?}):\n{log}")),
            (Ok(()), Target::Ptx) => result::get_ptx(prog).map(|p| c_chars_to_string(&p).into_bytes()).map_err(|e| format!("{name}: nvrtcGetPTX: {e:?}")),
            (Ok(()), Target::Cubin) => {
                let mut size = 0usize;
                if sys::nvrtcGetCUBINSize(prog, &mut size) != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                    Err(format!("{name}: no CUBIN for {what}"))
                } else {
                    let mut buf = vec![0u8; size];
                    match sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char) {
                        sys::nvrtcResult::NVRTC_SUCCESS => Ok(buf),
                        r => Err(format!("{name}: nvrtcGetCUBIN: {r:?}")),
                    }
                }
            }
        };
        let _ = result::destroy_program(prog);
        r.map(|b| (b, log))
    }
}

/// The order of attempts: CUBIN, else PTX. Ok carries the image and, after a fallback, why the
/// CUBIN failed; Err both reasons.
pub fn cubin_else_ptx(mut compile: impl FnMut(Target) -> Result<Vec<u8>, String>) -> Result<(Image, Option<String>), String> {
    match compile(Target::Cubin) {
        Ok(bytes) => Ok((Image { target: Target::Cubin, bytes }, None)),
        Err(cubin) => match compile(Target::Ptx) {
            Ok(bytes) => Ok((Image { target: Target::Ptx, bytes }, Some(cubin))),
            Err(ptx) => Err(format!("CUBIN: {cubin}; PTX: {ptx}")),
        },
    }
}

/// compiles a module for compute capability `arch`: CUBIN, PTX when that fails (logged)
pub fn compile(name: &str, source: &str, arch: u32) -> Result<Image, String> {
    let (image, fallback) = cubin_else_ptx(|t| compile_target(name, source, t, arch, &[]).map(|(b, _)| b))?;
    if let Some(why) = fallback {
        crate::log_line(
            ggml_abi::log::Level::Warn,
            &format!("ggml-rs-cuda: module {name}: no CUBIN for sm_{arch}, loading PTX for compute_{arch} instead ({})\n", why.trim()),
        );
    }
    Ok(image)
}

/// compiles `source` to machine code for sm_`arch` with ptxas's report (`-Xptxas -v`): the
/// CUBIN's size and NVRTC's log (registers, spills)
pub fn compile_cubin(name: &str, source: &str, arch: u32) -> Result<(usize, String), String> {
    compile_target(name, source, Target::Cubin, arch, &["-Xptxas", "-v"]).map(|(b, log)| (b.len(), log))
}

/// the loaded libnvrtc's path, from a `/proc/self/maps` text
pub fn loaded_path_in(maps: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(|f| f.starts_with("libnvrtc.so")))
        .map(Path::to_path_buf)
}

/// the NVRTC builtins libraries in `dir` (`libnvrtc-builtins.so*`), sorted
pub fn builtins_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten().map(|e| e.path()).filter(|p| p.file_name().and_then(|f| f.to_str()).is_some_and(|f| f.starts_with("libnvrtc-builtins.so"))).collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Loads NVRTC, then the builtins library next to it by full path (global, kept: NVRTC's own
/// dlopen by soname then finds it), and compiles a one-line kernel for `arch`. Ok: the target
/// the modules will get (CUBIN, or PTX after a failed CUBIN); Err: one sentence naming libnvrtc's
/// path and where its builtins were looked for.
pub fn self_check(arch: u32) -> Result<Target, String> {
    let (major, minor) = version()?;
    let lib = std::fs::read_to_string("/proc/self/maps").ok().and_then(|m| loaded_path_in(&m));
    let dir = lib.as_ref().and_then(|p| p.parent()).map(Path::to_path_buf);
    let builtins = dir.as_deref().map(builtins_in).unwrap_or_default();
    for b in &builtins {
        if let Ok(c) = CString::new(b.as_os_str().as_encoded_bytes()) {
            // SAFETY: dlopen of a file path; the handle is kept for the process's life.
            unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        }
    }
    let probe = "extern \"C\" __global__ void ggml_rs_probe(float *x) { x[threadIdx.x] *= 2.0f; }\n";
    match cubin_else_ptx(|t| compile_target("probe", probe, t, arch, &[]).map(|(b, _)| b)) {
        Ok((image, _)) => Ok(image.target),
        Err(e) => {
            let lib = lib.map(|p| p.display().to_string()).unwrap_or_else(|| "libnvrtc (path unknown)".into());
            let where_ = match (&dir, builtins.is_empty()) {
                (Some(d), true) => format!("no libnvrtc-builtins.so.{major}.{minor} in {}: put the folder that has it on LD_LIBRARY_PATH", d.display()),
                (Some(d), false) => format!("libnvrtc-builtins from {} loaded", d.display()),
                (None, _) => format!("libnvrtc-builtins.so.{major}.{minor} must be next to libnvrtc or on LD_LIBRARY_PATH"),
            };
            Err(format!("NVRTC {major}.{minor} ({lib}) cannot compile a kernel for sm_{arch} ({where_}): {}", e.lines().next().unwrap_or("").trim()))
        }
    }
}

fn c_chars_to_string(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_ask_for_the_devices_machine_code_then_its_ptx() {
        assert_eq!(options(Target::Cubin, 90)[0], "--gpu-architecture=sm_90");
        assert_eq!(options(Target::Ptx, 90)[0], "--gpu-architecture=compute_90");
        assert_eq!(options(Target::Cubin, 86)[0], "--gpu-architecture=sm_86");
        assert_eq!(options(Target::Cubin, 120)[0], "--gpu-architecture=sm_120");
        for t in [Target::Cubin, Target::Ptx] {
            // no CUDA header: the kernels compile from NVRTC alone; device code by default
            assert!(options(t, 80).iter().any(|o| o == "-default-device"));
            assert_eq!(options(t, 80).iter().filter(|o| o.starts_with("--gpu-architecture=")).count(), 1);
        }
    }

    #[test]
    fn a_failed_cubin_falls_back_to_ptx_and_says_why() {
        let mut asked = Vec::new();
        let (img, why) = cubin_else_ptx(|t| {
            asked.push(t);
            Ok(b"\x7fELF...".to_vec())
        })
        .unwrap();
        assert_eq!((img.target, why, &asked[..]), (Target::Cubin, None, &[Target::Cubin][..]));
        let (img, why) = cubin_else_ptx(|t| if t == Target::Cubin { Err("sm_999 unknown".into()) } else { Ok(b".entry k(".to_vec()) }).unwrap();
        assert_eq!(img.target, Target::Ptx);
        assert_eq!(why.as_deref(), Some("sm_999 unknown"));
        let both = cubin_else_ptx(|t| Err(format!("{t:?} failed"))).unwrap_err();
        assert!(both.contains("Cubin failed") && both.contains("Ptx failed"), "{both}");
    }

    #[test]
    fn stored_images_are_recognized_and_ptx_is_loaded_nul_terminated() {
        let cubin = Image::from_bytes(b"\x7fELF\x02\x01rest".to_vec()).unwrap();
        assert_eq!(cubin.target, Target::Cubin);
        assert_eq!(&*cubin.load_bytes(), b"\x7fELF\x02\x01rest");
        let ptx = Image::from_bytes(b".version 9.0\n.entry k()\n".to_vec()).unwrap();
        assert_eq!(ptx.target, Target::Ptx);
        assert_eq!(ptx.load_bytes().last(), Some(&0));
        // a truncated or foreign file is not an image
        assert!(Image::from_bytes(b".version 9.0\n".to_vec()).is_none());
        assert!(Image::from_bytes(vec![0xff, 0xfe]).is_none());
    }

    #[test]
    fn libnvrtc_and_its_builtins_are_found_where_they_are() {
        let maps = "7f00-7f01 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n\
                    7f02-7f03 r-xp 00000000 08:01 13 /opt/nv/lib/libnvrtc-builtins.so.13.0\n\
                    7f04-7f05 r-xp 00000000 08:01 14 /opt/nv/lib/libnvrtc.so.13\n\
                    7f06-7f07 rw-p 00000000 00:00 0 \n";
        assert_eq!(loaded_path_in(maps), Some(PathBuf::from("/opt/nv/lib/libnvrtc.so.13")));
        assert_eq!(loaded_path_in("7f00-7f01 r-xp 0 0 0 /usr/lib/libc.so.6\n"), None);
        let dir = std::env::temp_dir().join(format!("ggml-rs-cuda-nvrtc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(builtins_in(&dir).is_empty());
        for f in ["libnvrtc.so.13", "libnvrtc-builtins.so.13.0", "other.so"] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        assert_eq!(builtins_in(&dir), vec![dir.join("libnvrtc-builtins.so.13.0")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With NVRTC present: a libnvrtc whose folder has no builtins library (a process of this
    /// test binary, `missing_builtins_child`, with LD_LIBRARY_PATH at a folder holding a link to
    /// libnvrtc alone) fails the init check with one sentence naming that libnvrtc and folder.
    #[test]
    fn a_missing_builtins_library_is_one_clear_error_naming_the_path() {
        if !available() {
            eprintln!("SKIP a_missing_builtins_library_is_one_clear_error_naming_the_path: no libnvrtc on the loader's path");
            return;
        }
        version().unwrap();
        let lib = loaded_path_in(&std::fs::read_to_string("/proc/self/maps").unwrap()).expect("libnvrtc in /proc/self/maps");
        let dir = std::env::temp_dir().join(format!("ggml-rs-cuda-nvrtc-alone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let alone = dir.join(lib.file_name().unwrap());
        // a hard link (same file system) or a copy: /proc/self/maps must name this folder
        if std::fs::hard_link(&lib, &alone).is_err() {
            std::fs::copy(&lib, &alone).unwrap();
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "nvrtc::tests::missing_builtins_child", "--nocapture", "--test-threads=1"])
            .env("LD_LIBRARY_PATH", &dir)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().find_map(|l| l.split_once("SELF_CHECK ").map(|(_, r)| r)).unwrap_or_else(|| panic!("no answer from the child: {text}"));
        assert!(line.starts_with("Err("), "{line}");
        assert!(line.contains(&alone.display().to_string()), "names libnvrtc: {line}");
        assert!(line.contains(&format!("in {}", dir.display())) && line.contains("libnvrtc-builtins"), "names the folder: {line}");
    }

    /// the child of the test above (run by it, with LD_LIBRARY_PATH set)
    #[test]
    #[ignore = "run by a_missing_builtins_library_is_one_clear_error_naming_the_path"]
    fn missing_builtins_child() {
        println!("SELF_CHECK {:?}", self_check(90));
    }

    /// With NVRTC present (scripts/cuda-nvrtc.sh; the suite requires it): the init check passes
    /// and gives CUBIN for sm_90, and a module compiles to an sm_90 CUBIN (an ELF image).
    #[test]
    fn with_nvrtc_the_init_check_passes_and_a_cubin_comes_back_for_sm_90() {
        if !available() {
            assert!(std::env::var("GGML_RS_CUDA_NVRTC_REQUIRED").as_deref() != Ok("1"), "GGML_RS_CUDA_NVRTC_REQUIRED=1 and no libnvrtc was found");
            eprintln!("SKIP with_nvrtc_the_init_check_passes_and_a_cubin_comes_back_for_sm_90: no libnvrtc on the loader's path");
            return;
        }
        assert_eq!(self_check(90), Ok(Target::Cubin));
        let m = crate::kernels::Module::Norm;
        let img = compile(m.name(), &m.source(), 90).unwrap();
        assert_eq!(img.target, Target::Cubin);
        assert!(img.bytes.starts_with(b"\x7fELF"));
        assert_eq!(Image::from_bytes(img.bytes.clone()), Some(img));
        // an architecture NVRTC does not know: neither CUBIN nor PTX, and the error says both
        let e = compile(m.name(), &m.source(), 11).unwrap_err();
        assert!(e.contains("CUBIN") && e.contains("PTX"), "{e}");
    }
}
