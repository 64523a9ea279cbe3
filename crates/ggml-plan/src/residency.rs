//! What an allocator's memory holds now: which tensor last wrote each byte range, allocation by
//! allocation. This is how the allocator tells a result carried over from an earlier graph (its
//! bytes are still there: keep them) from one whose memory was handed to other tensors since
//! (say so, by name, instead of computing with garbage).
//!
//! Each allocation is recorded as its plan plus the tensors it was applied to; the final painting
//! of a plan (last writer per byte range) is computed lazily, only when a question is asked, so
//! recording costs nothing on the hot path. Lookups walk the history from the newest allocation
//! back. Memory is only ever reasoned about as offsets in chunks; no bytes are read.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use crate::MAX_NAME as GGML_MAX_NAME;
use crate::addr_map::AddrMap;
use crate::model::Tid;
use crate::plan::Plan;

/// The newest allocations kept; older ones are folded into `base` when dropped.
const HISTORY: usize = 8;

/// Tensor names, packed one after the other (turned into text only for a message).
pub struct Names {
    bytes: Vec<u8>,
    /// end of each name in `bytes`
    ends: Vec<u32>,
}

impl Names {
    /// From raw, NUL-padded `ggml_tensor::name` fields, one per tensor id (None: a tensor no
    /// message will name, kept as "").
    pub fn from_raw(raw: impl ExactSizeIterator<Item = Option<[u8; GGML_MAX_NAME]>>) -> Names {
        let mut names = Names { bytes: Vec::with_capacity(raw.len() * 8), ends: Vec::with_capacity(raw.len()) };
        for name in raw {
            if let Some(name) = name {
                let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                names.bytes.extend_from_slice(&name[..len]);
            }
            names.ends.push(names.bytes.len() as u32);
        }
        names
    }

    pub fn get(&self, t: Tid) -> String {
        let start = if t == 0 { 0 } else { self.ends[t - 1] as usize };
        String::from_utf8_lossy(&self.bytes[start..self.ends[t] as usize]).into_owned()
    }
}

impl From<Vec<String>> for Names {
    fn from(names: Vec<String>) -> Names {
        Names::from_raw(names.iter().map(|n| {
            let mut raw = [0u8; GGML_MAX_NAME];
            for (d, s) in raw.iter_mut().zip(n.bytes().take(GGML_MAX_NAME - 1)) {
                *d = s;
            }
            Some(raw)
        }))
    }
}

/// A plan plus what lookups need to explain themselves.
pub struct PlanRecord {
    pub plan: Plan,
    /// per tensor: computed by a node of the graph (a result) rather than only read
    pub is_node: Vec<bool>,
    /// per tensor: its name when the plan was first applied (for messages; a plan that is only
    /// reserved names nothing)
    names: OnceCell<Names>,
    painting: OnceCell<Painting>,
}

impl Drop for PlanRecord {
    fn drop(&mut self) {
        crate::plan::placements_spare::give(std::mem::take(&mut self.plan.placements));
    }
}

impl PlanRecord {
    pub fn new(plan: Plan, is_node: Vec<bool>) -> PlanRecord {
        PlanRecord { plan, is_node, names: OnceCell::new(), painting: OnceCell::new() }
    }

    /// The names of the tensors, read by `read` the first time they are needed: when the plan
    /// is first applied, while its tensors are there to be read.
    pub fn names_or(&self, read: impl FnOnce() -> Names) -> &Names {
        self.names.get_or_init(read)
    }

    fn name(&self, t: Tid) -> String {
        self.names.get().map(|n| n.get(t)).unwrap_or_default()
    }

    fn painting(&self) -> &Painting {
        self.painting.get_or_init(|| Painting::of(&self.plan))
    }
}

/// A chunk of one allocator: (allocator, chunk).
type ChunkKey = (usize, usize);

/// A byte range of a chunk and the tensor that wrote it last: (start, end, writer).
type Segment = (usize, usize, Tid);

/// Last writer of each byte range at the end of one plan, per (allocator, chunk).
#[derive(Default)]
struct Painting {
    /// sorted, disjoint segments
    segments: HashMap<ChunkKey, Vec<Segment>>,
}

