//! What both stores read and write alike: the run row's columns and how a row of them
//! reads back (through [`Cols`], which SQLite's and PostgreSQL's rows implement), step
//! rows, the status a new run is stored with, and ending a run from outside its steps.

use std::sync::Arc;

use sqlx::Row;

use super::packed::{ChunkValue, pg_chunk, sqlite_chunk};
use super::trace_once::put_back_trace;
use super::{RunInfo, StepDelta, StoreError, StoredStatus, owner_gone};
use crate::contracts::SYSTEM_SLICE;
use crate::runtime::{RunId, RunState, RunStatus, TerminationReason, TraceItem, TraceKind};

/// Reading a row's columns by name, the same way on both backends: text and 64-bit
/// integers (both stores keep every number as a 64-bit integer).
pub trait Cols {
    /// A `TEXT NOT NULL` column.
    fn text(&self, col: &str) -> Result<String, sqlx::Error>;
    /// A nullable `TEXT` column.
    fn opt_text(&self, col: &str) -> Result<Option<String>, sqlx::Error>;
    /// An integer column.
    fn int(&self, col: &str) -> Result<i64, sqlx::Error>;
    /// A nullable integer column.
    fn opt_int(&self, col: &str) -> Result<Option<i64>, sqlx::Error>;
    /// An event chunk's texts, as the row holds them: text in column `col`, or packed
    /// (SQLite: a `BLOB` value of `col`, format 11; PostgreSQL: column `packed`, the
    /// reader's `Dialect::packed_read`, format 12).
    fn chunk(&self, col: &str, packed: &str) -> Result<ChunkValue, sqlx::Error>;
}

/// `Cols` for a sqlx row type; `$chunk` reads an event chunk.
macro_rules! cols {
    ($row:ty, $chunk:expr) => {
        impl Cols for $row {
            fn text(&self, col: &str) -> Result<String, sqlx::Error> {
                self.try_get(col)
            }
            fn opt_text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
                self.try_get(col)
            }
            fn int(&self, col: &str) -> Result<i64, sqlx::Error> {
                self.try_get(col)
            }
            fn opt_int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
                self.try_get(col)
            }
            fn chunk(&self, col: &str, packed: &str) -> Result<ChunkValue, sqlx::Error> {
                $chunk(self, col, packed)
            }
        }
    };
}
// Chunks packed in the client: SQLite's from format 11 (ADR 0059), PostgreSQL's from 12
// (ADR 0063).
cols!(sqlx::sqlite::SqliteRow, sqlite_chunk);
cols!(sqlx::postgres::PgRow, pg_chunk);

/// [`INFO`] as a literal, for the statements built from literals that end with it.
macro_rules! info_columns {
    () => {
        "id, name, workflow, digest, status, termination_reason, steps, seq, created_ms, \
         updated_ms, expires_ms, owner, lease_expires_ms, attempt_key, attempt, \
         cancel_requested"
    };
}

/// The columns of a [`RunInfo`], in [`info_from_row`]'s order.
pub(crate) const INFO: &str = info_columns!();

/// A create's insert of the run row (binds `$1`-`$18`: id, name, workflow, digest, format,
/// workflow file, base folder, status, termination reason, steps, seq, creation and
/// update times, expiry, attempt key, then the owner it is created claimed by, the lease's
/// length in milliseconds and the time the lease is counted from (all three `NULL` for a
/// run nobody holds; the time `NULL` for the database's clock, `now` on it); attempt 1),
/// answering its [`INFO`].
pub(crate) fn insert_run(now: &str, int_param: &str) -> String {
    format!(
        "INSERT INTO runs (id, name, workflow, digest, format, workflow_file, base_dir, \
         status, termination_reason, steps, seq, snapshot_seq, created_ms, updated_ms, \
         expires_ms, owner, lease_expires_ms, attempt_key, attempt) VALUES ($1, $2, $3, $4, \
         $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, $14, $16, \
         COALESCE($18{int_param}, {now}) + $17{int_param}, $15, 1) RETURNING {INFO}"
    )
}

