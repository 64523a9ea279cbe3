//! The memory plan report on random graphs (no ggml): every tensor the planner places has a box
//! where the plan put it, the lifetimes the trace reports never let two boxes share bytes at one
//! step unless one computes in place of the other or views it, and the writers escape what they
//! are given. The conflict check itself is shown to catch an overlap.

use crate::dyn_tallocr::DynAllocator;
use crate::model::{GraphModel, Tid};
use crate::plan::{Planner, plan, trace};
use crate::plan_tests::{Rng, random_model};
use crate::report::{self, Kind, Report, TensorFacts, conflicts, json_str, xml_escape};

/// The random graphs' views may be larger than their sources; a ggml view is a window into its
/// source, so it is given the part of its size that fits.
fn facts(m: &GraphModel) -> impl FnMut(Tid) -> TensorFacts + '_ {
    move |t| {
        let d = &m.tensors[t];
        let nbytes = d.view_of.map_or(d.nbytes, |v| d.nbytes.min(m.tensors[v].nbytes));
        TensorFacts { name: format!("t{t}"), op: "OP".into(), nbytes, view_offs: 0, addr: 0x1000 + t }
    }
}

fn report_of(m: &GraphModel, planner: Planner) -> Report {
    let mut allocs = vec![DynAllocator::new(32, usize::MAX / 4)];
    let mut sizer = |t: Tid, _| m.tensors[t].nbytes;
    let p = plan(m, &[0], &mut allocs, &mut sizer, &planner).expect("fits");
    let life = trace(m, &[0], &mut allocs, &mut sizer).expect("fits");
    let tensors = report::tensors(m, &p, &life, facts(m));
    // every placed tensor has its box at its placement
    for (t, pl) in p.placements.iter().enumerate() {
        if let Some(pl) = pl {
            let b = tensors.iter().find(|r| r.name == format!("t{t}")).expect("a placed tensor is reported");
            assert_eq!((b.buffer, b.buffer_id, b.chunk, b.offset, b.alloc_size), (pl.alloc, Some(pl.buffer_id), pl.addr.chunk, pl.addr.offset, pl.size));
            assert!(b.first <= b.last);
        }
    }
    Report { kind: "alloc".into(), graph: 1, n_steps: m.nodes.len() as u32, tensors, ..Default::default() }
}

#[test]
fn random_graphs_have_no_conflicts() {
    let mut in_place = 0;
    for seed in 0..300 {
        let mut rng = Rng::new(seed);
        let n = 5 + rng.below(80) as usize;
        let m = random_model(&mut rng, n);
        for planner in [Planner::Upstream, Planner::Best] {
            let r = report_of(&m, planner.clone());
            assert_eq!(conflicts(&r.tensors), vec![], "seed {seed}");
            in_place += r.tensors.iter().filter(|t| t.inplace_of.is_some()).count();
            assert!(r.tensors.iter().filter(|t| t.kind == Kind::View).all(|t| t.view_of.is_some() && t.alloc_size == 0));
        }
    }
    assert!(in_place > 0, "the random graphs compute in place somewhere");
}

#[test]
fn conflicts_finds_overlap_at_one_step() {
    let mut rng = Rng::new(7);
    let m = random_model(&mut rng, 40);
    let mut r = report_of(&m, Planner::Upstream);
    let (a, b) = (0, r.tensors.iter().position(|t| t.kind != Kind::View && t.inplace_of.is_none()).unwrap());
    let a = if a == b { 1 } else { a };
    // put b over a for one of a's steps
    r.tensors[b].buffer = r.tensors[a].buffer;
    r.tensors[b].chunk = r.tensors[a].chunk;
    r.tensors[b].offset = r.tensors[a].offset;
    r.tensors[b].size = r.tensors[b].size.max(1);
    r.tensors[a].size = r.tensors[a].size.max(1);
    r.tensors[b].first = r.tensors[a].last;
    r.tensors[b].last = r.tensors[a].last;
    r.tensors[b].view_of = None;
    r.tensors[b].inplace_of = None;
    assert!(conflicts(&r.tensors).contains(&(a.min(b), a.max(b))));
}

#[test]
fn writers_escape() {
    assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    assert_eq!(xml_escape("<a & 'b'>\"\u{1}"), "&lt;a &amp; &apos;b&apos;&gt;&quot;?");
    let mut rng = Rng::new(3);
    let m = random_model(&mut rng, 30);
    let mut r = report_of(&m, Planner::Best);
    r.tensors[0].name = "x<&>\"".into();
    r.buffers.push(report::BufferReport { name: "CPU".into(), ids: vec![0], planned: vec![4096], allocated: vec![4096], lower_bound: 1000, offline: false });
    r.splits.push(report::SplitReport { backend: "CPU".into(), first: 0, end: r.n_steps });
    let json = r.to_json();
    assert!(json.contains("\"name\":\"x<&>\\\"\""));
    assert_eq!(json.matches("\"kind\":").count(), r.tensors.len() + 1);
    let svg = r.to_svg();
    assert!(svg.contains("x&lt;&amp;&gt;&quot;"));
    assert!(!svg.contains("x<&"));
    assert_eq!(svg.matches("<rect id=\"t").count(), r.tensors.len(), "one box per tensor");
    assert!(svg.contains("class=\"lb\"") && svg.contains("split #0: CPU"));
}
