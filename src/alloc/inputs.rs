//! Inputs (leafs the caller writes) that already hold bytes in a graph allocator's memory when a
//! later graph places them anew.
//!
//! - Bytes still their own are carried: read before anything may move or free them, written to
//!   the new place once placed (`Carried`), so a caller that does not set the input again reads
//!   what it held, as with any result carried into the next graph.
//! - Bytes lost (another tensor was placed over them, or the buffer was freed): a caller that
//!   sets the input after allocating (upstream's contract) is fine, one that relies on the old
//!   bytes would compute on garbage. Such an input is filled with a marker when placed
//!   (`watch`); a compute that reads it while it still holds nothing but the marker is refused,
//!   naming the tensor and why (`check`).
//!
//! Rare by construction (inputs are new tensors in most programs), so the common path costs one
//! atomic load per compute.

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::backend::tensor_io::{tensor_get, tensor_set};
use crate::ggml::tensor::TensorRef;

/// The bytes of the inputs being carried (see the module docs).
pub struct Carried(Vec<(TensorRef, Vec<u8>)>);

impl Carried {
    pub fn save(inputs: impl Iterator<Item = TensorRef>) -> Carried {
        Carried(
            inputs
                .map(|tensor| {
                    let mut bytes = vec![0u8; tensor.nbytes()];
                    tensor_get(tensor, bytes.as_mut_ptr() as *mut c_void, 0, bytes.len());
                    (tensor, bytes)
                })
                .collect(),
        )
    }

    /// Writes the bytes to the inputs' (new) places.
    pub fn restore(self) {
        for (tensor, bytes) in self.0 {
            tensor_set(tensor, bytes.as_ptr() as *const c_void, 0, bytes.len());
            moved(tensor); // still unset if it was: it carries the marker along
        }
    }
}

/// Eight bytes no program writes by chance (not a float or integer value anyone sets on purpose).
const MARKER: [u8; 8] = *b"\xA7rs-lost";

struct Watched {
    tensor: usize,
    data: usize,
    why: String,
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
static N_WATCHED: AtomicUsize = AtomicUsize::new(0);

fn marker_of(n: usize) -> Vec<u8> {
    MARKER.iter().copied().cycle().take(n).collect()
}

/// `tensor` was just placed anew after losing its bytes (`why`): mark it.
pub fn watch(tensor: TensorRef, why: String) {
    let n = tensor.nbytes();
    if n == 0 || tensor.data().is_null() {
        return;
    }
    tensor_set(tensor, marker_of(n).as_ptr() as *const c_void, 0, n);
    let mut w = WATCHED.lock().expect("unset inputs");
    w.retain(|e| e.tensor != tensor.addr());
    if w.len() >= 1024 {
        w.remove(0);
    }
    w.push(Watched { tensor: tensor.addr(), data: tensor.data() as usize, why });
    N_WATCHED.store(w.len(), Ordering::Release);
}

/// Whether any input is watched (the only thing the common path asks).
#[inline]
pub fn any() -> bool {
    N_WATCHED.load(Ordering::Acquire) != 0
}

/// `tensor` was moved with its bytes: if it is watched, it is watched at its new place.
pub fn moved(tensor: TensorRef) {
    if !any() {
        return;
    }
    let mut w = WATCHED.lock().expect("unset inputs");
    if let Some(e) = w.iter_mut().find(|e| e.tensor == tensor.addr()) {
        e.data = tensor.data() as usize;
    }
}

/// `tensors` were just placed by a graph allocator, `keep` among them as inputs that carry or
/// lost their bytes: the others hold nothing of what was watched at their address (a tensor
/// made anew where a watched one was would otherwise be taken for it).
pub fn placed(tensors: &[TensorRef], keep: impl Iterator<Item = TensorRef>) {
    if !any() {
        return;
    }
    let mut w = WATCHED.lock().expect("unset inputs");
    let keep: Vec<usize> = keep.map(|t| t.addr()).collect();
    let watched: std::collections::HashSet<usize> = w.iter().map(|e| e.tensor).collect();
    let drop: Vec<usize> = tensors.iter().map(|t| t.addr()).filter(|a| watched.contains(a) && !keep.contains(a)).collect();
    w.retain(|e| !drop.contains(&e.tensor));
    N_WATCHED.store(w.len(), Ordering::Release);
}

/// Checks the sources of `nodes` (and their view sources) against the watched inputs: an input
/// that still holds only the marker was not set; it is reported (by `who`) and false returned.
/// An input found written is not watched any more.
pub fn check(nodes: impl Iterator<Item = TensorRef>, who: &str) -> bool {
    if !any() {
        return true;
    }
    let mut w = WATCHED.lock().expect("unset inputs");
    let mut ok = true;
    for node in nodes {
        for src in node.srcs().into_iter().flatten() {
            let root = src.view_src().unwrap_or(src);
            let Some(k) = w.iter().position(|e| e.tensor == root.addr()) else { continue };
            let n = root.nbytes();
            if root.data() as usize != w[k].data || n == 0 {
                w.swap_remove(k); // placed elsewhere since (not by a graph allocator)
                continue;
            }
            let mut bytes = vec![0u8; n];
            tensor_get(root, bytes.as_mut_ptr() as *mut c_void, 0, n);
            if bytes != marker_of(n) {
                w.swap_remove(k); // set by the caller
                continue;
            }
            crate::log_error!(
                "{who}: node {node} reads input tensor {root}, which has not been set since it was allocated; it held \
                 bytes before, but {}: set it after allocating the graph\n",
                w[k].why
            );
            ok = false;
        }
    }
    N_WATCHED.store(w.len(), Ordering::Release);
    ok
}
