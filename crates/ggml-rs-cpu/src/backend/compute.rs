//! Computing a ggml graph on the kernels of `ops`: the graph's nodes become [`Node`]s, each handed
//! to `ops::compute` on a persistent pool. Shared by the backend's `graph_compute` and the C API's
//! `ggml_graph_compute`.

use std::ffi::c_void;

use ggml_abi::graph::GraphRef;
use ggml_abi::sys::{self, GGML_STATUS_ABORTED, GGML_STATUS_FAILED, GGML_STATUS_SUCCESS, GGML_TENSOR_FLAG_COMPUTE, ggml_status};
use ggml_abi::tensor::TensorRef;

use crate::block::AlignedBytes;
use crate::ops::{self, Exec, MAX_SRC, Node, OP_PARAMS, Op, View};
use crate::pool::ThreadPool;

/// `ggml_abort_callback`: true asks the computation to stop
pub type AbortCallback = Option<unsafe extern "C" fn(data: *mut c_void) -> bool>;

/// Where graphs run: a persistent pool and a scratch buffer, both kept between graphs (the hot
/// path allocates nothing once they have grown).
pub struct Engine {
    pool: ThreadPool,
    scratch: AlignedBytes,
}

impl Engine {
    pub fn new(n_threads: usize) -> Engine {
        Engine { pool: ThreadPool::new(n_threads.max(1)), scratch: AlignedBytes::default() }
    }

    pub fn n_threads(&self) -> usize {
        self.pool.n_threads()
    }

    /// the pool again with `n_threads` threads (the scratch is kept)
    pub fn set_n_threads(&mut self, n_threads: usize) {
        if n_threads.max(1) != self.pool.n_threads() {
            self.pool = ThreadPool::new(n_threads.max(1));
        }
    }

    /// Computes every node of `graph` that is to be computed (ggml's rules: not a view or NONE,
    /// flagged COMPUTE, not empty), in order. An op the kernels cannot do is an error naming the
    /// node (logged) and `GGML_STATUS_FAILED`: never a silent wrong result. `abort` is asked after
    /// each node.
    pub fn compute(&mut self, graph: GraphRef, abort: AbortCallback, abort_data: *mut c_void) -> ggml_status {
        for (i, t) in graph.node_slice().iter().enumerate() {
            if !is_computed(*t) {
                continue;
            }
            let node = match node_of(t) {
                Ok(n) => n,
                Err(why) => return fail(i, *t, &why),
            };
            let mut exec = Exec::new(&mut self.pool, &mut self.scratch);
            if let Err(e) = ops::compute(&node, &mut exec) {
                return fail(i, *t, &e.0);
            }
            // SAFETY: the callback and its data are the application's (ggml's contract).
            if let Some(cb) = abort
                && unsafe { cb(abort_data) }
            {
                return GGML_STATUS_ABORTED;
            }
        }
        GGML_STATUS_SUCCESS
    }
}

fn fail(index: usize, t: TensorRef, why: &str) -> ggml_status {
    // the kernels' errors name the node and op already (OpError)
    ggml_abi::log_error!("ggml-rs-cpu: graph node {index} ({}): {why}\n", t.op_name());
    GGML_STATUS_FAILED
}

/// whether ggml's CPU backend computes this node (ggml-cpu.c: `ggml_op_is_empty`, the COMPUTE
/// flag, `ggml_is_empty`)
pub fn is_computed(t: TensorRef) -> bool {
    !sys::op::is_empty(t.op()) && t.flags() & GGML_TENSOR_FLAG_COMPUTE != 0 && t.ne().iter().all(|&n| n != 0)
}

fn view_of(t: TensorRef) -> View {
    View { ty: t.type_(), ne: t.ne(), nb: t.nb(), data: t.data() as *mut u8 }
}

/// The node as the kernels see it (its data pointers may be NULL when asked by `supports_op`,
/// before allocation).
pub fn node_of(t: &TensorRef) -> Result<Node<'_>, String> {
    let name = t.name_cstr().to_str().unwrap_or("<name not UTF-8>");
    let op = Op::from_raw(t.op()).ok_or_else(|| format!("'{name}': op {} is not an op of ggml {}", t.op(), ggml_abi::config::GGML_VERSION))?;
    let mut src = [None; MAX_SRC];
    for (s, v) in t.srcs().iter().zip(src.iter_mut()) {
        *v = s.map(view_of);
    }
    // SAFETY: a TensorRef points to a live tensor; op_params is a plain array of it, copied out.
    let params: [i32; OP_PARAMS] = unsafe { (*t.as_ptr()).op_params };
    Ok(Node { op, dst: view_of(*t), src, params, name })
}
