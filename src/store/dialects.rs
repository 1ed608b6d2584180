//! The dialect table (docs/spec/store.md): the statements in which SQLite and
//! PostgreSQL differ, side by side. Every other statement is written once, in
//! `store/sql`.

use std::sync::LazyLock;

use super::db::Dialect;
use super::rows::INFO;

/// SQLite's clock in milliseconds since the Unix epoch: `'now'` is one instant for a
/// whole statement (triggers included), read when it runs.
const SQLITE_NOW: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// PostgreSQL's clock in milliseconds since the Unix epoch: `now()`, the start of the
/// statement's transaction (every transaction of the store is one short statement or a
/// few).
const POSTGRES_NOW: &str = "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)";

/// The advisory lock (a fixed key, "pactgraph documents") that a create takes shared and
/// a prune exclusive before deleting documents no run uses: a prune never deletes the
/// document of a run being created (the prune/create race).
const DOCUMENTS_LOCK_SHARED: &str = "SELECT pg_advisory_xact_lock_shared(7361626772617068)";
/// See [`DOCUMENTS_LOCK_SHARED`].
const DOCUMENTS_LOCK: &str = "SELECT pg_advisory_xact_lock(7361626772617068)";

/// The channel a store announces runnable runs on, as an SQL expression the server
/// evaluates on the session's connection: one per schema (`pactgraph_runnable_` and the
/// MD5 of the schema's name, 51 characters, under PostgreSQL's 63), so that workers of
/// other schemas of the same database are not woken. A macro, so that the notify
/// statement below is one literal.
macro_rules! runnable_channel {
    () => {
        "'pactgraph_runnable_' || md5(coalesce(current_schema(), ''))"
    };
}

/// See [`runnable_channel`]: what a listener reads the channel's name with.
pub(crate) const RUNNABLE_CHANNEL: &str = runnable_channel!();

/// SQLite's: its one writer takes the write lock at once; a checkpoint is one insert into
/// the `checkpoint_events_in` view (migration 0005), whose `INSTEAD OF` trigger inserts
/// into `checkpoint_in` (migration 0003: its trigger does the fence and the writes), then
/// the events; it returns the run row as it left it.
pub(crate) static SQLITE: LazyLock<Dialect> = LazyLock::new(|| {
    let returning: Vec<String> = INFO
        .split(',')
        .map(str::trim)
        .map(|c| format!("(SELECT {c} FROM runs WHERE id = checkpoint_events_in.run_id) AS {c}"))
        .collect();
    Dialect {
        checkpoint: format!(
            "INSERT INTO checkpoint_events_in (run_id, seq, steps, status, \
             termination_reason, now_ms, owner, running, next_key, next_attempt, digest, \
             document, delta, snapshot, events) VALUES ($1, $2, $3, $4, $5, COALESCE($6, {SQLITE_NOW}), $7, $8, $9, \
             $10, $11, $12, $13, $14, $15) RETURNING {}",
            returning.join(", ")
        ),
        now_ms: SQLITE_NOW,
        int_param: "",
        documents_lock: None,
        documents_lock_shared: None,
        notify_runnable: None,
        claim_lock: "",
        greatest: "MAX",
        name_lock: None,
        begin_write: "BEGIN IMMEDIATE",
        begin_read: "BEGIN",
    }
});

/// PostgreSQL's: a checkpoint is a call of `pactgraph_checkpoint` (migration 0004), which
/// does what SQLite's trigger does; a claim never waits on a row another worker is
/// claiming; a name is locked across machines; a load reads one snapshot of the database.
pub(crate) static POSTGRES: LazyLock<Dialect> = LazyLock::new(|| Dialect {
    // The function runs once (a volatile CTE read twice is materialized), before the
    // insert that reads it; a refused fence aborts the whole statement.
    checkpoint: format!(
        "WITH cp AS (SELECT {INFO} FROM pactgraph_checkpoint($1, $2, $3, $4, $5, \
         COALESCE($6::BIGINT, {POSTGRES_NOW}), $7, $8, $9, $10, $11, $12, $13, $14)), \
         ev AS (INSERT INTO events (run_id, seq, event) \
           SELECT $1, e.seq, e.event FROM cp, \
             jsonb_to_recordset($15::jsonb) AS e(seq BIGINT, event TEXT)) \
         SELECT * FROM cp"
    ),
    now_ms: POSTGRES_NOW,
    int_param: "::BIGINT",
    documents_lock: Some(DOCUMENTS_LOCK),
    documents_lock_shared: Some(DOCUMENTS_LOCK_SHARED),
    notify_runnable: Some(concat!("SELECT pg_notify(", runnable_channel!(), ", '')")),
    claim_lock: " FOR UPDATE SKIP LOCKED",
    greatest: "GREATEST",
    name_lock: Some("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"),
    begin_write: "BEGIN",
    begin_read: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
});
