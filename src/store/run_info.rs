//! What listing a run shows: its status as the store keeps it ([`StoredStatus`]) and its
//! row without its state ([`RunInfo`]).

use serde::{Deserialize, Serialize};

use super::attempt_key;
use crate::runtime::{RunId, RunState, RunStatus, TerminationReason};

/// A run's status as the store shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StoredStatus {
    /// Created, no step taken or claimed yet.
    Queued,
    /// Waiting on other runs (dependencies).
    Waiting,
    /// Being stepped by the owner of a current lease.
    Running,
    /// Running, but no current lease: its process died or stopped. Resumable from the
    /// last committed step.
    Interrupted,
    /// Paused by `ask_clarification`.
    AwaitingInput,
    /// Ended normally.
    Completed,
    /// Ended by a guard or cancelled.
    Stopped,
    /// Ended by an error.
    Failed,
}

impl StoredStatus {
    /// The status as written in the store and in output (`awaiting_input`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StoredStatus::Queued => "queued",
            StoredStatus::Waiting => "waiting",
            StoredStatus::Running => "running",
            StoredStatus::Interrupted => "interrupted",
            StoredStatus::AwaitingInput => "awaiting_input",
            StoredStatus::Completed => "completed",
            StoredStatus::Stopped => "stopped",
            StoredStatus::Failed => "failed",
        }
    }

    /// Every status, in the order of a run's life.
    pub const ALL: [StoredStatus; 8] = [
        StoredStatus::Queued,
        StoredStatus::Waiting,
        StoredStatus::Running,
        StoredStatus::Interrupted,
        StoredStatus::AwaitingInput,
        StoredStatus::Completed,
        StoredStatus::Stopped,
        StoredStatus::Failed,
    ];

    /// Reads a status written by [`StoredStatus::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// The stored status of a run state (a running run is `running`).
    pub fn of(status: RunStatus) -> Self {
        match status {
            RunStatus::Completed => StoredStatus::Completed,
            RunStatus::Stopped => StoredStatus::Stopped,
            RunStatus::Failed => StoredStatus::Failed,
            RunStatus::AwaitingInput => StoredStatus::AwaitingInput,
            _ => StoredStatus::Running,
        }
    }

    /// True for `completed`, `stopped` and `failed`.
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            StoredStatus::Completed | StoredStatus::Stopped | StoredStatus::Failed
        )
    }
}

impl std::fmt::Display for StoredStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run's row: what listing shows, without its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunInfo {
    /// The run's id.
    pub id: RunId,
    /// Its name, if given.
    pub name: Option<String>,
    /// The workflow's name.
    pub workflow: String,
    /// The document's digest.
    pub digest: String,
    /// Its status (`interrupted` when running without a current lease).
    pub status: StoredStatus,
    /// Why it ended or paused.
    pub termination_reason: Option<TerminationReason>,
    /// Steps taken.
    pub steps: u32,
    /// Checkpoints applied since creation.
    pub seq: u64,
    /// Created (milliseconds since the Unix epoch).
    pub created_ms: u64,
    /// Last written.
    pub updated_ms: u64,
    /// When the record expires, if it does.
    pub expires_ms: Option<u64>,
    /// The owner of the lease, if any.
    pub owner: Option<String>,
    /// When the lease lapses.
    pub lease_expires_ms: Option<u64>,
    /// Which step the attempt counter is for (`STEPS.TRACE_LEN` of the run the step
    /// starts from; see [`attempt_key`]).
    #[serde(skip)]
    pub attempt_key: Option<String>,
    /// The attempt the step named by `attempt_key` makes (1 the first time; more after a
    /// crash, an interruption or a retried failure).
    pub attempt: u32,
    /// A cancel was asked while the run was running: its driver stops it at its next step.
    pub cancel_requested: bool,
}

impl RunInfo {
    /// True when the record has expired at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_ms.is_some_and(|e| e <= now_ms)
    }

    /// The attempt the next step of `run` makes: the stored one when it is for that
    /// step, else 1.
    pub fn attempt_for(&self, run: &RunState) -> u32 {
        if self.attempt_key.as_deref() == Some(attempt_key(run).as_str()) {
            self.attempt.max(1)
        } else {
            1
        }
    }
}