impl Painting {
    fn of(plan: &Plan) -> Painting {
        let mut writes: Vec<(u32, Tid)> =
            plan.write_order.iter().enumerate().filter_map(|(t, w)| w.map(|w| (w, t))).filter(|&(_, t)| plan.placements[t].is_some()).collect();
        writes.sort_unstable_by_key(|w| std::cmp::Reverse(w.0)); // newest first
        let mut covered: HashMap<ChunkKey, BTreeMap<usize, usize>> = HashMap::new();
        let mut segments: HashMap<ChunkKey, Vec<Segment>> = HashMap::new();
        for (_, t) in writes {
            let p = plan.placements[t].expect("filtered above");
            let key = (p.alloc, p.addr.chunk);
            let (start, end) = (p.addr.offset, p.addr.offset + p.size.max(1));
            let cov = covered.entry(key).or_default();
            for (s, e) in uncovered(cov, start, end) {
                segments.entry(key).or_default().push((s, e, t));
            }
            insert_interval(cov, start, end);
        }
        for segs in segments.values_mut() {
            segs.sort_unstable();
        }
        Painting { segments }
    }

    /// The segments overlapping `[start, end)`.
    fn query(&self, alloc: usize, chunk: usize, start: usize, end: usize) -> Vec<(usize, usize, Tid)> {
        let Some(segs) = self.segments.get(&(alloc, chunk)) else { return Vec::new() };
        let first = segs.partition_point(|&(_, e, _)| e <= start);
        segs[first..].iter().take_while(|&&(s, _, _)| s < end).copied().collect()
    }
}

fn uncovered(cov: &BTreeMap<usize, usize>, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut cur = start;
    // intervals starting before `end`, beginning with the last one that starts before `start`
    let from = cov.range(..=start).next_back().map(|(&s, _)| s).unwrap_or(start);
    for (&s, &e) in cov.range(from..end) {
        if e <= cur {
            continue;
        }
        if s > cur {
            out.push((cur, s.min(end)));
        }
        cur = cur.max(e);
        if cur >= end {
            break;
        }
    }
    if cur < end {
        out.push((cur, end));
    }
    out
}

fn insert_interval(cov: &mut BTreeMap<usize, usize>, start: usize, end: usize) {
    let mut s = start;
    let mut e = end;
    let from = cov.range(..=start).next_back().map(|(&k, _)| k).unwrap_or(start);
    let overlapping: Vec<(usize, usize)> = cov.range(from..=end).filter(|&(&k, &v)| v >= start && k <= end).map(|(&k, &v)| (k, v)).collect();
    for (k, v) in overlapping {
        s = s.min(k);
        e = e.max(v);
        cov.remove(&k);
    }
    cov.insert(s, e);
}

/// One applied allocation.
struct Applied {
    seq: u64,
    record: Rc<PlanRecord>,
    /// tensor id -> address of the ggml_tensor it was applied to
    tensors: Rc<Vec<usize>>,
    /// names of those tensors when they differ from the ones the plan was made with
    names: Option<Rc<Names>>,
    /// generation of every (allocator, chunk) when applied
    generations: Vec<Vec<u64>>,
}

impl Applied {
    fn name(&self, t: Tid) -> String {
        match &self.names {
            Some(n) => n.get(t),
            None => self.record.name(t),
        }
    }
}

/// What a byte range holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Contents {
    /// the bytes of one tensor (`writer`, named `name`) written by allocation `seq`, not
    /// overwritten since
    Valid { writer: usize, name: String, seq: u64 },
    /// overwritten by `by` (a tensor of allocation `seq`) since
    Overwritten { by: String, seq: u64 },
    /// no recorded allocation touched it
    Unknown,
}

/// A result whose chunk was freed (the compute buffer was reallocated).
#[derive(Clone, Debug)]
pub struct Tombstone {
    pub data: usize,
    /// the allocation that placed it
    pub seq: u64,
    /// computed by a node of that allocation (a result), rather than only read
    pub result: bool,
    /// its bytes were still its own when the chunk was freed
    pub intact: bool,
    /// the allocation whose growth freed the chunk
    pub lost_at: u64,
}

