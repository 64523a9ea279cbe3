//! The headers of a set of tensors as they were at one moment, to tell later, in one pass of
//! word comparisons, whether any of them changed since: shape, strides, op and its parameters,
//! flags, sources, view, data, buffer, name or extra. (ggml-cuda tells whether a graph changed
//! the same way, by comparing whole node headers.)

use crate::tensor::{Header, TensorRef};

#[derive(Default)]
pub struct HeaderSnapshot {
    tensors: Vec<TensorRef>,
    headers: Vec<Header>,
}

impl HeaderSnapshot {
    /// The headers of `tensors` now.
    pub fn take(tensors: impl IntoIterator<Item = TensorRef>) -> HeaderSnapshot {
        let tensors: Vec<TensorRef> = tensors.into_iter().collect();
        let headers = tensors.iter().map(|t| t.header()).collect();
        HeaderSnapshot { tensors, headers }
    }

    pub fn tensors(&self) -> &[TensorRef] {
        &self.tensors
    }

    /// Whether every tensor's header is still what it was when taken.
    pub fn holds(&self) -> bool {
        self.tensors.iter().zip(&self.headers).all(|(t, h)| t.has_header(h))
    }
}
