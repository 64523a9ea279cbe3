//! Property tests of backend assignment on random graphs and random backends (no ggml needed):
//! every node and every tensor a node reads gets a backend; a node runs on a backend that
//! supports its op, unless the user put it elsewhere; a user's assignment stays, or moves only to
//! a higher-priority backend of the same buffer type that supports the op; views share their
//! source's backend; tensors already in a buffer go to a backend that can use it; inputs go to
//! the CPU; tensors outside the lists go where their buffer can be read; ops reading weights stay with the weights' buffer type (no op offload); and the two
//! errors (a buffer no backend can use, an op no backend runs) are reported with the tensor.

use crate::MAX_SRC;
use crate::assign::{AssignError, AssignGraph, Assigner, NONE, Oracle};
use crate::plan_tests::Rng;

/// Op kinds of the random graphs.
pub(crate) const OP_VIEW: u8 = 0;
const OP_ROPE: u8 = 5;
/// a leaf's op (NONE): every backend "runs" it
const OP_NONE: u8 = 6;
const N_OPS: usize = 7;
/// the CPU backend's buffer type (host memory)
pub(crate) const HOST: u8 = 99;

pub(crate) struct Scenario {
    pub(crate) n_backends: usize,
    /// per backend: its buffer type (the last one: HOST)
    pub(crate) bufts: Vec<u8>,
    /// supports_buft by (backend's buffer type, buffer type): backends of one type answer alike
    pub(crate) buft_ok: Vec<(u8, u8)>,
    pub(crate) supports: Vec<[bool; N_OPS]>,
    pub(crate) offload: Vec<[bool; N_OPS]>,
    // the graph
    pub(crate) nodes: Vec<u32>,
    pub(crate) leafs: Vec<u32>,
    /// tensors in a buffer that are neither nodes nor leafs (read by nodes)
    pub(crate) loose: Vec<u32>,
    pub(crate) srcs: Vec<[u32; MAX_SRC]>,
    pub(crate) view_src: Vec<u32>,
    pub(crate) op: Vec<u8>,
    pub(crate) storage: Vec<Option<u8>>,
    pub(crate) weights: Vec<bool>,
    pub(crate) input: Vec<bool>,
    pub(crate) user: Vec<i32>,
}

impl Oracle for &Scenario {
    type Buft = u8;
    fn n_backends(&self) -> usize {
        self.n_backends
    }
    fn supports_op(&self, b: usize, t: u32) -> bool {
        self.supports[b][self.op[t as usize] as usize]
    }
    fn offload_op(&self, b: usize, t: u32) -> bool {
        self.offload[b][self.op[t as usize] as usize]
    }
    fn supports_buft(&self, b: usize, buft: u8) -> bool {
        self.bufts[b] == buft || self.buft_ok.contains(&(self.bufts[b], buft))
    }
    fn backend_buft(&self, b: usize) -> Option<u8> {
        Some(self.bufts[b])
    }
    fn storage_buft(&self, t: u32) -> Option<u8> {
        self.storage[t as usize]
    }
    fn is_input(&self, t: u32) -> bool {
        self.input[t as usize]
    }
    fn is_view_op(&self, t: u32) -> bool {
        self.op[t as usize] == OP_VIEW
    }
    fn follows_weights(&self, t: u32) -> bool {
        self.op[t as usize] != OP_ROPE
    }
    fn in_weights(&self, t: u32) -> bool {
        self.weights[t as usize]
    }
    fn weights_on_host(&self, t: u32) -> bool {
        self.storage[t as usize] == Some(HOST)
    }
}

