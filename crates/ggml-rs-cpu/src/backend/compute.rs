//! Computing a ggml graph on the kernels of `ops`: the graph's nodes become [`Node`]s, each handed
//! to `ops::compute` on a persistent pool. Shared by the backend's `graph_compute` and the C API's
//! `ggml_graph_compute`.

use std::ffi::c_void;

use ggml_abi::graph::GraphRef;
use ggml_abi::sys::{self, GGML_STATUS_ABORTED, GGML_STATUS_FAILED, GGML_STATUS_SUCCESS, GGML_TENSOR_FLAG_COMPUTE, ggml_status};
use ggml_abi::tensor::TensorRef;

use super::profile::{self, Profile};
use crate::block::AlignedBytes;
use crate::ops::{self, Exec, MAX_SRC, Node, OP_PARAMS, Op, View};
use crate::pool::ThreadPool;
use crate::simd::Level;

/// `ggml_abort_callback`: true asks the computation to stop
pub type AbortCallback = Option<unsafe extern "C" fn(data: *mut c_void) -> bool>;

/// Where graphs run: a persistent pool and a scratch buffer, both kept between graphs (the hot
/// path allocates nothing once they have grown).
pub struct Engine {
    pool: ThreadPool,
    scratch: AlignedBytes,
    /// `GGML_RS_CPU_PROFILE`: per-op times, printed when the engine is dropped
    profile: Option<Box<Profile>>,
}

impl Engine {
    pub fn new(n_threads: usize) -> Engine {
        Engine::with_profile(n_threads, profile::enabled())
    }

    /// an engine that profiles its graphs (or not), whatever the environment says
    pub fn with_profile(n_threads: usize, on: bool) -> Engine {
        let mut pool = ThreadPool::new(n_threads.max(1));
        pool.set_measure_wait(on);
        Engine { pool, scratch: AlignedBytes::default(), profile: on.then(Box::default) }
    }

    /// what was profiled so far (None when not profiling)
    pub fn profile(&self) -> Option<&Profile> {
        self.profile.as_deref()
    }

    pub fn n_threads(&self) -> usize {
        self.pool.n_threads()
    }

    /// the pool again with `n_threads` threads (the scratch is kept)
    pub fn set_n_threads(&mut self, n_threads: usize) {
        if n_threads.max(1) != self.pool.n_threads() {
            let waited = self.pool.waited();
            self.pool = ThreadPool::new(n_threads.max(1));
            self.pool.set_measure_wait(self.profile.is_some());
            if let Some(p) = self.profile.as_deref_mut() {
                p.pool_wait += waited;
            }
        }
    }

