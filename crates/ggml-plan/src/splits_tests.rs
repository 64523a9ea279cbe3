//! Property tests of the split cutting on random assigned graphs (those of `assign_tests`): the
//! splits cover the node list in order, each on the backend of its nodes; exactly the sources a
//! split's backend cannot read are read through copies; each (source, backend) pair is copied
//! once, in the first split that needs it, and every later read on that backend uses that copy;
//! a copied source is a leaf, never computed, or computed before its first read; and two
//! neighbouring splits on one backend are cut only where weights are on a backend the split
//! cannot read.

use crate::assign::{AssignGraph, Assigner, NONE};
use crate::assign_tests::{OP_VIEW, Scenario, scenario};
use crate::plan_tests::Rng;
use crate::splits::{CopyRead, SplitModel, cut};

fn check(s: &Scenario, asg: &Assigner<'_, &Scenario>, splits: &[SplitModel]) {
    let ids = &asg.ids;
    assert!(!splits.is_empty());
    assert_eq!(splits[0].i_start, 0);
    assert_eq!(splits.last().unwrap().i_end, s.nodes.len());
    let mut copied: Vec<(u32, usize)> = Vec::new();
    for (k, split) in splits.iter().enumerate() {
        assert!(split.i_start < split.i_end || s.nodes.is_empty(), "split {k} is empty");
        if k > 0 {
            let prev = &splits[k - 1];
            assert_eq!(split.i_start, prev.i_end, "split {k} does not start where split {} ends", k - 1);
            if prev.backend == split.backend {
                // cut for weights only: the first node reads weights the backend cannot read
                let first = split.i_start;
                let cut_for_weights = !prev.inputs.is_empty()
                    && s.srcs[first]
                        .iter()
                        .filter(|&&x| x != NONE)
                        .any(|&x| s.weights[x as usize] && ids[x as usize] != split.backend as i32 && !asg.buffer_supported(x, split.backend));
                assert!(cut_for_weights, "splits {} and {k} on backend {} without a reason", k - 1, split.backend);
            }
        }
        let mut expected_reads = Vec::new();
        for i in split.i_start..split.i_end {
            let n = s.nodes[i];
            if s.op[n as usize] == OP_VIEW {
                continue;
            }
            assert_eq!(ids[n as usize], split.backend as i32, "node {n} in split {k} is on another backend");
            // not cut where it should be: weights the backend cannot read, after copies in this split
            let copies_before = split.inputs.iter().any(|&x| split.reads.iter().find(|r| r.src == x).is_some_and(|r| r.node < i));
            let reads_foreign_weights = s.srcs[i]
                .iter()
                .filter(|&&x| x != NONE)
                .any(|&x| s.weights[x as usize] && ids[x as usize] != split.backend as i32 && !asg.buffer_supported(x, split.backend));
            assert!(!(i > split.i_start && copies_before && reads_foreign_weights), "node {i} of split {k} should start a split");
            for (slot, &x) in s.srcs[i].iter().enumerate() {
                if x != NONE && ids[x as usize] != split.backend as i32 && !asg.buffer_supported(x, split.backend) {
                    expected_reads.push(CopyRead { node: i, slot, src: x });
                }
            }
        }
        assert_eq!(split.reads, expected_reads, "split {k}: the reads through copies");
        for &x in &split.inputs {
            assert!(!copied.contains(&(x, split.backend)), "source {x} copied to backend {} twice", split.backend);
            copied.push((x, split.backend));
            // produced earlier: a leaf, a tensor no node computes, or a node before its first read
            let first_read = split.reads.iter().find(|r| r.src == x).expect("an input is read").node;
            if let Some(pos) = s.nodes.iter().position(|&n| n == x) {
                assert!(pos < first_read, "input {x} of split {k} is computed at {pos}, read at {first_read}");
            }
        }
        for r in &split.reads {
            assert!(copied.contains(&(r.src, split.backend)), "split {k} reads {} through a copy never made", r.src);
        }
    }
}

#[test]
fn random_assigned_graphs_cut_into_valid_splits() {
    let mut n_splits = 0;
    let mut n_copies = 0;
    for seed in 0..400u64 {
        let mut rng = Rng::new(0x5917 + seed);
        let n_nodes = 1 + rng.below(120) as usize;
        let s = scenario(&mut rng, n_nodes);
        for op_offload in [false, true] {
            let graph = AssignGraph { nodes: &s.nodes, leafs: &s.leafs, loose: &s.loose, srcs: &s.srcs, view_src: &s.view_src };
            let mut asg = Assigner { graph, oracle: &s, op_offload, ids: s.user.clone() };
            asg.run().unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            let splits = cut(&asg, |x| s.weights[x as usize]).unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            check(&s, &asg, &splits);
            n_splits += splits.len();
            n_copies += splits.iter().map(|x| x.inputs.len()).sum::<usize>();
        }
    }
    // the corpus exercises what it checks
    assert!(n_splits > 2000 && n_copies > 500, "{n_splits} splits, {n_copies} copies");
}

#[test]
fn a_graph_of_views_is_one_split() {
    let mut rng = Rng::new(3);
    let mut s = scenario(&mut rng, 5);
    for &n in &s.nodes.clone() {
        s.op[n as usize] = OP_VIEW;
        s.user[n as usize] = -1;
        let i = s.nodes.iter().position(|&m| m == n).unwrap();
        s.view_src[n as usize] = s.srcs[i][0];
    }
    let graph = AssignGraph { nodes: &s.nodes, leafs: &s.leafs, loose: &s.loose, srcs: &s.srcs, view_src: &s.view_src };
    let mut asg = Assigner { graph, oracle: &s, op_offload: false, ids: s.user.clone() };
    asg.run().unwrap();
    let splits = cut(&asg, |x| s.weights[x as usize]).unwrap();
    assert_eq!(splits.len(), 1);
    assert_eq!((splits[0].backend, splits[0].i_start, splits[0].i_end), (0, 0, 5));
}
