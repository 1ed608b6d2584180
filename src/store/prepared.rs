//! A checkpoint made ready to write ([`RunStore::prepare_checkpoint`](super::RunStore::prepare_checkpoint)): everything its
//! statement binds, made from the run when it is prepared, so that the run may step on
//! while the checkpoint is written ([`RunStore::write_checkpoint`](super::RunStore::write_checkpoint), ADR 0068).

use super::rows::stored_status;
use super::{CreateOptions, Lease, RunInfo, StoreError, StoredStatus, attempt_key, now_ms};
use crate::runtime::{RunId, RunRecord, TerminationReason, digest_of};

/// One checkpoint as its statement binds it: the run row's new values, the delta's text,
/// a snapshot when one is due, the document when the run takes a new one, and the
/// events packed as one chunk. It holds no reference to the run: a driver may step the
/// run on (pure steps only: brief section 13) while the store writes it.
#[derive(Debug, Clone)]
pub struct PreparedCheckpoint {
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
    /// The events' texts, one a line (UTF-8), until [`PreparedCheckpoint::pack_events`]
    /// packs them (as every checkpoint of this format writes them): then a packed chunk.
    pub(crate) events: Vec<u8>,
    /// Whether `events` is packed.
    pub(crate) packed: bool,
    pub(crate) first_event: u64,
    pub(crate) last_event: u64,
    /// The store's clock when it was prepared (what a refusal is judged at).
    pub(crate) now: u64,
    /// Written on the connection checkpoints are pipelined on (ADR 0080): see
    /// [`PreparedCheckpoint::piped`].
    pub(crate) piped: bool,
    /// Sent while another checkpoint of the run is in flight (ADR 0080: set by the
    /// driver when the store pipelines it): see [`PreparedCheckpoint::behind`].
    pub(crate) behind: bool,
    /// Written again after a try whose outcome is unknown (see
    /// [`PreparedCheckpoint::resent`]).
    pub(crate) resent: bool,
}

impl PreparedCheckpoint {
    /// Marks it to be written on the connection the store pipelines checkpoints on, when
    /// it has one ([`RunStore::pipelines`](super::RunStore::pipelines)); else on the
    /// store's own, as every other.
    pub fn piped(mut self) -> Self {
        self.piped = true;
        self
    }

    /// Marks it sent while another checkpoint of its run is in flight
    /// ([`RunStore::pipelines`](super::RunStore::pipelines)): its first try never opens a
    /// connection of its own, so that it goes where the one before it went or fails as
    /// that one did.
    pub fn behind(mut self) -> Self {
        self.behind = true;
        self
    }

    /// Marks it written again, alone, after it failed behind another (ADR 0080): it may
    /// have been committed already (its answer lost), which a refusal of its fence then
    /// tells, as for a try again after a lost connection.
    pub fn resent(mut self) -> Self {
        self.behind = false;
        self.resent = true;
        self
    }

    /// The run it checkpoints.
    pub fn run_id(&self) -> RunId {
        self.id
    }

    /// Its number: the run's stored `seq` after it.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether the run is still running after it.
    pub fn running(&self) -> bool {
        self.running
    }

    /// Packs its events' texts (lz4, `store/packed.rs`), as writing it would: a driver
    /// writing a checkpoint while the run steps on packs it on another thread first
    /// (ADR 0068). Packing packed events does nothing.
    ///
    /// Complexity: linear in the texts' bytes.
    pub fn pack_events(&mut self) {
        if !self.packed {
            self.events = super::packed::pack(&self.events);
            self.packed = true;
        }
    }
}

/// A run's creation made ready to write ([`RunStore::create_prepared`](super::RunStore::create_prepared)):
/// its document's and its state's texts, made from the record (and its digest checked)
/// before the store is at hand. `pactgraph run` makes it while the store opens (ADR 0068).
#[derive(Debug, Clone)]
pub struct PreparedCreate {
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
    pub fn of(record: &RunRecord) -> Result<Self, StoreError> {
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

    /// The run it creates.
    pub fn run_id(&self) -> RunId {
        self.id
    }
}

impl RunInfo {
    /// The row a create of `prepared` with `options` writes, claimed under `lease` (what
    /// a drive reads of a run whose create is still in flight, `drive_creating_then`).
    pub(crate) fn creating(
        prepared: &PreparedCreate,
        options: &CreateOptions,
        lease: &Lease,
    ) -> Self {
        let row = &prepared.row;
        let now = now_ms();
        Self {
            id: prepared.id,
            name: options.name.clone(),
            workflow: row.workflow.clone(),
            digest: row.digest.clone(),
            status: row.status(options.claimed_by.is_some()),
            termination_reason: row.termination_reason,
            steps: row.steps,
            seq: row.seq,
            created_ms: prepared.id.created_ms(),
            updated_ms: now,
            expires_ms: options.expires_ms,
            owner: Some(lease.owner.clone()),
            lease_expires_ms: Some(lease.expires_ms),
            attempt_key: Some(row.attempt_key.clone()),
            attempt: 1,
            cancel_requested: false,
        }
    }
}
