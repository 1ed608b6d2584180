//! Durable runs: the [`RunStore`] trait, the store that implements it once for SQLite
//! ([`SqliteStore`]), PostgreSQL ([`PgStore`]) or either by URL ([`AnyStore`]), and a
//! driver ([`drive()`]) that steps a stored run and checkpoints it at effects (a step that
//! performed an effect at once, pure steps in batches) or every step ([`Checkpoints`]).
//!
//! A store keeps each run as a row (id, name, workflow, status, lease, counters), its
//! workflow document once per digest, one row per checkpoint holding its
//! [`StepDelta`] (what its steps changed, not the whole state), and a snapshot of the whole
//! [`RunState`] at creation, at pauses, at the end and every
//! `snapshot_every` steps. Loading a run is its latest snapshot plus the deltas after it.
//! `docs/spec/store.md` gives the contract.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::contracts::WorkflowDocument;
use crate::runtime::{EventStamp, RunEvent, RunId, RunRecord, RunState};

mod any;
mod batch;
mod clock;
mod db;
mod delta;
mod deps;
mod dialects;
mod drive;
mod drive_options;
mod driver;
mod dyn_store;
mod error;
mod follow;
mod format;
mod map_delta;
mod owner;
mod packed;
mod postgres;
mod prepared;
mod rows;
mod run_info;
mod sql;
mod sqlite;
mod trace_once;
mod trace_weight;
mod wakeups;
mod weights;
mod worker;

pub use any::{AnyDb, AnyStore};
pub use batch::{BATCH_STEPS, BATCH_WAIT, Checkpoints};
pub use clock::Clock;
pub use delta::{Before, ControlDelta, FrameDelta, SessionDelta, StepDelta};
pub use deps::{
    DEFAULT_DEP_TIMEOUT, Dependencies, DependencySpec, OnDepFailure, Settled, settle,
    settle_dependents,
};
pub use drive::{Continue, drive};
pub use drive_options::DriveOptions;
pub use dyn_store::DynStore;
pub use error::StoreError;
pub use follow::Follower;
pub use map_delta::MapDelta;
pub(crate) use owner::local_owner_pattern;
pub use owner::{local_owner, owner_gone};
pub use postgres::{PgDb, PgOptions, PgStore};
pub(crate) use prepared::{PreparedCheckpoint, PreparedCreate};
pub use rows::STORE_FORMAT;
pub use run_info::{RunInfo, StoredStatus};
pub use sql::{RunStorage, Store};
// The CLI's: the file a `sqlite:` URL names.
#[cfg(feature = "cli")]
pub(crate) use sqlite::file_path as sqlite_file_path;
pub use sqlite::{Durability, SqliteDb, SqliteOptions, SqliteStore};
pub use wakeups::Wakeups;
pub use worker::{WorkEvent, WorkSummary, WorkerOptions, work};

/// What names the step a run takes next, for counting its attempts: its steps taken and
/// its trace length (`STEPS.TRACE_LEN`). A step tried again (after a crash, or a failed
/// step reopened) starts from the same run, so it has the same key.
pub fn attempt_key(run: &RunState) -> String {
    format!("{}.{}", run.steps, run.trace.len())
}

/// A run as loaded: its row and its record (document, digest, seq and rebuilt state).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StoredRun {
    /// The row.
    pub info: RunInfo,
    /// The record, the run state rebuilt from the latest snapshot and later deltas.
    pub record: RunRecord,
}

/// How a run is created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CreateOptions {
    /// A name, unique among unexpired runs.
    pub name: Option<String>,
    /// When the record expires (milliseconds since the Unix epoch).
    pub expires_ms: Option<u64>,
    /// Runs this one waits for (it is created `waiting`).
    pub dependencies: Option<Dependencies>,
    /// The owner it is created claimed by and the lease's length (see
    /// [`CreateOptions::claimed_by`]).
    pub claimed_by: Option<(String, Duration)>,
}

