//! Tensor address -> number, for numbering the tensors of a graph (thousands of lookups per
//! plan): open addressing with linear probing over one array of (address, number) pairs, kept at
//! most half full, so that a lookup usually reads one cache line. A general-purpose map reads two
//! (its control bytes, then the slot), and on a graph whose headers stream through the cache
//! both tend to miss.

/// Addresses are never 0 (tensors are not at NULL), so 0 marks an empty slot.
const EMPTY: usize = 0;

#[derive(Default)]
pub struct AddrIndex {
    slots: Vec<(usize, u32)>,
    /// `64 - log2(slots.len())`: the home slot is the top bits of the hash
    shift: u32,
    len: usize,
}

impl AddrIndex {
    /// Empties the index and makes room for `n` addresses without growing.
    pub fn reset(&mut self, n: usize) {
        let size = (2 * n).next_power_of_two().max(16);
        self.slots.clear();
        self.slots.resize(size, (EMPTY, 0));
        self.shift = 64 - size.trailing_zeros();
        self.len = 0;
    }

    #[inline]
    fn home(&self, addr: usize) -> usize {
        // Fibonacci hashing of the address without its alignment bits
        (((addr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    pub fn get(&self, addr: usize) -> Option<u32> {
        debug_assert!(addr != EMPTY && !self.slots.is_empty());
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        loop {
            let (key, value) = self.slots[i];
            if key == addr {
                return Some(value);
            }
            if key == EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `addr` (not in the index yet).
    pub fn insert(&mut self, addr: usize, value: u32) {
        debug_assert!(addr != EMPTY && self.get(addr).is_none());
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        while self.slots[i].0 != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = (addr, value);
        self.len += 1;
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.reset(old.len().max(8));
        for (addr, value) in old.into_iter().filter(|&(a, _)| a != EMPTY) {
            self.insert(addr, value);
        }
    }

    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_was_inserted_and_nothing_else_across_growth() {
        let mut index = AddrIndex::default();
        index.reset(4);
        // tensor-like addresses (368 bytes apart) and a second arena far away
        let addrs: Vec<usize> = (0..1000).map(|i| 0x7f00_0000_0000 + 368 * i).chain((0..1000).map(|i| 0x5500_0000 + 4096 * i)).collect();
        for (i, &a) in addrs.iter().enumerate() {
            assert_eq!(index.get(a), None);
            index.insert(a, i as u32);
        }
        for (i, &a) in addrs.iter().enumerate() {
            assert_eq!(index.get(a), Some(i as u32));
        }
        assert_eq!(index.get(0x7f00_0000_0010), None);
        index.reset(10);
        assert_eq!(index.get(addrs[0]), None);
    }
}