/// Where an allocation that fell out of the history placed a tensor (the newest such per tensor),
/// so that freeing the chunk still leaves a tombstone for it.
#[derive(Clone, Copy)]
struct EvictedPlacement {
    alloc: usize,
    chunk: usize,
    /// the chunk's generation when placed: only a placement in the chunk being freed counts
    generation: u64,
    offset: usize,
    size: usize,
    seq: u64,
    result: bool,
}

/// Evicted placements kept at most (a program that makes new tensors for every graph and never
/// grows its buffers would otherwise grow this without end); past it they are forgotten, and a
/// tensor placed that long ago in a chunk freed since is no longer recognised.
const MAX_EVICTED_PLACEMENTS: usize = 1 << 17;

#[derive(Default)]
pub struct Residency {
    history: VecDeque<Applied>,
    /// current generation of each (allocator, chunk); bumped when the chunk's buffer is freed
    generations: Vec<Vec<u64>>,
    tombstones: AddrMap<Tombstone>,
    /// results of allocations that fell out of the history: tensor address -> allocation
    evicted_results: AddrMap<u64>,
    /// placements in the current chunks by allocations that fell out of the history: tensor
    /// address -> placement
    evicted_placements: AddrMap<EvictedPlacement>,
}

impl Residency {
    pub fn new(n_allocs: usize) -> Residency {
        Residency { generations: vec![Vec::new(); n_allocs], ..Default::default() }
    }

    fn generation(&self, alloc: usize, chunk: usize) -> u64 {
        self.generations[alloc].get(chunk).copied().unwrap_or(0)
    }

    /// Whether the newest recorded allocation is exactly this one (a replay of the same plan to
    /// the same tensors: nothing to record).
    #[inline]
    pub fn is_newest(&self, record: &Rc<PlanRecord>, tensors: &Rc<Vec<usize>>) -> bool {
        self.history.back().is_some_and(|a| Rc::ptr_eq(&a.record, record) && Rc::ptr_eq(&a.tensors, tensors))
    }

    pub fn record(&mut self, seq: u64, record: Rc<PlanRecord>, tensors: Rc<Vec<usize>>, names: Option<Rc<Names>>) {
        // an older application of the same plan to the same tensors says nothing this one does not
        self.history.retain(|a| !(Rc::ptr_eq(&a.record, &record) && (Rc::ptr_eq(&a.tensors, &tensors) || a.tensors == tensors)));
        let generations = self.generations.clone();
        self.history.push_back(Applied { seq, record, tensors, names, generations });
        while self.history.len() > HISTORY {
            let old = self.history.pop_front().expect("longer than HISTORY");
            // keep knowing which tensors were results, for the messages of later lookups
            if self.evicted_results.len() > 1 << 16 {
                self.evicted_results.clear();
            }
            if self.evicted_placements.len() > MAX_EVICTED_PLACEMENTS {
                self.evicted_placements.clear();
            }
            for (t, &addr) in old.tensors.iter().enumerate() {
                let result = old.record.is_node[t];
                if result {
                    self.evicted_results.insert(addr, old.seq);
                }
                if let Some(p) = old.record.plan.placements[t] {
                    let generation = old.generations[p.alloc].get(p.addr.chunk).copied().unwrap_or(0);
                    let e = EvictedPlacement { alloc: p.alloc, chunk: p.addr.chunk, generation, offset: p.addr.offset, size: p.size, seq: old.seq, result };
                    self.evicted_placements.insert(addr, e);
                }
            }
        }
    }

