//! The offset allocator gallocr plans with, one per distinct buffer type: an address space of up
//! to 16 chunks (a compute buffer larger than the buffer type's max size is split into chunks),
//! each a sorted list of free blocks.
//!
//! Placement decisions are upstream's, step for step (best fit among inner free blocks, then the
//! tail block that reuses most of the already-reserved space, then a new chunk), so that a graph
//! gets the same offsets as with upstream's ggml-alloc unless the planner finds a smaller layout.
//! Pure bookkeeping: no memory is touched.

/// Upstream's GGML_VBUFFER_MAX_CHUNKS.
pub const MAX_CHUNKS: usize = 16;

/// Where a tensor lives: chunk index and byte offset inside the chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    pub chunk: usize,
    pub offset: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FreeBlock {
    offset: usize,
    size: usize,
}

#[derive(Clone, Debug, Default)]
struct Chunk {
    /// sorted by offset, never adjacent (merged on free)
    free: Vec<FreeBlock>,
    /// high-water mark: the chunk's buffer must be at least this large
    max_size: usize,
}

#[derive(Clone, Debug)]
pub struct DynAllocator {
    alignment: usize,
    max_chunk_size: usize,
    chunks: Vec<Chunk>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfChunks {
    pub size: usize,
    pub largest_free: usize,
}

#[inline]
pub fn align_up(size: usize, alignment: usize) -> usize {
    debug_assert!(alignment.is_power_of_two());
    size.div_ceil(alignment) * alignment
}

impl DynAllocator {
    pub fn new(alignment: usize, max_buffer_size: usize) -> DynAllocator {
        let alignment = alignment.max(1);
        assert!(alignment.is_power_of_two(), "buffer alignment {alignment} is not a power of two");
        DynAllocator { alignment, max_chunk_size: max_buffer_size.min(usize::MAX / 2), chunks: Vec::new() }
    }

    #[inline]
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    #[inline]
    pub fn max_chunk_size(&self) -> usize {
        self.max_chunk_size
    }

    #[inline]
    pub fn reset(&mut self) {
        self.chunks.clear();
    }

    #[inline]
    pub fn aligned(&self, size: usize) -> usize {
        align_up(size, self.alignment)
    }

    /// High-water mark of each chunk: the sizes the chunk buffers must have.
    pub fn chunk_sizes(&self) -> Vec<usize> {
        self.chunks.iter().map(|c| c.max_size).collect()
    }

    pub fn total_size(&self) -> usize {
        self.chunks.iter().map(|c| c.max_size).sum()
    }

    fn new_chunk(&mut self, min_size: usize) -> Option<usize> {
        if self.chunks.len() >= MAX_CHUNKS {
            return None;
        }
        // the last possible chunk is unbounded: the backend then decides whether it can allocate it
        let size = if self.chunks.len() == MAX_CHUNKS - 1 { usize::MAX / 2 } else { min_size.max(self.max_chunk_size) };
        self.chunks.push(Chunk { free: vec![FreeBlock { offset: 0, size }], max_size: 0 });
        Some(self.chunks.len() - 1)
    }

    pub fn alloc(&mut self, size: usize) -> Result<Addr, OutOfChunks> {
        let size = self.aligned(size);
        let mut best: Option<(usize, usize)> = None;
        let mut max_avail = 0;

        // best fit among the blocks that are not the last of their chunk; as upstream, the best
        // size is tracked per chunk, so a later chunk with any fitting block wins
        for (c, chunk) in self.chunks.iter().enumerate() {
            let mut best_fit_size = usize::MAX;
            let inner = chunk.free.len().saturating_sub(1);
            for (i, block) in chunk.free[..inner].iter().enumerate() {
                max_avail = max_avail.max(block.size);
                if block.size >= size && block.size <= best_fit_size {
                    best = Some((c, i));
                    best_fit_size = block.size;
                }
            }
        }

        if best.is_none() {
            // the tail blocks: prefer one that stays within the reserved space, with the least
            // waste; otherwise the one that grows the chunk least
            let mut best_reuse = i128::MIN;
            for (c, chunk) in self.chunks.iter().enumerate() {
                if let Some(block) = chunk.free.last() {
                    max_avail = max_avail.max(block.size);
                    let reuse = chunk.max_size as i128 - block.offset as i128 - size as i128;
                    let better_reuse = best_reuse < 0 && reuse > best_reuse;
                    let better_fit = reuse >= 0 && reuse < best_reuse;
                    if block.size >= size && (better_reuse || better_fit) {
                        best = Some((c, chunk.free.len() - 1));
                        best_reuse = reuse;
                    }
                }
            }
        }

        let (c, i) = match best {
            Some(b) => b,
            None => match self.new_chunk(size) {
                Some(c) => (c, 0),
                None => return Err(OutOfChunks { size, largest_free: max_avail }),
            },
        };

        let chunk = &mut self.chunks[c];
        let block = &mut chunk.free[i];
        let addr = Addr { chunk: c, offset: block.offset };
        block.offset += size;
        block.size -= size;
        if block.size == 0 {
            chunk.free.remove(i);
        }
        chunk.max_size = chunk.max_size.max(addr.offset + size);
        Ok(addr)
    }

