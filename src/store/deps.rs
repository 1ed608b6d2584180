//! Run dependencies: a run created after other runs waits (`waiting`) until each of them
//! is final, then starts, fails (`dependency_failed`, `dependency_timeout`) or starts with
//! their results in a slice. [`settle`] makes that decision for one run; the driver and
//! the worker call it. `docs/spec/store.md` ("Dependencies") gives the rules.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::delta::{Before, StepDelta};
use super::{Checkpoint, RunInfo, RunStore, StoreError, StoredStatus, duration_ms};
use crate::contracts::SYSTEM_SLICE;
use crate::runtime::{RunId, RunState, RunStatus, TerminationReason};

/// What a run does when a dependency ends other than `completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OnDepFailure {
    /// It fails with `dependency_failed` before any step (the default).
    #[default]
    Abort,
    /// It runs; the failure shows in its `dep_result` slice.
    Continue,
}

impl OnDepFailure {
    /// `abort` or `continue`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnDepFailure::Abort => "abort",
            OnDepFailure::Continue => "continue",
        }
    }

    /// Reads `abort` or `continue`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "abort" => Some(OnDepFailure::Abort),
            "continue" => Some(OnDepFailure::Continue),
            _ => None,
        }
    }
}

/// The default dependency timeout: 24 hours.
pub const DEFAULT_DEP_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The runs a new run waits for, and how ([`super::CreateOptions::after`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dependencies {
    /// The runs, in the order given (at least one).
    pub after: Vec<RunId>,
    /// How long the run waits for all of them to be final.
    pub timeout: Duration,
    /// What a dependency that did not complete does to the run.
    pub on_failure: OnDepFailure,
    /// A root slice (declared by the run's document) that receives, when the run starts,
    /// `{RUN_ID: {"workflow", "status", "termination_reason", "state"}}`.
    pub result_slice: Option<String>,
}

impl Dependencies {
    /// Waiting for `after` (24 h at most, aborting on a failure, no result slice).
    pub fn new(after: Vec<RunId>) -> Self {
        Self {
            after,
            timeout: DEFAULT_DEP_TIMEOUT,
            on_failure: OnDepFailure::Abort,
            result_slice: None,
        }
    }

    /// Waiting at most `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Doing `on_failure` when a dependency does not complete.
    pub fn on_failure(mut self, on_failure: OnDepFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// Writing the dependencies' results to `slice`.
    pub fn result_slice(mut self, slice: impl Into<String>) -> Self {
        self.result_slice = Some(slice.into());
        self
    }
}

/// A run's dependencies as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DependencySpec {
    /// The runs waited for, in the order given.
    pub after: Vec<RunId>,
    /// Until when (milliseconds since the Unix epoch).
    pub deadline_ms: u64,
    /// What a dependency that did not complete does.
    pub on_failure: OnDepFailure,
    /// The slice receiving their results, if any.
    pub result_slice: Option<String>,
}

/// What [`settle`] decided for a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Settled {
    /// The run has no dependencies left to wait for: it may run (its result slice, if
    /// any, written).
    Ready,
    /// It still waits, on these runs (not final yet), until `deadline_ms`.
    Waiting {
        /// The dependencies not final yet, with their rows.
        on: Vec<RunInfo>,
        /// When it gives up.
        deadline_ms: u64,
    },
    /// It ended before any step: `dependency_failed` or `dependency_timeout`.
    Ended(TerminationReason),
}

/// Decides whether run `id`, stored as `waiting` and held by `owner` (`run` as of its
/// checkpoint `seq`, both moved on by what this writes), may start: `Ready` for a run without dependencies or whose dependencies are
/// all final and acceptable (writing their results to its result slice, as one
/// checkpoint); `Ended` when one did not complete and the policy is `abort`, or when the
/// timeout passed first (one checkpoint, the run `failed`); else `Waiting`.
///
/// A dependency that no longer exists (pruned) counts as failed, with status `pruned` in
/// the message and result.
pub async fn settle<S: RunStore>(
    store: &S,
    id: RunId,
    owner: &str,
    run: &mut RunState,
    seq: &mut u64,
) -> Result<Settled, StoreError> {
    let Some(spec) = store.dependency_spec(id).await? else {
        return Ok(Settled::Ready);
    };
    if !run.is_running() || run.steps > 0 {
        return Ok(Settled::Ready);
    }
    let mut infos = Vec::with_capacity(spec.after.len());
    for dep in &spec.after {
        match store.info(*dep).await {
            Ok(info) => infos.push(Ok(info)),
            Err(StoreError::NotFound { .. }) => infos.push(Err(*dep)),
            Err(e) => return Err(e),
        }
    }
    let pending: Vec<RunInfo> = infos
        .iter()
        .filter_map(|i| i.as_ref().ok())
        .filter(|i| !i.status.is_ended())
        .cloned()
        .collect();
    let now = store.clock().now_ms();
    if !pending.is_empty() {
        if now < spec.deadline_ms {
            return Ok(Settled::Waiting {
                on: pending,
                deadline_ms: spec.deadline_ms,
            });
        }
        let what: Vec<String> = pending
            .iter()
            .map(|i| format!("{} is still {}", i.id, i.status))
            .collect();
        let message = format!("dependency timeout: {} at its deadline", what.join(", "));
        end(
            store,
            id,
            owner,
            run,
            seq,
            TerminationReason::DependencyTimeout,
            message,
        )
        .await?;
        return Ok(Settled::Ended(TerminationReason::DependencyTimeout));
    }
    let failed: Vec<String> = infos
        .iter()
        .filter_map(|i| match i {
            Ok(info) if info.status == StoredStatus::Completed => None,
            Ok(info) => Some(format!(
                "{} ({}) ended {}{}",
                info.id,
                info.workflow,
                info.status,
                info.termination_reason
                    .map_or(String::new(), |r| format!(" ({r})"))
            )),
            Err(dep) => Some(format!("{dep} was pruned")),
        })
        .collect();
    if !failed.is_empty() && spec.on_failure == OnDepFailure::Abort {
        let message = format!("dependency failed: {}", failed.join("; "));
        end(
            store,
            id,
            owner,
            run,
            seq,
            TerminationReason::DependencyFailed,
            message,
        )
        .await?;
        return Ok(Settled::Ended(TerminationReason::DependencyFailed));
    }
    if let Some(slice) = &spec.result_slice {
        let mut results = Map::with_capacity(infos.len());
        for info in &infos {
            let (key, value) = match info {
                Ok(info) => (info.id.to_string(), result_of(store, info).await?),
                Err(dep) => (
                    dep.to_string(),
                    serde_json::json!({"workflow": null, "status": "pruned",
                        "termination_reason": null, "state": null}),
                ),
            };
            results.insert(key, value);
        }
        let before = Before::of(run);
        run.root_state_mut()
            .insert(slice.clone(), Value::Object(results));
        let delta = StepDelta::between(&before, run);
        store
            .checkpoint(id, owner, Checkpoint::new(*seq + 1, &delta, run))
            .await?;
        *seq += 1;
    }
    Ok(Settled::Ready)
}

/// `{"workflow", "status", "termination_reason", "state"}` of a final dependency: its
/// root state without `system`.
async fn result_of<S: RunStore>(store: &S, info: &RunInfo) -> Result<Value, StoreError> {
    let loaded = store.load(info.id).await?;
    let mut state = loaded.record.run.state.clone();
    state.shift_remove(SYSTEM_SLICE);
    Ok(serde_json::json!({
        "workflow": info.workflow,
        "status": info.status,
        "termination_reason": info.termination_reason,
        "state": Value::Object(state),
    }))
}

/// Ends run `id` before any step with `reason`, as one checkpoint.
async fn end<S: RunStore>(
    store: &S,
    id: RunId,
    owner: &str,
    run: &mut RunState,
    seq: &mut u64,
    reason: TerminationReason,
    message: String,
) -> Result<(), StoreError> {
    let before = Before::of(run);
    super::rows::end_run(
        run,
        RunStatus::Failed,
        reason,
        &message,
        store.clock().now_ms(),
    )
    .map_err(|why| StoreError::Corrupt {
        run_id: id,
        what: "run state".into(),
        reason: why,
    })?;
    let delta = StepDelta::between(&before, run);
    store
        .checkpoint(id, owner, Checkpoint::new(*seq + 1, &delta, run))
        .await?;
    *seq += 1;
    Ok(())
}

/// Settles the waiting dependents of run `id` that can be settled now (after `id`
/// ended or was cancelled): each is claimed for a moment by `owner`, ended by its
/// failure policy or left ready for whoever runs it. Returns the dependents ended.
/// A dependent held by someone else is left to them.
pub async fn settle_dependents<S: RunStore>(
    store: &S,
    id: RunId,
    owner: &str,
    lease: Duration,
) -> Result<Vec<(RunId, TerminationReason)>, StoreError> {
    let mut ended = Vec::new();
    for dependent in store.dependents(id).await? {
        if dependent.status != StoredStatus::Waiting {
            continue;
        }
        match store.claim(dependent.id, owner, lease).await {
            Ok(_) => {}
            Err(StoreError::LeaseHeld { .. }) => continue,
            Err(e) => return Err(e),
        }
        let result = async {
            let stored = store.load(dependent.id).await?;
            let mut run = stored.record.run;
            let mut seq = stored.record.seq;
            settle(store, dependent.id, owner, &mut run, &mut seq).await
        }
        .await;
        store.release(dependent.id, owner).await?;
        if let Settled::Ended(reason) = result? {
            ended.push((dependent.id, reason));
        }
    }
    Ok(ended)
}

/// The deadline of a run created at `now` waiting at most `timeout`.
pub(crate) fn deadline(now: u64, timeout: Duration) -> u64 {
    now.saturating_add(duration_ms(timeout))
}
