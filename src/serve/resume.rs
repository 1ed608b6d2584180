//! Whether and how a stored run may be resumed: the one decision `runs resume` and
//! `POST /api/runs/{id}/resume` share.

use crate::runtime::TerminationReason;
use crate::store::{Continue, RunInfo, StoredStatus};

/// Why a resume was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeRefused {
    /// The run's status does not allow it (completed, cancelled, running...): the CLI
    /// exits 1, the API answers 409.
    #[error("{0}")]
    Conflict(String),
    /// The request lacks or has too much (no answer for a paused run, an answer for a
    /// run not paused): the CLI exits 2, the API answers 400.
    #[error("{0}")]
    Usage(String),
}

/// How run `info` continues when resumed with `answer` and `max_steps` (the document's
/// step budget is `budget`): as stored (queued, waiting, interrupted), with the answer
/// (awaiting input) or reopened (failed, or stopped by `max_steps_exceeded` with a higher
/// `max_steps`); completed, cancelled, running and other stopped runs are refused.
pub fn plan_resume(
    info: &RunInfo,
    answer: Option<&str>,
    max_steps: Option<u32>,
    budget: u32,
) -> Result<Continue, ResumeRefused> {
    let id = info.id;
    let refuse = |why: String| Err(ResumeRefused::Conflict(format!("run {id} {why}")));
    let how = match (info.status, info.termination_reason) {
        (StoredStatus::Completed, _) => {
            return refuse("is completed: there is nothing to resume".into());
        }
        (StoredStatus::Stopped, Some(TerminationReason::Cancelled)) => {
            return refuse("was cancelled: a cancelled run cannot be resumed".into());
        }
        (StoredStatus::Running, _) => {
            return refuse(format!(
                "is running, held by `{}`: it cannot be resumed while its owner runs it",
                info.owner.as_deref().unwrap_or("?")
            ));
        }
        (StoredStatus::AwaitingInput, _) => match answer {
            Some(a) => Continue::Answer(a.to_string()),
            None => {
                return Err(ResumeRefused::Usage(format!(
                    "run {id} awaits input: give the answer with --answer TEXT"
                )));
            }
        },
        (StoredStatus::Stopped, Some(TerminationReason::MaxStepsExceeded)) => match max_steps {
            Some(n) if n > budget => Continue::Reopen(None),
            _ => {
                return refuse(format!(
                    "stopped at its step budget ({budget}): give a higher --max-steps"
                ));
            }
        },
        (StoredStatus::Stopped, r) => {
            return refuse(format!(
                "stopped ({}): only a run stopped by max_steps_exceeded can be resumed",
                r.map_or("no reason", |r| r.as_str())
            ));
        }
        (
            StoredStatus::Failed,
            Some(r @ (TerminationReason::DependencyFailed | TerminationReason::DependencyTimeout)),
        ) => {
            return refuse(format!(
                "failed before its first step ({r}): resuming cannot change its dependencies; \
                 start a new run"
            ));
        }
        (StoredStatus::Failed, _) => Continue::Reopen(None),
        _ => Continue::AsStored,
    };
    if answer.is_some() && !matches!(how, Continue::Answer(_)) {
        return Err(ResumeRefused::Usage(format!(
            "run {id} is {}: --answer is only for a run awaiting input",
            info.status
        )));
    }
    if max_steps.is_some() && !matches!(how, Continue::Reopen(_)) {
        return Err(ResumeRefused::Usage(format!(
            "run {id} is {}: --max-steps is for a run stopped by max_steps_exceeded or failed",
            info.status
        )));
    }
    Ok(how)
}
