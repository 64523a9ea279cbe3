//! The objects the C API holds as opaque pointers (`ggml_gallocr_t`, `ggml_backend_sched_t`):
//! each is a `Box` of ours, made by [`BoxedHandle::into_c`], used for the length of one exported
//! call through [`BoxedHandle::arg`], and given back by [`BoxedHandle::free`]. This is the one
//! place that turns those pointers back into Rust objects.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::alloc::gallocr::Gallocr;
use crate::ggml::abi_alloc::ggml_gallocr;
use crate::ggml::abi_backend::ggml_backend_sched;
use crate::sched::scheduler::Sched;

/// A Rust object handed to C as `*mut Self::C`.
pub(crate) trait BoxedHandle: Sized {
    /// the opaque C type
    type C;
    /// the argument's name in ggml's headers, for messages
    const ARG: &'static str;

    /// Boxes `self` for C: it lives until [`BoxedHandle::free`].
    fn into_c(self) -> *mut Self::C {
        Box::into_raw(Box::new(self)).cast()
    }

    /// The object behind the argument `ptr` of `function`, for the length of the call (a value
    /// local to the export: the borrow cannot outlive it); aborts naming both when it is NULL.
    fn arg(function: &str, ptr: *mut Self::C) -> HandleArg<Self> {
        match NonNull::new(ptr.cast::<Self>()) {
            Some(p) => HandleArg(p),
            None => crate::fatal!("{function}: argument `{}` is NULL", Self::ARG),
        }
    }

    /// Drops the object behind `ptr` (NULL: nothing, as upstream's `_free` functions).
    ///
    /// # Safety
    /// `ptr` is NULL or was made by `into_c` and not freed; the caller gives it up.
    unsafe fn free(ptr: *mut Self::C) {
        if let Some(p) = NonNull::new(ptr.cast::<Self>()) {
            // SAFETY: made by into_c (Box::into_raw of a Box<Self>), given up by the caller.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    }
}

impl BoxedHandle for Gallocr {
    type C = ggml_gallocr;
    const ARG: &'static str = "galloc";
}

impl BoxedHandle for Sched {
    type C = ggml_backend_sched;
    const ARG: &'static str = "sched";
}

/// The object behind a handle argument, borrowed for one exported call.
pub(crate) struct HandleArg<T>(NonNull<T>);

impl<T> Deref for HandleArg<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a non-NULL handle is a Box<T> made by into_c (the C API contract), alive during
        // the call.
        unsafe { self.0.as_ref() }
    }
}

impl<T> DerefMut for HandleArg<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref; the C API gives the caller exclusive use of the object during the
        // call, and the HandleArg is the call's only way to it.
        unsafe { self.0.as_mut() }
    }
}