impl CreateOptions {
    /// Named `name`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Expiring `ttl` from now.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.expires_ms = Some(now_ms().saturating_add(duration_ms(ttl)));
        self
    }

    /// Expiring at `expires_ms`.
    pub fn expires_at(mut self, expires_ms: u64) -> Self {
        self.expires_ms = Some(expires_ms);
        self
    }

    /// Created claimed by `owner` for `lease` (on the database's clock, as
    /// [`RunStore::claim`] would take it), in the create's own statement: `running` where
    /// it would be `queued`, so that no worker takes it between its create and its drive,
    /// and one round trip fewer. [`drive()`] by `owner` claims it again keeping its
    /// attempt.
    pub fn claimed_by(mut self, owner: impl Into<String>, lease: Duration) -> Self {
        self.claimed_by = Some((owner.into(), lease));
        self
    }

    /// Waiting for `dependencies` before its first step.
    pub fn after(mut self, dependencies: Dependencies) -> Self {
        self.dependencies = Some(dependencies);
        self
    }
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs with this status.
    pub status: Option<StoredStatus>,
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Expired runs too.
    pub include_expired: bool,
    /// At most this many runs (the newest).
    pub limit: Option<usize>,
    /// Only runs older than this one (ids sort by creation): the next page after it.
    pub before: Option<RunId>,
}

impl RunFilter {
    /// Runs with `status`.
    pub fn status(mut self, status: StoredStatus) -> Self {
        self.status = Some(status);
        self
    }
    /// Runs of `workflow`.
    pub fn workflow(mut self, workflow: impl Into<String>) -> Self {
        self.workflow = Some(workflow.into());
        self
    }
    /// Expired runs too.
    pub fn include_expired(mut self) -> Self {
        self.include_expired = true;
        self
    }
    /// The newest `n` runs only.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
    /// Runs created before run `id` only (the page after it).
    pub fn before(mut self, id: RunId) -> Self {
        self.before = Some(id);
        self
    }
}

/// Which runs to prune (the filters given all apply; at least one is needed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneFilter {
    /// Expired runs.
    pub expired: bool,
    /// Runs last written longer ago than this.
    pub older_than: Option<Duration>,
    /// Runs with this status.
    pub status: Option<StoredStatus>,
    /// Count, delete nothing.
    pub dry_run: bool,
}

impl PruneFilter {
    /// Expired runs.
    pub fn expired(mut self) -> Self {
        self.expired = true;
        self
    }
    /// Runs last written more than `age` ago.
    pub fn older_than(mut self, age: Duration) -> Self {
        self.older_than = Some(age);
        self
    }
    /// Runs with `status`.
    pub fn status(mut self, status: StoredStatus) -> Self {
        self.status = Some(status);
        self
    }
    /// Count only.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
}

/// A lease on a run: who holds it and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// The run.
    pub run_id: RunId,
    /// The owner.
    pub owner: String,
    /// When it lapses, on the store's clock ([`RunStore::clock`], milliseconds since the
    /// Unix epoch): the time the claim or renewal was sent plus the lease (the database
    /// wrote its own expiry, on its own clock, a little later).
    pub expires_ms: u64,
}

/// One checkpoint: the transitions committed to a run since its last checkpoint (one step
/// or several, merged into one delta), as the store writes it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Checkpoint<'a> {
    /// The run's sequence number after this transition (the stored one plus one).
    pub seq: u64,
    /// What the transition changed.
    pub delta: &'a StepDelta,
    /// The run after it (written whole only when a snapshot is due, or with a new
    /// document).
    pub run: &'a RunState,
    /// The attempt the run's next step makes (1 unless set; kept only while running).
    pub next_attempt: u32,
    /// A new document for the run (its budgets changed by a resume), with its digest. The
    /// checkpoint then carries a snapshot of the run.
    pub document: Option<(&'a WorkflowDocument, &'a str)>,
    /// Where the transition's events start (docs/spec/events.md): a driver that publishes
    /// them gives it; without one the store numbers them on from the run's last kept
    /// event, at its own clock's time.
    pub events: Option<EventStamp>,
    /// A checkpoint of a run that stopped running (paused or ended) also gives the lease
    /// up, where the store does both in one statement (PostgreSQL; ADR 0071): the answer
    /// then shows no owner, and no `release` is needed. Elsewhere it is ignored.
    pub let_go: bool,
}

