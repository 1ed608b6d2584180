//! [`Clock`]: where a store and the driver read the time (leases, updates, deadlines):
//! the system's clock (maybe set wrong: [`Clock::skewed`]), or one a test sets and moves.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::{duration_ms, now_ms};

/// The time a store and [`drive`](super::drive()) go by, in milliseconds since the Unix
/// epoch: the system's clock (the default), or a manual clock that moves only when told
/// ([`Clock::manual`], [`Clock::advance`]), so that a test of leases does not depend on
/// how fast a loaded machine runs. A store opened with a clock fences leases on it, and
/// `drive` renews them on the store's ([`RunStore::clock`](super::RunStore::clock)).
///
/// A store on the system's clock (or a [skewed](Clock::skewed) one) fences leases on
/// the **database's** clock instead, inside each statement (docs/spec/store.md, "Leases
/// on the database's clock"): the local clock only times when to renew.
#[derive(Clone, Default)]
pub struct Clock {
    manual: Option<Arc<Manual>>,
    /// Milliseconds added to the system's time (a machine whose clock is wrong).
    skew_ms: i64,
}

/// A manual clock's time and who waits for it to move.
#[derive(Debug)]
struct Manual {
    ms: AtomicU64,
    moved: Notify,
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.manual {
            None if self.skew_ms != 0 => write!(f, "Clock::skewed({} ms)", self.skew_ms),
            None => f.write_str("Clock::system"),
            Some(m) => write!(f, "Clock::manual({})", m.ms.load(Ordering::SeqCst)),
        }
    }
}

/// Two clocks are equal when both are the system's with the same skew or both are the
/// same manual clock.
impl PartialEq for Clock {
    fn eq(&self, other: &Self) -> bool {
        match (&self.manual, &other.manual) {
            (None, None) => self.skew_ms == other.skew_ms,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Clock {}

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock standing at `start_ms` until [`Clock::advance`]d.
    pub fn manual(start_ms: u64) -> Self {
        Self {
            manual: Some(Arc::new(Manual {
                ms: AtomicU64::new(start_ms),
                moved: Notify::new(),
            })),
            skew_ms: 0,
        }
    }

    /// The system's clock set wrong by `skew_ms` milliseconds (ahead when positive): a
    /// machine whose clock is off. Its store still fences leases on the database's clock;
    /// it is how the tests show that a worker with a wrong clock neither steals a live
    /// lease nor keeps one that lapsed.
    pub fn skewed(skew_ms: i64) -> Self {
        Self {
            manual: None,
            skew_ms,
        }
    }

    /// The time now, in milliseconds since the Unix epoch.
    #[inline]
    pub fn now_ms(&self) -> u64 {
        match &self.manual {
            None => now_ms().saturating_add_signed(self.skew_ms),
            Some(m) => m.ms.load(Ordering::SeqCst),
        }
    }

    /// This clock moved on by `by_ms` (a manual clock: itself).
    pub(crate) fn shifted(&self, by_ms: i64) -> Self {
        match &self.manual {
            Some(_) => self.clone(),
            None => Self::skewed(self.skew_ms.saturating_add(by_ms)),
        }
    }

    /// The manual clock's time, bound into a store's statements in place of the
    /// database's own clock; `None` on the system's clock (skewed or not), whose store
    /// reads the database's clock.
    pub(crate) fn fixed_ms(&self) -> Option<u64> {
        self.manual.as_ref().map(|m| m.ms.load(Ordering::SeqCst))
    }

    /// Moves a manual clock on by `by`, waking whoever [`Clock::sleep`]s on it (the
    /// system's clock moves by itself: nothing happens).
    pub fn advance(&self, by: Duration) {
        if let Some(m) = &self.manual {
            m.ms.fetch_add(duration_ms(by), Ordering::SeqCst);
            m.moved.notify_waiters();
        }
    }

    /// Waits until `d` has passed on this clock (see [`Clock::sleep_until`]).
    pub async fn sleep(&self, d: Duration) {
        self.sleep_until(self.now_ms().saturating_add(duration_ms(d)))
            .await;
    }

    /// Waits until this clock reads `at_ms` or later: a tokio sleep on the system's
    /// clock (needing a tokio runtime with time enabled); on a manual one, until it has
    /// been advanced that far.
    pub async fn sleep_until(&self, at_ms: u64) {
        let Some(m) = &self.manual else {
            let left = at_ms.saturating_sub(self.now_ms());
            tokio::time::sleep(Duration::from_millis(left)).await;
            return;
        };
        loop {
            let moved = m.moved.notified();
            tokio::pin!(moved);
            // Registered before the time is read: an advance in between still wakes it.
            moved.as_mut().enable();
            if m.ms.load(Ordering::SeqCst) >= at_ms {
                return;
            }
            moved.await;
        }
    }
}
