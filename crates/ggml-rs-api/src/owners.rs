//! Whose memory each allocated tensor is in, so that no call reads or computes over freed memory.
//!
//! ggml keeps a tensor's memory as two raw fields (`buffer`, `data`) that nothing clears when
//! the memory goes: a `Buffer` dropped, a graph allocator or scheduler dropped, or the tensor
//! placed by another allocator since. The safe layer records, for each tensor it sees placed,
//! the object whose memory it is in (its *owner*: a `Buffer`, a `GraphAllocator`, a
//! `Scheduler`), and keeps a set of the owners alive. Before an allocation, a tensor whose owner
//! is gone (or is another allocator) gets its fields cleared, so the allocator places it anew;
//! before a compute or a copy, every tensor involved must be in live memory of the allocation's
//! own owner or of a `Buffer`, else the call is an `Error`. A global `epoch`, bumped whenever an
//! owner goes or a tensor is cleared, lets an allocation skip that check when nothing changed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::Error;
use crate::sys::{Api, RawTensor};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct OwnerId(pub(crate) u64);

/// Keys here are addresses and counters, not attacker-chosen: a multiplicative hash is enough,
/// and a third of the cost of SipHash in the per-tensor passes (`prepare`, `record`, `check`).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        // addresses are 16-byte aligned: fold the high bits of the product down
        let h = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;

#[derive(Default)]
struct Registry {
    /// live owners; `true` for a `Buffer` (whose tensors any allocation may read)
    live: Map<u64, bool>,
    /// tensor address → owner of its memory
    placed: Map<usize, u64>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(1);
static EPOCH: AtomicU64 = AtomicU64::new(0);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    // a panic while holding the lock leaves consistent maps (each update is one insert/remove)
    let mut g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(Registry::default);
    g
}

fn bump() {
    EPOCH.fetch_add(1, Ordering::SeqCst);
}

pub(crate) fn epoch() -> u64 {
    EPOCH.load(Ordering::SeqCst)
}

/// A number never given out before (owners, and backends for `Graph`'s cache of checks).
pub(crate) fn unique_id() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A new live owner (`is_buffer`: a `Buffer`, whose tensors every allocation may read).
pub(crate) fn new_owner(is_buffer: bool) -> OwnerId {
    let id = unique_id();
    registry().as_mut().unwrap().live.insert(id, is_buffer);
    OwnerId(id)
}

/// The owner's memory is gone (called before it is freed).
pub(crate) fn drop_owner(id: OwnerId) {
    registry().as_mut().unwrap().live.remove(&id.0);
    bump();
}

/// The tensors of a context that is freed: their addresses may be reused.
pub(crate) fn forget(tensors: &[RawTensor]) {
    let mut g = registry();
    let r = g.as_mut().unwrap();
    for t in tensors {
        r.placed.remove(&t.addr());
    }
}

/// Before `owner` allocates (or reserves) `tensors`: clears every tensor whose memory is not
/// live memory of `owner` or of a `Buffer`. Returns which tensors have no memory now (the ones
/// the allocation will place).
pub(crate) fn prepare(api: &Api, owner: OwnerId, tensors: &[RawTensor]) -> Vec<bool> {
    let mut g = registry();
    let r = g.as_mut().unwrap();
    let mut cleared = false;
    let empty = tensors
        .iter()
        .map(|&t| {
            if api.info(t).data == 0 {
                return true;
            }
            let keep = r.placed.get(&t.addr()).is_some_and(|o| *o == owner.0 || r.live.get(o) == Some(&true));
            if !keep {
                api.clear_memory(t);
                r.placed.remove(&t.addr());
                cleared = true;
            }
            !keep
        })
        .collect();
    if cleared {
        bump();
    }
    empty
}

/// After `owner` placed `tensors` (`empty`: from `prepare`): each newly placed tensor is in
/// `owner`'s memory, or, for a view, in its source's.
pub(crate) fn record(api: &Api, owner: OwnerId, tensors: &[RawTensor], empty: &[bool]) {
    let mut g = registry();
    let r = g.as_mut().unwrap();
    for (&t, &e) in tensors.iter().zip(empty) {
        if e && api.info(t).data != 0 {
            let o = api.view_src(t).and_then(|v| r.placed.get(&v.addr()).copied()).unwrap_or(owner.0);
            r.placed.insert(t.addr(), o);
        }
    }
}

/// Every tensor has memory, and it is live memory of `owner` or of a `Buffer`. `since`: the
/// epoch of the last successful check (nothing to do when it is still the current one).
pub(crate) fn check(api: &Api, owner: OwnerId, tensors: &[RawTensor], since: u64) -> Result<u64, Error> {
    let now = epoch();
    if now == since {
        return Ok(now);
    }
    let g = registry();
    let r = g.as_ref().unwrap();
    for &t in tensors {
        let o = r.placed.get(&t.addr());
        if api.info(t).data == 0 || o.is_none() {
            return Err(Error::NotAllocated(format!("tensor '{}' has no memory (allocate its graph again)", api.name(t))));
        }
        let o = *o.unwrap();
        if o != owner.0 && r.live.get(&o) != Some(&true) {
            let why = if r.live.contains_key(&o) { "was placed by another allocator since" } else { "is in memory that was freed" };
            return Err(Error::NotAllocated(format!("tensor '{}' {why} (allocate its graph again)", api.name(t))));
        }
    }
    Ok(now)
}

/// The tensors (of `tensors`) in the memory of a live `Buffer`: weights and the like, which an
/// allocator takes as they are.
pub(crate) fn in_buffers(tensors: &[RawTensor]) -> Vec<RawTensor> {
    let g = registry();
    let r = g.as_ref().unwrap();
    tensors.iter().copied().filter(|t| r.placed.get(&t.addr()).is_some_and(|o| r.live.get(o) == Some(&true))).collect()
}

/// Whether `t` is in the memory of `owner` (a `Buffer`'s tensors and their views).
pub(crate) fn owned_by(t: RawTensor, owner: OwnerId) -> bool {
    registry().as_ref().unwrap().placed.get(&t.addr()) == Some(&owner.0)
}
