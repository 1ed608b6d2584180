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

/// Milliseconds since the Unix epoch, from the system clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
