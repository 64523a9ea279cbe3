//! Tensor address -> number, for numbering the tensors of a graph (thousands of lookups per
//! plan): open addressing with linear probing over an array of numbers, kept at most half full;
//! the address of a number is read from the numbered tensors themselves (`key_of`), so the
//! table is a quarter of the size of one holding (address, number) pairs and, with the recently
//! numbered tensors it points at, stays in the first-level cache while a graph's headers stream
//! through it.

/// Marks an empty slot.
const EMPTY: u32 = u32::MAX;

/// Where `find` would have found an address: valid until the next insertion.
#[derive(Clone, Copy, Debug)]
pub struct Vacancy {
    slot: usize,
    len: usize,
}

#[derive(Default)]
pub struct AddrIndex {
    slots: Vec<u32>,
    /// `64 - log2(slots.len())`: the home slot is the top bits of the hash
    shift: u32,
    len: usize,
}

impl AddrIndex {
    /// Empties the index, keeping its memory.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
    }

    /// Makes room in an empty index for `n` addresses without growing.
    pub fn reserve(&mut self, n: usize) {
        debug_assert!(self.len == 0, "reserve on an index in use");
        let size = (2 * n).next_power_of_two().max(16);
        self.slots.clear();
        self.slots.resize(size, EMPTY);
        self.shift = 64 - size.trailing_zeros();
    }

    #[inline]
    fn home(&self, addr: usize) -> usize {
        // Fibonacci hashing of the address without its alignment bits
        (((addr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The number of `addr`, or where it would go (for `insert_at`); `key_of(n)` is the address
    /// numbered `n`.
    #[inline]
    pub fn find(&self, addr: usize, key_of: impl Fn(u32) -> usize) -> Result<u32, Vacancy> {
        debug_assert!(!self.slots.is_empty());
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        loop {
            let value = self.slots[i];
            if value == EMPTY {
                return Err(Vacancy { slot: i, len: self.len });
            }
            if key_of(value) == addr {
                return Ok(value);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `addr`, numbered `value`, where `find` said it would go, unless something was added
    /// since (then it looks again).
    #[inline]
    pub fn insert_at(&mut self, vacancy: Vacancy, addr: usize, value: u32, key_of: impl Fn(u32) -> usize) {
        if vacancy.len != self.len || 2 * (self.len + 1) > self.slots.len() {
            return self.insert(addr, value, key_of);
        }
        debug_assert!(self.slots[vacancy.slot] == EMPTY);
        self.slots[vacancy.slot] = value;
        self.len += 1;
    }

    /// Adds `addr` (not in the index yet), numbered `value` (not `u32::MAX`).
    pub fn insert(&mut self, addr: usize, value: u32, key_of: impl Fn(u32) -> usize) {
        assert!(value != EMPTY, "too many tensors");
        if 2 * (self.len + 1) > self.slots.len() {
            let old = std::mem::take(&mut self.slots);
            self.clear();
            self.reserve(old.len().max(8));
            for v in old.into_iter().filter(|&v| v != EMPTY) {
                self.place(key_of(v), v);
            }
        }
        self.place(addr, value);
    }

    fn place(&mut self, addr: usize, value: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        while self.slots[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = value;
        self.len += 1;
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
        index.reserve(4);
        // tensor-like addresses (368 bytes apart) and a second arena far away, numbered in order
        let addrs: Vec<usize> = (0..1000).map(|i| 0x7f00_0000_0000 + 368 * i).chain((0..1000).map(|i| 0x5500_0000 + 4096 * i)).collect();
        let mut numbered: Vec<usize> = Vec::new();
        for &a in &addrs {
            let found = index.find(a, |v| numbered[v as usize]);
            assert!(found.is_err(), "{a:#x} found before it was added");
            numbered.push(a);
            let n = numbered.len() as u32 - 1;
            index.insert_at(found.unwrap_err(), a, n, |v| numbered[v as usize]);
        }
        for (i, &a) in addrs.iter().enumerate() {
            assert_eq!(index.find(a, |v| numbered[v as usize]).ok(), Some(i as u32));
        }
        assert!(index.find(0x7f00_0000_0010, |v| numbered[v as usize]).is_err());
        // a vacancy made stale by an insertion in between
        let (x, y) = (0x1000_0010, 0x2000_0010);
        let vx = index.find(x, |v| numbered[v as usize]).unwrap_err();
        numbered.push(y);
        index.insert(y, numbered.len() as u32 - 1, |v| numbered[v as usize]);
        numbered.push(x);
        index.insert_at(vx, x, numbered.len() as u32 - 1, |v| numbered[v as usize]);
        assert_eq!(index.find(x, |v| numbered[v as usize]).ok(), Some(numbered.len() as u32 - 1));
        assert_eq!(index.find(y, |v| numbered[v as usize]).ok(), Some(numbered.len() as u32 - 2));
        index.clear();
        index.reserve(10);
        assert!(index.find(addrs[0], |v| numbered[v as usize]).is_err());
    }
}
