//! What the scheduler shows of its plan: `GGML_SCHED_DEBUG=1/2` prints the splits in upstream's
//! format (so existing habits and scripts keep working), and the plan can be dumped as JSON or
//! Graphviz DOT (`GGML_RS_SCHED_DUMP=<dir>`, or `ggml_rs_sched_dump_plan`), because people would
//! rather look at the plan than read logs.

use std::fmt::Write;

use ggml_plan::report::json_str;

use crate::ggml::graph::GraphRef;
use crate::ggml::sys::op;
use crate::ggml::tensor::TensorRef;
use crate::sched::splits::SplitPlan;

/// upstream's fmt_size: whole MiB above 1 MiB, else whole KiB
fn fmt_size(size: usize) -> String {
    if size >= 1024 * 1024 { format!("{}M", size / 1024 / 1024) } else { format!("{}K", size / 1024) }
}

/// printf's "%W.Ps": at most P characters, right-aligned in W
fn fit(s: &str, width: usize) -> String {
    let cut: String = s.chars().take(width).collect();
    format!("{cut:>width$}")
}

fn backend_name(plan: &SplitPlan, names: &[String], t: TensorRef) -> String {
    match plan.ix.get(t).map(|i| plan.ids[i as usize]) {
        Some(b) if b >= 0 => names[b as usize].clone(),
        _ => "NULL".to_string(),
    }
}

/// The split plan in upstream's GGML_SCHED_DEBUG format.
pub fn print_assignments(plan: &SplitPlan, graph: GraphRef, names: &[String], level: i32) {
    let mut cur_split = 0;
    let mut out = String::new();
    for (i, node) in graph.nodes().enumerate() {
        if cur_split < plan.splits.len() && i == plan.splits[cur_split].i_start {
            let split = &plan.splits[cur_split];
            let _ = write!(out, "\n## SPLIT #{}: {} # {} inputs", cur_split, names[split.backend], split.inputs.len());
            for (j, input) in split.inputs.iter().enumerate() {
                if j == 0 {
                    out.push_str(": ");
                }
                let _ = write!(out, "[{} ({})] ", input.name(), fit(&fmt_size(input.nbytes()), 5));
            }
            out.push('\n');
            crate::log_debug!("{out}");
            out.clear();
            cur_split += 1;
        }
        if op::is_view(node.op()) || level <= 1 {
            continue;
        }
        let _ = write!(
            out,
            "node #{:3} ({}): {} ({}) [{} {}] use={},c={}:",
            i,
            fit(&node.op_name(), 10),
            fit(&node.name(), 20),
            fit(&fmt_size(node.nbytes()), 5),
            fit(&backend_name(plan, names, node), 5),
            fit("", 8),
            graph.use_count(node),
            (node.flags() & crate::ggml::sys::GGML_TENSOR_FLAG_COMPUTE != 0) as i32
        );
        for src in node.srcs().into_iter().flatten() {
            let _ = write!(out, " {} ({}) [{} {}]", fit(&src.name(), 20), fit(&fmt_size(src.nbytes()), 5), fit(&backend_name(plan, names, src), 5), fit("", 8));
        }
        out.push('\n');
        crate::log_debug!("{out}");
        out.clear();
    }
}

/// The plan as JSON: backends, splits (backend, node range, inputs with their copies and
/// sizes), and the backend of every node.
pub fn plan_json(plan: &SplitPlan, nodes: &[TensorRef], names: &[String], n_copies: usize, seq: u64) -> String {
    let mut s = String::new();
    let _ = write!(s, "{{\"graph\":{seq},\"n_copies\":{n_copies},\"backends\":[");
    for (i, n) in names.iter().enumerate() {
        let _ = write!(s, "{}{}", if i > 0 { "," } else { "" }, json_str(n));
    }
    s.push_str("],\"splits\":[");
    for (k, split) in plan.splits.iter().enumerate() {
        let _ = write!(
            s,
            "{}{{\"id\":{k},\"backend\":{},\"first_node\":{},\"end_node\":{},\"n_nodes\":{},\"inputs\":[",
            if k > 0 { "," } else { "" },
            json_str(&names[split.backend]),
            split.i_start,
            split.i_end,
            split.graph.len()
        );
        for (j, (input, copy)) in split.inputs.iter().zip(&split.input_copies).enumerate() {
            let _ = write!(
                s,
                "{}{{\"tensor\":{},\"from\":{},\"copy\":{},\"bytes\":{}}}",
                if j > 0 { "," } else { "" },
                json_str(&input.name()),
                json_str(&backend_name(plan, names, *input)),
                json_str(&copy.name()),
                input.nbytes()
            );
        }
        s.push_str("]}");
    }
    s.push_str("],\"nodes\":[");
    for (i, node) in nodes.iter().enumerate() {
        let _ = write!(
            s,
            "{}{{\"name\":{},\"op\":{},\"backend\":{}}}",
            if i > 0 { "," } else { "" },
            json_str(&node.name()),
            json_str(&node.op_name()),
            json_str(&backend_name(plan, names, *node))
        );
    }
    s.push_str("]}\n");
    s
}

/// The plan as Graphviz DOT: one cluster per split, copies as dashed edges between clusters.
pub fn plan_dot(plan: &SplitPlan, nodes: &[TensorRef], names: &[String]) -> String {
    let colors = ["lightblue", "lightyellow", "palegreen", "pink", "lavender", "wheat", "lightcyan", "mistyrose"];
    let id = |t: TensorRef| format!("t{:x}", t.addr());
    let mut s = String::from("digraph sched {\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n");
    for (k, split) in plan.splits.iter().enumerate() {
        let _ =
            writeln!(s, "  subgraph cluster_{k} {{\n    label={};", json_str(&format!("split #{k}: {} ({} inputs)", names[split.backend], split.inputs.len())));
        for node in &nodes[split.i_start..split.i_end] {
            let color = colors[split.backend % colors.len()];
            let _ = writeln!(s, "    {} [label={}, fillcolor={color}];", id(*node), json_str(&format!("{}\n{}", node.name(), node.op_name())));
        }
        s.push_str("  }\n");
    }
    for node in nodes {
        for src in node.srcs().into_iter().flatten() {
            let copied = plan.splits.iter().any(|sp| sp.substitutions.iter().any(|sub| sub.node == *node && sub.original == src.as_ptr()));
            if plan.ix.get(src).is_some_and(|i| plan.ix.nodes.contains(&i)) || copied {
                let style = if copied { " [style=dashed, label=\"copy\"]" } else { "" };
                let _ = writeln!(s, "  {} -> {}{style};", id(src), id(*node));
            }
        }
    }
    s.push_str("}\n");
    s
}
