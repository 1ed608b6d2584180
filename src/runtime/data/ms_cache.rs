//! The current millisecond between system-clock reads: a reading of the CPU's cycle
//! counter (about 12 ns on the machine it was measured on, against about 30 for
//! `CLOCK_REALTIME`) tells whether the millisecond last read from the system clock is
//! still the current one (ADR 0076).
//!
//! The cache is exact, not approximate: it answers a millisecond only while the counter
//! shows, with a margin, that the system clock cannot yet have reached the next one;
//! otherwise the system clock is read. What it learns is the counter's rate, from pairs
//! of (counter, system clock) readings at least [`LEARN_NS`] apart, and only a rate two
//! consecutive windows agree on (within 1/64) is used, lowered by 1/32: a thread moved
//! between cores whose counters disagree, a machine whose counter changed speed, or a
//! reading delayed by preemption gives rates that disagree, and the cache reads the
//! system clock until they agree again. A counter that goes backwards, or a system
//! clock that does, resets what was learned.
//!
//! Complexity: O(1) a reading; at most one system-clock read a millisecond while the
//! cache holds (and one a reading while it does not).

/// Counter readings must span at least this many nanoseconds of system time before
/// their rate is measured: 4 ms, so that a reading's own jitter (tens of nanoseconds)
/// is well under the 1/64 two windows must agree within.
const LEARN_NS: u64 = 4_000_000;

/// Nanoseconds before the next millisecond at which a cached millisecond stops being
/// answered, on top of the rate's margin: covers the counter being read a little out of
/// order with the system clock's own read.
const SLACK_NS: u64 = 2_000;

/// What a thread knows about the millisecond and the counter's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MsCache {
    /// The millisecond since the Unix epoch the system clock last gave.
    ms: u64,
    /// The counter read just before that system-clock read.
    from: u64,
    /// The counter reading before which `ms` is still current (`from` when not known).
    until: u64,
    /// The counter and the system clock (in nanoseconds) at the start of the window the
    /// rate is measured over; `anchor_ns` 0: no window yet.
    anchor_raw: u64,
    anchor_ns: u64,
    /// The rate the last window measured, in counter ticks a millisecond (0: none).
    last_rate: u64,
    /// The rate the cache uses, a lower bound (0: no caching).
    per_ms: u64,
}

impl MsCache {
    /// A cache that knows nothing: its first reading reads the system clock.
    pub(crate) const EMPTY: MsCache = MsCache {
        ms: 0,
        from: 0,
        until: 0,
        anchor_raw: 0,
        anchor_ns: 0,
        last_rate: 0,
        per_ms: 0,
    };

    /// The millisecond at counter reading `raw`, if the cache knows it without reading
    /// the system clock: `raw` at or after the reading that fetched it and before the
    /// next millisecond can have begun.
    #[inline(always)]
    pub(crate) fn current(&self, raw: u64) -> Option<u64> {
        // One comparison covers both ends: a reading before `from` wraps to a large value.
        (raw.wrapping_sub(self.from) < self.until.wrapping_sub(self.from)).then_some(self.ms)
    }

    /// The millisecond the system clock last gave.
    #[inline(always)]
    pub(crate) fn ms(&self) -> u64 {
        self.ms
    }

    /// The cache after the system clock was read: `raw` is the counter read just before
    /// it, `ns` the system clock in nanoseconds since the Unix epoch.
    pub(crate) fn refreshed(self, raw: u64, ns: u64) -> MsCache {
        let mut next = MsCache {
            ms: ns / 1_000_000,
            from: raw,
            until: raw,
            ..self
        };
        if self.anchor_ns == 0 || raw < self.from || ns < self.anchor_ns || next.ms < self.ms {
            // The first reading, or a counter or clock that went backwards since the last.
            next.anchor_raw = raw;
            next.anchor_ns = ns;
            next.last_rate = 0;
            next.per_ms = 0;
            return next;
        }
        let span_ns = ns - self.anchor_ns;
        if span_ns >= LEARN_NS {
            let ticks = u128::from(raw - self.anchor_raw);
            let rate = u64::try_from(ticks * 1_000_000 / u128::from(span_ns)).unwrap_or(0);
            next.per_ms = if agree(rate, self.last_rate) {
                let low = rate.min(self.last_rate);
                low - low / 32
            } else {
                0
            };
            next.last_rate = rate;
            next.anchor_raw = raw;
            next.anchor_ns = ns;
        }
        if next.per_ms != 0 {
            let left_ns = (1_000_000 - ns % 1_000_000).saturating_sub(SLACK_NS);
            // At most 10^6 ns left times a rate of at most a few 10^6 ticks a millisecond.
            let ticks = u128::from(left_ns) * u128::from(next.per_ms) / 1_000_000;
            next.until = raw.saturating_add(u64::try_from(ticks).unwrap_or(0));
        }
        next
    }
}

/// Whether two measured rates agree within 1/64 (neither zero).
fn agree(a: u64, b: u64) -> bool {
    a != 0 && b != 0 && a.abs_diff(b) <= a.max(b) / 64
}

