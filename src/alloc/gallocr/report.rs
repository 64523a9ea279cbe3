//! The memory plan report of an allocator (`ggml_plan::report`): with `GGML_RS_ALLOC_REPORT=<dir>`
//! every plan that places tensors (a reserve, an `alloc_graph` that plans anew; the scheduler's
//! allocations included) is written as `<dir>/<n>-<kind>.json` and `.svg`; on request
//! (`ggml_rs_gallocr_write_report`, `ggml_rs_sched_write_report`) the last plan is written to a
//! path. Reporting reads the graph's tensors and never changes what was allocated: a file that
//! cannot be written is logged once and the allocation goes on.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::*;
use ggml_plan::report::{self, BufferReport, Report, SplitReport, TensorFacts};

/// What the scheduler adds to its allocator's report: its splits, in the allocator's node steps.
pub struct SchedContext {
    pub splits: Vec<SplitReport>,
}

/// `GGML_RS_ALLOC_REPORT`, read once: the folder, and the number the next report gets (one past
/// the highest number of a report already there, so that runs into one folder add to it).
struct Reports {
    dir: PathBuf,
    next: AtomicU64,
    warned: AtomicBool,
}

fn reports() -> Option<&'static Reports> {
    static REPORTS: OnceLock<Option<Reports>> = OnceLock::new();
    REPORTS
        .get_or_init(|| {
            let dir = PathBuf::from(std::env::var_os("GGML_RS_ALLOC_REPORT").filter(|d| !d.is_empty())?);
            let _ = std::fs::create_dir_all(&dir);
            let highest = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.split('-').next()?.parse::<u64>().ok()))
                .max();
            Some(Reports { dir, next: AtomicU64::new(highest.map_or(0, |h| h + 1)), warned: AtomicBool::new(false) })
        })
        .as_ref()
}

/// Whether `GGML_RS_ALLOC_REPORT` is set (read on the first call only).
pub fn enabled() -> bool {
    reports().is_some()
}

/// Writes `text` to `path`; the first failure of the process is logged, naming the path.
fn write_logged(path: &Path, text: &str, warned: &AtomicBool) -> bool {
    match std::fs::write(path, text) {
        Ok(()) => true,
        Err(e) => {
            if !warned.swap(true, Ordering::Relaxed) {
                crate::log_warn!("ggml-rs: GGML_RS_ALLOC_REPORT: cannot write {}: {e} (further failures are not reported)\n", path.display());
            }
            false
        }
    }
}

impl Gallocr {
    /// The report of `built` planned as `plan`; None when the planner's trace of it fails (it
    /// cannot, `plan` was made from it: the report is then skipped, not the allocation).
    pub(super) fn report_of(&self, built: &Built, plan: &Plan, kind: &str) -> Option<Report> {
        let mut scratch: Vec<DynAllocator> = self.allocs.iter().map(|a| a.dyn_alloc.clone()).collect();
        let life = plan::trace(&built.model, &self.alloc_of_id, &mut scratch, &mut Sizes::new(&self.bufts, built)).ok()?;
        let tensors = report::tensors(&built.model, plan, &life, |t| {
            let tensor = built.tensors[t];
            TensorFacts { name: tensor.name(), op: tensor.op_name(), nbytes: tensor.nbytes(), view_offs: tensor.view_offs(), addr: tensor.addr() }
        });
        let buffers = self
            .allocs
            .iter()
            .enumerate()
            .map(|(a, st)| BufferReport {
                name: st.buft.name(),
                ids: (0..self.alloc_of_id.len()).filter(|&id| self.alloc_of_id[id] == a).collect(),
                planned: plan.chunk_sizes.get(a).cloned().unwrap_or_default(),
                allocated: st.chunks.iter().flatten().map(|b| b.size()).collect(),
                lower_bound: plan.live_peak.get(a).copied().unwrap_or(0),
                offline: plan.offline.get(a).copied().unwrap_or(false),
            })
            .collect();
        let (kind, splits) = match &self.sched_context {
            Some(ctx) => (format!("sched-{kind}"), ctx.splits.clone()),
            None => (kind.to_string(), Vec::new()),
        };
        Some(Report { kind, graph: self.seq, n_steps: built.model.nodes.len() as u32, buffers, tensors, splits })
    }

    /// With `GGML_RS_ALLOC_REPORT` set, writes the report of `built` planned as `plan`.
    pub(super) fn auto_report(&self, built: &Built, plan: &Plan, kind: &str) {
        let Some(r) = reports() else { return };
        let Some(report) = self.report_of(built, plan, kind) else { return };
        let n = r.next.fetch_add(1, Ordering::Relaxed);
        let stem = r.dir.join(format!("{n:04}-{}", report.kind));
        if write_logged(&stem.with_extension("json"), &report.to_json(), &r.warned) {
            write_logged(&stem.with_extension("svg"), &report.to_svg(), &r.warned);
        }
    }

    /// The report of the last plan (what made it, as `kind`), or None when nothing was planned.
    pub fn last_report(&self) -> Option<Report> {
        let last = self.last.as_ref()?;
        self.report_of(&last.built, &last.record.plan, self.last_kind)
    }

    /// What the scheduler adds to the reports of this allocator's next plans (None: a plain
    /// graph allocator's).
    pub fn set_sched_context(&mut self, ctx: Option<SchedContext>) {
        self.sched_context = ctx;
    }
}
