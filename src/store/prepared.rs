//! A checkpoint and a create as their statements bind them: everything made from the run
//! before a connection is taken, so that a try again after a transient fault binds the
//! same values.

use super::rows::stored_status;
use super::{StoreError, StoredStatus, attempt_key};
use crate::runtime::{RunId, RunRecord, TerminationReason, digest_of};

/// One checkpoint as its statement binds it: the run row's new values, the delta's text,
/// a snapshot when one is due, the document when the run takes a new one, and the
/// events packed as one chunk.
#[derive(Debug, Clone)]
pub(crate) struct PreparedCheckpoint {
    pub(crate) id: RunId,
    pub(crate) owner: String,
    pub(crate) seq: u64,
    pub(crate) steps: u32,
    pub(crate) status: StoredStatus,
    pub(crate) termination_reason: Option<TerminationReason>,
    pub(crate) running: bool,
    /// Gives the lease up in the same statement (a run that stopped running, where the
    /// backend can: [`super::Checkpoint::let_go`]).
    pub(crate) let_go: bool,
    pub(crate) next_key: String,
    pub(crate) next_attempt: u32,
    /// The new document's text and digest.
    pub(crate) document: Option<(String, String)>,
    /// The delta's JSON text (weighed when prepared: ADR 0049, 0071).
    pub(crate) delta: String,
    pub(crate) snapshot: Option<String>,
    /// The events' texts, one a line (UTF-8), packed as one chunk (`store/packed.rs`).
    pub(crate) events: Vec<u8>,
    pub(crate) first_event: u64,
    pub(crate) last_event: u64,
    /// The store's clock when it was prepared (what a refusal is judged at).
    pub(crate) now: u64,
}

/// A run's creation as its statements bind it: its document's and its state's texts,
/// made from the record (and its digest checked).
#[derive(Debug, Clone)]
pub(crate) struct PreparedCreate {
    pub(crate) id: RunId,
    pub(crate) document: String,
    pub(crate) run_state: String,
    /// The run row's values, taken from the record: a create needs nothing else of it.
    pub(crate) row: CreatedRow,
}

/// What a create writes in the run row besides its texts.
#[derive(Debug, Clone)]
pub(crate) struct CreatedRow {
    pub(crate) workflow: String,
    pub(crate) digest: String,
    pub(crate) format: u32,
    pub(crate) workflow_file: Option<String>,
    pub(crate) base_dir: Option<String>,
    pub(crate) status: StoredStatus,
    pub(crate) termination_reason: Option<TerminationReason>,
    pub(crate) steps: u32,
    pub(crate) seq: u64,
    pub(crate) attempt_key: String,
    pub(crate) running: bool,
}

impl CreatedRow {
    /// The status the row is created with: a run created claimed is running where it
    /// would be queued, as a claim leaves it.
    pub(crate) fn status(&self, claimed: bool) -> StoredStatus {
        match self.status {
            StoredStatus::Queued if claimed => StoredStatus::Running,
            status => status,
        }
    }
}

impl PreparedCreate {
    /// The texts `record` is stored with; its document's digest checked against the
    /// record's (a record whose digest does not match is refused, [`StoreError::Corrupt`]).
    ///
    /// Complexity: linear in the document's and the state's sizes.
    pub(crate) fn of(record: &RunRecord) -> Result<Self, StoreError> {
        let id = record.run_id;
        let computed = digest_of(&record.document);
        if computed != record.digest {
            return Err(StoreError::Corrupt {
                run_id: id,
                what: "document".into(),
                reason: format!(
                    "its digest is {computed}, the record says {}",
                    record.digest
                ),
            });
        }
        let run = &record.run;
        Ok(Self {
            id,
            row: CreatedRow {
                workflow: run.workflow.clone(),
                digest: record.digest.clone(),
                format: record.format,
                workflow_file: record.workflow_file.clone(),
                base_dir: record.base_dir.clone(),
                status: stored_status(run, record.seq),
                termination_reason: run.termination_reason(),
                steps: run.steps,
                seq: record.seq,
                attempt_key: attempt_key(run),
                running: run.is_running(),
            },
            document: serde_json::to_string(&record.document).expect("a document is plain data"),
            // `serde_json`'s text, the state (the run's whole input) written by hand
            // (ADR 0070).
            run_state: record
                .run
                .to_json_text()
                .expect("a run state is plain data"),
        })
    }
}