impl<'a> Checkpoint<'a> {
    /// Checkpoint `seq`: `delta` led to `run`.
    pub fn new(seq: u64, delta: &'a StepDelta, run: &'a RunState) -> Self {
        Self {
            seq,
            delta,
            run,
            next_attempt: 1,
            document: None,
            events: None,
            let_go: false,
        }
    }

    /// Its events numbered from `stamp` (see [`Checkpoint::events`]).
    pub fn events(mut self, stamp: EventStamp) -> Self {
        self.events = Some(stamp);
        self
    }

    /// The run's next step makes attempt `n` (a reopened failed step: its last attempt
    /// plus one).
    pub fn next_attempt(mut self, n: u32) -> Self {
        self.next_attempt = n.max(1);
        self
    }

    /// Gives the lease up with the checkpoint if the run stopped running (see
    /// [`Checkpoint::let_go`]).
    pub fn letting_go(mut self) -> Self {
        self.let_go = true;
        self
    }

    /// The run continues under `document` (digest `digest`) from now on.
    pub fn document(mut self, document: &'a WorkflowDocument, digest: &'a str) -> Self {
        self.document = Some((document, digest));
        self
    }
}

/// Keeps runs durably: created before their first step, checkpointed as they step (see
/// [`Checkpoints`]), loaded to continue them. Every write is one transaction; a checkpoint is refused
/// unless its sequence number is the next one and its writer holds the run's lease.
pub trait RunStore: Send + Sync {
    /// Stores a new run: its row, its document (once per digest) and a snapshot of its
    /// state at `record.seq`. Its status is `queued` while the state is running.
    fn create(
        &self,
        record: &RunRecord,
        options: &CreateOptions,
    ) -> impl Future<Output = Result<RunInfo, StoreError>> + Send;

    /// Writes one checkpoint of run `id` by `owner` (one step or a batch of them, as one
    /// delta), in one transaction: the step row,
    /// the run row and, when due, a snapshot. Refuses ([`StoreError::SeqMismatch`],
    /// [`StoreError::LeaseLost`]) writing nothing.
    fn checkpoint(
        &self,
        id: RunId,
        owner: &str,
        checkpoint: Checkpoint<'_>,
    ) -> impl Future<Output = Result<RunInfo, StoreError>> + Send;

    /// Loads run `id`: its row, document and the run state as of its last checkpoint.
    fn load(&self, id: RunId) -> impl Future<Output = Result<StoredRun, StoreError>> + Send;

    /// Loads run `id` as it was after checkpoint `seq` (at most its current one): what
    /// reopening a run ended by its last step starts from. Needs a snapshot at or before
    /// `seq` (a run ended by a failure or a stop keeps the one before its end).
    fn load_at(
        &self,
        id: RunId,
        seq: u64,
    ) -> impl Future<Output = Result<StoredRun, StoreError>> + Send;

    /// The run's row.
    fn info(&self, id: RunId) -> impl Future<Output = Result<RunInfo, StoreError>> + Send;

    /// Runs matching `filter`, newest first.
    fn list(
        &self,
        filter: &RunFilter,
    ) -> impl Future<Output = Result<Vec<RunInfo>, StoreError>> + Send;