    /// Computes every node of `graph` that is to be computed (ggml's rules: not a view or NONE,
    /// flagged COMPUTE, not empty), in order. An op the kernels cannot do is an error naming the
    /// node (logged) and `GGML_STATUS_FAILED`: never a silent wrong result. `abort` is asked after
    /// each node. `use_ref` (`ggml_backend_cpu_set_use_ref`, `ggml_cplan.use_ref`) runs the
    /// scalar reference of every row kernel instead of the SIMD one this CPU selects, as
    /// upstream's flag turns its optimised paths (tiled GEMM, flash-attention tiles, fusion) off.
    pub fn compute(&mut self, graph: GraphRef, abort: AbortCallback, abort_data: *mut c_void, use_ref: bool) -> ggml_status {
        let level = if use_ref { Level::Scalar } else { crate::simd::active() };
        let profiling = self.profile.is_some();
        let graph_start = profile::now_if(profiling);
        let mut status = GGML_STATUS_SUCCESS;
        let nodes = graph.node_slice();
        let mut fused_next = false;
        for (i, t) in nodes.iter().enumerate() {
            if std::mem::take(&mut fused_next) || !is_computed(*t) {
                continue;
            }
            let node = match node_of(t) {
                Ok(n) => n,
                Err(why) => {
                    status = fail(i, *t, &why);
                    break;
                }
            };
            let (jobs0, start) = (self.pool.jobs(), profile::now_if(profiling));
            let mut exec = Exec::with_level(&mut self.pool, &mut self.scratch, level);
            // RMS_NORM + MUL in one pass where upstream's CPU backend fuses them (not under
            // use_ref, nor with GGML_CPU_DISABLE_FUSION=1, as upstream)
            let r = if node.op == Op::RmsNorm
                && !use_ref
                && let Some(w) = rms_norm_mul_next(graph, i)
                && let Ok(mul) = node_of(&nodes[i + 1])
                && ops::rms_norm_mul_fusable(&node, &mul, w)
            {
                fused_next = true;
                ops::rms_norm_mul(&node, &mul, w, &mut exec)
            } else {
                ops::compute(&node, &mut exec)
            };
            if let (Some(p), Some(start)) = (self.profile.as_deref_mut(), start) {
                p.record(profile::key_of(&node), self.pool.jobs() - jobs0, start.elapsed());
                p.nodes += 1;
            }
            if let Err(e) = r {
                status = fail(i, *t, &e.0);
                break;
            }
            // SAFETY: the callback and its data are the application's (ggml's contract).
            if let Some(cb) = abort
                && unsafe { cb(abort_data) }
            {
                status = GGML_STATUS_ABORTED;
                break;
            }
        }
        if let (Some(p), Some(start)) = (self.profile.as_deref_mut(), graph_start) {
            let wall = start.elapsed();
            p.graphs += 1;
            p.graph_time += wall;
            let in_ops: std::time::Duration = p.ops.values().map(|s| s.time).sum();
            // between = all graph time not inside a kernel (kept as a running difference)
            p.between = p.graph_time.saturating_sub(in_ops);
        }
        status
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(p) = self.profile.as_deref_mut() {
            p.pool_wait += self.pool.waited();
            if p.graphs > 0 {
                eprint!("{}", p.report(self.pool.n_threads()));
            }
        }
    }
}

/// upstream's `GGML_CPU_DISABLE_FUSION=1` (read once)
fn fusion_disabled() -> bool {
    crate::config::get().disable_fusion
}

