//! Debug mode `GGML_RS_ALLOC_POISON=1`: every tensor a graph allocator places is filled with
//! 0xFF bytes (NaN for float types, -1 for integers), and before a node is computed its sources
//! are checked: a source that still holds nothing but the pattern was never written (an input the
//! caller forgot to set, or memory read before anything computed it), and is reported by name.
//!
//! Checking reads every source back to the host, so this is for debugging only.

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use crate::backend::tensor_io::{tensor_get, tensor_memset};
use crate::ggml::tensor::TensorRef;

const PATTERN: u8 = 0xFF;

pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("GGML_RS_ALLOC_POISON").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Addresses of the tensors filled since they were placed.
fn poisoned() -> &'static Mutex<HashSet<usize>> {
    static SET: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    SET.get_or_init(|| Mutex::new(HashSet::new()))
}

pub fn fill(tensor: TensorRef) {
    let n = tensor.nbytes();
    if n == 0 || tensor.storage_buffer().is_none_or(|b| !b.has_memset_tensor()) {
        return;
    }
    tensor_memset(tensor, PATTERN, 0, n);
    poisoned().lock().expect("poison set").insert(tensor.addr());
}

/// Reports the sources of `node` that were placed by a graph allocator and never written.
/// Returns how many it reported.
pub fn check_sources(node: TensorRef) -> usize {
    if !enabled() {
        return 0;
    }
    let mut reported = 0;
    for src in node.srcs().into_iter().flatten() {
        let root = src.view_src().unwrap_or(src);
        if !poisoned().lock().expect("poison set").contains(&root.addr()) || src.data().is_null() {
            continue;
        }
        let n = src.nbytes();
        if n == 0 {
            continue;
        }
        let mut bytes = vec![0u8; n];
        tensor_get(src, bytes.as_mut_ptr() as *mut c_void, 0, n);
        if bytes.iter().all(|&b| b == PATTERN) {
            crate::log_error!(
                "GGML_RS_ALLOC_POISON: node {} ({}) reads tensor {}, which nothing has written since it was allocated\n",
                node,
                node.op_name(),
                src
            );
            reported += 1;
        } else {
            poisoned().lock().expect("poison set").remove(&root.addr());
        }
    }
    reported
}
