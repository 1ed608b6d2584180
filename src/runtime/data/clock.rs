//! Time: where trace timestamps and durations come from ([`Clock`]), and the readings the
//! executor takes and hands to planning (planning itself never reads the clock).

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

/// Milliseconds since the Unix epoch, from the system clock: `CLOCK_REALTIME`, the
/// clock `SystemTime::now` reads, turned into milliseconds without std's `Duration`
/// arithmetic (about 55 instructions of a loop step's clock reading, ADR 0064). The same
/// reading as [`system_ms`], to the millisecond.
#[cfg(unix)]
#[inline]
pub(crate) fn now_ms() -> u64 {
    use nix::time::{ClockId, clock_gettime};
    match clock_gettime(ClockId::CLOCK_REALTIME) {
        Ok(t) => epoch_ms(u64::try_from(t.tv_sec()).ok(), t.tv_nsec()),
        // Not on any platform the clock exists on; std's reading all the same.
        Err(_) => system_ms(),
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

/// The milliseconds of a `timespec` reading (`secs` `None` before the epoch: 0), as
/// [`system_ms`] gives them: whole milliseconds, at most `u64::MAX`.
#[cfg(any(unix, test))]
#[inline(always)]
fn epoch_ms(secs: Option<u64>, nanos: impl TryInto<u64>) -> u64 {
    match (secs, nanos.try_into()) {
        (Some(s), Ok(n)) => s.saturating_mul(1000).saturating_add(n / 1_000_000),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    /// The clock read through `CLOCK_REALTIME` lies between two readings of
    /// `SystemTime` taken around it: the same clock, to the millisecond.
    #[test]
    fn now_ms_reads_the_system_clock() {
        for _ in 0..1000 {
            let before = system_ms();
            let now = now_ms();
            let after = system_ms();
            assert!(
                before <= now && now <= after,
                "{before} <= {now} <= {after}"
            );
        }
    }

    proptest! {
        /// For all readings after the epoch, the conversion gives what
        /// `Duration::as_millis` gives (saturated at `u64::MAX`), and 0 before it.
        #[test]
        fn epoch_ms_is_durations_millis(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            let std = u64::try_from(Duration::new(secs, nanos).as_millis()).unwrap_or(u64::MAX);
            prop_assert_eq!(epoch_ms(Some(secs), nanos), std);
            prop_assert_eq!(epoch_ms(None, nanos), 0);
        }
    }
}
