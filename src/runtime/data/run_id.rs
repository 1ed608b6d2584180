//! A run's id ([`RunId`]): a ULID, sortable by creation time.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A run's id: a ULID (26 characters of Crockford base32, sortable by creation time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(ulid::Ulid);

impl RunId {
    /// A new id: it sorts after every id made in an earlier millisecond, and after every
    /// id this process made before (one monotonic generator per process: ids made in
    /// the same millisecond count up instead of taking fresh random bits). The algorithm
    /// of `ulid::Generator` (the reference generator's), with the random bits from the
    /// operating system (`getrandom`), so that `ulid` builds without `rand`'s stack
    /// (ADR 0066).
    pub fn new() -> Self {
        static LAST: std::sync::Mutex<ulid::Ulid> = std::sync::Mutex::new(ulid::Ulid::nil());
        // A poisoned generator still holds the last id made: keep counting from it.
        let mut last = LAST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let ms = now_ms();
        let id = if ms <= last.timestamp_ms() {
            // The same millisecond (or the clock went back): one more than the last.
            // 2^80 ids in one millisecond overflow into the next one, as the generator's
            // `commit_overflow_random` does: a fresh random part on the next millisecond.
            last.increment()
                .unwrap_or_else(|next| ulid::Ulid::from_parts(next.timestamp_ms(), random_bits()))
        } else {
            ulid::Ulid::from_parts(ms, random_bits())
        };
        *last = id;
        Self(id)
    }

    /// Its text (as `Display` writes it) in `buf`, without allocating.
    pub(crate) fn encode<'b>(&self, buf: &'b mut [u8; ulid::ULID_LEN]) -> &'b str {
        self.0.array_to_str(buf)
    }

    /// Milliseconds since the Unix epoch when the id was made.
    pub fn created_ms(&self) -> u64 {
        self.0.timestamp_ms()
    }
}

/// Milliseconds since the Unix epoch (0 before it).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// 128 random bits (a ULID keeps the low 80) from the operating system. Should it have
/// none to give, the time hashed with std's random hash keys (which std drew once per
/// thread): ids stay unique within the process by the generator's count, and unlikely to
/// collide across processes.
fn random_bits() -> u128 {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_ok() {
        return u128::from_ne_bytes(bytes);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let high = hasher.finish();
    hasher.write_u64(high);
    (u128::from(high) << 64) | u128::from(hasher.finish())
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A run id that is not a ULID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a run id (a ULID: 26 characters of Crockford base32): {reason}")]
pub struct RunIdError {
    text: String,
    reason: String,
}

impl FromStr for RunId {
    type Err = RunIdError;
    fn from_str(s: &str) -> Result<Self, RunIdError> {
        ulid::Ulid::from_string(s)
            .map(Self)
            .map_err(|e| RunIdError {
                text: s.to_string(),
                reason: e.to_string(),
            })
    }
}

impl TryFrom<String> for RunId {
    type Error = RunIdError;
    fn try_from(s: String) -> Result<Self, RunIdError> {
        s.parse()
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.to_string()
    }
}
