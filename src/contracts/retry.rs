//! `RetryPolicy`: how a node's failed run is tried again within its step.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A node's `retry` field: a failed run of the node is tried again, within the same step,
/// up to `max_attempts` attempts in all, waiting `backoff_ms`, then twice that, four
/// times that... between attempts. Each failed attempt is traced (kind `retry`); when the
/// last one fails, the run fails as it would have without the policy.
///
/// ```
/// use pactgraph::{NodeContract, RetryOn, RetryPolicy};
/// let n = NodeContract::new("fetch").retry(RetryPolicy::new(3).backoff_ms(200));
/// assert_eq!(n.retry.as_ref().map(|r| r.on.clone()), Some(vec![RetryOn::Timeout, RetryOn::Failed]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: no retry). At least 1.
    pub max_attempts: u32,
    /// Milliseconds to wait before the second attempt; each later wait doubles, up to
    /// [`RetryPolicy::MAX_BACKOFF_MS`]. Default 0.
    #[serde(default)]
    pub backoff_ms: u64,
    /// Which failures are retried. Default `["timeout", "failed"]`.
    #[serde(default = "RetryPolicy::default_on")]
    pub on: Vec<RetryOn>,
}

/// A kind of failure a [`RetryPolicy`] retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetryOn {
    /// The node ran past its time limit.
    Timeout,
    /// The handler returned an error (one not marked permanent) or panicked, or the
    /// program failed (non-zero exit, a signal, output that is not JSON).
    Failed,
    /// The output broke the node output envelope (`invalid_output`).
    InvalidOutput,
}

impl RetryPolicy {
    /// The longest wait between two attempts (one hour).
    pub const MAX_BACKOFF_MS: u64 = 3_600_000;

    /// `max_attempts` attempts in all, no wait, retrying time-outs and failures.
    pub fn new(max_attempts: u32) -> Self {
        Self {
            max_attempts,
            backoff_ms: 0,
            on: Self::default_on(),
        }
    }

    /// Sets the first wait.
    pub fn backoff_ms(mut self, ms: u64) -> Self {
        self.backoff_ms = ms;
        self
    }

    /// Sets which failures are retried.
    pub fn on(mut self, kinds: impl IntoIterator<Item = RetryOn>) -> Self {
        self.on = kinds.into_iter().collect();
        self
    }

    fn default_on() -> Vec<RetryOn> {
        vec![RetryOn::Timeout, RetryOn::Failed]
    }

    /// The wait before attempt `next` (2 for the first retry): `backoff_ms` doubled for
    /// each attempt after the second, capped at [`RetryPolicy::MAX_BACKOFF_MS`].
    pub fn backoff_before(&self, next: u32) -> u64 {
        let doublings = next.saturating_sub(2).min(63);
        self.backoff_ms
            .saturating_mul(1u64 << doublings)
            .min(Self::MAX_BACKOFF_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_backoff_doubling() {
        let p: RetryPolicy = serde_json::from_value(json!({"max_attempts": 4, "backoff_ms": 100}))
            .expect("a valid policy");
        assert_eq!(p.on, [RetryOn::Timeout, RetryOn::Failed]);
        assert_eq!(
            (2..=5).map(|n| p.backoff_before(n)).collect::<Vec<_>>(),
            [100, 200, 400, 800]
        );
        assert_eq!(
            RetryPolicy::new(90).backoff_ms(1_000).backoff_before(80),
            RetryPolicy::MAX_BACKOFF_MS
        );
    }

    #[test]
    fn unknown_kinds_and_fields_are_refused() {
        let e = serde_json::from_value::<RetryPolicy>(json!({"max_attempts": 2, "on": ["oops"]}))
            .expect_err("unknown kind");
        assert!(e.to_string().contains("oops"), "{e}");
        assert!(
            serde_json::from_value::<RetryPolicy>(json!({"max_attempts": 2, "delay": 1})).is_err()
        );
    }
}
