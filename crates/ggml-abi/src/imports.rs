//! The functions of the rest of ggml-base this library calls, found when first called rather
//! than when the library is loaded.
//!
//! `LD_PRELOAD=libggml_rs.so` puts the library into every process the preloaded program starts
//! (`timeout`, `env`, a shell, Python), most of which never load ggml-base; and a program that
//! loads ggml-base later with `dlopen(RTLD_LOCAL)` (Python's ctypes) keeps its symbols out of
//! the global scope. Imports the dynamic linker binds at load time would make the first kind of
//! process fail to start ("undefined symbol") and could never see the second. So no ggml symbol
//! is a strong undefined reference of the library: `ggml_imports!` turns each declaration into a
//! Rust function of the same name and signature that calls through a pointer kept in an
//! `AtomicPtr`, looked up on the first call. The library is inert until then: nothing runs at
//! load time, and a process that never calls into ggml pays nothing.
//!
//! Where a symbol is looked for, in order:
//! 1. a weak reference (a table in C, `$OUT_DIR/weak_imports.c`, that build.rs generates from
//!    the declarations in `sys.rs`). When the static library is linked into ggml-base or into an
//!    executable with ggml, the static linker resolves it, and `dlsym` could not see a symbol the
//!    executable does not export (`c_tests/static_link.c`). In the shared library it is resolved
//!    at load time when ggml-base is already there (LD_PRELOAD over a program linked to
//!    ggml-base, or ggml-base linked to us) and is NULL, with no error, otherwise.
//! 2. `dlsym(RTLD_DEFAULT)`: ggml-base loaded after us into the global scope.
//! 3. every loaded object, through `dlopen(RTLD_NOLOAD)` of each and `dlsym` on that handle
//!    (ggml-base `dlopen`ed with `RTLD_LOCAL`, e.g. by llama-cpp-python).
//!
//! The names are ggml-base's, which this library does not define (the preload test checks that
//! each one is a weak undefined symbol of the shared library), so none of these steps can find
//! the library's own exports. A function found nowhere is a process that calls this library
//! without ggml-base: one message naming the function, then abort (ggml's own abort path may be
//! what is missing). The two meta-device predicates have a safe answer instead: without
//! ggml-backend-meta's code in the process (a static link that did not need it) no meta buffer
//! or buffer type can exist, so they are false.
//!
//! Cost on the hot path: a relaxed load and a never-taken branch before the indirect call, the
//! same indirect call the GOT gave before.

use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

/// One imported function: its name and, once found, its address.
pub struct Import {
    name: &'static CStr,
    addr: AtomicPtr<c_void>,
}

/// Stored for a function with a fallback that is in no loaded object (see the module docs).
const ABSENT: *mut c_void = std::ptr::without_provenance_mut(1);

