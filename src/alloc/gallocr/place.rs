//! Placing: pointing every tensor of a planned graph at its place in the chunks, views at their
//! sources, and telling `residency` and `inputs` what was placed.

use super::*;

/// Tells `residency` that allocation `seq` placed `tensors` (addresses `addrs`) as `record`
/// says. Their names are read now, while they are there: into the record when they are the
/// tensors it was planned with (`own_tensors`), else beside it.
pub(super) fn record_application(
    residency: &mut Residency,
    seq: u64,
    record: &Rc<PlanRecord>,
    tensors: &[TensorRef],
    addrs: Rc<Vec<usize>>,
    own_tensors: bool,
) {
    let names = if own_tensors {
        record.names_or(|| placed_names(tensors, &record.plan));
        None
    } else {
        Some(Rc::new(placed_names(tensors, &record.plan)))
    };
    residency.record(seq, record.clone(), addrs, names);
}

/// The names of the tensors `plan` places, for messages: those are the tensors whose memory
/// another one may take over.
pub(super) fn placed_names(tensors: &[TensorRef], plan: &Plan) -> Names {
    Names::from_raw(tensors.iter().zip(&plan.placements).map(|(t, p)| p.map(|_| t.name_bytes())))
}

/// Once `built` is placed: its carried inputs get their bytes back, and the inputs that lost
/// theirs are marked (see `inputs`).
pub(super) fn carry_inputs(carried: Carried, built: &Built) {
    let kept = built.carried.iter().chain(built.lost.iter().map(|(t, _)| t)).map(|&t| built.tensors[t]);
    inputs::placed(&built.tensors, kept);
    carried.restore();
    for (t, why) in &built.lost {
        inputs::watch(built.tensors[*t], why.clone());
    }
}

/// Whether `view` points where its source says (`data = view_src->data + view_offs`, same
/// buffer), or its source has no memory from ggml-backend to point into.
pub(super) fn view_is_current(view: TensorRef, src: TensorRef) -> bool {
    let (src_data, src_buffer) = (src.data(), src.buffer_ptr());
    src_buffer.is_null() || src_data.is_null() || (view.buffer_ptr() == src_buffer && view.data() as usize == src_data as usize + view.view_offs())
}

impl Gallocr {
    /// Places every tensor of `built` where `plan` says (tensors already there are left alone,
    /// unless poisoning), and points views at their sources.
    pub(super) fn apply(&mut self, built: &Built, plan: &Plan) -> Result<(), AllocError> {
        self.placed = None;
        self.reset_buffers();
        let bases: Vec<Vec<(Buffer, usize)>> =
            self.allocs.iter().map(|st| st.chunks.iter().flatten().map(|b| (**b, buffer_base(**b) as usize)).collect()).collect();
        let mut moved = vec![false; built.tensors.len()];
        let poisoning = poison::enabled();
        for (t, &tensor) in built.tensors.iter().enumerate() {
            let desc = &built.model.tensors[t];
            let status = if let Some(v) = desc.view_of {
                if moved[v] || !view_is_current(tensor, built.tensors[v]) { reinit_view(tensor) } else { GGML_STATUS_SUCCESS }
            } else if let Some(p) = plan.placements[t] {
                let (chunk, base) = bases[p.alloc][p.addr.chunk];
                let at = base + p.addr.offset;
                if poisoning || tensor.data() as usize != at || tensor.buffer_ptr() != chunk.as_ptr() {
                    // (else already there: placed by an earlier allocation of this plan)
                    moved[t] = true;
                    let status = place(chunk, tensor, at as *mut c_void);
                    if poisoning && status == GGML_STATUS_SUCCESS {
                        poison::fill(tensor);
                    }
                    status
                } else {
                    GGML_STATUS_SUCCESS
                }
            } else {
                GGML_STATUS_SUCCESS
            };
            if status != GGML_STATUS_SUCCESS {
                let msg = format!("ggml_gallocr: the buffer refused tensor {tensor} (init_tensor returned {status})");
                crate::log_error!("{msg}\n");
                return Err(AllocError::Backend(msg));
            }
        }
        Ok(())
    }
}
