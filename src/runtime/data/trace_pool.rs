//! Trace item buffers kept from one run for the next (ADR 0078).
//!
//! A long run's trace is one large vector (56 bytes an item, two items a step of a loop),
//! which the allocator serves from fresh pages and gives back to the system when the run
//! is dropped: the next run of the process touches fresh pages again, a page fault every
//! 4 KiB (~73 items). A worker or `serve` running one run after another, a test or a
//! bench repeating a run, paid that for every run: a third of the bench example's loop
//! step was system time. A dropped trace's buffer (emptied) is kept here instead, and
//! the next trace made takes it, its pages already in place.
//!
//! Bounded: at most [`KEPT`] buffers of at most [`MAX_BYTES`] each; a larger one is
//! freed as before. The pool is never waited on: a buffer is kept or taken only when its
//! lock is free at once, otherwise the trace allocates (or frees) as if it did not exist.
//!
//! Complexity: `take` and `give` are O(1) besides the dropped items' own destructors.

use std::sync::Mutex;

use super::trace::InternedItem;

/// The most buffers kept.
pub(crate) const KEPT: usize = 2;

/// The largest buffer kept, in bytes of capacity (64 MiB: ~1.2 M items, a 600,000-step
/// loop's trace).
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// The buffers kept, emptied.
static POOL: Mutex<Vec<Vec<InternedItem>>> = Mutex::new(Vec::new());

/// An empty buffer with room for at least `items` items: a kept one when there is one
/// (the largest), else a new one.
pub(crate) fn take(items: usize) -> Vec<InternedItem> {
    let kept = POOL.try_lock().ok().and_then(|mut pool| pool.pop());
    match kept {
        Some(mut buffer) => {
            buffer.reserve(items);
            buffer
        }
        None => Vec::with_capacity(items),
    }
}

/// Keeps `buffer` (emptied) for a later [`take`] when there is room for it; frees it
/// otherwise.
pub(crate) fn give(mut buffer: Vec<InternedItem>) {
    let bytes = buffer.capacity().saturating_mul(size_of::<InternedItem>());
    if bytes == 0 || bytes > MAX_BYTES {
        return;
    }
    // The items' own allocations (details) are freed here, outside the lock.
    buffer.clear();
    if let Ok(mut pool) = POOL.try_lock()
        && pool.len() < KEPT
    {
        pool.push(buffer);
        // The largest last: `take` pops it.
        pool.sort_unstable_by_key(Vec::capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the pool's bounds and that a buffer comes back empty with its capacity:
    /// a buffer given is taken again (the largest first), at most [`KEPT`] are kept,
    /// one over [`MAX_BYTES`] or without capacity is not. Other tests of this process
    /// use the pool too, so it is only read through what this thread gives and takes.
    #[test]
    fn buffers_come_back_empty_and_the_pool_stays_bounded() {
        let pool_len = || POOL.lock().map(|p| p.len()).unwrap_or(0);
        // A buffer with items, given: kept empty with its room.
        let mut a = take(1000);
        assert!(a.capacity() >= 1000);
        a.push(InternedItem {
            step: 1,
            depth: 0,
            kind: super::super::TraceKind::Decision,
            termination_reason: None,
            supervisor: None,
            subgraph: None,
            source: None,
            target: None,
            reason: None,
            candidates: None,
            at_ms: 0,
            duration_us: 0,
            detail: Some(Box::default()),
        });
        let room = a.capacity();
        give(a);
        assert!(pool_len() <= KEPT);
        let b = take(10);
        assert!(b.is_empty());
        assert!(b.capacity() >= 10);
        // Never more than KEPT, whatever is given.
        for _ in 0..(KEPT + 3) {
            give(Vec::with_capacity(room));
        }
        assert!(pool_len() <= KEPT);
        // Too large to keep: never in the pool (its capacity is unlike any other).
        let huge = MAX_BYTES / size_of::<InternedItem>() + 1;
        give(Vec::with_capacity(huge));
        let kept = POOL.lock().map(|p| p.iter().map(Vec::capacity).collect::<Vec<_>>());
        assert!(kept.is_ok_and(|caps| caps.iter().all(|&c| c < huge)));
        drop(b);
    }
}
