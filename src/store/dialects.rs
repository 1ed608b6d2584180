//! The dialect table (docs/spec/store.md): the statements in which SQLite and
//! PostgreSQL differ, side by side. Every other statement is written once, in
//! `store/sql`.

use std::sync::LazyLock;

use super::db::Dialect;
use super::rows::{INFO, insert_run};

/// SQLite's clock in milliseconds since the Unix epoch: `'now'` is one instant for a
/// whole statement (triggers included), read when it runs.
const SQLITE_NOW: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// PostgreSQL's clock in milliseconds since the Unix epoch: `now()`, the start of the
/// statement's transaction (every transaction of the store is one short statement or a
/// few).
const POSTGRES_NOW: &str = "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)";

/// The advisory lock's key (a fixed key, "pactgraph documents") that a create takes shared
/// (`Dialect::begin_create`) and a prune exclusive ([`DOCUMENTS_LOCK`]) before deleting
/// documents no run uses: a prune never deletes the document of a run being created (the
/// prune/create race).
macro_rules! documents_lock_key {
    () => {
        "7361626772617068"
    };
}

/// See [`documents_lock_key`].
const DOCUMENTS_LOCK: &str = concat!("SELECT pg_advisory_xact_lock(", documents_lock_key!(), ")");

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

/// The channel a checkpoint announces its run's new events on (its payload the run id),
/// one per schema as [`runnable_channel`] (`pactgraph_events_` and the MD5 of the
/// schema's name): `runs watch` and the server's event feeds listen on it.
macro_rules! events_channel {
    () => {
        "'pactgraph_events_' || md5(coalesce(current_schema(), ''))"
    };
}

/// See [`events_channel`]: what a follower reads the channel's name with.
pub(crate) const EVENTS_CHANNEL: &str = events_channel!();

/// SQLite's: its one writer takes the write lock at once; a checkpoint is one insert into
/// the `checkpoint_events_in` view (migrations/sqlite/run_store.sql), whose `INSTEAD OF`
/// trigger inserts into `checkpoint_in` (its trigger does the fence and the writes), then
/// the events as one chunk row, their texts one a line (format 8, ADR 0053); it returns
/// the run row as it left it.
pub(crate) static SQLITE: LazyLock<Dialect> = LazyLock::new(|| {
    // One statement, with a snapshot or not (the trigger tests `snapshot`). Its answer is
    // the run row as the trigger left it: a view's `RETURNING` answers the values inserted
    // into the view, so each column of the row is read back by a subquery (ADR 0089).
    let columns: Vec<String> = INFO
        .split(',')
        .map(str::trim)
        .map(|col| {
            format!("(SELECT {col} FROM runs WHERE id = checkpoint_events_in.run_id) AS {col}")
        })
        .collect();
    let columns = columns.join(", ");
    let checkpoint = format!(
        "INSERT INTO checkpoint_events_in (run_id, seq, steps, status, \
         termination_reason, now_ms, owner, running, next_key, next_attempt, digest, \
         document, delta, snapshot, events, first_event, last_event) VALUES ($1, $2, \
         $3, $4, $5, COALESCE($6, {SQLITE_NOW}), $7, $8, $9, $10, $11, $12, $13, $14, \
         $15, $16, $17) \
         RETURNING {columns}"
    );
    Dialect {
        checkpoint_snapshot: checkpoint.clone(),
        checkpoint,
        now_ms: SQLITE_NOW,
        int_param: "",
        documents_lock: None,
        begin_create: "BEGIN IMMEDIATE",
        insert_run: insert_run(SQLITE_NOW, ""),
        create_run: None,
        notify_runnable: None,
        // Packed in the client, a `BLOB` value of the text column (ADR 0059).
        packed_column: "events",
        claim_lock: "",
        greatest: "MAX",
        name_lock: None,
        begin_write: "BEGIN IMMEDIATE",
        begin_read: "BEGIN",
    }
});