/// The status a run row of `stored` status shows at `now`: `interrupted` when running
/// without a current lease, `running` when queued and claimed.
fn shown_status(
    stored: StoredStatus,
    owner: Option<&str>,
    lease_expires_ms: Option<u64>,
    now: u64,
) -> StoredStatus {
    let leased = owner.is_some_and(|o| !owner_gone(o)) && lease_expires_ms.is_some_and(|l| l > now);
    match stored {
        StoredStatus::Running if !leased => StoredStatus::Interrupted,
        StoredStatus::Queued if leased => StoredStatus::Running,
        s => s,
    }
}

/// The store format this pactgraph reads and writes (ADR 0084): the version of each
/// backend's one migration (`migrations/sqlite/run_store.sql`,
/// `migrations/postgres/run_store.sql`), also kept in SQLite's `PRAGMA user_version`. A
/// database of any other format is refused, untouched: a newer one (`NewerFormat`), or
/// one of the formats 1 to 13 development builds wrote (`OlderFormat`).
pub const STORE_FORMAT: i64 = 14;

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Reads a row of [`INFO`] columns, deriving `interrupted` (running, no current lease)
/// and `running` (queued, claimed) at `now`.
pub(crate) fn info_from_row(row: &impl Cols, now: u64) -> Result<RunInfo, StoreError> {
    let text: String = row
        .text("id")
        .map_err(StoreError::db("reading a run row", None))?;
    let id: RunId = text
        .parse()
        .map_err(|e: crate::runtime::RunIdError| StoreError::Database {
            operation: "reading a run row",
            run_id: None,
            source: sqlx::Error::Decode(Box::new(e)),
        })?;
    let db = StoreError::db("reading the run row", Some(id));
    let corrupt = |what: &str, reason: String| StoreError::Corrupt {
        run_id: id,
        what: what.to_string(),
        reason,
    };
    let status_text = row.text("status").map_err(&db)?;
    let stored = StoredStatus::parse(&status_text)
        .ok_or_else(|| corrupt("status", format!("`{status_text}` is not a status")))?;
    let reason = row.opt_text("termination_reason").map_err(&db)?;
    let termination_reason = match reason {
        None => None,
        Some(r) => Some(
            serde_json::from_value::<TerminationReason>(serde_json::Value::String(r.clone()))
                .map_err(|_| corrupt("termination_reason", format!("`{r}` is not a reason")))?,
        ),
    };
    let owner = row.opt_text("owner").map_err(&db)?;
    let lease = row.opt_int("lease_expires_ms").map_err(&db)?;
    let lease_expires_ms = lease.map(to_u64);
    let status = shown_status(stored, owner.as_deref(), lease_expires_ms, now);
    Ok(RunInfo {
        id,
        name: row.opt_text("name").map_err(&db)?,
        workflow: row.text("workflow").map_err(&db)?,
        digest: row.text("digest").map_err(&db)?,
        status,
        termination_reason,
        steps: u32::try_from(row.int("steps").map_err(&db)?).unwrap_or(u32::MAX),
        seq: to_u64(row.int("seq").map_err(&db)?),
        created_ms: to_u64(row.int("created_ms").map_err(&db)?),
        updated_ms: to_u64(row.int("updated_ms").map_err(&db)?),
        expires_ms: row.opt_int("expires_ms").map_err(&db)?.map(to_u64),
        owner,
        lease_expires_ms,
        attempt_key: row.opt_text("attempt_key").map_err(&db)?,
        attempt: u32::try_from(row.int("attempt").map_err(&db)?).unwrap_or(1),
        cancel_requested: row.int("cancel_requested").map_err(&db)? != 0,
    })
}

/// The stored status of a run state: `queued` for a running run no step has touched.
pub(crate) fn stored_status(run: &RunState, seq: u64) -> StoredStatus {
    match StoredStatus::of(run.status()) {
        StoredStatus::Running if seq == 0 => StoredStatus::Queued,
        s => s,
    }
}

/// True when a database error is a uniqueness violation (a primary key taken).
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// A step row: its checkpoint number, delta and the delta's size in bytes of JSON.
pub(crate) fn delta_from_row(
    id: RunId,
    row: &impl Cols,
) -> Result<(u64, StepDelta, usize), StoreError> {
    let db = StoreError::db("reading steps", Some(id));
    let seq = to_u64(row.int("seq").map_err(&db)?);
    let text = row.text("delta").map_err(&db)?;
    let delta = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        run_id: id,
        what: format!("step {seq}"),
        reason: e.to_string(),
    })?;
    Ok((seq, delta, text.len()))
}

