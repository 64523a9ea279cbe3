//! The memory plan report: where a plan put every tensor of a graph and for which node steps,
//! as plain data (`Report`), written as JSON and drawn as an SVG timeline (x: node step, y: byte
//! offset, one band per compute buffer chunk, one rectangle per tensor). `ggml-rs` fills it from
//! the allocator's graph, plan and buffers (`GGML_RS_ALLOC_REPORT`, `ggml_rs_gallocr_write_report`);
//! everything here is string building, so it is tested without ggml.

use std::fmt::Write;

use crate::model::{GraphModel, Presence, Tid};
use crate::plan::{Lifetimes, Plan};

/// What a tensor is to the graph, in the order the report classifies it (the first that holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// a result of an earlier graph, kept in this allocator's memory while the graph is planned
    Carried,
    /// a view of another tensor: no memory of its own, a window into its source's
    View,
    /// flagged input
    Input,
    /// flagged output
    Output,
    /// computed by a node of the graph
    Node,
    /// a leaf (or a source in neither list) the allocator gave memory
    Leaf,
}

impl Kind {
    pub const ALL: [Kind; 6] = [Kind::Input, Kind::Output, Kind::Node, Kind::Leaf, Kind::Carried, Kind::View];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Carried => "carried",
            Kind::View => "view",
            Kind::Input => "input",
            Kind::Output => "output",
            Kind::Node => "node",
            Kind::Leaf => "leaf",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Kind::Input => "#4c78a8",
            Kind::Output => "#e45756",
            Kind::Node => "#54a24b",
            Kind::Leaf => "#f58518",
            Kind::Carried => "#b279a2",
            Kind::View => "none",
        }
    }
}

/// What the report needs of a tensor that the planner's model does not hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TensorFacts {
    pub name: String,
    pub op: String,
    /// `ggml_nbytes`
    pub nbytes: usize,
    /// `view_offs` (views only)
    pub view_offs: usize,
    /// the tensor's address in the process, to match it with what a program reads back
    pub addr: usize,
}

/// One compute buffer (one allocator: buffer ids of the same buffer type share it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferReport {
    /// the buffer type's name
    pub name: String,
    /// the allocator's buffer ids that share this buffer (one buffer per buffer type)
    pub ids: Vec<usize>,
    /// the bytes the plan needs in each chunk
    pub planned: Vec<usize>,
    /// the bytes of each chunk buffer there is (empty when none is allocated)
    pub allocated: Vec<usize>,
    /// the most bytes live at once: no placement can need less
    pub lower_bound: usize,
    /// whether the offline placement was kept (else upstream's online one)
    pub offline: bool,
}

/// One tensor with memory in a compute buffer: its box in the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorReport {
    pub name: String,
    pub op: String,
    pub kind: Kind,
    /// the buffer (index into `Report::buffers`), the chunk in it, and the offset in the chunk
    pub buffer: usize,
    /// the allocator's buffer id it was placed for (the scheduler's: the backend index); None for
    /// a carried tensor, whose place is older than this plan
    pub buffer_id: Option<usize>,
    pub chunk: usize,
    pub offset: usize,
    /// `ggml_nbytes`: the box's height
    pub size: usize,
    /// the bytes reserved for it (the buffer type may pad; a view reserves nothing)
    pub alloc_size: usize,
    /// the node steps it is live in, both included
    pub first: u32,
    pub last: u32,
    /// computed in place of this tensor (index into `Report::tensors`), whose memory it took
    pub inplace_of: Option<usize>,
    /// a view of this tensor (index into `Report::tensors`)
    pub view_of: Option<usize>,
    pub addr: usize,
}

/// A split of the scheduler: its backend and its node steps `first..end` in the allocator's graph
/// (the copies of its inputs included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitReport {
    pub backend: String,
    pub first: u32,
    pub end: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// what made the plan: "reserve", "alloc", "sched-reserve", "sched-alloc", "current"
    pub kind: String,
    /// the allocator's graph number (`alloc_graph` calls so far)
    pub graph: u64,
    /// node steps of the graph (its node count)
    pub n_steps: u32,
    pub buffers: Vec<BufferReport>,
    pub tensors: Vec<TensorReport>,
    pub splits: Vec<SplitReport>,
}

