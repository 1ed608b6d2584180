//! Buffers kept from one run for the next: the pool a dropped trace leaves its items'
//! buffer in (ADR 0078).
//!
//! A long run's trace is one large vector (56 bytes an item, two items a step of a loop),
//! which the allocator serves from fresh pages and gives back to the system when the run
//! is dropped: the next run of the process touches fresh pages again, a page fault every
//! 4 KiB (~73 items). A worker or `serve` running one run after another, a test or a
//! bench repeating a run, paid that for every run: a third of the bench example's loop
//! step was system time. A dropped trace's buffer (emptied) is kept in a [`BufferPool`]
//! instead, and the next trace made takes it, its pages already in place.
//!
//! Bounded: at most [`KEPT`] buffers of at most [`MAX_BYTES`] each; a larger one is
//! freed as before. A pool is never waited on: a buffer is kept or taken only when its
//! lock is free at once, otherwise the caller allocates (or frees) as if it did not exist.
//!
//! Complexity: `take` and `give` are O(1) besides the dropped items' own destructors.

use std::sync::Mutex;

/// The most buffers a pool keeps.
pub(crate) const KEPT: usize = 2;

/// The largest buffer a pool keeps, in bytes of capacity (64 MiB: ~1.2 M trace items, a
/// 600,000-step loop's trace).
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// Emptied vectors of `T` kept for reuse (at most [`KEPT`], none over [`MAX_BYTES`]).
pub(crate) struct BufferPool<T> {
    kept: Mutex<Vec<Vec<T>>>,
}

impl<T> BufferPool<T> {
    /// An empty pool (for a `static`).
    pub(crate) const fn new() -> Self {
        Self {
            kept: Mutex::new(Vec::new()),
        }
    }

    /// An empty buffer with room for at least `items` items: a kept one when there is
    /// one (the largest), else a new one.
    pub(crate) fn take(&self, items: usize) -> Vec<T> {
        let kept = self.kept.try_lock().ok().and_then(|mut kept| kept.pop());
        match kept {
            Some(mut buffer) => {
                buffer.reserve(items);
                buffer
            }
            None => Vec::with_capacity(items),
        }
    }

    /// Keeps `buffer` (emptied) for a later [`take`](Self::take) when there is room for
    /// it, or in place of the smallest kept when it is larger; frees it otherwise.
    pub(crate) fn give(&self, mut buffer: Vec<T>) {
        let bytes = buffer.capacity().saturating_mul(size_of::<T>());
        if bytes == 0 || bytes > MAX_BYTES {
            return;
        }
        // The items' own allocations are freed here, outside the lock.
        buffer.clear();
        let Ok(mut kept) = self.kept.try_lock() else {
            return;
        };
        // Full: the largest buffers are the ones worth keeping (a clone's exact-size
        // buffer must not crowd out a long run's), so a larger one takes the smallest's
        // place. What is not kept is freed after the lock is let go.
        let freed = if kept.len() < KEPT {
            kept.push(buffer);
            None
        } else if kept[0].capacity() < buffer.capacity() {
            Some(std::mem::replace(&mut kept[0], buffer))
        } else {
            Some(buffer)
        };
        // Smallest first, the largest last: `take` pops it.
        kept.sort_unstable_by_key(Vec::capacity);
        drop(kept);
        drop(freed);
    }

    /// The capacities of the buffers kept, smallest first.
    #[cfg(test)]
    fn capacities(&self) -> Vec<usize> {
        self.kept
            .lock()
            .map(|k| k.iter().map(Vec::capacity).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves what a pool gives back and its bounds: a buffer given (with items) comes
    /// back empty with its room, the largest first; at most [`KEPT`] are kept; one over
    /// [`MAX_BYTES`], or one without capacity, is never kept; a pool with nothing kept
    /// makes a new buffer with the room asked.
    #[test]
    fn buffers_come_back_empty_and_the_pool_stays_bounded() {
        let pool: BufferPool<String> = BufferPool::new();
        let fresh = pool.take(100);
        assert!(fresh.capacity() >= 100 && fresh.is_empty());

        let mut a = Vec::with_capacity(1000);
        a.push("an item with an allocation of its own".to_string());
        let room = a.capacity();
        pool.give(a);
        pool.give(Vec::with_capacity(10));
        assert_eq!(pool.capacities().len(), 2);
        let b = pool.take(5);
        assert!(b.is_empty());
        assert_eq!(b.capacity(), room, "the largest kept comes first");

        for _ in 0..(KEPT + 3) {
            pool.give(Vec::with_capacity(room));
        }
        assert_eq!(pool.capacities().len(), KEPT);
        // Full of buffers of `room`: a smaller one is not kept, a larger one replaces
        // the smallest.
        pool.give(Vec::with_capacity(room / 2));
        assert_eq!(pool.capacities(), vec![room; KEPT]);
        pool.give(Vec::with_capacity(room * 4));
        assert_eq!(pool.capacities().len(), KEPT);
        assert_eq!(
            pool.take(1).capacity(),
            room * 4,
            "the largest kept comes first"
        );

        let huge = MAX_BYTES / size_of::<String>() + 1;
        let _ = pool.take(0);
        pool.give(Vec::with_capacity(huge));
        pool.give(Vec::new());
        assert!(
            pool.capacities().iter().all(|&c| c > 0 && c < huge),
            "{:?}",
            pool.capacities()
        );
    }
}
