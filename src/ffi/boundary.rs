//! The panic boundary every `extern "C"` function of the library runs inside.
//!
//! A panic must never unwind into C. `ffi_boundary!` catches an unwinding panic and aborts
//! through `ggml_abort` with the function's name and the panic message; in release builds panics
//! abort at once (`panic = "abort"`), and the hook installed on first entry routes them through
//! `ggml_abort` as well, so `ggml_set_abort_callback` sees them either way.

use std::any::Any;
use std::sync::Once;

use crate::ggml::graph::GraphRef;
use crate::ggml::sys::ggml_cgraph;

static HOOK: Once = Once::new();

fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Called on entry to every export: installs (once) the hook that sends panics to ggml_abort.
#[inline]
pub fn enter() {
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let (file, line) = info.location().map(|l| (l.file().to_string(), l.line())).unwrap_or(("ggml-rs".to_string(), 0));
            let text = message(info.payload());
            crate::ggml::log::abort(&file, line, &format!("ggml-rs: internal error (panic): {text}"));
        }));
    });
}

/// Reached only when a panic unwound without the hook (the hook aborts first otherwise).
pub fn panicked(function: &str, payload: Box<dyn Any + Send>) -> ! {
    crate::ggml::log::abort(file!(), line!(), &format!("{function}: internal error (panic): {}", message(&*payload)))
}

/// The last plain segment of an item path: the function a `function_name!()` stands in (the
/// marker item and closures skipped).
pub fn enclosing_function(path: &'static str) -> &'static str {
    path.rsplit("::").find(|segment| *segment != "function_name_marker" && !segment.starts_with('{')).unwrap_or(path)
}

/// The name of the function this expands in, for messages: every export names itself without
/// writing its name a second time (read from the type name of an item declared here).
#[macro_export]
macro_rules! function_name {
    () => {{
        fn function_name_marker() {}
        $crate::ffi::boundary::enclosing_function(::std::any::type_name_of_val(&function_name_marker))
    }};
}

/// Runs `$body` inside the panic boundary; see the module docs.
#[macro_export]
macro_rules! ffi_boundary {
    ($body:block) => {{
        $crate::ffi::boundary::enter();
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(value) => value,
            Err(payload) => $crate::ffi::boundary::panicked($crate::function_name!(), payload),
        }
    }};
}

/// Converts a raw pointer argument into its handle, aborting with a message when it is NULL
/// (upstream asserts on these).
#[macro_export]
macro_rules! arg {
    ($kind:ident, $ptr:expr) => {{
        let ptr = $ptr;
        // SAFETY: the C API contract: a non-NULL handle argument points to a live object.
        match unsafe { $crate::ggml::handles::$kind::from_raw(ptr) } {
            Some(h) => h,
            None => $crate::fatal!("{}: argument `{}` is NULL", $crate::function_name!(), stringify!($ptr)),
        }
    }};
}

/// As `arg!`, for tensors.
#[macro_export]
macro_rules! tensor_arg {
    ($ptr:expr) => {{
        let ptr = $ptr;
        // SAFETY: the C API contract: a non-NULL tensor argument points to a live tensor.
        match unsafe { $crate::ggml::tensor::TensorRef::from_raw(ptr) } {
            Some(t) => t,
            None => $crate::fatal!("{}: argument `{}` is NULL", $crate::function_name!(), stringify!($ptr)),
        }
    }};
}

/// The graph argument of `function` (every export that takes a `ggml_cgraph *`), aborting with a
/// message naming the function when it is NULL, as upstream asserts.
pub(crate) fn graph_arg(function: &str, graph: *mut ggml_cgraph) -> GraphRef {
    // SAFETY: the C API contract: a non-NULL graph argument is a live graph.
    match unsafe { GraphRef::from_raw(graph) } {
        Some(g) => g,
        None => crate::fatal!("{function}: argument `graph` is NULL"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn function_name_is_the_enclosing_function() {
        fn ggml_example_export() -> &'static str {
            crate::function_name!()
        }
        fn inside_closures() -> &'static str {
            let inner = || crate::function_name!();
            let outer = || inner();
            std::hint::black_box(outer)()
        }
        assert_eq!(ggml_example_export(), "ggml_example_export");
        assert_eq!(inside_closures(), "inside_closures");
    }
}