/// PostgreSQL's checkpoint statement, of a checkpoint carrying a snapshot or not (binds as
/// [`Dialect::checkpoint`]'s; the one without a snapshot ignores `$11`, `$12` and `$14`,
/// the one with it `$13`). Two statements rather than one whose clauses test `$14`: the
/// server plans a prepared statement's generic plan once, but only when it does not look
/// dearer than the plans made for the values bound, and with clauses that only those
/// values switch off (a snapshot's deletes) it always looked dearer, so every execution
/// was planned again, about as much server time as executing it (ADR 0050).
///
/// The one without a snapshot is what every checkpoint of `--checkpoints steps` runs, so
/// it does the least (ADR 0054): no document clause (a checkpoint carrying a document
/// always carries a snapshot: `Store::checkpoint_once`), the run row's digest left as it
/// is, and no step row: its delta is kept in its event chunk's row (format 13, ADR 0079:
/// one tuple and one index entry fewer; before, a step row with no foreign key to check,
/// format 9). The notifications are
/// columns of the answer, called once for the one row `up` returns (none when refused),
/// rather than a clause of their own joined to it: one scan and one join fewer to start
/// at every execution.
///
/// The events channel's name is bound (`$18`, [`EVENTS_CHANNEL`] as the store read it once
/// at its open: `Store::events_channel`) rather than computed at every checkpoint: its
/// `md5(current_schema())` was ~7,500 server instructions of each (ADR 0063, ADR 0067).
/// The runnable channel is only named when the run stops running (`$8` false), once a
/// run, and stays an expression.
///
/// `up` returns the run row's [`INFO`] columns, which the answer carries.
fn postgres_checkpoint(snapshot: bool) -> String {
    // With a snapshot (and maybe a new document) it replaces the run's snapshot and the
    // step rows before it (format 12's and older; the deltas of the chunks before it stay
    // with them, ADR 0079).
    let (sets, writes) = if snapshot {
        (
            "digest = COALESCE($11, digest), snapshot_seq = $2, ",
            "doc AS (INSERT INTO documents (digest, document) SELECT $11, $12 FROM up \
               WHERE $12::TEXT IS NOT NULL ON CONFLICT (digest) DO NOTHING), \
             sn AS (INSERT INTO snapshots (run_id, seq, run_state) SELECT $1, $2, $14 \
               FROM up), \
             ds AS (DELETE FROM snapshots WHERE run_id = $1 AND seq < $2 \
               AND EXISTS (SELECT 1 FROM up)), \
             dt AS (DELETE FROM steps WHERE run_id = $1 AND seq < $2 \
               AND EXISTS (SELECT 1 FROM up)), "
                .to_string(),
        )
    } else {
        // No step row: the delta goes with the events, in their chunk's row (format 13,
        // ADR 0079; every checkpoint carries its `checkpoint` event, so every one writes
        // a chunk).
        ("", String::new())
    };
    // The delta in the chunk's row when the checkpoint carries no snapshot (which holds
    // the run as it is after it).
    let delta = if snapshot { "NULL" } else { "$13::TEXT" };
    format!(
        "WITH up AS (UPDATE runs SET seq = $2, steps = $3, status = $4, \
           termination_reason = $5, updated_ms = COALESCE($6::BIGINT, {POSTGRES_NOW}), \
           {sets}\
           attempt_key = CASE WHEN $8 THEN $9 ELSE attempt_key END, \
           attempt = CASE WHEN $8 THEN $10 ELSE attempt END, \
           owner = CASE WHEN $19::BOOLEAN THEN NULL ELSE owner END, \
           lease_expires_ms = CASE WHEN $19::BOOLEAN THEN NULL ELSE lease_expires_ms END \
         WHERE id = $1 AND seq = $2 - 1 AND owner = $7 \
           AND lease_expires_ms > COALESCE($6::BIGINT, {POSTGRES_NOW}) RETURNING {INFO}), \
         {writes}\
         ev AS (INSERT INTO event_chunks (run_id, first_seq, last_seq, seq, packed, delta) \
           SELECT $1, $16, $17, $2, $15::BYTEA, {delta} FROM up \
           WHERE $17::BIGINT >= $16::BIGINT) \
         SELECT up.*, pg_notify($18, $1) AS told, \
           CASE WHEN $8::BOOLEAN THEN NULL ELSE pg_notify({}, '') END AS woke FROM up",
        runnable_channel!()
    )
}