/// The boxes of every tensor of `model` that `plan` (or a pin) puts in a compute buffer, and of
/// the views into them, in the model's order. `life` is the planner's trace of the same model
/// (`plan::trace`); an in-place take-over is reported only where `plan` kept it (the same
/// address), which a plan taken over from a template may not have.
pub fn tensors(model: &GraphModel, plan: &Plan, life: &Lifetimes, mut facts: impl FnMut(Tid) -> TensorFacts) -> Vec<TensorReport> {
    let n = model.tensors.len();
    let end = (model.nodes.len() as u32).saturating_sub(1);
    let mut is_node = vec![false; n];
    // views: first and last step they appear in (as a node or a source)
    let mut seen: Vec<Option<(u32, u32)>> = vec![None; n];
    let mut mark = |t: Tid, step: u32| {
        seen[t] = Some(match seen[t] {
            Some((a, b)) => (a.min(step), b.max(step)),
            None => (step, step),
        });
    };
    for (i, node) in model.nodes.iter().enumerate() {
        is_node[node.tensor] = true;
        mark(node.tensor, i as u32);
        for s in node.srcs.iter() {
            mark(s, i as u32);
        }
    }
    let life_end = |l: u32| if l == Lifetimes::NONE { end } else { l };
    let mut index = vec![usize::MAX; n];
    let mut out: Vec<TensorReport> = Vec::new();
    // view sources come first in the model (a view is numbered after its source), but a view's
    // box needs its source's box: own memory first, views second
    for pass in 0..2 {
        for (t, d) in model.tensors.iter().enumerate() {
            let is_view = d.view_of.is_some();
            if (pass == 0) == is_view {
                continue;
            }
            let own = match (d.presence, plan.placements.get(t).copied().flatten()) {
                (Presence::Pinned(k), _) => model.pins.get(k as usize).map(|p| (p.alloc, None, p.addr.chunk, p.addr.offset, p.size, 0, end, None)),
                (_, Some(p)) if !is_view => {
                    let first = life.first.get(t).copied().filter(|&f| f != Lifetimes::NONE).unwrap_or(0);
                    let last = life.last.get(t).copied().map_or(end, life_end).max(first);
                    let parent = life.took_from.get(t).copied().flatten().filter(|&q| {
                        plan.placements.get(q).copied().flatten().is_some_and(|pq| pq.alloc == p.alloc && pq.addr == p.addr) && index[q] != usize::MAX
                    });
                    Some((p.alloc, Some(p.buffer_id), p.addr.chunk, p.addr.offset, p.size, first, last, parent.map(|q| index[q])))
                }
                _ => None,
            };
            let kind = match d.presence {
                Presence::Pinned(_) => Kind::Carried,
                _ if is_view => Kind::View,
                _ if d.input => Kind::Input,
                _ if d.output => Kind::Output,
                _ if is_node[t] => Kind::Node,
                _ => Kind::Leaf,
            };
            let f;
            let entry = if let Some((buffer, buffer_id, chunk, offset, alloc_size, first, last, inplace_of)) = own {
                f = facts(t);
                TensorReport {
                    name: f.name,
                    op: f.op,
                    kind,
                    buffer,
                    buffer_id,
                    chunk,
                    offset,
                    size: f.nbytes,
                    alloc_size,
                    first,
                    last,
                    inplace_of,
                    view_of: None,
                    addr: f.addr,
                }
            } else if let Some(v) = d.view_of.filter(|&v| index[v] != usize::MAX) {
                let src = &out[index[v]];
                let (first, last) = seen[t].unwrap_or((src.first, src.first));
                // a view lives from its first appearance to its last reader (a view nothing reads,
                // such as the scheduler's keep-alive markers, only at its own step: its source may
                // be computed over in place right after); an output view as long as its source
                let last = if d.output { last.max(src.last) } else { last };
                let (buffer, buffer_id, chunk, base) = (src.buffer, src.buffer_id, src.chunk, src.offset);
                f = facts(t);
                TensorReport {
                    name: f.name,
                    op: f.op,
                    kind,
                    buffer,
                    buffer_id,
                    chunk,
                    offset: base + f.view_offs,
                    size: f.nbytes,
                    alloc_size: 0,
                    first,
                    last,
                    inplace_of: None,
                    view_of: Some(index[v]),
                    addr: f.addr,
                }
            } else {
                continue;
            };
            index[t] = out.len();
            out.push(entry);
        }
    }
    out
}

/// The tensor whose memory box `i` is in: itself, or the end of its chain of view sources (a view
/// of a view, as the scheduler's keep-alive markers are, names the view it was made from).
fn memory_of(tensors: &[TensorReport], mut i: usize) -> usize {
    // bounded: a chain longer than the list would be a cycle, which a model cannot hold
    for _ in 0..tensors.len() {
        match tensors[i].view_of {
            Some(v) => i = v,
            None => break,
        }
    }
    i
}

