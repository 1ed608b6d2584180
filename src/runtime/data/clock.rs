//! Time: where trace timestamps and durations come from ([`Clock`]), and the readings the
//! executor takes and hands to planning (planning itself never reads the clock).

#[cfg(unix)]
use super::ms_cache::{MsCache, counter};
#[cfg(unix)]
use std::cell::Cell;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Where trace timestamps and durations come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// The system clock (`at_ms` since the Unix epoch, measured durations).
    #[default]
    System,
    /// Always zero: traces are byte-for-byte reproducible (tests, golden files). Run
    /// deadlines still use the system clock.
    Frozen,
}

impl Clock {
    /// A start for [`elapsed`]: `None` with a frozen clock (durations are zero).
    pub(crate) fn timer(self) -> Option<Instant> {
        match self {
            Clock::System => Some(Instant::now()),
            Clock::Frozen => None,
        }
    }
}

/// Microseconds since `t0` (0 without a timer).
pub(crate) fn elapsed(t0: Option<Instant>) -> u64 {
    t0.map_or(0, |t| {
        u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
    })
}

/// Milliseconds since the Unix epoch, from the system clock (`CLOCK_REALTIME`, the clock
/// `SystemTime::now` reads), to the millisecond: the same reading as [`system_ms`].
/// Between two readings of the system clock this thread's [`MsCache`] answers from the
/// CPU's cycle counter while it proves the millisecond has not yet changed (ADR 0076).
#[cfg(unix)]
#[inline]
pub(crate) fn now_ms() -> u64 {
    let raw = counter();
    MS.with(|cache| {
        let known = cache.get();
        match known.current(raw) {
            Some(ms) => ms,
            None => {
                let next = known.refreshed(raw, system_ns());
                cache.set(next);
                next.ms()
            }
        }
    })
}

#[cfg(unix)]
thread_local! {
    /// This thread's millisecond between system-clock reads.
    static MS: Cell<MsCache> = const { Cell::new(MsCache::EMPTY) };
}

/// Nanoseconds since the Unix epoch from `CLOCK_REALTIME`, without std's `Duration`
/// arithmetic (ADR 0064); 0 before the epoch.
#[cfg(unix)]
#[inline]
fn system_ns() -> u64 {
    use nix::time::{ClockId, clock_gettime};
    match clock_gettime(ClockId::CLOCK_REALTIME) {
        Ok(t) => epoch_ns(u64::try_from(t.tv_sec()).ok(), t.tv_nsec()),
        // Not on any platform the clock exists on; std's reading all the same.
        Err(_) => system_ms().saturating_mul(1_000_000),
    }
}

/// Milliseconds since the Unix epoch, from the system clock.
#[cfg(not(unix))]
#[inline]
pub(crate) fn now_ms() -> u64 {
    system_ms()
}

/// Milliseconds since the Unix epoch through `SystemTime`: 0 before the epoch, at most
/// `u64::MAX`.
pub(crate) fn system_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The nanoseconds of a `timespec` reading (`secs` `None` before the epoch: 0), at most
/// `u64::MAX` (the year 2554); divided by 10^6 they are [`system_ms`]'s milliseconds.
#[cfg(any(unix, test))]
#[inline(always)]
fn epoch_ns(secs: Option<u64>, nanos: impl TryInto<u64>) -> u64 {
    match (secs, nanos.try_into()) {
        (Some(s), Ok(n)) => s.saturating_mul(1_000_000_000).saturating_add(n),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    /// Every reading lies between two readings of `SystemTime` taken around it: the same
    /// clock, to the millisecond, whether the system clock was read or the thread's cache
    /// answered (ADR 0076). Readings go on for 60 ms and past the moment the cache first
    /// holds (on x86-64, where the cycle counter exists, it must within two seconds), so
    /// that many cached readings and many millisecond boundaries are checked.
    #[test]
    fn now_ms_reads_the_system_clock() {
        let start = Instant::now();
        let mut held = false;
        let mut readings = 0u64;
        while start.elapsed() < Duration::from_millis(60)
            || (cfg!(target_arch = "x86_64") && !held && start.elapsed() < Duration::from_secs(2))
        {
            let before = system_ms();
            let now = now_ms();
            let after = system_ms();
            assert!(
                before <= now && now <= after,
                "reading {readings}: {before} <= {now} <= {after}"
            );
            readings += 1;
            held |= MS.with(|cache| cache.get().current(super::counter()).is_some());
        }
        if cfg!(target_arch = "x86_64") {
            assert!(held, "the cache never held in {readings} readings");
        }
    }

    proptest! {
        /// For all readings after the epoch and before the year 2554, the conversion
        /// divided by 10^6 gives what `Duration::as_millis` gives, and 0 before it.
        #[test]
        fn epoch_ns_is_durations_millis(secs in 0u64..18_446_744_073, nanos in 0u32..1_000_000_000) {
            let std = u64::try_from(Duration::new(secs, nanos).as_millis()).expect("fits");
            prop_assert_eq!(epoch_ns(Some(secs), nanos) / 1_000_000, std);
            prop_assert_eq!(epoch_ns(None, nanos), 0);
        }
    }
}
