//! What can go wrong in a run store, naming the run and what was asked.

use crate::runtime::RunId;

use super::StoredStatus;

/// A run store refused or failed an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store URL is not one this pactgraph opens.
    #[error("`{url}` is not a run store URL ({reason})")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database could not be opened or prepared (its folder, file or migrations).
    #[error("cannot open the run store `{url}`: {reason}")]
    Open {
        /// The URL given.
        url: String,
        /// Why.
        reason: String,
    },
    /// The database has a format development builds of pactgraph wrote (1 to 13, before
    /// the one format of ADR 0084); it is left untouched. Nothing reads or upgrades it:
    /// the store is to be made again.
    #[error(
        "cannot open the run store `{url}`: format {found} was written by a development \
         build of pactgraph; this one reads format {supported} only: recreate the store (a \
         new SQLite file, or an empty PostgreSQL database or schema) and run again"
    )]
    OlderFormat {
        /// The URL given (its password, if any, shown as `***`).
        url: String,
        /// The format found.
        found: i64,
        /// The one format this pactgraph reads.
        supported: i64,
    },
    /// The database was written by a newer pactgraph (its format is higher than this
    /// one's); it is left untouched.
    #[error(
        "the run store `{url}` has format {found}, newer than this pactgraph's ({supported}); \
         use a newer pactgraph or another store"
    )]
    NewerFormat {
        /// The URL given.
        url: String,
        /// The format found.
        found: i64,
        /// The newest format this pactgraph reads.
        supported: i64,
    },
    /// The database failed an operation.
    #[error("run store: {operation}{} failed: {source}", run_suffix(.run_id))]
    Database {
        /// What was being done (`checkpoint`, `load`, ...).
        operation: &'static str,
        /// The run it was done for, if one.
        run_id: Option<RunId>,
        /// The database error.
        #[source]
        source: sqlx::Error,
    },
    /// A checkpoint before the run's snapshot was asked for: the snapshot replaced it.
    #[error(
        "run {run_id}: checkpoint {seq} is no longer kept (the run's snapshot at checkpoint \
         {snapshot_seq} replaced the ones before it)"
    )]
    Compacted {
        /// The run.
        run_id: RunId,
        /// The checkpoint asked for.
        seq: u64,
        /// The run's snapshot: checkpoints from here on can be loaded.
        snapshot_seq: u64,
    },
    /// No run has this id, unique prefix or name.
    #[error("no run `{key}` in the store")]
    NotFound {
        /// The id, prefix or name looked for.
        key: String,
    },
    /// An id prefix matches several runs.
    #[error("the prefix `{prefix}` matches {} runs: {}", .candidates.len(), list(.candidates))]
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// The runs it matches, newest first.
        candidates: Vec<RunId>,
    },
    /// A run with this id is already stored.
    #[error("run {run_id} is already in the store")]
    Exists {
        /// The run.
        run_id: RunId,
    },
    /// Another unexpired run has this name.
    #[error("the name `{name}` is taken by run {holder}")]
    NameTaken {
        /// The name.
        name: String,
        /// The run that has it.
        holder: RunId,
    },
    /// A checkpoint's sequence number is not the run's next one (a step written twice, or
    /// one skipped); nothing was written.
    #[error("run {run_id}: checkpoint {given} refused, the next one is {expected}")]
    SeqMismatch {
        /// The run.
        run_id: RunId,
        /// The sequence number the store expects (stored + 1).
        expected: u64,
        /// The one given.
        given: u64,
    },
    /// The writer does not hold a current lease on the run (it lapsed, or another owner
    /// claimed it); nothing was written.
    #[error("run {run_id}: `{owner}` does not hold the lease{}", holder_suffix(.holder))]
    LeaseLost {
        /// The run.
        run_id: RunId,
        /// The owner that tried to write.
        owner: String,
        /// The owner holding an unexpired lease, if any.
        holder: Option<String>,
    },
    /// Another owner holds an unexpired lease on the run.
    #[error("run {run_id} is held by `{holder}` until {lease_expires_ms} ms")]
    LeaseHeld {
        /// The run.
        run_id: RunId,
        /// Its owner.
        holder: String,
        /// When the lease lapses (milliseconds since the Unix epoch).
        lease_expires_ms: u64,
    },
    /// The run's status does not allow the operation (cancelling a completed run, say).
    #[error("run {run_id} is {status}: cannot {operation}")]
    WrongStatus {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: StoredStatus,
        /// What was asked.
        operation: &'static str,
    },
    /// A stored row could not be read back (damaged or written by another version).
    #[error("run {run_id}: stored {what} is unreadable: {reason}")]
    Corrupt {
        /// The run.
        run_id: RunId,
        /// Which row (`snapshot 12`, `step 13`, `document`, ...).
        what: String,
        /// Why.
        reason: String,
    },
    /// The run cannot be continued the way asked (an answer to a run that asks nothing,
    /// a reopened run that was not ended by its last step, ...).
    #[error("run {run_id}: cannot continue: {reason}")]
    CannotContinue {
        /// The run.
        run_id: RunId,
        /// Why.
        reason: String,
    },
    /// A drive was interrupted ([`DriveOptions::interrupt`](super::DriveOptions)): the
    /// steps it finished are committed and its lease is given up; `in_flight` when an
    /// effect was dropped (its step's next attempt is one more).
    #[error("run {run_id}: interrupted (every finished step is committed)")]
    Interrupted {
        /// The run.
        run_id: RunId,
        /// An effect was in flight and was dropped.
        in_flight: bool,
    },
    /// A prune with no filter (it would delete every run).
    #[error("prune needs a filter (expired, older than or status); none was given")]
    NoPruneFilter,
}

fn run_suffix(id: &Option<RunId>) -> String {
    id.map(|id| format!(" of run {id}")).unwrap_or_default()
}

fn holder_suffix(holder: &Option<String>) -> String {
    holder
        .as_ref()
        .map(|h| format!(" (`{h}` does)"))
        .unwrap_or_default()
}

fn list(ids: &[RunId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl StoreError {
    /// Whether this is a fault that passes (the database's connection lost, the server
    /// restarting or shutting down): a call failing so is tried again, with a backoff.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            StoreError::Database { source, .. } => transient(source),
            _ => false,
        }
    }

    /// A database error during `operation` for `run_id`.
    pub(crate) fn db(
        operation: &'static str,
        run_id: Option<RunId>,
    ) -> impl Fn(sqlx::Error) -> Self {
        move |source| StoreError::Database {
            operation,
            run_id,
            source,
        }
    }
}

/// Whether database error `e` is a fault that passes ([`StoreError::is_transient`]): the
/// connection lost, the server restarting or shutting down.
pub(crate) fn transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        // PostgreSQL: operator intervention (57P01 admin shutdown, 57P02 crash
        // shutdown, 57P03 cannot connect now) and connection exceptions (08...).
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("57P") || c.starts_with("08")),
        _ => false,
    }
}
