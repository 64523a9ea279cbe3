//! Maps keyed by the address of a ggml tensor (or any other distinct, 16-byte aligned address).
//! The key is hashed with one multiply: the standard SipHash costs more than the lookups it
//! serves in the allocator's and scheduler's passes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes tensor addresses (distinct, 16-byte aligned) with one multiply.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only usize keys are hashed")
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map from an address to `V`.
pub type AddrMap<V> = HashMap<usize, V, BuildHasherDefault<AddrHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_addresses_spread() {
        let mut m: AddrMap<usize> = AddrMap::default();
        for i in 0..1000 {
            m.insert(0x1000 + 16 * i, i);
        }
        assert!((0..1000).all(|i| m[&(0x1000 + 16 * i)] == i));
    }
}
