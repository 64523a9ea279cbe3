//! Offline placement over known lifetimes ("greedy by size", as TFLite's GPU delegate and XLA's
//! heap simulator do): the largest allocations are placed first, each in the smallest gap left
//! between the already-placed allocations whose lifetimes overlap its own.
//!
//! Upstream's online placement is already optimal on chain-shaped transformer graphs; on irregular
//! graphs (random DAGs, backward passes) this finds layouts a few percent smaller. The planner
//! keeps whichever is smaller; here the best of a few greedy orders is taken.

/// An allocation of `size` bytes live in steps `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub size: usize,
    pub start: u32,
    pub end: u32,
}

impl Interval {
    #[cfg(test)]
    fn overlaps(&self, other: &Interval) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// The best of a few greedy placements: longest first, largest first, largest area first, each
/// into the smallest gap that fits, and largest first into the lowest gap that fits ("first
/// fit"); no one wins on every graph, and each costs one pass. Stops at the first placement that
/// reaches `lower_bound` (nothing can be smaller). Returns an offset per interval and the arena
/// size.
pub fn best_placement(intervals: &[Interval], lower_bound: usize) -> (Vec<usize>, usize) {
    let mut placer = Placer::new(intervals);
    // Longest first goes first: on chain-shaped graphs (transformers, where the few long-lived
    // tensors are what fragments an online placement) it is the order that reaches the bound,
    // and a placement at the bound ends the search after one pass. The result is the same in
    // any order: the smallest arena of the four, or one at the bound (nothing is smaller).
    let mut best = placer.greedy(longest_first, Fit::Best);
    for candidate in 0..3 {
        if best.1 <= lower_bound {
            break;
        }
        let c = match candidate {
            0 => placer.greedy_below(largest_first, Fit::Best, best.1),
            1 => placer.greedy_below(largest_area_first, Fit::Best, best.1),
            _ => placer.greedy_below(largest_first, Fit::First, best.1),
        };
        if let Some(c) = c {
            best = c; // below the best so far, or it would have given up
        }
    }
    best
}

/// Which gap an interval goes into: the smallest that fits, or the lowest.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fit {
    Best,
    First,
}

/// The orders, each as one integer of at most 96 bits (the index of the interval goes below it:
/// sorting the intervals of a 2000-node graph by a tuple costs as much as placing them).
///
/// Largest first, earliest first among equals: the classic order.
fn largest_first(i: &Interval) -> u128 {
    ((u64::MAX - i.size as u64) as u128) << 32 | i.start as u128
}

/// Largest area (bytes times steps, saturated at 2^64) first, then largest first.
fn largest_area_first(i: &Interval) -> u128 {
    let area = (i.size as u64).saturating_mul(i.end.saturating_sub(i.start).max(1) as u64);
    ((u64::MAX - area) as u128) << 32 | (u32::MAX - (i.size as u64).min(u32::MAX as u64) as u32) as u128
}

/// Longest first, then largest first.
fn longest_first(i: &Interval) -> u128 {
    ((u32::MAX - i.end.saturating_sub(i.start)) as u128) << 64 | (u64::MAX - i.size as u64) as u128
}

/// Largest first, each into the smallest gap that fits (TFLite's and XLA's "greedy by size").
pub fn greedy_by_size(intervals: &[Interval]) -> (Vec<usize>, usize) {
    Placer::new(intervals).greedy(largest_first, Fit::Best)
}

/// What the greedy passes over one set of intervals share: the intervals, how each finds the
/// placed intervals it overlaps in time, and scratch space.
///
/// Two ways to find them, with the same result: when few pairs overlap (chain-shaped graphs,
/// where most tensors live for a few steps) each interval's list of overlapping intervals, made
/// once; else a scan over all placed intervals, kept sorted by offset (the lists of a graph where
/// most tensors overlap would be as long, and need sorting by offset at every step).
struct Placer<'a> {
    intervals: &'a [Interval],
    conflicts: Option<Conflicts>,
    /// the scan: placed intervals sorted by offset; the lists: (offset, end offset) of the placed
    /// intervals overlapping the current one
    placed: Vec<Placed>,
    near: Vec<(usize, usize)>,
}