    /// The chunks of allocator `alloc` are about to be freed: remember every tensor that lived
    /// there (`chunk_bases[c]` is the address of chunk c), then forget the memory. A new buffer
    /// may come back at the same address; the tensors of the old one must not pass for its own.
    pub fn chunks_freed(&mut self, alloc: usize, chunk_bases: &[usize], lost_at: u64) {
        let mut stones: AddrMap<Tombstone> = AddrMap::default();
        for a in self.history.iter().rev() {
            for (t, placement) in a.record.plan.placements.iter().enumerate() {
                let Some(p) = placement else { continue };
                let c = p.addr.chunk;
                let current = a.generations[alloc].get(c).copied().unwrap_or(0) == self.generation(alloc, c);
                if p.alloc != alloc || c >= chunk_bases.len() || !current || stones.contains_key(&a.tensors[t]) {
                    continue; // another allocator, already freed, or placed again by a newer allocation
                }
                let (start, end) = (p.addr.offset, p.addr.offset + p.size.max(1));
                let intact = matches!(self.contents(alloc, c, start, end), Contents::Valid { writer, seq, .. } if writer == a.tensors[t] && seq == a.seq);
                stones.insert(a.tensors[t], Tombstone { data: chunk_bases[c] + start, seq: a.seq, result: a.record.is_node[t], intact, lost_at });
            }
        }
        // then the placements of allocations the history no longer holds: their tensors point
        // into the chunk as well (a graph allocated many graphs ago and allocated again now)
        for (&addr, e) in &self.evicted_placements {
            if e.alloc != alloc || e.chunk >= chunk_bases.len() || e.generation != self.generation(alloc, e.chunk) || stones.contains_key(&addr) {
                continue;
            }
            // intact when no allocation of the history wrote there since
            let intact = self.contents(alloc, e.chunk, e.offset, e.offset + e.size.max(1)) == Contents::Unknown;
            stones.insert(addr, Tombstone { data: chunk_bases[e.chunk] + e.offset, seq: e.seq, result: e.result, intact, lost_at });
        }
        // every placement in this allocator's chunks is a tombstone now, or older than them
        self.evicted_placements.retain(|_, e| e.alloc != alloc);
        if self.tombstones.len() > 1 << 16 {
            self.tombstones.clear();
        }
        self.tombstones.extend(stones);
        let gens = &mut self.generations[alloc];
        let n = gens.len().max(chunk_bases.len());
        gens.resize(n, 0);
        for g in gens.iter_mut() {
            *g += 1;
        }
    }

    #[inline]
    pub fn tombstone(&self, tensor: usize, data: usize) -> Option<&Tombstone> {
        if self.tombstones.is_empty() {
            return None;
        }
        self.tombstones.get(&tensor).filter(|t| t.data == data)
    }

    #[inline]
    pub fn forget_tombstone(&mut self, tensor: usize) {
        if !self.tombstones.is_empty() {
            self.tombstones.remove(&tensor);
        }
    }

    /// Who last wrote `[start, end)` of chunk `chunk` of allocator `alloc`.
    pub fn contents(&self, alloc: usize, chunk: usize, start: usize, end: usize) -> Contents {
        let generation = self.generation(alloc, chunk);
        for a in self.history.iter().rev() {
            if a.generations[alloc].get(chunk).copied().unwrap_or(0) != generation {
                continue;
            }
            let segs = a.record.painting().query(alloc, chunk, start, end);
            if segs.is_empty() {
                continue;
            }
            let newest = segs.iter().max_by_key(|&&(_, _, t)| a.record.plan.write_order[t]).expect("not empty").2;
            let single = segs.iter().all(|&(_, _, t)| t == newest);
            let contiguous = segs.windows(2).all(|w| w[0].1 == w[1].0);
            let covers = segs.first().is_some_and(|s| s.0 <= start) && segs.last().is_some_and(|s| s.1 >= end);
            if single && contiguous && covers {
                return Contents::Valid { writer: a.tensors[newest], name: a.name(newest), seq: a.seq };
            }
            return Contents::Overwritten { by: a.name(newest), seq: a.seq };
        }
        Contents::Unknown
    }

    /// The newest recorded allocation in which tensor `tensor` was computed by a node.
    #[inline]
    pub fn computed_in(&self, tensor: usize) -> Option<u64> {
        self.history
            .iter()
            .rev()
            .find_map(|a| {
                let t = a.tensors.iter().position(|&p| p == tensor)?;
                a.record.is_node[t].then_some(a.seq)
            })
            .or_else(|| self.evicted_results.get(&tensor).copied())
    }