/// Random backends (the last a CPU running everything) and a random DAG: leafs (some in
/// buffers, most of those weights; some inputs), then nodes reading 1 to 3 earlier tensors,
/// some views of their first source, some assigned by the user.
pub(crate) fn scenario(rng: &mut Rng, n_nodes: usize) -> Scenario {
    let n_backends = 1 + rng.below(4) as usize;
    let mut bufts: Vec<u8> = (0..n_backends - 1).map(|_| rng.below(n_backends as u64) as u8).collect();
    bufts.push(HOST);
    let mut buft_ok = Vec::new();
    for &a in &bufts {
        for &b in &bufts {
            if a != b && rng.chance(30) {
                buft_ok.push((a, b));
            }
        }
    }
    let mut supports: Vec<[bool; N_OPS]> = (0..n_backends).map(|_| std::array::from_fn(|op| op as u8 == OP_NONE || rng.chance(70))).collect();
    supports[n_backends - 1] = [true; N_OPS];
    let offload = (0..n_backends).map(|_| std::array::from_fn(|_| rng.chance(30))).collect();
    let mut s = Scenario {
        n_backends,
        bufts,
        buft_ok,
        supports,
        offload,
        nodes: Vec::new(),
        leafs: Vec::new(),
        loose: Vec::new(),
        srcs: Vec::new(),
        view_src: Vec::new(),
        op: Vec::new(),
        storage: Vec::new(),
        weights: Vec::new(),
        input: Vec::new(),
        user: Vec::new(),
    };
    let n_leafs = 1 + rng.below(8) as usize;
    for l in 0..n_leafs {
        let stored = rng.chance(60);
        s.leafs.push(l as u32);
        s.op.push(OP_NONE);
        s.view_src.push(NONE);
        s.storage.push(stored.then(|| s.bufts[rng.below(n_backends as u64) as usize]));
        s.weights.push(stored && rng.chance(80));
        s.input.push(!stored && rng.chance(50));
        s.user.push(-1);
    }
    let n_loose = if rng.chance(30) { 1 + rng.below(3) as usize } else { 0 };
    for l in n_leafs..n_leafs + n_loose {
        s.loose.push(l as u32);
        s.op.push(OP_NONE);
        s.view_src.push(NONE);
        s.storage.push(Some(s.bufts[rng.below(n_backends as u64) as usize]));
        s.weights.push(rng.chance(50));
        s.input.push(false);
        s.user.push(-1);
    }
    let n_leafs = n_leafs + n_loose;
    for k in 0..n_nodes {
        let id = (n_leafs + k) as u32;
        let mut srcs = [NONE; MAX_SRC];
        for slot in srcs.iter_mut().take(1 + rng.below(3) as usize) {
            *slot = rng.below(id as u64) as u32;
        }
        let op = rng.below(N_OPS as u64 - 1) as u8; // no OP_NONE among nodes
        s.nodes.push(id);
        s.srcs.push(srcs);
        s.op.push(op);
        s.view_src.push(if op == OP_VIEW { srcs[0] } else { NONE });
        s.storage.push(None);
        s.weights.push(false);
        s.input.push(false);
        let user = if op != OP_VIEW && rng.chance(10) {
            let b = rng.below(n_backends as u64) as usize;
            if s.supports[b][op as usize] { b as i32 } else { -1 }
        } else {
            -1
        };
        s.user.push(user);
    }
    s
}

fn run(s: &Scenario, op_offload: bool) -> Result<Vec<i32>, AssignError> {
    let graph = AssignGraph { nodes: &s.nodes, leafs: &s.leafs, loose: &s.loose, srcs: &s.srcs, view_src: &s.view_src };
    let mut asg = Assigner { graph, oracle: s, op_offload, ids: s.user.clone() };
    asg.run().map(|()| asg.ids)
}

/// The highest-priority backend that can use `buft` and runs the op of `t` (pass 1's rule).
fn by_buft(s: &Scenario, buft: u8, t: u32) -> Option<usize> {
    (0..s.n_backends).find(|&b| (&s).supports_buft(b, buft) && (&s).supports_op(b, t))
}

fn check(s: &Scenario, ids: &[i32], op_offload: bool) {
    let o = &s;
    let n = s.n_backends as i32;
    let has = |t: u32| (0..n).contains(&ids[t as usize]);
    for (i, &node) in s.nodes.iter().enumerate() {
        let b = ids[node as usize];
        assert!(has(node), "node {node} has no backend ({b})");
        for &src in s.srcs[i].iter().filter(|&&x| x != NONE) {
            assert!(has(src), "source {src} of node {node} has no backend");
        }
        let vs = s.view_src[node as usize];
        if vs != NONE {
            assert_eq!(b, ids[vs as usize], "view {node} is not on its source {vs}'s backend");
            continue;
        }
        let user = s.user[node as usize];
        if user != -1 {
            assert!(
                b == user || (b < user && s.bufts[b as usize] == s.bufts[user as usize] && o.supports_op(b as usize, node)),
                "node {node}: assigned {user} by the user, ends on {b}"
            );
            continue;
        }
        assert!(o.supports_op(b as usize, node), "node {node} (op {}) on backend {b}, which does not run it", s.op[node as usize]);
        // an op reading weights stays with the weights' buffer type
        if !op_offload && o.follows_weights(node) {
            let weights = s.srcs[i].iter().copied().find(|&x| x != NONE && s.weights[x as usize]);
            if let Some((w, wb)) = weights.and_then(|w| by_buft(s, s.storage[w as usize].unwrap(), node).map(|wb| (w, wb))) {
                assert_eq!(s.bufts[b as usize], s.bufts[wb], "node {node} reads weights {w} usable on {wb}, runs on {b}");
            }
        }
    }
    for &l in &s.loose {
        let b = ids[l as usize];
        let buft = s.storage[l as usize].unwrap();
        assert!(o.supports_buft(b as usize, buft), "loose tensor {l} in a buffer of type {buft} on backend {b}, which cannot use it");
    }
    for &l in &s.leafs {
        let b = ids[l as usize];
        if let Some(buft) = s.storage[l as usize] {
            assert!(o.supports_buft(b as usize, buft), "leaf {l} in a buffer of type {buft} on backend {b}, which cannot use it");
        } else if s.input[l as usize] {
            assert_eq!(b, n - 1, "input {l} not on the CPU");
        }
    }
}