/// A placed interval, with what the scan reads of it side by side (the scan is the whole cost).
#[derive(Clone, Copy)]
struct Placed {
    offset: usize,
    end_offset: usize,
    start: u32,
    end: u32,
}

impl<'a> Placer<'a> {
    fn new(intervals: &'a [Interval]) -> Placer<'a> {
        // a list entry costs about a dozen scan steps (it is sorted by offset at every use)
        let n = intervals.len();
        Placer::with_max_pairs(intervals, n * n / 24)
    }

    /// Lists when at most `max_pairs` pairs overlap, else the scan.
    fn with_max_pairs(intervals: &'a [Interval], max_pairs: usize) -> Placer<'a> {
        Placer { intervals, conflicts: Conflicts::new(intervals, max_pairs), placed: Vec::new(), near: Vec::new() }
    }

    /// Places the intervals in the order `cmp` gives, each in the gap `fit` picks among the
    /// placed intervals it overlaps in time (or above them all); the order is that of `key`, then
    /// of the index. Intervals that overlap in time never overlap in memory.
    fn greedy(&mut self, key: impl Fn(&Interval) -> u128, fit: Fit) -> (Vec<usize>, usize) {
        self.greedy_below(key, fit, usize::MAX).expect("no arena reaches usize::MAX")
    }

    /// `greedy`, given up (None) as soon as the arena reaches `bound`: a pass that cannot beat
    /// the best one so far stops early (the large intervals come first, so it mostly does).
    fn greedy_below(&mut self, key: impl Fn(&Interval) -> u128, fit: Fit, bound: usize) -> Option<(Vec<usize>, usize)> {
        let intervals = self.intervals;
        // an interval of no bytes or no steps overlaps nothing: it stays at 0. The key (96 bits)
        // and the index in one integer: one compare per step of the sort
        let mut order: Vec<u128> = (0..intervals.len() as u32)
            .filter(|&i| intervals[i as usize].size > 0 && intervals[i as usize].start < intervals[i as usize].end)
            .map(|i| key(&intervals[i as usize]) << 32 | i as u128)
            .collect();
        order.sort_unstable();

        let mut offsets = vec![0usize; intervals.len()];
        let mut is_placed = vec![false; intervals.len()];
        self.placed.clear();
        let mut arena = 0usize;
        for &keyed in &order {
            let i = keyed as u32;
            let cur = intervals[i as usize];
            let offset = match &self.conflicts {
                Some(c) => {
                    self.near.clear();
                    let placed_near = c.of(i as usize).iter().filter(|&&j| is_placed[j as usize]);
                    self.near.extend(placed_near.map(|&j| (offsets[j as usize], offsets[j as usize] + intervals[j as usize].size)));
                    self.near.sort_unstable_by_key(|&(start, _)| start);
                    gap(self.near.iter().copied(), cur.size, fit)
                }
                None => {
                    let offset = gap_scan(&self.placed, cur, fit);
                    let pos = self.placed.partition_point(|p| p.offset < offset);
                    self.placed.insert(pos, Placed { offset, end_offset: offset + cur.size, start: cur.start, end: cur.end });
                    offset
                }
            };
            offsets[i as usize] = offset;
            is_placed[i as usize] = true;
            arena = arena.max(offset + cur.size);
            if arena >= bound {
                return None;
            }
        }
        Some((offsets, arena))
    }
}

/// The offset for `size` bytes among `busy` ranges (start, end), sorted by start: the smallest
/// gap that fits (the lowest among equals), or the lowest that fits, or above them all.
#[inline]
fn gap(busy: impl Iterator<Item = (usize, usize)>, size: usize, fit: Fit) -> usize {
    let mut best: Option<(usize, usize)> = None; // (gap size, offset)
    let mut prev_end = 0usize;
    for (start, end) in busy {
        if start >= prev_end + size {
            let gap = start - prev_end;
            if fit == Fit::First {
                return prev_end;
            }
            if best.is_none_or(|(g, _)| gap < g) {
                best = Some((gap, prev_end));
            }
        }
        prev_end = prev_end.max(end);
    }
    best.map_or(prev_end, |(_, off)| off)
}

/// `gap` over the placed intervals (sorted by offset) that overlap `cur` in time, written so that
/// the test for overlap is no branch: on a dense graph it goes either way at random, and a
/// mispredicted branch per placed interval would cost more than the rest of the scan.
#[inline]
fn gap_scan(placed: &[Placed], cur: Interval, fit: Fit) -> usize {
    let (mut best_gap, mut best_offset) = (usize::MAX, usize::MAX);
    let mut prev_end = 0usize;
    for p in placed {
        let live = (p.start < cur.end) & (cur.start < p.end);
        if live & (p.offset >= prev_end + cur.size) {
            if fit == Fit::First {
                return prev_end;
            }
            let gap = p.offset - prev_end;
            if gap < best_gap {
                (best_gap, best_offset) = (gap, prev_end);
            }
        }
        prev_end = prev_end.max(if live { p.end_offset } else { 0 });
    }
    if best_offset != usize::MAX { best_offset } else { prev_end }
}

/// For each interval of non-zero size, the others that overlap it in time (compressed rows).
struct Conflicts {
    /// `list[row[i]..row[i + 1]]`: the intervals overlapping `i`
    row: Vec<u32>,
    list: Vec<u32>,
}

impl Conflicts {
    /// None when more than `max_pairs` pairs overlap.
    fn new(intervals: &[Interval], max_pairs: usize) -> Option<Conflicts> {
        let n = intervals.len();
        let mut by_start: Vec<u32> = (0..n as u32).filter(|&i| intervals[i as usize].size > 0).collect();
        // the planner makes them in order of start already
        if !by_start.is_sorted_by_key(|&i| intervals[i as usize].start) {
            by_start.sort_unstable_by_key(|&i| intervals[i as usize].start);
        }
        // one sweep collects the pairs, then they are counted into rows
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut active: Vec<u32> = Vec::new();
        let complete = sweep(intervals, &by_start, &mut active, |i, j| {
            pairs.push((i, j));
            pairs.len() <= max_pairs
        });
        if !complete {
            return None;
        }
        let mut row = vec![0u32; n + 1];
        for &(i, j) in &pairs {
            row[i as usize + 1] += 1;
            row[j as usize + 1] += 1;
        }
        for k in 0..n {
            row[k + 1] += row[k];
        }
        let mut fill = row[..n].to_vec();
        let mut list = vec![0u32; 2 * pairs.len()];
        for &(i, j) in &pairs {
            list[fill[i as usize] as usize] = j;
            fill[i as usize] += 1;
            list[fill[j as usize] as usize] = i;
            fill[j as usize] += 1;
        }
        Some(Conflicts { row, list })
    }

    #[inline]
    fn of(&self, i: usize) -> &[u32] {
        &self.list[self.row[i] as usize..self.row[i + 1] as usize]
    }
}

/// Calls `pair` for every two intervals of `by_start` (sorted by start) that overlap in time,
/// keeping in `active` those not ended at the current start; stops when `pair` says so, and
/// returns whether it went through.
fn sweep(intervals: &[Interval], by_start: &[u32], active: &mut Vec<u32>, mut pair: impl FnMut(u32, u32) -> bool) -> bool {
    active.clear();
    for &i in by_start {
        let cur = intervals[i as usize];
        if cur.start >= cur.end {
            continue; // never live: overlaps nothing
        }
        active.retain(|&j| intervals[j as usize].end > cur.start);
        // each started no later than `cur` and has not ended: they overlap
        for &j in active.iter() {
            if !pair(i, j) {
                return false;
            }
        }
        active.push(i);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_no_overlap(iv: &[Interval], off: &[usize]) {
        for a in 0..iv.len() {
            for b in a + 1..iv.len() {
                if iv[a].overlaps(&iv[b]) && iv[a].size > 0 && iv[b].size > 0 {
                    let disjoint = off[a] + iv[a].size <= off[b] || off[b] + iv[b].size <= off[a];
                    assert!(disjoint, "intervals {a} and {b} overlap in time and memory");
                }
            }
        }
    }

    #[test]
    fn reaches_max_load_where_online_fragments() {
        // a small long-lived tensor allocated between two short-lived big ones: online placement
        // puts it in the middle; by size it goes after the big ones
        let iv = [Interval { size: 100, start: 0, end: 2 }, Interval { size: 10, start: 1, end: 10 }, Interval { size: 100, start: 3, end: 5 }];
        let (off, arena) = greedy_by_size(&iv);
        check_no_overlap(&iv, &off);
        assert_eq!(arena, 110);
    }

    /// The placement by definition: every placed interval is checked for overlap in time (all
    /// pairs), the smallest gap between those that overlap wins.
    fn reference_greedy_by_size(intervals: &[Interval]) -> (Vec<usize>, usize) {
        let mut order: Vec<usize> = (0..intervals.len()).collect();
        order.sort_by_key(|&a| largest_first(&intervals[a]));
        let mut offsets = vec![0usize; intervals.len()];
        let mut placed: Vec<usize> = Vec::new();
        let mut arena = 0;
        for &i in &order {
            let cur = intervals[i];
            let mut busy: Vec<(usize, usize)> = placed.iter().filter(|&&j| cur.overlaps(&intervals[j])).map(|&j| (offsets[j], intervals[j].size)).collect();
            busy.sort();
            let (mut best, mut prev_end) = (None::<(usize, usize)>, 0);
            for (off, size) in busy {
                if off >= prev_end + cur.size && best.is_none_or(|(g, _)| off - prev_end < g) {
                    best = Some((off - prev_end, prev_end));
                }
                prev_end = prev_end.max(off + size);
            }
            offsets[i] = best.map_or(prev_end, |(_, o)| o);
            arena = arena.max(offsets[i] + cur.size);
            placed.push(i);
        }
        (offsets, arena)
    }

    #[test]
    fn greedy_by_size_is_the_placement_by_definition() {
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..300 {
            let n = (next() % 120) as usize + 1;
            let iv: Vec<Interval> = (0..n)
                .map(|_| {
                    let start = (next() % 80) as u32;
                    let end = if next() % 10 == 0 { u32::MAX } else { start + 1 + (next() % 30) as u32 };
                    Interval { size: (next() % 64 + 1) as usize * 16, start, end }
                })
                .collect();
            let reference = reference_greedy_by_size(&iv);
            assert_eq!(greedy_by_size(&iv), reference);
            // both ways of finding the overlapping intervals
            assert_eq!(Placer::with_max_pairs(&iv, 0).greedy(largest_first, Fit::Best), reference);
            assert_eq!(Placer::with_max_pairs(&iv, usize::MAX).greedy(largest_first, Fit::Best), reference);
            let (first_scan, first_lists) =
                (Placer::with_max_pairs(&iv, 0).greedy(largest_first, Fit::First), Placer::with_max_pairs(&iv, usize::MAX).greedy(largest_first, Fit::First));
            assert_eq!(first_scan, first_lists);
            check_no_overlap(&iv, &first_scan.0);
        }
    }

    #[test]
    fn random_intervals_never_overlap() {
        let mut seed = 0x9E3779B97F4A7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200 {
            let n = (next() % 60) as usize + 1;
            let iv: Vec<Interval> = (0..n)
                .map(|_| {
                    let start = (next() % 50) as u32;
                    Interval { size: (next() % 64 + 1) as usize * 8, start, end: start + 1 + (next() % 20) as u32 }
                })
                .collect();
            let (off, arena) = best_placement(&iv, 0);
            check_no_overlap(&iv, &off);
            let (_, by_size) = greedy_by_size(&iv);
            assert!(arena <= by_size, "the best order is never worse than largest first");
            let peak = (0..80u32).map(|s| iv.iter().filter(|i| i.start <= s && s < i.end).map(|i| i.size).sum::<usize>()).max().unwrap();
            assert!(arena >= peak);
        }
    }
}
