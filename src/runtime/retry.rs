//! Node retries within a step (ADR 0015): the state a retried call keeps, and the next
//! attempt's effect.

use std::sync::Arc;
use std::time::Duration;

use super::data::Role;
use super::data::RunState;
use super::effects::{Call, Effect, EffectKind};
use super::executor::Executor;
use super::guarded::Fault;
use crate::contracts::RetryPolicy;

/// A node call under a retry policy: the policy, the call to repeat and the attempts
/// that failed so far.
pub(crate) struct Retrying<'e> {
    pub(crate) policy: &'e RetryPolicy,
    /// The node's own time limit (a program's `timeout_ms`), for each attempt's limit.
    pub(crate) own_limit: Option<u64>,
    /// The call as first planned (its attempt number is set for each try).
    pub(crate) call: Call,
    /// Attempts made in this step so far.
    pub(crate) tried: u32,
    pub(crate) failed: Vec<FailedAttempt>,
}

/// An attempt of a node call that failed and was tried again (traced as `retry`).
#[derive(Debug)]
pub(crate) struct FailedAttempt {
    pub(crate) attempt: u32,
    pub(crate) kind: &'static str,
    pub(crate) message: String,
    pub(crate) duration_us: u64,
    /// The wait before the next attempt.
    pub(crate) backoff_ms: u64,
}

impl Executor {
    /// The next attempt of a node call that failed with `fault`, if its retry policy
    /// covers the failure and has attempts left (and the run has time left). Notes the
    /// failed attempt in `r`.
    pub(crate) fn retry_effect(
        &self,
        run: &RunState,
        node: &Arc<str>,
        r: &mut Retrying<'_>,
        fault: &Fault,
        attempt: u32,
        duration_us: u64,
    ) -> Option<Effect> {
        if r.tried >= r.policy.max_attempts || !fault.is_retried_by(r.policy) {
            return None;
        }
        let limit = self.call_limit(run, r.own_limit);
        if limit.is_some_and(|l| l.is_zero()) {
            return None;
        }
        // The attempt that failed is the one the driver performed (a store may have
        // started the step at a higher attempt after a crash).
        let attempt = attempt.max(1);
        let backoff_ms = r.policy.backoff_before(r.tried + 1);
        let (kind, message) = fault.describe();
        r.failed.push(FailedAttempt {
            attempt,
            kind,
            message: message.to_string(),
            duration_us,
            backoff_ms,
        });
        r.tried += 1;
        let mut call = r.call.clone();
        call.set_attempt(attempt.saturating_add(1));
        let router = self
            .plan
            .nodes
            .get(&**node)
            .is_some_and(|np| np.contract(&self.plan.graph).router.is_some());
        Some(Effect {
            kind: EffectKind::Node,
            id: Arc::clone(node),
            step: run.steps,
            limit,
            delay: Duration::from_millis(backoff_ms),
            call,
            role: if router { Role::Router } else { Role::Plain },
        })
    }
}