#[test]
fn random_graphs_get_valid_assignments() {
    for seed in 0..400u64 {
        let mut rng = Rng::new(0xA55 + seed);
        let n_nodes = 1 + rng.below(120) as usize;
        let s = scenario(&mut rng, n_nodes);
        for op_offload in [false, true] {
            let ids = run(&s, op_offload).unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            check(&s, &ids, op_offload);
        }
    }
}

#[test]
fn one_backend_runs_everything() {
    for seed in 0..50u64 {
        let mut rng = Rng::new(0x1B + seed);
        let mut s = scenario(&mut rng, 40);
        s.n_backends = 1;
        s.bufts = vec![HOST];
        s.buft_ok.clear();
        s.supports = vec![[true; N_OPS]];
        s.offload = vec![[false; N_OPS]];
        s.storage.iter_mut().for_each(|b| *b = b.map(|_| HOST));
        s.user.iter_mut().for_each(|u| *u = -1);
        let ids = run(&s, false).unwrap();
        for (i, &node) in s.nodes.iter().enumerate() {
            assert_eq!(ids[node as usize], 0);
            assert!(s.srcs[i].iter().filter(|&&x| x != NONE).all(|&x| ids[x as usize] == 0));
        }
    }
}

/// A tensor in a buffer no backend can use is named; so is a node no backend runs.
#[test]
fn the_two_errors_name_the_tensor() {
    let mut rng = Rng::new(7);
    let mut s = scenario(&mut rng, 10);
    s.storage[0] = Some(77); // a buffer type nobody uses
    assert_eq!(run(&s, false), Err(AssignError::PreallocatedUnsupported { tensor: 0 }));

    let mut s = scenario(&mut rng, 10);
    let node = *s.nodes.last().unwrap();
    s.op[node as usize] = 4;
    s.view_src[node as usize] = NONE;
    s.user[node as usize] = -1;
    for b in 0..s.n_backends {
        s.supports[b][4] = false;
    }
    let first_node_with_op_4 = *s.nodes.iter().find(|&&n| s.op[n as usize] == 4 && s.view_src[n as usize] == NONE && s.user[n as usize] == -1).unwrap();
    assert_eq!(run(&s, false), Err(AssignError::NoBackend { node: first_node_with_op_4 }));
}

/// With op offload, an op reading weights in host memory of the CPU goes to the first backend
/// that runs it and asks for it.
#[test]
fn op_offload_takes_ops_reading_host_weights() {
    let s = Scenario {
        n_backends: 2,
        bufts: vec![1, HOST],
        buft_ok: vec![],
        supports: vec![[true; N_OPS], [true; N_OPS]],
        offload: vec![[true; N_OPS], [false; N_OPS]],
        nodes: vec![1],
        leafs: vec![0],
        loose: vec![],
        srcs: vec![{
            let mut s = [NONE; MAX_SRC];
            s[0] = 0;
            s
        }],
        view_src: vec![NONE, NONE],
        op: vec![OP_NONE, 3],
        storage: vec![Some(HOST), None],
        weights: vec![true, false],
        input: vec![false, false],
        user: vec![-1, -1],
    };
    assert_eq!(run(&s, false).unwrap(), vec![1, 1], "without op offload the op stays with its weights");
    assert_eq!(run(&s, true).unwrap(), vec![1, 0], "with op offload it goes to the backend that asks");
}
