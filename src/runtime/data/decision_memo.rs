//! A run's last rule decision, kept so that the next decision of the same rule table on
//! the same level is taken again without evaluating its triggers when none of the slices
//! they read was written since (ADR 0072). Bookkeeping, like the change log it lives in:
//! not run data, neither serialized nor compared; a loaded or deserialized run has none.
//!
//! Writes are told apart by bucket: each slice name falls in one of 64 buckets
//! ([`slice_bit`]), a table knows the buckets of the slices its triggers read, and a
//! write at the memo's level marks its bucket. Two names in one bucket only make a memo
//! miss, never a wrong decision.

/// The bucket of slice `name`, as a one-bit mask: a mix of its length and its first and
/// last bytes (a handful of instructions, no loop over the name).
#[inline]
pub(crate) fn slice_bit(name: &str) -> u64 {
    let b = name.as_bytes();
    let ends =
        u64::from(b.first().copied().unwrap_or(0)) << 8 | u64::from(b.last().copied().unwrap_or(0));
    let mixed = (b.len() as u64 ^ ends << 8).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    1 << (mixed >> 58)
}

/// A rule table's verdict, as indices into the table: `(entry, trigger)` of the one
/// matching entry, or `None` when no entry matched (the default).
pub(crate) type Taken = Option<(u32, u32)>;

/// The last rule decision of a run and what was written since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecisionMemo {
    /// The rule table's id (unique in the process: a table of another executor never
    /// has it).
    pub(crate) table: u64,
    /// The level decided on (the number of open frames).
    pub(crate) level: usize,
    /// What the table decided.
    pub(crate) taken: Taken,
    /// The buckets of the slices written at `level` since.
    pub(crate) written: u64,
}

impl DecisionMemo {
    /// A memo of `taken`, decided by table `table` on `level`, nothing written since.
    pub(crate) fn new(table: u64, level: usize, taken: Taken) -> Self {
        Self {
            table,
            level,
            taken,
            written: 0,
        }
    }

    /// What table `table`, whose triggers read the slices of buckets `reads`, decided on
    /// `level`, if this memo still tells it.
    #[inline]
    pub(crate) fn taken(&self, table: u64, level: usize, reads: u64) -> Option<Taken> {
        (self.table == table && self.level == level && self.written & reads == 0)
            .then_some(self.taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_a_read_slice_ends_the_memo_and_other_writes_do_not() {
        let reads = slice_bit("request");
        let mut m = DecisionMemo::new(7, 0, Some((0, 1)));
        assert_eq!(m.taken(7, 0, reads), Some(Some((0, 1))));
        assert_eq!(m.taken(8, 0, reads), None, "another table");
        assert_eq!(m.taken(7, 1, reads), None, "another level");
        let other = slice_bit("out");
        if other != reads {
            m.written |= other;
            assert_eq!(m.taken(7, 0, reads), Some(Some((0, 1))));
        }
        m.written |= slice_bit("request");
        assert_eq!(m.taken(7, 0, reads), None);
    }

    #[test]
    fn every_name_falls_in_one_bucket() {
        for name in [
            "",
            "a",
            "request",
            "out",
            "system",
            "a much longer slice name",
        ] {
            assert_eq!(slice_bit(name).count_ones(), 1, "{name}");
            assert_eq!(slice_bit(name), slice_bit(name));
        }
    }
}
