//! The compute buffers: one or more chunks per buffer type, (re)allocated to fit a plan, the
//! index from a buffer address to its chunk, and their sizes.

use super::*;

impl Gallocr {
    pub(super) fn find_chunk(&self, buffer: usize) -> Option<ChunkEntry> {
        self.chunk_index.iter().find(|e| e.buffer == buffer).copied()
    }

    pub(super) fn rebuild_chunk_index(&mut self) {
        self.chunk_index.clear();
        for (bases, st) in self.chunk_bases.iter_mut().zip(&self.allocs) {
            bases.clear();
            bases.extend(st.chunks.iter().flatten().map(|b| (b.as_ptr() as usize, buffer_base(**b) as usize)));
        }
        for (a, st) in self.allocs.iter().enumerate() {
            for (c, b) in st.chunks.iter().flatten().enumerate() {
                self.chunk_index.push(ChunkEntry { buffer: b.as_ptr() as usize, alloc: a, chunk: c, base: buffer_base(**b) as usize, size: b.size() });
            }
        }
    }

    /// Makes the compute buffers at least as large as `plan` needs. With `no_alloc`, buffers that
    /// would have to grow are freed and left unallocated (reserve_n_size).
    pub(super) fn ensure_buffers(&mut self, plan: &Plan, built: Option<&Built>, no_alloc: bool) -> Result<Resized, AllocError> {
        let mut resized = Resized::default();
        for a in 0..self.allocs.len() {
            let wanted = &plan.chunk_sizes[a];
            let realloc = match &self.allocs[a].chunks {
                None => true,
                Some(chunks) => wanted.iter().enumerate().any(|(c, &w)| w > chunks.get(c).map(|b| b.size()).unwrap_or(0)),
            };
            if !realloc {
                continue;
            }
            // results that stay pinned in this allocator move to the new chunks with their bytes
            let mut moving: Vec<(TensorRef, Addr, Vec<u8>)> = Vec::new();
            if let (Some(b), Some(_), false) = (built, &self.allocs[a].chunks, no_alloc) {
                for pin in b.model.pins.iter().filter(|p| p.alloc == a) {
                    let tensor = b.tensors[pin.tensor];
                    let mut bytes = vec![0u8; tensor.nbytes()];
                    tensor_get(tensor, bytes.as_mut_ptr() as *mut c_void, 0, bytes.len());
                    moving.push((tensor, pin.addr, bytes));
                }
            }
            resized.grew |= self.allocs[a].chunks.is_some();
            resized.any = true;
            let old_size: usize = self.allocs[a].chunks.iter().flatten().map(|b| b.size()).sum();
            let new_size: usize = wanted.iter().sum();
            if old_size > 0 && cfg!(debug_assertions) {
                crate::log_debug!(
                    "ggml_gallocr: reallocating {} compute buffer from {:.2} MiB to {:.2} MiB\n",
                    self.allocs[a].buft.name(),
                    old_size as f64 / 1048576.0,
                    new_size as f64 / 1048576.0
                );
            }
            self.free_chunks(a);
            if no_alloc {
                continue;
            }
            let buft = self.allocs[a].buft;
            let mut chunks = Vec::with_capacity(wanted.len());
            for &size in wanted {
                match buft_alloc_owned(buft, size) {
                    Some(b) => {
                        buffer_set_usage(*b, sys::USAGE_COMPUTE);
                        chunks.push(b);
                    }
                    None => {
                        drop(chunks); // the chunks allocated so far are freed
                        let msg = format!("ggml_gallocr: failed to allocate {} buffer of size {new_size}", buft.name());
                        crate::log_error!("{msg}\n");
                        self.rebuild_chunk_index();
                        return Err(AllocError::Backend(msg));
                    }
                }
            }
            self.allocs[a].chunks = Some(chunks);
            self.rebuild_chunk_index();
            for (tensor, addr, bytes) in moving {
                let chunk = *self.allocs[a].chunks.as_ref().expect("just allocated")[addr.chunk];
                tensor.set_buffer(std::ptr::null_mut());
                tensor.set_data(std::ptr::null_mut());
                let at = (buffer_base(chunk) as usize + addr.offset) as *mut c_void;
                if place(chunk, tensor, at) != GGML_STATUS_SUCCESS {
                    return Err(AllocError::Backend(format!("ggml_gallocr: buffer refused tensor {tensor}")));
                }
                tensor_set(tensor, bytes.as_ptr() as *const c_void, 0, bytes.len());
            }
        }
        self.rebuild_chunk_index();
        Ok(resized)
    }

    /// Whether `plan` fits the compute buffers there are (an allocator without buffers takes any).
    pub(super) fn fits_buffers(&self, plan: &Plan) -> bool {
        self.allocs.iter().zip(&plan.chunk_sizes).all(|(st, wanted)| match &st.chunks {
            None => true,
            Some(chunks) => wanted.iter().enumerate().all(|(c, &w)| w <= chunks.get(c).map_or(0, |b| b.size())),
        })
    }

    pub(super) fn free_chunks(&mut self, a: usize) {
        if let Some(chunks) = self.allocs[a].chunks.take() {
            self.placed = None;
            let bases: Vec<usize> = chunks.iter().map(|b| buffer_base(**b) as usize).collect();
            self.residency.chunks_freed(a, &bases, self.seq + 1);
            drop(chunks); // freed
        }
    }

    /// Per buffer id, the bytes the last plan needs (upstream's reserve_n_size).
    pub fn planned_sizes(&self) -> Vec<usize> {
        let plan = self.last.as_ref().map(|p| &p.record.plan);
        self.alloc_of_id.iter().map(|&a| plan.map(|p| p.total_size(a)).unwrap_or(0)).collect()
    }

    /// The lower bound of the last plan for buffer id `id`: the most bytes live at once.
    pub fn planned_lower_bound(&self, id: usize) -> usize {
        self.last.as_ref().map(|p| p.record.plan.live_peak.get(self.alloc_of_id[id]).copied().unwrap_or(0)).unwrap_or(0)
    }

    /// Resets the compute buffers (as upstream does before placing tensors).
    pub(super) fn reset_buffers(&self) {
        for st in &self.allocs {
            for b in st.chunks.iter().flatten() {
                b.reset();
            }
        }
    }

    /// Bytes of the compute buffer of buffer id `id` (0 when it shares an earlier id's buffer).
    pub fn buffer_size(&self, id: usize) -> usize {
        crate::ensure!(id < self.bufts.len(), "ggml_gallocr_get_buffer_size: buffer id {id} out of range ({})", self.bufts.len());
        let a = self.alloc_of_id[id];
        if self.alloc_of_id[..id].contains(&a) {
            return 0;
        }
        self.allocs[a].chunks.iter().flatten().map(|b| b.size()).sum()
    }

    /// Where `t`'s bytes are, as far as this allocator knows, from `t`'s header alone: the
    /// buffer it points at is never read (it may be one this allocator freed).
    pub fn residence(&self, t: TensorRef) -> Residence {
        let data = t.data() as usize;
        // first: a freed chunk's struct address may have been taken by a new buffer since
        if data != 0 && self.residency.tombstone(t.addr(), data).is_some() {
            return Residence::Freed;
        }
        if self.find_chunk(t.buffer_ptr() as usize).is_some() { Residence::Compute } else { Residence::Elsewhere }
    }
}