/// The CPU's cycle counter: `rdtsc` on x86-64 (not ordered with the instructions around
/// it; the cache's slack covers that). Elsewhere 0, which never spans a window, so the
/// cache never holds and every reading reads the system clock.
#[inline(always)]
pub(crate) fn counter() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        safe_arch::read_timestamp_counter()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A counter ticking `rate` ticks a millisecond from `raw0` at system time `ns0`.
    fn ticks_at(raw0: u64, ns0: u64, rate: u64, ns: u64) -> u64 {
        raw0 + u64::try_from(u128::from(ns - ns0) * u128::from(rate) / 1_000_000).expect("fits")
    }

    /// Drives a cache over readings `gaps` apart (in ns) with a counter of `rate` ticks a
    /// millisecond, checking every cached answer; returns how many readings it answered
    /// without the system clock, and the cache.
    fn drive(rate: u64, start_ns: u64, gaps: &[u64]) -> (usize, MsCache) {
        let raw0 = 1_000_000_000_000;
        let mut cache = MsCache::EMPTY;
        let mut ns = start_ns;
        let mut cached = 0;
        for gap in gaps {
            ns += gap;
            let raw = ticks_at(raw0, start_ns, rate, ns);
            match cache.current(raw) {
                Some(ms) => {
                    assert_eq!(ms, ns / 1_000_000, "a cached millisecond is the clock's");
                    cached += 1;
                }
                None => cache = cache.refreshed(raw, ns),
            }
        }
        (cached, cache)
    }

    /// Readings 200 ns apart for 20 ms: once two windows agree, nearly every reading is
    /// answered from the cache, and every answer is the system clock's millisecond.
    #[test]
    fn a_steady_counter_is_cached_exactly() {
        let gaps = vec![200; 100_000];
        let (cached, cache) = drive(3_000_000, 1_700_000_000_123_456_789, &gaps);
        assert!(cache.per_ms > 0, "the rate was learned: {cache:?}");
        assert!(
            cached > 50_000,
            "most readings came from the cache: {cached}"
        );
    }

    /// Rates measured over two windows that disagree (a counter that changed speed by a
    /// tenth) are not used: the cache reads the system clock until two windows agree.
    #[test]
    fn rates_that_disagree_are_not_used() {
        let cache = MsCache::EMPTY.refreshed(1_000, 10_000_000);
        let cache = cache.refreshed(1_000 + 4 * 3_000_000, 14_000_000);
        assert_eq!(cache.per_ms, 0, "one window is not enough");
        let cache = cache.refreshed(1_000 + 4 * 3_000_000 + 4 * 3_300_000, 18_000_000);
        assert_eq!(cache.per_ms, 0, "the windows disagree: {cache:?}");
        assert_eq!(cache.current(cache.from), None);
    }

    /// A counter or a clock that goes backwards forgets the rate.
    #[test]
    fn going_backwards_forgets_the_rate() {
        let (_, cache) = drive(3_000_000, 5_000_000_000, &vec![1_000; 20_000]);
        assert!(cache.per_ms > 0);
        let back = cache.refreshed(cache.from - 1, cache.anchor_ns + 1);
        assert_eq!((back.per_ms, back.last_rate), (0, 0));
        assert_eq!(back.current(back.from), None);
        let clock_back = cache.refreshed(cache.from + 10, cache.anchor_ns - 1);
        assert_eq!(clock_back.per_ms, 0);
        // A reading before the one that fetched the millisecond is not answered.
        assert_eq!(cache.current(cache.from.wrapping_sub(1)), None);
    }

    proptest! {
        /// For all counter rates (1 to 5 GHz), start times and gaps between readings
        /// (including gaps longer than a millisecond and a learning window), every
        /// millisecond the cache answers is the one the system clock shows at that
        /// reading.
        #[test]
        fn the_cache_never_answers_a_stale_millisecond(
            rate in 1_000_000u64..5_000_000,
            start in 1_000_000_000_000_000_000u64..1_900_000_000_000_000_000,
            gaps in proptest::collection::vec(
                prop_oneof![1u64..2_000, 2_000u64..300_000, 300_000u64..6_000_000],
                1..3_000,
            ),
        ) {
            drive(rate, start, &gaps);
        }

        /// For all pairs of windows whose rates differ by more than 1/64, nothing is
        /// cached after them.
        #[test]
        fn disagreeing_windows_cache_nothing(
            rate in 1_000_000u64..5_000_000,
            change in prop_oneof![-500i64..-17, 17i64..500],
        ) {
            let second = rate.saturating_add_signed(i64::try_from(rate).expect("fits") * change / 1_000);
            let cache = MsCache::EMPTY.refreshed(1_000, 10_000_000);
            let cache = cache.refreshed(1_000 + 4 * rate, 14_000_000);
            let cache = cache.refreshed(1_000 + 4 * rate + 4 * second, 18_000_000);
            prop_assert_eq!(cache.per_ms, 0);
        }
    }
}