/// Applies step rows `rows` (checkpoints `snap_seq + 1 ..= at`, in order) to `run`, the
/// state of snapshot `snap_seq`, each delta's trace items put back from its checkpoint's
/// events (`chunks`: each checkpoint's number and event texts, in order; format 8, ADR
/// 0053); returns the bytes of deltas replayed. A missing or unreadable step is
/// `Corrupt`, naming it.
pub(crate) fn replay(
    id: RunId,
    run: &mut RunState,
    rows: &[impl Cols],
    chunks: &[(u64, String)],
    (snap_seq, at): (u64, u64),
) -> Result<usize, StoreError> {
    let corrupt = |what: String, reason: String| StoreError::Corrupt {
        run_id: id,
        what,
        reason,
    };
    let mut expected = snap_seq + 1;
    let mut bytes = 0;
    for row in rows {
        let (seq, mut delta, size) = delta_from_row(id, row)?;
        bytes += size;
        put_back_trace(&mut delta, chunk_of(chunks, seq))
            .map_err(|e| corrupt(format!("step {seq}"), e))?;
        if seq != expected {
            return Err(corrupt(
                format!("step {expected}"),
                format!("is missing (the next stored step is {seq})"),
            ));
        }
        delta
            .apply(run)
            .map_err(|e| corrupt(format!("step {seq}"), e))?;
        expected += 1;
    }
    if expected != at + 1 {
        return Err(corrupt(
            format!("step {expected}"),
            format!("is missing (the run is at {at})"),
        ));
    }
    Ok(bytes)
}

/// The event texts checkpoint `seq` kept, in `chunks` (each checkpoint's number and
/// texts, in order).
pub(crate) fn chunk_of(chunks: &[(u64, String)], seq: u64) -> Option<&str> {
    chunks
        .binary_search_by_key(&seq, |(s, _)| *s)
        .ok()
        .map(|i| chunks[i].1.as_str())
}

/// Stops `run` as cancelled: a `guard_stop` trace item, open frames reported as
/// uncommitted, `system.call_stack` emptied.
pub(crate) fn cancel_run(run: &mut RunState, at_ms: u64) -> Result<(), String> {
    end_run(
        run,
        RunStatus::Stopped,
        TerminationReason::Cancelled,
        "the run was cancelled",
        at_ms,
    )
}

/// Ends `run` from outside its steps (a cancel, a dependency that failed or timed out)
/// with `status` and `reason`: a `guard_stop` trace item carrying `message`, open frames
/// reported as uncommitted, `system.call_stack` emptied.
pub(crate) fn end_run(
    run: &mut RunState,
    status: RunStatus,
    reason: TerminationReason,
    message: &str,
    at_ms: u64,
) -> Result<(), String> {
    let supervisor = run
        .pending()
        .map(|p| Arc::clone(p.supervisor()))
        .or_else(|| {
            run.trace
                .iter()
                .rev()
                .find_map(|i| i.supervisor().map(Arc::from))
        });
    let mut item = TraceItem::new(TraceKind::GuardStop, run.steps, run.depth());
    item.supervisor = supervisor;
    item.subgraph = run.stack.last().map(|f| Arc::clone(&f.subgraph_id));
    item.target = Some(status.to_string().into());
    item.reason = Some(message.into());
    item.termination_reason = Some(reason);
    item.at_ms = at_ms;
    run.trace.push(item);
    run.set_control(status, Some(reason), Some(message.to_string()), None, None)?;
    run.forget_decision();
    let open: Vec<_> = run.stack.drain(..).map(Into::into).collect();
    run.uncommitted.extend(open);
    if let Some(serde_json::Value::Object(system)) = run.state.get_mut(SYSTEM_SLICE)
        && system.contains_key("call_stack")
    {
        system.insert("call_stack".into(), serde_json::Value::Array(Vec::new()));
    }
    Ok(())
}
