//! The failure half of a commit: how a handler's fault, the retried attempts of a node
//! call and a node run whose output was refused end the run.

use std::sync::Arc;

use super::budgets::GuardStop;
use super::commit::{Tx, attach_usage};
use super::step::Ran;
use crate::runtime::data::{NodeOutput, TerminationReason, TraceKind, Usage};
use crate::runtime::effects::Fault;
use crate::runtime::plan::NodePlan;

impl Tx<'_> {
    /// Maps a handler fault to the run's end.
    pub(crate) fn fault(&mut self, who: &str, what: &str, fault: Fault, sup: Option<Arc<str>>) {
        match fault {
            Fault::Failed(m) | Fault::Permanent(m) => {
                let msg = format!("{what} `{who}` failed: {m}");
                self.fail(TerminationReason::NodeFailed, msg, sup);
            }
            Fault::Timeout(m) => {
                let g = GuardStop {
                    reason: TerminationReason::Timeout,
                    message: format!("{what} `{who}` {m}"),
                };
                self.guard_stop(g, sup);
            }
            Fault::Cancelled => {
                let g = GuardStop {
                    reason: TerminationReason::Cancelled,
                    message: format!("the run was cancelled while {what} `{who}` ran"),
                };
                self.guard_stop(g, sup);
            }
            Fault::InvalidOutput(m) => {
                let msg = format!("{what} `{who}` {m}");
                self.fail(TerminationReason::InvalidOutput, msg, sup);
            }
        }
    }

    /// Records a `retry` item for each attempt of the node call that failed and was
    /// tried again, and hands back the last attempt's result.
    pub(crate) fn retried(
        &mut self,
        ran: Ran,
        np: &NodePlan,
        dispatcher: &Arc<str>,
    ) -> Result<NodeOutput, Fault> {
        let Ran { result, failed } = ran;
        for f in failed {
            let it = self.record(TraceKind::Retry, dispatcher);
            it.set_target(&np.id);
            it.duration_us = f.duration_us;
            it.set_reason(format!(
                "attempt {} failed ({}): {}; attempt {} in {} ms",
                f.attempt,
                f.kind,
                f.message,
                f.attempt.saturating_add(1),
                f.backoff_ms
            ));
        }
        result
    }

    /// Fails the run after node `node` ran for `duration_us` (its writes refused): the
    /// failure's item stands for the node run (its `source` is the node), so it carries
    /// what the run cost.
    pub(crate) fn fail_after_run(
        &mut self,
        reason: TerminationReason,
        msg: String,
        dispatcher: Arc<str>,
        (node, duration_us): (&Arc<str>, u64),
        usage: Option<Usage>,
    ) {
        self.fail(reason, msg, Some(dispatcher));
        if let Some(it) = self.run.trace.last_mut() {
            // The end item stands for the node run: it names the node and its time.
            it.set_source(node);
            it.duration_us = duration_us;
            if let Some(u) = usage {
                attach_usage(it, u);
            }
        }
    }
}
