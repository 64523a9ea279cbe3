//! The memory plan report on random graphs (no ggml): every tensor the planner places has a box
//! where the plan put it, the lifetimes the trace reports never let two boxes share bytes at one
//! step unless one computes in place of the other or views it, and the writers escape what they
//! are given. The conflict check itself is shown to catch an overlap.

use crate::dyn_tallocr::DynAllocator;
use crate::model::{GraphModel, Tid};
use crate::plan::{Lifetimes, Planner, plan, trace};
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
    report_chunked(m, planner, usize::MAX / 4)
}

/// The report of `m` planned in chunks of at most `max_chunk` bytes.
fn report_chunked(m: &GraphModel, planner: Planner, max_chunk: usize) -> Report {
    let mut allocs = vec![DynAllocator::new(32, max_chunk)];
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
fn chunked_plans_have_no_conflicts() {
    let mut chunked = 0;
    for seed in 0..200 {
        let mut rng = Rng::new(1000 + seed);
        let n = 20 + rng.below(60) as usize;
        let m = random_model(&mut rng, n);
        let r = report_chunked(&m, Planner::Upstream, 512);
        assert_eq!(conflicts(&r.tensors), vec![], "seed {seed}");
        chunked += r.tensors.iter().any(|t| t.chunk > 0) as usize;
    }
    assert!(chunked > 50, "chunks of 512 bytes split most plans ({chunked} of 200)");
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

/// The traced lifetimes cover every use the graph makes of a tensor, computed from the model
/// alone: given memory no later than its first use (leafs and inputs: step 0; a node: its own
/// step), given back no earlier than its last reader's step, through views (a view's readers read
/// its source); outputs and tensors nothing reads are never given back.
#[test]
fn lifetimes_cover_every_use() {
    for seed in 0..300 {
        let mut rng = Rng::new(5000 + seed);
        let n = 5 + rng.below(80) as usize;
        let m = random_model(&mut rng, n);
        let mut allocs = vec![DynAllocator::new(32, usize::MAX / 4)];
        let mut sizer = |t: Tid, _| m.tensors[t].nbytes;
        let p = plan(&m, &[0], &mut allocs, &mut sizer, &Planner::Upstream).expect("fits");
        let life = trace(&m, &[0], &mut allocs, &mut sizer).expect("fits");
        let root = |mut t: Tid| {
            while let Some(v) = m.tensors[t].view_of {
                t = v;
            }
            t
        };
        let nt = m.tensors.len();
        let (mut first_use, mut last_use, mut read) = (vec![u32::MAX; nt], vec![0u32; nt], vec![false; nt]);
        for &(l, _) in &m.leafs {
            first_use[l] = 0;
        }
        for (t, d) in m.tensors.iter().enumerate() {
            if d.input {
                first_use[t] = 0;
            }
        }
        for (i, node) in m.nodes.iter().enumerate() {
            let i = i as u32;
            first_use[node.tensor] = first_use[node.tensor].min(i);
            for s in node.srcs.iter() {
                let r = root(s);
                first_use[r] = first_use[r].min(i);
                last_use[r] = last_use[r].max(i);
                read[r] = true;
            }
        }
        for t in (0..nt).filter(|&t| p.placements[t].is_some()) {
            assert!(life.first[t] <= first_use[t], "seed {seed}: tensor {t} given memory at {} after its first use {}", life.first[t], first_use[t]);
            if m.tensors[t].output || !read[t] {
                assert_eq!(life.last[t], Lifetimes::NONE, "seed {seed}: output or unread tensor {t} given back");
            } else if life.last[t] != Lifetimes::NONE {
                assert!(life.last[t] >= last_use[t], "seed {seed}: tensor {t} given back at {} before its last reader {}", life.last[t], last_use[t]);
            }
        }
    }
}

/// A view of a view (the scheduler's keep-alive markers are made from the view they keep) lies in
/// the memory of the first view's source: they may share bytes; an unrelated tensor may not.
#[test]
fn views_of_views_share_their_root_memory() {
    let bx = |name: &str, kind: Kind, offset: usize, view_of: Option<usize>| report::TensorReport {
        name: name.into(),
        op: "OP".into(),
        kind,
        buffer: 0,
        buffer_id: Some(0),
        chunk: 0,
        offset,
        size: 64,
        alloc_size: if view_of.is_some() { 0 } else { 64 },
        first: 0,
        last: 3,
        inplace_of: None,
        view_of,
        addr: 0,
    };
    let mut ts = vec![bx("c", Kind::Node, 0, None), bx("c_T", Kind::View, 0, Some(0)), bx("c_T (dep)", Kind::View, 0, Some(1))];
    assert_eq!(conflicts(&ts), vec![]);
    ts.push(bx("other", Kind::Node, 32, None));
    assert_eq!(conflicts(&ts), vec![(0, 3), (1, 3), (2, 3)]);
}

/// A view nothing reads (the scheduler's keep-alive marker, op NONE: not counted as a view by the
/// planner) lives at its own step only: its source may be computed over in place afterwards, which
/// is no conflict. (Found by the scheduler fuzz test with GGML_RS_ALLOC_REPORT.)
#[test]
fn an_unread_view_lives_at_its_step() {
    use crate::model::{NodeDesc, Presence, SrcList, TensorDesc};
    let d = |view_of, inplace_op, op_none, output| TensorDesc { view_of, nbytes: 64, presence: Presence::Fresh, input: false, output, inplace_op, op_none };
    let mut m = GraphModel::default();
    let l = crate::model::Layout { type_: 0, ne: [16, 1, 1, 1], nb: [4, 64, 64, 64] };
    let x = m.push_tensor(TensorDesc { input: true, ..d(None, false, false, false) }, l);
    let a = m.push_tensor(d(None, false, false, false), l); // a = f(x)
    let marker = m.push_tensor(d(Some(a), false, true, false), l); // keeps a alive until here
    let b = m.push_tensor(d(None, true, false, false), l); // b = g(a), in place of a
    let c = m.push_tensor(d(None, false, false, true), l); // c = h(b), output
    m.leafs.push((x, 0));
    for (t, srcs) in [(a, vec![x]), (marker, vec![a]), (b, vec![a]), (c, vec![b])] {
        m.nodes.push(NodeDesc { tensor: t, srcs: SrcList::from(&srcs[..]), buffer_id: 0 });
    }
    let r = report_of(&m, Planner::Upstream);
    let by = |name: &str| r.tensors.iter().position(|t| t.name == name).unwrap();
    assert_eq!(r.tensors[by(&format!("t{b}"))].inplace_of, Some(by(&format!("t{a}"))), "b computes in place of a");
    let mk = &r.tensors[by(&format!("t{marker}"))];
    assert_eq!((mk.first, mk.last), (1, 1));
    assert_eq!(conflicts(&r.tensors), vec![]);
}