    /// Whether an allocation of the history gave `tensor` memory of its own.
    #[inline]
    pub fn placed(&self, tensor: usize) -> bool {
        self.history.iter().any(|a| a.tensors.iter().enumerate().any(|(t, &p)| p == tensor && a.record.plan.placements[t].is_some()))
            || self.evicted_results.contains_key(&tensor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(plan: Plan, is_node: Vec<bool>, names: Names) -> Rc<PlanRecord> {
        let record = PlanRecord::new(plan, is_node);
        record.names_or(|| names);
        Rc::new(record)
    }
    use crate::dyn_tallocr::Addr;
    use crate::plan::Placement;

    fn plan_of(places: &[(usize, usize, u32)]) -> Plan {
        // (offset, size, write order), all in allocator 0, chunk 0
        Plan {
            placements: places.iter().map(|&(o, s, _)| Some(Placement { buffer_id: 0, alloc: 0, addr: Addr { chunk: 0, offset: o }, size: s })).collect(),
            write_order: places.iter().map(|&(_, _, w)| Some(w)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn later_writers_overwrite_earlier_ones() {
        // a at [0,16) written first, b at [8,24) later: a is overwritten, b is intact
        let rec = named(plan_of(&[(0, 16, 0), (8, 16, 1)]), vec![true, true], Names::from(vec!["a".to_string(), "b".to_string()]));
        let mut r = Residency::new(1);
        r.record(1, rec, Rc::new(vec![100, 200]), None);
        assert_eq!(r.contents(0, 0, 0, 16), Contents::Overwritten { by: "b".into(), seq: 1 });
        assert_eq!(r.contents(0, 0, 8, 24), Contents::Valid { writer: 200, name: "b".into(), seq: 1 });
        assert_eq!(r.contents(0, 0, 32, 40), Contents::Unknown);
    }

    #[test]
    fn a_newer_allocation_shadows_an_older_one() {
        let g1 = named(plan_of(&[(0, 16, 0), (16, 16, 1)]), vec![true, true], Names::from(vec!["h".to_string(), "x".to_string()]));
        let g2 = named(plan_of(&[(16, 16, 0)]), vec![true], Names::from(vec!["y".to_string()]));
        let mut r = Residency::new(1);
        r.record(1, g1, Rc::new(vec![100, 101]), None);
        r.record(2, g2, Rc::new(vec![300]), None);
        assert_eq!(r.contents(0, 0, 0, 16), Contents::Valid { writer: 100, name: "h".into(), seq: 1 });
        assert_eq!(r.contents(0, 0, 16, 32), Contents::Valid { writer: 300, name: "y".into(), seq: 2 });
        assert_eq!(r.computed_in(100), Some(1));
        r.chunks_freed(0, &[0x1000], 3);
        assert_eq!(r.contents(0, 0, 0, 16), Contents::Unknown);
        let stone = r.tombstone(100, 0x1000).expect("h was valid when its chunk was freed");
        assert!(stone.result);
        assert_eq!(stone.lost_at, 3);
    }

    #[test]
    fn a_placement_older_than_the_history_leaves_a_tombstone() {
        // h placed by allocation 1, then more allocations than the history keeps (elsewhere in
        // the chunk), then the chunk is freed: h still points into it
        let mut r = Residency::new(1);
        r.record(1, named(plan_of(&[(0, 16, 0)]), vec![true], Names::from(vec!["h".to_string()])), Rc::new(vec![100]), None);
        for seq in 2..(HISTORY as u64 + 4) {
            let other = named(plan_of(&[(16, 16, 0)]), vec![true], Names::from(vec![format!("o{seq}")]));
            r.record(seq, other, Rc::new(vec![1000 + seq as usize]), None);
        }
        r.chunks_freed(0, &[0x1000], 20);
        let stone = r.tombstone(100, 0x1000).expect("h's chunk was freed");
        assert!(stone.result && stone.intact);
        assert_eq!((stone.seq, stone.lost_at), (1, 20));
        // a chunk freed after that is another chunk: h is not in it
        r.forget_tombstone(100);
        r.chunks_freed(0, &[0x1000], 21);
        assert!(r.tombstone(100, 0x1000).is_none());
    }

    #[test]
    fn interval_helpers() {
        let mut cov = BTreeMap::new();
        insert_interval(&mut cov, 10, 20);
        insert_interval(&mut cov, 30, 40);
        assert_eq!(uncovered(&cov, 0, 50), vec![(0, 10), (20, 30), (40, 50)]);
        insert_interval(&mut cov, 15, 35);
        assert_eq!(cov.into_iter().collect::<Vec<_>>(), vec![(10, 40)]);
    }
}
