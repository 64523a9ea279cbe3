//! A per-op profiler for the graph walk (`GGML_RS_CPU_PROFILE=1`): per (op, sub-op, type of
//! `src0`) the calls, the pool jobs they ran, the time inside the kernel; per engine the graphs,
//! their wall time and the time between nodes (the walk itself: building the node, the abort
//! callback, the dispatch of the next op). Printed to stderr when the engine is dropped (the
//! backend freed, `ggml_threadpool_free`).
//!
//! Off (the default) it costs one branch per node: the engine holds `None`. On, two clock reads
//! per node and one hash-map update outside the timed region; the map grows only the first time
//! an (op, type) is seen.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::GgmlType;
use crate::ops::{Node, Op, raw_type};

/// whether `GGML_RS_CPU_PROFILE` asks for the profile (read once per process)
pub fn enabled() -> bool {
    crate::config::get().profile
}

/// (op, sub-op for UNARY / GLU else -1, src0 type or -1)
type Key = (u32, i32, i32);

#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Stat {
    pub calls: u64,
    /// pool jobs (parallel phases) the calls ran
    pub jobs: u64,
    pub time: Duration,
}

#[derive(Default)]
pub struct Profile {
    pub ops: HashMap<Key, Stat>,
    pub graphs: u64,
    pub nodes: u64,
    /// wall time of every `compute`
    pub graph_time: Duration,
    /// between the end of one computed node and the start of the next, and before the first /
    /// after the last (the walk, not the kernels)
    pub between: Duration,
    /// the pool's total wait for the other threads at the end of its jobs (barrier + imbalance)
    pub pool_wait: Duration,
}

/// the key of a node: UNARY and GLU by their sub-op (op_params[0]), as upstream's op names do
pub fn key_of(node: &Node) -> Key {
    let sub = if matches!(node.op, Op::Unary | Op::Glu) { node.params[0] } else { -1 };
    (node.op as u32, sub, node.src[0].map_or(-1, |s| s.ty))
}

impl Profile {
    pub fn record(&mut self, key: Key, jobs: u64, time: Duration) {
        let s = self.ops.entry(key).or_default();
        s.calls += 1;
        s.jobs += jobs;
        s.time += time;
    }

    /// the table, longest total first
    pub fn report(&self, n_threads: usize) -> String {
        let mut rows: Vec<(&Key, &Stat)> = self.ops.iter().collect();
        rows.sort_by(|a, b| b.1.time.cmp(&a.1.time).then(a.0.cmp(b.0)));
        let total = self.graph_time.as_secs_f64().max(1e-12);
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "ggml-rs-cpu profile: {} graphs, {} nodes ({:.1} per graph), {} threads, graph time {:.0} µs ({:.1} µs per graph)",
            self.graphs,
            self.nodes,
            self.nodes as f64 / self.graphs.max(1) as f64,
            n_threads,
            us(self.graph_time),
            us(self.graph_time) / self.graphs.max(1) as f64
        );
        let _ = writeln!(out, "  {:<28} {:<6} {:>9} {:>9} {:>12} {:>9} {:>6}", "op", "src0", "calls", "jobs", "total µs", "µs/call", "share");
        for (k, s) in rows {
            let _ = writeln!(
                out,
                "  {:<28} {:<6} {:>9} {:>9} {:>12.0} {:>9.2} {:>5.1}%",
                op_label(*k),
                type_label(k.2),
                s.calls,
                s.jobs,
                us(s.time),
                us(s.time) / s.calls.max(1) as f64,
                100.0 * s.time.as_secs_f64() / total
            );
        }
        let _ = writeln!(
            out,
            "  {:<35} {:>9} {:>9} {:>12.0} {:>9.2} {:>5.1}%",
            "(between nodes: walk, dispatch)",
            self.nodes,
            "",
            us(self.between),
            us(self.between) / self.nodes.max(1) as f64,
            100.0 * self.between.as_secs_f64() / total
        );
        let jobs: u64 = self.ops.values().map(|s| s.jobs).sum();
        let _ = writeln!(
            out,
            "  {:<35} {:>9} {:>9} {:>12.0} {:>9.2} {:>5.1}%  (inside the ops above)",
            "(pool: waiting for other threads)",
            "",
            jobs,
            us(self.pool_wait),
            us(self.pool_wait) / jobs.max(1) as f64,
            100.0 * self.pool_wait.as_secs_f64() / total
        );
        out
    }
}

fn op_label((op, sub, _): Key) -> String {
    let name = Op::ALL.get(op as usize).map_or_else(|| format!("op {op}"), |o| format!("{o:?}"));
    match Op::ALL.get(op as usize) {
        Some(Op::Unary) => format!("{name}({})", crate::ops::UnaryOp::from_raw(sub).map_or_else(|| sub.to_string(), |u| format!("{u:?}"))),
        Some(Op::Glu) => format!("{name}({})", crate::ops::GluOp::from_raw(sub).map_or_else(|| sub.to_string(), |g| format!("{g:?}"))),
        _ => name,
    }
}

fn type_label(ty: i32) -> String {
    if let Some(t) = GgmlType::from_raw(ty) {
        return t.name().to_string();
    }
    match ty {
        -1 => "-".into(),
        raw_type::I8 => "i8".into(),
        raw_type::I16 => "i16".into(),
        raw_type::I32 => "i32".into(),
        raw_type::I64 => "i64".into(),
        raw_type::F64 => "f64".into(),
        t => format!("type {t}"),
    }
}

/// a clock read only when profiling
#[inline]
pub fn now_if(on: bool) -> Option<Instant> {
    if on { Some(Instant::now()) } else { None }
}
