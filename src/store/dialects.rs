//! The dialect table (docs/spec/store.md): the statements in which SQLite and
//! PostgreSQL differ, side by side. Every other statement is written once, in
//! `store/sql`.

use std::sync::LazyLock;

use super::db::Dialect;
use super::rows::INFO;

/// SQLite's: its one writer takes the write lock at once; a checkpoint is one insert into
/// the `checkpoint_in` view (migration 0003), whose `INSTEAD OF` trigger does the fence
/// and the writes, returning the run row as it left it.
pub(crate) static SQLITE: LazyLock<Dialect> = LazyLock::new(|| {
    let returning: Vec<String> = INFO
        .split(',')
        .map(str::trim)
        .map(|c| format!("(SELECT {c} FROM runs WHERE id = checkpoint_in.run_id) AS {c}"))
        .collect();
    Dialect {
        checkpoint: format!(
            "INSERT INTO checkpoint_in (run_id, seq, steps, status, termination_reason, \
             now_ms, owner, running, next_key, next_attempt, digest, document, delta, \
             snapshot) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
             RETURNING {}",
            returning.join(", ")
        ),
        checkpoint_with_events: None,
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
    checkpoint: format!(
        "SELECT {INFO} FROM pactgraph_checkpoint($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
         $11, $12, $13, $14)"
    ),
    // The function runs once (a volatile CTE read twice is materialized), before the
    // insert that reads it; a refused fence aborts the whole statement.
    checkpoint_with_events: Some(format!(
        "WITH cp AS (SELECT {INFO} FROM pactgraph_checkpoint($1, $2, $3, $4, $5, $6, $7, $8, \
         $9, $10, $11, $12, $13, $14)), \
         ev AS (INSERT INTO events (run_id, seq, event) \
           SELECT $1, e.seq, e.event FROM cp, \
             jsonb_to_recordset($15::jsonb) AS e(seq BIGINT, event TEXT)) \
         SELECT * FROM cp"
    )),
    claim_lock: " FOR UPDATE SKIP LOCKED",
    greatest: "GREATEST",
    name_lock: Some("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"),
    begin_write: "BEGIN",
    begin_read: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
});