/// Whether two boxes may share bytes at the same step: one computes in place of the other (at
/// the step it takes the memory over), or one is a view into the other's memory, or both are
/// views into one tensor's memory.
pub fn may_share(tensors: &[TensorReport], a: usize, b: usize) -> bool {
    let (ta, tb) = (&tensors[a], &tensors[b]);
    let a_view_or_b_view = ta.view_of.is_some() || tb.view_of.is_some();
    ta.inplace_of == Some(b) || tb.inplace_of == Some(a) || (a_view_or_b_view && memory_of(tensors, a) == memory_of(tensors, b))
}

/// The pairs of boxes that share bytes at a step where both are live and may not (see
/// `may_share`): an empty list for a sound plan. A sweep over offsets per buffer chunk.
pub fn conflicts(tensors: &[TensorReport]) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..tensors.len()).filter(|&i| tensors[i].size > 0).collect();
    order.sort_by_key(|&i| (tensors[i].buffer, tensors[i].chunk, tensors[i].offset));
    let mut out = Vec::new();
    for (k, &a) in order.iter().enumerate() {
        let ta = &tensors[a];
        for &b in &order[k + 1..] {
            let tb = &tensors[b];
            if tb.buffer != ta.buffer || tb.chunk != ta.chunk || tb.offset >= ta.offset + ta.size {
                break;
            }
            let together = ta.first <= tb.last && tb.first <= ta.last;
            if together && !may_share(tensors, a, b) {
                out.push((a.min(b), a.max(b)));
            }
        }
    }
    out
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` escaped for XML text and attribute values.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // not allowed in XML 1.0 at all
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn json_opt(v: Option<usize>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

fn json_list(v: &[usize]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(","))
}

/// Bytes for people: B, KiB or MiB with two decimals.
fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.2} MiB", b as f64 / 1048576.0),
        b if b >= 1 << 10 => format!("{:.2} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

impl Report {
    /// The report as JSON (format `version` 1; one tensor per line, so that it diffs).
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(256 + self.tensors.len() * 200);
        let _ = write!(s, "{{\"version\":1,\"kind\":{},\"graph\":{},\"n_steps\":{},\n\"buffers\":[", json_str(&self.kind), self.graph, self.n_steps);
        for (i, b) in self.buffers.iter().enumerate() {
            let _ = write!(
                s,
                "{}\n{{\"id\":{i},\"name\":{},\"ids\":{},\"planned\":{},\"allocated\":{},\"size\":{},\"lower_bound\":{},\"placement\":{}}}",
                if i > 0 { "," } else { "" },
                json_str(&b.name),
                json_list(&b.ids),
                json_list(&b.planned),
                json_list(&b.allocated),
                b.planned.iter().sum::<usize>(),
                b.lower_bound,
                json_str(if b.offline { "offline" } else { "upstream" })
            );
        }
        s.push_str("],\n\"splits\":[");
        for (i, sp) in self.splits.iter().enumerate() {
            let _ =
                write!(s, "{}\n{{\"id\":{i},\"backend\":{},\"first\":{},\"end\":{}}}", if i > 0 { "," } else { "" }, json_str(&sp.backend), sp.first, sp.end);
        }
        s.push_str("],\n\"tensors\":[");
        for (i, t) in self.tensors.iter().enumerate() {
            let _ = write!(
                s,
                "{}\n{{\"id\":{i},\"name\":{},\"op\":{},\"kind\":\"{}\",\"buffer\":{},\"buffer_id\":{},\"chunk\":{},\"offset\":{},\"size\":{},\"alloc_size\":{},\"first\":{},\"last\":{},\"inplace_of\":{},\"view_of\":{},\"addr\":\"{:#x}\"}}",
                if i > 0 { "," } else { "" },
                json_str(&t.name),
                json_str(&t.op),
                t.kind.name(),
                t.buffer,
                json_opt(t.buffer_id),
                t.chunk,
                t.offset,
                t.size,
                t.alloc_size,
                t.first,
                t.last,
                json_opt(t.inplace_of),
                json_opt(t.view_of),
                t.addr
            );
        }
        s.push_str("]}\n");
        s
    }

    /// The timeline as SVG: x the node step, y the offset in each chunk of each compute buffer
    /// (one band each, scaled to what the plan needs of the chunk), a rectangle per tensor coloured by kind with a
    /// tooltip, the live-bytes lower bound as a dashed line per buffer, the scheduler's splits
    /// along the x axis, a legend. Sized by its viewBox, so a browser zooms it without loss.
    pub fn to_svg(&self) -> String {
        const LEFT: f64 = 150.0;
        const PLOT_W: f64 = 1600.0;
        const BAND_H: f64 = 360.0;
        const GAP: f64 = 46.0;
        const TOP: f64 = 70.0;
        let n_steps = self.n_steps.max(1) as f64;
        let dx = PLOT_W / n_steps;
        let x_of = |step: u32| LEFT + step as f64 * dx;

        // one band per chunk of each buffer
        let mut bands: Vec<(usize, usize, usize)> = Vec::new(); // (buffer, chunk, bytes)
        for (b, buf) in self.buffers.iter().enumerate() {
            let n_chunks = buf.planned.len().max(buf.allocated.len());
            for c in 0..n_chunks {
                // scaled to what the plan needs (a reserved buffer may be much larger)
                let planned = buf.planned.get(c).copied().unwrap_or(0);
                let size = if planned > 0 { planned } else { buf.allocated.get(c).copied().unwrap_or(0) };
                bands.push((b, c, size.max(1)));
            }
        }
        let band_top = |k: usize| TOP + k as f64 * (BAND_H + GAP);
        let splits_y = TOP + bands.len() as f64 * (BAND_H + GAP);
        let legend_y = splits_y + if self.splits.is_empty() { 10.0 } else { 50.0 };
        let width = LEFT + PLOT_W + 40.0;
        let height = legend_y + 40.0;

        let mut s = String::with_capacity(4096 + self.tensors.len() * 260);
        let _ = writeln!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"100%\" preserveAspectRatio=\"xMinYMin meet\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        // a thin white edge between neighbouring boxes, thinner than a tenth of a step's width so
        // that graphs of thousands of nodes still show colour
        let edge = (dx / 10.0).min(0.3);
        let _ = write!(s, "<style>rect.t{{stroke:#fff;stroke-width:{edge:.3}}}rect.t:hover{{stroke:#000;stroke-width:1}}");
        for k in Kind::ALL {
            let _ = write!(s, "rect.{}{{fill:{}}}", k.name(), k.color());
        }
        s.push_str("rect.view{fill:none;stroke:#555;stroke-width:0.4;stroke-dasharray:2 1}.lb{stroke:#000;stroke-width:1.2;stroke-dasharray:6 3}.split{stroke:#888;stroke-width:0.5}</style>\n");
        s.push_str("<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n");
        let total: usize = self.buffers.iter().map(|b| b.planned.iter().sum::<usize>()).sum();
        let _ = writeln!(
            s,
            "<text x=\"{LEFT}\" y=\"24\" font-size=\"18\">{}</text>",
            xml_escape(&format!(
                "memory plan: {} of graph #{}, {} node steps, {} tensors, {} planned",
                self.kind,
                self.graph,
                self.n_steps,
                self.tensors.len(),
                human(total)
            ))
        );
        let _ = writeln!(s, "<text x=\"{LEFT}\" y=\"44\" fill=\"#555\">x: node step; y: byte offset in the compute buffer; hover a box for its tensor</text>");

        for (k, &(b, c, size)) in bands.iter().enumerate() {
            let y0 = band_top(k);
            let buf = &self.buffers[b];
            let _ = writeln!(s, "<rect x=\"{LEFT}\" y=\"{y0}\" width=\"{PLOT_W}\" height=\"{BAND_H}\" fill=\"#f4f4f4\" stroke=\"#999\"/>");
            let allocated = buf.allocated.get(c).copied().unwrap_or(0);
            let label = format!("{} (buffer {b}, chunk {c}): {} planned, {} allocated", buf.name, human(size), human(allocated));
            let _ = writeln!(s, "<text x=\"{LEFT}\" y=\"{:.1}\" font-weight=\"bold\">{}</text>", y0 - 6.0, xml_escape(&label));
            // y axis: offsets at quarters
            for q in 0..=4 {
                let y = y0 + BAND_H * q as f64 / 4.0;
                let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\">{}</text>", LEFT - 6.0, y + 4.0, human(size * q / 4));
            }
            let y_of = |offset: usize| y0 + BAND_H * offset as f64 / size as f64;
            for (i, t) in self.tensors.iter().enumerate() {
                if t.buffer != b || t.chunk != c {
                    continue;
                }
                let (x, w) = (x_of(t.first), (t.last - t.first + 1) as f64 * dx);
                let (y, h) = (y_of(t.offset), (BAND_H * t.size as f64 / size as f64).max(0.4));
                let mut tip =
                    format!("{} ({}, {})\n{} ({} B) at offset {}\nsteps {}..{}", t.name, t.op, t.kind.name(), human(t.size), t.size, t.offset, t.first, t.last);
                if let Some(p) = t.inplace_of {
                    let _ = write!(tip, "\nin place of {}", self.tensors[p].name);
                }
                if let Some(v) = t.view_of {
                    let _ = write!(tip, "\nview of {}", self.tensors[v].name);
                }
                let _ = writeln!(
                    s,
                    "<rect id=\"t{i}\" class=\"t {}\" x=\"{x:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{h:.2}\"><title>{}</title></rect>",
                    t.kind.name(),
                    xml_escape(&tip)
                );
            }
            if c == 0 {
                let y = y_of(buf.lower_bound.min(size));
                let _ = writeln!(
                    s,
                    "<line class=\"lb\" x1=\"{LEFT}\" y1=\"{y:.2}\" x2=\"{:.0}\" y2=\"{y:.2}\"><title>{}</title></line>",
                    LEFT + PLOT_W,
                    xml_escape(&format!("lower bound: {} live at once ({} B)", human(buf.lower_bound), buf.lower_bound))
                );
                let _ = writeln!(
                    s,
                    "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">lower bound {}</text>",
                    LEFT + PLOT_W - 4.0,
                    (y - 4.0).max(y0 + 12.0),
                    xml_escape(&human(buf.lower_bound))
                );
            }
            // x axis: about ten ticks
            let every = (self.n_steps / 10).max(1);
            let mut step = 0;
            while step <= self.n_steps {
                let x = x_of(step);
                let _ = writeln!(s, "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{step}</text>", y0 + BAND_H + 14.0);
                step += every;
            }
            for sp in self.splits.iter().skip(1) {
                let x = x_of(sp.first);
                let _ = writeln!(s, "<line class=\"split\" x1=\"{x:.2}\" y1=\"{y0}\" x2=\"{x:.2}\" y2=\"{:.0}\"/>", y0 + BAND_H);
            }
        }

        if !self.splits.is_empty() {
            let mut backends: Vec<&str> = Vec::new();
            for sp in &self.splits {
                if !backends.contains(&sp.backend.as_str()) {
                    backends.push(&sp.backend);
                }
            }
            let palette = ["#9ecae9", "#ffbf79", "#88d27a", "#ff9d98", "#d6a5c9", "#bab0ac"];
            let _ = writeln!(s, "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">splits</text>", LEFT - 6.0, splits_y + 14.0);
            for (i, sp) in self.splits.iter().enumerate() {
                let color = palette[backends.iter().position(|b| *b == sp.backend).unwrap_or(0) % palette.len()];
                let (x, w) = (x_of(sp.first), (sp.end.saturating_sub(sp.first)) as f64 * dx);
                let tip = format!("split #{i}: {}, steps {}..{}", sp.backend, sp.first, sp.end.saturating_sub(1));
                let _ = writeln!(
                    s,
                    "<rect x=\"{x:.2}\" y=\"{splits_y:.1}\" width=\"{w:.2}\" height=\"20\" fill=\"{color}\" stroke=\"#fff\" stroke-width=\"0.5\"><title>{}</title></rect>",
                    xml_escape(&tip)
                );
            }
            let mut lx = LEFT;
            for (k, b) in backends.iter().enumerate() {
                let _ = writeln!(s, "<rect x=\"{lx:.0}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>", splits_y + 26.0, palette[k % palette.len()]);
                let _ = writeln!(s, "<text x=\"{:.0}\" y=\"{:.1}\">{}</text>", lx + 16.0, splits_y + 36.0, xml_escape(b));
                lx += 30.0 + 8.0 * b.len() as f64;
            }
        }

        let mut lx = LEFT;
        for k in Kind::ALL {
            let _ = writeln!(s, "<rect class=\"t {}\" x=\"{lx:.0}\" y=\"{legend_y:.1}\" width=\"14\" height=\"14\"/>", k.name());
            let _ = writeln!(s, "<text x=\"{:.0}\" y=\"{:.1}\">{}</text>", lx + 18.0, legend_y + 12.0, k.name());
            lx += 90.0;
        }
        let _ = writeln!(
            s,
            "<line class=\"lb\" x1=\"{lx:.0}\" y1=\"{:.1}\" x2=\"{:.0}\" y2=\"{:.1}\"/><text x=\"{:.0}\" y=\"{:.1}\">live-bytes lower bound</text>",
            legend_y + 7.0,
            lx + 30.0,
            legend_y + 7.0,
            lx + 36.0,
            legend_y + 12.0
        );
        s.push_str("</svg>\n");
        s
    }
}