    pub fn free(&mut self, addr: Addr, size: usize) {
        let size = self.aligned(size);
        let chunk = &mut self.chunks[addr.chunk];
        let free = &mut chunk.free;
        for i in 0..free.len() {
            if free[i].offset + free[i].size == addr.offset {
                free[i].size += size;
                if i + 1 < free.len() && free[i].offset + free[i].size == free[i + 1].offset {
                    free[i].size += free[i + 1].size;
                    free.remove(i + 1);
                }
                return;
            }
            if addr.offset + size == free[i].offset {
                free[i].offset = addr.offset;
                free[i].size += size;
                if i > 0 && free[i - 1].offset + free[i - 1].size == free[i].offset {
                    free[i - 1].size += free[i].size;
                    free.remove(i);
                }
                return;
            }
        }
        let pos = free.partition_point(|b| b.offset < addr.offset);
        free.insert(pos, FreeBlock { offset: addr.offset, size });
    }

    /// Marks `[addr.offset, addr.offset + size)` as taken before planning starts: memory that
    /// holds data the graph still needs (a result carried over from an earlier graph).
    pub fn reserve_at(&mut self, addr: Addr, size: usize) {
        let size = self.aligned(size);
        while self.chunks.len() <= addr.chunk {
            if self.new_chunk(0).is_none() {
                return;
            }
        }
        let chunk = &mut self.chunks[addr.chunk];
        let (start, end) = (addr.offset, addr.offset + size);
        let mut kept = Vec::with_capacity(chunk.free.len() + 1);
        for b in chunk.free.drain(..) {
            let (b_start, b_end) = (b.offset, b.offset + b.size);
            if b_end <= start || b_start >= end {
                kept.push(b);
                continue;
            }
            if b_start < start {
                kept.push(FreeBlock { offset: b_start, size: start - b_start });
            }
            if b_end > end {
                kept.push(FreeBlock { offset: end, size: b_end - end });
            }
        }
        chunk.free = kept;
        chunk.max_size = chunk.max_size.max(end);
    }

    #[inline]
    pub fn n_chunks(&self) -> usize {
        self.chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_prefers_smallest_inner_block_then_tail() {
        // scenario: three blocks, free the middle and the first; a small request takes the
        // smaller hole, a large one the tail
        let mut a = DynAllocator::new(8, usize::MAX);
        let x = a.alloc(16).unwrap();
        let y = a.alloc(8).unwrap();
        let _z = a.alloc(8).unwrap();
        a.free(x, 16);
        a.free(y, 8); // merges with x: hole [0, 24)
        let w = a.alloc(24).unwrap();
        assert_eq!(w, Addr { chunk: 0, offset: 0 });
        let v = a.alloc(40).unwrap();
        assert_eq!(v.offset, 32);
        assert_eq!(a.total_size(), 72);
    }

    #[test]
    fn chunks_split_at_max_size_and_last_chunk_is_unbounded() {
        // invariant: no chunk exceeds the max size unless one tensor alone is larger
        let mut a = DynAllocator::new(8, 16);
        for _ in 0..3 {
            a.alloc(8).unwrap();
        }
        assert_eq!(a.chunk_sizes(), vec![16, 8]);
        let big = a.alloc(24).unwrap();
        assert_eq!(big, Addr { chunk: 2, offset: 0 });
        assert_eq!(a.chunk_sizes(), vec![16, 8, 24]);

        let mut b = DynAllocator::new(8, 8);
        for _ in 0..MAX_CHUNKS + 1 {
            b.alloc(8).unwrap();
        }
        assert_eq!(b.n_chunks(), MAX_CHUNKS);
        assert_eq!(b.chunk_sizes()[MAX_CHUNKS - 1], 16);
    }

    #[test]
    fn prefers_already_reserved_space_over_growth() {
        // upstream's test_prefer_already_allocated_memory, on the allocator alone
        let mut a = DynAllocator::new(4, 32);
        let x0 = a.alloc(24).unwrap();
        let x1 = a.alloc(4).unwrap();
        a.free(x0, 24);
        let x2 = a.alloc(4).unwrap();
        assert_eq!(x2.offset, 0);
        assert_eq!(x1.offset, 24);
        assert_eq!(a.total_size(), 28);
    }

    #[test]
    fn reserve_at_carves_the_range_out() {
        let mut a = DynAllocator::new(8, usize::MAX);
        a.reserve_at(Addr { chunk: 0, offset: 16 }, 8);
        let x = a.alloc(16).unwrap();
        let y = a.alloc(8).unwrap();
        assert_eq!(x.offset, 0);
        assert_eq!(y.offset, 24);
        assert_eq!(a.total_size(), 32);
    }
}