    /// Takes the lease on run `id` for `owner` until `lease` from now. Fails with
    /// [`StoreError::LeaseHeld`] if another owner holds an unexpired lease.
    fn claim(
        &self,
        id: RunId,
        owner: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    /// Extends `owner`'s current lease to `lease` from now ([`StoreError::LeaseLost`] if
    /// it has lapsed or another owner holds it).
    fn renew(
        &self,
        id: RunId,
        owner: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    /// Records that the step in flight starts attempt `attempt` (a node `retry` policy's
    /// later attempt), so that a crash from here makes the step run again with a higher
    /// one. Fenced by the lease ([`StoreError::LeaseLost`] if `owner` does not hold it);
    /// never lowers the stored attempt.
    fn note_attempt(
        &self,
        id: RunId,
        owner: &str,
        attempt: u32,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives the lease up ([`StoreError::LeaseLost`] if `owner` does not hold it).
    fn release(
        &self,
        id: RunId,
        owner: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives the lease up after the step in flight was abandoned (a signal, the lease
    /// lost): the run shows as `interrupted` and that step's next attempt is one more
    /// ([`StoreError::LeaseLost`] if `owner` does not hold it).
    fn interrupt(
        &self,
        id: RunId,
        owner: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stops a queued, waiting, paused or interrupted run with reason `cancelled`, as one
    /// more checkpoint. For a run being stepped under a current lease, marks the cancel
    /// asked (`cancel_requested`): its driver stops it at its next step, killing its
    /// programs. An ended run is refused ([`StoreError::WrongStatus`]).
    fn cancel(&self, id: RunId) -> impl Future<Output = Result<RunInfo, StoreError>> + Send;

    /// Deletes the runs `filter` selects (their steps and snapshots, and documents no
    /// run uses any more); returns how many runs.
    fn prune(&self, filter: &PruneFilter) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The run `key` names: a full id, a unique id prefix of 6 or more characters, or a
    /// name (unique among unexpired runs).
    fn find(&self, key: &str) -> impl Future<Output = Result<RunId, StoreError>> + Send;

    /// Run `id`'s dependencies as created (`None` for a run created without any).
    fn dependency_spec(
        &self,
        id: RunId,
    ) -> impl Future<Output = Result<Option<DependencySpec>, StoreError>> + Send;

    /// The runs created after run `id` (those that name it as a dependency), oldest first.
    fn dependents(
        &self,
        id: RunId,
    ) -> impl Future<Output = Result<Vec<RunInfo>, StoreError>> + Send;

    /// Up to `limit` runs a worker may take now, oldest first: `queued` ones, `waiting`
    /// ones whose dependencies are all final or whose deadline passed, and `interrupted`
    /// ones (their lease lapsed, or their owner is a process of this host that is gone:
    /// [`owner_gone`], as [`RunStore::claim`] takes them over at once); none held under a
    /// current lease by a live owner, none expired.
    fn runnable(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<RunInfo>, StoreError>> + Send;

    /// Run `id`'s kept events (docs/spec/events.md) with a `seq` above `after`, at most
    /// `limit`, in `seq` order: the history a watcher reads before (and while) following
    /// the run. Every checkpoint writes its events in its own transaction, so a reader
    /// sees whole transitions. Empty for a run without events (or no such run).
    fn events(
        &self,
        id: RunId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<RunEvent>, StoreError>> + Send;

    /// The `seq` of run `id`'s last kept event (0 before any).
    fn last_event_seq(&self, id: RunId) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The clock the store reads the time from (leases, updates, deadlines): what
    /// [`drive()`] renews its lease by. The system's, set to the database's clock as
    /// measured when the store opened (leases are fenced on the database's clock), unless
    /// the store was opened with a manual one ([`SqliteOptions::clock`],
    /// [`PgOptions::clock`]).
    fn clock(&self) -> Clock {
        Clock::system()
    }

    /// Wakeups when runs become runnable, if the store sends them (PostgreSQL: `LISTEN`
    /// on a connection of its own, [`work`] looks at once when told); `None`, the
    /// default and SQLite's: a worker polls only.
    fn wakeups(&self) -> impl Future<Output = Option<Wakeups>> + Send {
        async { None }
    }

    /// Wakeups when run `id` has new kept events, if the store sends them (PostgreSQL:
    /// the checkpoint's `NOTIFY`, heard by a `LISTEN` on a connection of its own, which
    /// [`Follower::wakeups`] takes); `None`, the default and SQLite's: a follower polls.
    fn event_wakeups(&self, id: RunId) -> impl Future<Output = Option<Wakeups>> + Send {
        let _ = id;
        async { None }
    }
}

/// Milliseconds since the Unix epoch.
#[inline]
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, duration_ms)
}

/// A duration in whole milliseconds (saturating).
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
