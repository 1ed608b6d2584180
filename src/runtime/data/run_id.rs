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
    /// the same millisecond count up instead of taking fresh random bits).
    pub fn new() -> Self {
        static GENERATOR: std::sync::Mutex<ulid::Generator> =
            std::sync::Mutex::new(ulid::Generator::new());
        // A poisoned generator still holds the last id made: keep counting from it.
        let mut generator = GENERATOR
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match generator.generate() {
            Ok(id) => Self(id),
            // 2^80 ids in one millisecond: the generator moves on to the next one.
            Err(overflow) => Self(overflow.commit_overflow_random()),
        }
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
