//! Node retries within a step (ADR 0015): the next attempt's effect (the state a retried
//! call keeps, [`Retrying`], is step data).

use std::sync::Arc;
use std::time::Duration;

use super::planner::Planner;
use super::step::{FailedAttempt, Retrying};
use crate::runtime::data::{Role, RunState};
use crate::runtime::effects::{Effect, EffectKind, Fault};

impl<'e> Planner<'e> {
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