impl Import {
    pub const fn new(name: &'static CStr) -> Import {
        Import { name, addr: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// The function's address; on the first call it is looked up, and a function found nowhere
    /// ends the process with a message naming it.
    #[inline(always)]
    pub fn get(&self) -> *mut c_void {
        // Relaxed: the address is code of an object the loader has mapped and relocated before
        // anyone could look it up; threads that race on the first call store the same value.
        let p = self.addr.load(Ordering::Relaxed);
        if p.is_null() { self.resolve_or_abort() } else { p }
    }

    /// The function's address, or None when no loaded object has it (remembered).
    #[inline(always)]
    pub fn get_optional(&self) -> Option<*mut c_void> {
        let mut p = self.addr.load(Ordering::Relaxed);
        if p.is_null() {
            p = self.resolve_optional();
        }
        if p == ABSENT { None } else { Some(p) }
    }

    #[cold]
    #[inline(never)]
    fn resolve_or_abort(&self) -> *mut c_void {
        match lookup(self.name) {
            Some(p) => {
                self.addr.store(p, Ordering::Relaxed);
                p
            }
            None => missing(self.name, None),
        }
    }

    #[cold]
    #[inline(never)]
    fn resolve_optional(&self) -> *mut c_void {
        let p = lookup(self.name).unwrap_or(ABSENT);
        self.addr.store(p, Ordering::Relaxed);
        p
    }
}

/// One entry of the generated weak table (`struct ggml_rs_weak_import` in weak_imports.c).
#[repr(C)]
struct WeakImport {
    name: *const c_char,
    addr: *mut c_void,
}

unsafe extern "C" {
    /// Hidden (not exported), terminated by an entry whose name is NULL.
    static ggml_rs_weak_imports: [WeakImport; 0];
}

/// Where `name` is, looked for in the order of the module docs.
pub fn lookup(name: &CStr) -> Option<*mut c_void> {
    weak(name).or_else(|| global(name)).or_else(|| any_loaded_object(name))
}

fn weak(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: the table is a static array of the C shim, terminated by a NULL name; every name is
    // a NUL-terminated string literal.
    unsafe {
        let mut e = ggml_rs_weak_imports.as_ptr();
        while !(*e).name.is_null() {
            if CStr::from_ptr((*e).name) == name {
                return (!(*e).addr.is_null()).then_some((*e).addr);
            }
            e = e.add(1);
        }
    }
    None
}

fn global(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's tables.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// Every distinct address `name` has in the loaded objects (each object searched with its
/// dependencies, as `dlsym` on its handle does; the main program through `RTLD_DEFAULT`). A
/// backend uses it to see whether another library of the process defines the same entry point
/// (upstream's CPU backend beside ours).
pub fn lookup_all(name: &CStr) -> Vec<*mut c_void> {
    let mut found: Vec<*mut c_void> = global(name).into_iter().collect();
    for_each_loaded_object(name, |p| {
        if !found.contains(&p) {
            found.push(p);
        }
        false
    });
    found
}

/// `dlsym` on every loaded object, including those loaded with `RTLD_LOCAL`.
fn any_loaded_object(name: &CStr) -> Option<*mut c_void> {
    let mut first = None;
    for_each_loaded_object(name, |p| {
        first = Some(p);
        true
    });
    first
}

/// Calls `found(address)` for each loaded object (in load order) where `dlsym` finds `name`,
/// until it returns true.
fn for_each_loaded_object(name: &CStr, mut found: impl FnMut(*mut c_void) -> bool) {
    // the paths first, then the lookups: dlopen is not called from inside dl_iterate_phdr, which
    // holds the loader's lock
    let mut paths: Vec<Vec<u8>> = Vec::new();
    unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info and the Vec we gave it; dlpi_name is NULL or
        // a NUL-terminated path ("" for the main program, already searched through RTLD_DEFAULT).
        unsafe {
            let paths = &mut *(data as *mut Vec<Vec<u8>>);
            let n = (*info).dlpi_name;
            if !n.is_null() && *n != 0 {
                paths.push(CStr::from_ptr(n).to_bytes_with_nul().to_vec());
            }
        }
        0
    }
    // SAFETY: the callback only reads `info` and appends to `paths`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(collect), &mut paths as *mut Vec<Vec<u8>> as *mut c_void) };
    for path in paths {
        // SAFETY: RTLD_NOLOAD never loads anything: it returns a handle (a new reference, given
        // back by dlclose) for an object already loaded, or NULL. dlsym on that handle searches the
        // object and its dependencies. The address stays valid while the object stays loaded, which
        // ggml-base does while anything calls into this library.
        unsafe {
            let h = libc::dlopen(path.as_ptr() as *const c_char, libc::RTLD_NOLOAD | libc::RTLD_LAZY);
            if h.is_null() {
                continue;
            }
            let p = libc::dlsym(h, name.as_ptr());
            libc::dlclose(h);
            if !p.is_null() && found(p) {
                return;
            }
        }
    }
}

/// A ggml function this library needs is in no loaded object: say which (after `context`, the
/// message that was being reported, if any), and abort. Not through ggml's logger or
/// `ggml_abort` (they are what is missing), and no panic (we may be inside a call from C).
#[cold]
pub fn missing(name: &CStr, context: Option<&str>) -> ! {
    let text = format!(
        "{}ggml-rs: {} is not in this process: ggml-base (libggml-base) is not loaded, or not the \
         ggml this library was built for (ggml {}); ggml-rs cannot work without it\n",
        context.map(|c| format!("{c}\n")).unwrap_or_default(),
        name.to_string_lossy(),
        crate::config::GGML_VERSION
    );
    // SAFETY: write(2) of a valid buffer, then abort(3); nothing else runs.
    unsafe {
        libc::write(2, text.as_ptr() as *const c_void, text.len());
        libc::abort()
    }
}

/// Declares ggml-base's functions as Rust functions of the same names and signatures that call
/// through an [`Import`] (see the module docs). Forms:
///
/// - `fn name(args) -> ret;`
/// - `#[if_absent(value)] fn name(args) -> ret;`: returns `value` when no loaded object has it;
/// - `variadic fn name(fixed args; more args) -> ret;`: a C function `name(fixed args, ...)`,
///   called with the arguments after `;` as its variadic part (Rust cannot define variadic
///   functions; our callers always pass the same ones).
///
/// build.rs reads the names from this macro's invocation in `sys.rs` for the weak table.
macro_rules! ggml_imports {
    () => {};
    ($(#[doc = $doc:literal])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; $($rest:tt)*) => {
        $(#[doc = $doc])*
        #[inline(always)]
        pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
            static IMPORT: $crate::imports::Import = $crate::imports::Import::new(
                match ::std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(n) => n,
                    Err(_) => panic!("a name without NUL"),
                },
            );
            // SAFETY: the address is ggml-base's function of this name, whose C signature is
            // the one declared here (checked against the pinned headers by scripts/check_abi.sh).
            unsafe {
                let f = ::std::mem::transmute::<*mut ::std::ffi::c_void, unsafe extern "C" fn($($ty),*) $(-> $ret)?>(IMPORT.get());
                f($($arg),*)
            }
        }
        $crate::imports::ggml_imports!($($rest)*);
    };
    ($(#[doc = $doc:literal])* #[if_absent($absent:expr)] fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; $($rest:tt)*) => {
        $(#[doc = $doc])*
        #[inline(always)]
        pub unsafe fn $name($($arg: $ty),*) -> $ret {
            static IMPORT: $crate::imports::Import = $crate::imports::Import::new(
                match ::std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(n) => n,
                    Err(_) => panic!("a name without NUL"),
                },
            );
            match IMPORT.get_optional() {
                // SAFETY: as in the plain form.
                Some(p) => unsafe {
                    let f = ::std::mem::transmute::<*mut ::std::ffi::c_void, unsafe extern "C" fn($($ty),*) -> $ret>(p);
                    f($($arg),*)
                },
                None => $absent,
            }
        }
        $crate::imports::ggml_imports!($($rest)*);
    };
    ($(#[doc = $doc:literal])* variadic fn $name:ident($($arg:ident: $ty:ty),*; $($varg:ident: $vty:ty),*) $(-> $ret:ty)?; $($rest:tt)*) => {
        $(#[doc = $doc])*
        #[inline(always)]
        pub unsafe fn $name($($arg: $ty),*, $($varg: $vty),*) $(-> $ret)? {
            static IMPORT: $crate::imports::Import = $crate::imports::Import::new(
                match ::std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(n) => n,
                    Err(_) => panic!("a name without NUL"),
                },
            );
            // SAFETY: as in the plain form; the C function is variadic and the extra arguments
            // are passed as its variadic part.
            unsafe {
                let f = ::std::mem::transmute::<*mut ::std::ffi::c_void, unsafe extern "C" fn($($ty),*, ...) $(-> $ret)?>(IMPORT.get());
                f($($arg),*, $($varg),*)
            }
        }
        $crate::imports::ggml_imports!($($rest)*);
    };
}
pub(crate) use ggml_imports;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_function_of_the_process() {
        // libc's, through RTLD_DEFAULT
        assert!(lookup(c"strlen").is_some());
    }

    #[test]
    fn lookup_all_finds_one_definition_once() {
        let all = lookup_all(c"strlen");
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(Some(all[0]), lookup(c"strlen"));
        assert!(lookup_all(c"ggml_rs_no_such_function").is_empty());
    }

    #[test]
    fn a_name_nobody_defines_is_absent_and_remembered() {
        static I: Import = Import::new(c"ggml_rs_no_such_function");
        assert_eq!(I.get_optional(), None);
        assert_eq!(I.addr.load(Ordering::Relaxed), ABSENT);
        assert_eq!(I.get_optional(), None);
    }
}