/// PostgreSQL's: a checkpoint is one statement of data-modifying `WITH` clauses doing
/// what SQLite's trigger does; a claim never waits on a row another worker is claiming;
/// a name is locked across machines; a load reads one snapshot of the database.
pub(crate) static POSTGRES: LazyLock<Dialect> = LazyLock::new(|| Dialect {
    // The fence is the update's `WHERE` (its row lock makes the check and the write one
    // step against any other writer); every other clause reads `up`, so a refused fence
    // writes nothing and returns no row. A snapshot replaces the run's snapshot and the
    // step rows before it; the events come in the same statement. The clauses see the
    // database as it was before the statement, and the one foreign key left (the run's
    // document) is checked at its end (a new document is inserted by the same statement
    // that points the run at it; event chunks have none from format 8, step rows and
    // snapshots none from format 9, ADR 0054: they are only ever inserted `FROM up`).
    // One planned statement, not a PL/pgSQL function (ADR 0044): a function's call runs
    // its four statements one by one.
    // Followers of the run listening on its schema's events channel are told when it
    // commits (its payload the run id; NOTIFY is sent at commit, so never for a refused
    // checkpoint), and when the run stops running (`$8` false: ended, waiting, paused)
    // workers are told on the runnable channel that runs depending on it may be runnable,
    // in the same round trip rather than one more statement after it (ADR 0050), by the
    // answer's `told` and `woke` columns (`pg_notify` returns nothing to read). The
    // events come as one chunk, their texts one a line, kept as one row (format 8, ADR
    // 0053: no row nor foreign-key check per event), packed in the client and bound as
    // bytes, which the server keeps as they come (format 12, ADR 0063: no UTF-8 check of
    // a text parameter, no compression in TOAST). The delta of a checkpoint without a
    // snapshot is kept in the same row (format 13, ADR 0079: no step row).
    checkpoint: postgres_checkpoint(false),
    checkpoint_snapshot: postgres_checkpoint(true),
    now_ms: POSTGRES_NOW,
    int_param: "::BIGINT",
    documents_lock: Some(DOCUMENTS_LOCK),
    begin_create: concat!(
        "BEGIN; SELECT pg_advisory_xact_lock_shared(",
        documents_lock_key!(),
        ")"
    ),
    // The document (once per digest), the run row and its first snapshot; the row's
    // foreign key to its document is checked at the statement's end, when the document
    // the same statement inserted is there. Workers are told when it commits.
    insert_run: insert_run(POSTGRES_NOW, "::BIGINT"),
    create_run: Some(format!(
        "WITH doc AS (INSERT INTO documents (digest, document) VALUES ($4, $19) \
           ON CONFLICT (digest) DO NOTHING), \
         run AS ({}), \
         sn AS (INSERT INTO snapshots (run_id, seq, run_state) SELECT id, seq, $20::TEXT \
           FROM run) \
         SELECT run.*, pg_notify({}, '') AS woke FROM run",
        insert_run(POSTGRES_NOW, "::BIGINT"),
        runnable_channel!()
    )),
    notify_runnable: Some(concat!("SELECT pg_notify(", runnable_channel!(), ", '')")),
    // Packed in the client, a `BYTEA` column of its own stored as it comes (ADR 0063).
    packed_column: "packed",
    claim_lock: " FOR UPDATE SKIP LOCKED",
    greatest: "GREATEST",
    name_lock: Some("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"),
    begin_write: "BEGIN",
    begin_read: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
});