/// The index of the weight source of the MUL after RMS_NORM node `i`, when the two may run as
/// one pass: the graph-level conditions of upstream's `ggml_can_fuse` (the MUL next, computed,
/// reading the norm's output, of its shape; the norm's output used once in the graph, not a
/// view, not a graph output); the kernel's own (types, strides) are `ops::rms_norm_mul_fusable`'s.
fn rms_norm_mul_next(graph: GraphRef, i: usize) -> Option<usize> {
    let nodes = graph.node_slice();
    let (norm, next) = (nodes[i], *nodes.get(i + 1)?);
    if fusion_disabled() || next.op() != Op::Mul as i32 || !is_computed(next) || norm.ne() != next.ne() {
        return None;
    }
    if norm.view_src().is_some() || norm.is_output() || graph.use_count(norm) != 1 {
        return None;
    }
    let w = match (next.src(0), next.src(1)) {
        (Some(a), Some(_)) if a == norm => 1,
        (Some(_), Some(b)) if b == norm => 0,
        _ => return None,
    };
    Some(w)
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
    // src0 as weights repacked at load time (the repack buffer type)
    let packed = t.src(0).and_then(super::repack::packed_of).map(ops::Packed);
    Ok(Node { op, dst: view_of(*t), src, params, name, packed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GgmlType;
    use ggml_abi::sys::{ggml_cgraph, ggml_hash_set, ggml_tensor};

    /// a contiguous f32 tensor over `data` (ggml's layout, built by hand: no ggml-base needed)
    fn f32_tensor(name: &str, op: Op, data: &mut [f32], ne: [i64; 4], flags: i32) -> Box<ggml_tensor> {
        // SAFETY: ggml_tensor is plain old data; all-zero is a valid (empty) tensor.
        let mut t: Box<ggml_tensor> = Box::new(unsafe { std::mem::zeroed() });
        t.type_ = 0;
        t.ne = ne;
        t.nb = [4, 4 * ne[0] as usize, 4 * (ne[0] * ne[1]) as usize, 4 * (ne[0] * ne[1] * ne[2]) as usize];
        t.op = op as i32;
        t.flags = flags;
        t.data = data.as_mut_ptr() as *mut c_void;
        for (d, s) in t.name.iter_mut().zip(name.bytes()) {
            *d = s as _;
        }
        t
    }

    fn graph(nodes: &mut [*mut ggml_tensor]) -> ggml_cgraph {
        ggml_cgraph {
            size: nodes.len() as i32,
            n_nodes: nodes.len() as i32,
            n_leafs: 0,
            nodes: nodes.as_mut_ptr(),
            grads: std::ptr::null_mut(),
            grad_accs: std::ptr::null_mut(),
            leafs: std::ptr::null_mut(),
            use_counts: std::ptr::null_mut(),
            visited_hash_set: ggml_hash_set { size: 0, used: std::ptr::null_mut(), keys: std::ptr::null_mut() },
            order: 0,
            uid: 0,
        }
    }

    unsafe extern "C" fn count_and_stop(data: *mut c_void) -> bool {
        // SAFETY: the test passes a pointer to its counter.
        unsafe { *(data as *mut u32) += 1 };
        true
    }

    #[test]
    fn the_walk_computes_what_ggml_cpu_computes_and_skips_the_rest() {
        let (mut a, mut b) = ([1.0f32, 2.0, 3.0, 4.0], [10.0f32, 20.0, 30.0, 40.0]);
        let (mut sum, mut skipped, mut viewed, mut empty) = ([0.0f32; 4], [-1.0f32; 4], [-1.0f32; 4], [-1.0f32; 0]);
        let mut ta = f32_tensor("a", Op::None, &mut a, [4, 1, 1, 1], 0);
        let mut tb = f32_tensor("b", Op::None, &mut b, [4, 1, 1, 1], 0);
        let pa: *mut ggml_tensor = &mut *ta;
        let pb: *mut ggml_tensor = &mut *tb;
        let with_srcs = |mut t: Box<ggml_tensor>| {
            t.src[0] = pa;
            t.src[1] = pb;
            t
        };
        let mut t_sum = with_srcs(f32_tensor("sum", Op::Add, &mut sum, [4, 1, 1, 1], GGML_TENSOR_FLAG_COMPUTE));
        // no COMPUTE flag (a node another backend computes in a shared graph): not touched
        let mut t_skipped = with_srcs(f32_tensor("skipped", Op::Add, &mut skipped, [4, 1, 1, 1], 0));
        // a view computes nothing
        let mut t_view = with_srcs(f32_tensor("view", Op::View, &mut viewed, [4, 1, 1, 1], GGML_TENSOR_FLAG_COMPUTE));
        // an empty tensor (a dimension of 0) computes nothing
        let mut t_empty = with_srcs(f32_tensor("empty", Op::Add, &mut empty, [4, 0, 1, 1], GGML_TENSOR_FLAG_COMPUTE));
        let mut nodes: Vec<*mut ggml_tensor> = vec![&mut *t_view, &mut *t_skipped, &mut *t_empty, &mut *t_sum];
        let g = graph(&mut nodes);
        // SAFETY: the graph and its tensors live until the end of the test.
        let gr = unsafe { GraphRef::from_raw(&g) }.unwrap();
        let flags: Vec<bool> = gr.node_slice().iter().map(|t| is_computed(*t)).collect();
        assert_eq!(flags, [false, false, false, true]);

        let mut engine = Engine::new(2);
        assert_eq!(engine.compute(gr, None, std::ptr::null_mut(), false), GGML_STATUS_SUCCESS);
        assert_eq!(sum, [11.0, 22.0, 33.0, 44.0]);
        assert_eq!(skipped, [-1.0; 4]);
        assert_eq!(viewed, [-1.0; 4]);

        // the abort callback is asked after each computed node, and stops the graph
        let mut t_sum2 = with_srcs(f32_tensor("sum2", Op::Add, &mut skipped, [4, 1, 1, 1], GGML_TENSOR_FLAG_COMPUTE));
        let mut nodes2: Vec<*mut ggml_tensor> = vec![&mut *t_sum, &mut *t_sum2];
        let g2 = graph(&mut nodes2);
        sum = [0.0; 4];
        let mut asked = 0u32;
        // SAFETY: as above.
        let gr2 = unsafe { GraphRef::from_raw(&g2) }.unwrap();
        assert_eq!(engine.compute(gr2, Some(count_and_stop), &mut asked as *mut u32 as *mut c_void, false), GGML_STATUS_ABORTED);
        assert_eq!(asked, 1);
        assert_eq!(sum, [11.0, 22.0, 33.0, 44.0]);
        assert_eq!(skipped, [-1.0; 4], "the node after the abort ran");

        // the node as the kernels see it: op, shapes, strides, params, name
        let n = node_of(&gr.node_slice()[3]).unwrap();
        assert_eq!((n.op, n.name, n.dst.ne, n.dst.nb[1]), (Op::Add, "sum", [4, 1, 1, 1], 16));
        assert!(n.src[0].is_some() && n.src[1].is_some() && n.src[2].is_none());
    }

    /// a graph of RMS_NORM(x) then MUL(norm, w), with the norm's use count in the graph's hash set
    #[test]
    fn rms_norm_then_mul_is_fused_only_where_upstream_fuses() {
        use ggml_abi::sys::GGML_TENSOR_FLAG_OUTPUT;
        const NE: [i64; 4] = [64, 3, 1, 1];
        let x0: Vec<f32> = (0..192).map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0).collect();
        let w0: Vec<f32> = (0..64).map(|i| 0.5 + (i % 7) as f32 / 3.0).collect();
        // (the norm's output after the run, the MUL's)
        let run = |uses: i32, norm_flags: i32, use_ref: bool| -> (Vec<f32>, Vec<f32>) {
            let (mut x, mut w, mut normed, mut out) = (x0.clone(), w0.clone(), vec![-7.0f32; 192], vec![0f32; 192]);
            let mut tx = f32_tensor("x", Op::None, &mut x, NE, 0);
            let mut tw = f32_tensor("w", Op::None, &mut w, [64, 1, 1, 1], 0);
            let mut tn = f32_tensor("norm", Op::RmsNorm, &mut normed, NE, GGML_TENSOR_FLAG_COMPUTE | norm_flags);
            tn.src[0] = &mut *tx;
            tn.op_params[0] = 1e-5f32.to_bits() as i32;
            let mut tm = f32_tensor("mul", Op::Mul, &mut out, NE, GGML_TENSOR_FLAG_COMPUTE);
            (tm.src[0], tm.src[1]) = (&mut *tn, &mut *tw);
            let mut nodes: Vec<*mut ggml_tensor> = vec![&mut *tn, &mut *tm];
            let mut g = graph(&mut nodes);
            // ggml's visited set: the key at (address >> 4) % size, probing on
            const SIZE: usize = 61;
            let (mut keys, mut used, mut counts) = ([std::ptr::null_mut::<ggml_tensor>(); SIZE], [0u32; 2], [0i32; SIZE]);
            let key: *mut ggml_tensor = &mut *tn;
            let mut at = (key as usize >> 4) % SIZE;
            while used[at / 32] & (1 << (at % 32)) != 0 {
                at = (at + 1) % SIZE;
            }
            (keys[at], counts[at]) = (key, uses);
            used[at / 32] |= 1 << (at % 32);
            g.visited_hash_set = ggml_hash_set { size: SIZE, used: used.as_mut_ptr(), keys: keys.as_mut_ptr() };
            g.use_counts = counts.as_mut_ptr();
            // SAFETY: the graph, its tensors and its hash set live until the end of the closure.
            let gr = unsafe { GraphRef::from_raw(&g) }.unwrap();
            // SAFETY: a live tensor of the graph
            assert_eq!(gr.use_count(unsafe { TensorRef::from_raw(key) }.unwrap()), uses);
            assert_eq!(Engine::new(2).compute(gr, None, std::ptr::null_mut(), use_ref), GGML_STATUS_SUCCESS);
            (normed, out)
        };
        let (normed, want) = run(2, 0, false);
        assert!(normed.iter().all(|v| *v != -7.0), "a norm used twice is computed");
        // used by the MUL alone: one pass, the norm's output never written, the same bits
        let (normed, got) = run(1, 0, false);
        assert!(normed.iter().all(|v| *v == -7.0), "the fused pass wrote the norm's output");
        assert_eq!(got, want);
        // a graph output, or use_ref: the two ops
        for (flags, use_ref) in [(GGML_TENSOR_FLAG_OUTPUT, false), (0, true)] {
            let (normed, got) = run(1, flags, use_ref);
            assert!(normed.iter().all(|v| *v != -7.0), "flags {flags} use_ref {use_ref}: not fused");
            assert_eq!(got, want);
        }
    }

    /// GGML_RS_CPU_PROFILE's table: per (op, src0 type) the calls and the pool jobs they ran,
    /// the graphs and nodes; kernel time plus time between nodes is the graph time
    #[test]
    fn the_profile_counts_each_computed_node_by_op_and_type() {
        let (mut a, mut b) = ([1.0f32; 64], [2.0f32; 64]);
        let (mut s1, mut s2, mut m, mut skipped) = ([0.0f32; 64], [0.0f32; 64], [0.0f32; 64], [0.0f32; 64]);
        let mut ta = f32_tensor("a", Op::None, &mut a, [64, 1, 1, 1], 0);
        let mut tb = f32_tensor("b", Op::None, &mut b, [64, 1, 1, 1], 0);
        let (pa, pb): (*mut ggml_tensor, *mut ggml_tensor) = (&mut *ta, &mut *tb);
        let with_srcs = |mut t: Box<ggml_tensor>| {
            t.src[0] = pa;
            t.src[1] = pb;
            t
        };
        let mut t1 = with_srcs(f32_tensor("s1", Op::Add, &mut s1, [64, 1, 1, 1], GGML_TENSOR_FLAG_COMPUTE));
        let mut t2 = with_srcs(f32_tensor("s2", Op::Add, &mut s2, [64, 1, 1, 1], GGML_TENSOR_FLAG_COMPUTE));
        let mut t3 = with_srcs(f32_tensor("m", Op::Mul, &mut m, [64, 1, 1, 1], GGML_TENSOR_FLAG_COMPUTE));
        let mut t4 = with_srcs(f32_tensor("skipped", Op::Mul, &mut skipped, [64, 1, 1, 1], 0));
        let mut nodes: Vec<*mut ggml_tensor> = vec![&mut *t1, &mut *t2, &mut *t3, &mut *t4];
        let g = graph(&mut nodes);
        // SAFETY: the graph and its tensors live until the end of the test.
        let gr = unsafe { GraphRef::from_raw(&g) }.unwrap();

        let mut quiet = Engine::with_profile(2, false);
        assert_eq!(quiet.compute(gr, None, std::ptr::null_mut(), false), GGML_STATUS_SUCCESS);
        assert!(quiet.profile().is_none());

        let mut engine = Engine::with_profile(2, true);
        for _ in 0..3 {
            assert_eq!(engine.compute(gr, None, std::ptr::null_mut(), false), GGML_STATUS_SUCCESS);
        }
        assert_eq!(m, [2.0; 64]);
        let p = engine.profile().unwrap();
        assert_eq!((p.graphs, p.nodes), (3, 9));
        let f32_ = GgmlType::F32 as i32;
        let add = p.ops[&(Op::Add as u32, -1, f32_)];
        let mul = p.ops[&(Op::Mul as u32, -1, f32_)];
        assert_eq!((add.calls, mul.calls, p.ops.len()), (6, 3, 2));
        // every call that used the pool counted its jobs (a kernel runs at least one)
        assert!(add.jobs >= 6 && mul.jobs >= 3, "{add:?} {mul:?}");
        assert_eq!(add.time + mul.time + p.between, p.graph_time);
        let table = p.report(2);
        assert!(table.contains("3 graphs, 9 nodes") && table.contains("Add") && table.contains("Mul") && table.contains("f32"), "{table}");
    }
}
