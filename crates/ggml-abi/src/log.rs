//! Messages and aborts go through ggml's own logger and abort path, so `ggml_log_set`,
//! `llama_log_set` and `ggml_set_abort_callback` see them exactly as they see upstream's.

use std::ffi::{CString, c_int};

use crate::sys;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
    /// continuation of the previous message (upstream's GGML_LOG_CONT)
    Cont,
}

impl Level {
    fn to_c(self) -> sys::ggml_log_level {
        match self {
            Level::Debug => sys::GGML_LOG_LEVEL_DEBUG,
            Level::Info => sys::GGML_LOG_LEVEL_INFO,
            Level::Warn => sys::GGML_LOG_LEVEL_WARN,
            Level::Error => sys::GGML_LOG_LEVEL_ERROR,
            Level::Cont => sys::GGML_LOG_LEVEL_CONT,
        }
    }
}

fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', "\\0")).expect("interior NULs were replaced")
}

/// Sends `text` (which carries its own trailing newline, as upstream's messages do) to ggml's logger.
pub fn log(level: Level, text: &str) {
    let text = c_string(text);
    // SAFETY: ggml_log_internal is ggml-base's printf-style logger; "%s" with a valid C string
    // is a well-formed call.
    unsafe { sys::ggml_log_internal(level.to_c(), c"%s".as_ptr(), text.as_ptr()) }
}

/// Aborts through `ggml_abort`: prints `file:line: message` and a backtrace, calls the abort
/// callback the application installed, then aborts the process.
pub fn abort(file: &str, line: u32, message: &str) -> ! {
    // without ggml-base (a cold path: look again each time), the message still gets out
    if crate::imports::lookup(c"ggml_abort").is_none() {
        crate::imports::missing(c"ggml_abort", Some(&format!("{file}:{line}: {message}")));
    }
    let file = c_string(file);
    let message = c_string(message);
    // SAFETY: ggml_abort is printf-style; "%s" with a valid C string is a well-formed call. It
    // does not return.
    unsafe { sys::ggml_abort(file.as_ptr(), line as c_int, c"%s".as_ptr(), message.as_ptr()) }
}

#[macro_export]
macro_rules! log_debug { ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Debug, &format!($($arg)*)) } }
#[macro_export]
macro_rules! log_info { ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Info, &format!($($arg)*)) } }
#[macro_export]
macro_rules! log_warn { ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Warn, &format!($($arg)*)) } }
#[macro_export]
macro_rules! log_error { ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Error, &format!($($arg)*)) } }

/// Upstream's GGML_ABORT: the contract of the C API was broken; say how and abort.
#[macro_export]
macro_rules! fatal {
    ($($arg:tt)*) => { $crate::log::abort(file!(), line!(), &format!($($arg)*)) };
}

/// Upstream's GGML_ASSERT, with a message that says what was expected.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::fatal!($($arg)*);
        }
    };
}
