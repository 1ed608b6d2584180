//! Reading and writing rows: the run row's columns, snapshots, step deltas, and the
//! cancellation transition.

use super::*;

/// The columns of a [`RunInfo`], in [`info_from_row`]'s order.
pub(super) const INFO: &str = "id, name, workflow, digest, status, termination_reason, steps, seq, \
                    created_ms, updated_ms, expires_ms, owner, lease_expires_ms, \
                    attempt_key, attempt, cancel_requested";

/// The store format this pactgraph writes: the number of its migrations, also kept in
/// `PRAGMA user_version`. A database with a higher one is refused, untouched.
pub const STORE_FORMAT: i64 = 4;

pub(super) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Writes the run's snapshot at `seq` and drops the older ones (a run keeps one) and the
/// step rows up to it (the snapshot covers them), in the caller's transaction.
pub(super) async fn snapshot_at(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
    seq: u64,
    state: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO snapshots (run_id, seq, run_state) VALUES (?1, ?2, ?3)")
        .bind(key)
        .bind(to_i64(seq))
        .bind(state)
        .execute(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM snapshots WHERE run_id = ?1 AND seq < ?2")
        .bind(key)
        .bind(to_i64(seq))
        .execute(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM steps WHERE run_id = ?1 AND seq <= ?2")
        .bind(key)
        .bind(to_i64(seq))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub(super) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Reads a row of [`INFO`] columns, deriving `interrupted` (running, no current lease)
/// and `running` (queued, claimed) at `now`.
pub(super) fn info_from_row(row: &SqliteRow, now: u64) -> Result<RunInfo, StoreError> {
    let text: String = row
        .try_get("id")
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
    let status_text: String = row.try_get("status").map_err(&db)?;
    let stored = StoredStatus::parse(&status_text)
        .ok_or_else(|| corrupt("status", format!("`{status_text}` is not a status")))?;
    let reason: Option<String> = row.try_get("termination_reason").map_err(&db)?;
    let termination_reason = match reason {
        None => None,
        Some(r) => Some(
            serde_json::from_value::<TerminationReason>(serde_json::Value::String(r.clone()))
                .map_err(|_| corrupt("termination_reason", format!("`{r}` is not a reason")))?,
        ),
    };
    let owner: Option<String> = row.try_get("owner").map_err(&db)?;
    let lease: Option<i64> = row.try_get("lease_expires_ms").map_err(&db)?;
    let lease_expires_ms = lease.map(to_u64);
    let leased = owner.as_deref().is_some_and(|o| !owner_gone(o))
        && lease_expires_ms.is_some_and(|l| l > now);
    let status = match stored {
        StoredStatus::Running if !leased => StoredStatus::Interrupted,
        StoredStatus::Queued if leased => StoredStatus::Running,
        s => s,
    };
    Ok(RunInfo {
        id,
        name: row.try_get("name").map_err(&db)?,
        workflow: row.try_get("workflow").map_err(&db)?,
        digest: row.try_get("digest").map_err(&db)?,
        status,
        termination_reason,
        steps: u32::try_from(row.try_get::<i64, _>("steps").map_err(&db)?).unwrap_or(u32::MAX),
        seq: to_u64(row.try_get("seq").map_err(&db)?),
        created_ms: to_u64(row.try_get("created_ms").map_err(&db)?),
        updated_ms: to_u64(row.try_get("updated_ms").map_err(&db)?),
        expires_ms: row
            .try_get::<Option<i64>, _>("expires_ms")
            .map_err(&db)?
            .map(to_u64),
        owner,
        lease_expires_ms,
        attempt_key: row.try_get("attempt_key").map_err(&db)?,
        attempt: u32::try_from(row.try_get::<i64, _>("attempt").map_err(&db)?).unwrap_or(1),
        cancel_requested: row.try_get::<i64, _>("cancel_requested").map_err(&db)? != 0,
    })
}

/// The stored status of a run state: `queued` for a running run no step has touched.
pub(super) fn stored_status(run: &RunState, seq: u64) -> StoredStatus {
    match StoredStatus::of(run.status()) {
        StoredStatus::Running if seq == 0 => StoredStatus::Queued,
        s => s,
    }
}

/// True when a database error is a uniqueness violation (a primary key taken).
pub(super) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// A step row: its checkpoint number, delta and the delta's size in bytes of JSON.
pub(super) fn delta_from_row(
    id: RunId,
    row: &SqliteRow,
) -> Result<(u64, StepDelta, usize), StoreError> {
    let db = StoreError::db("reading steps", Some(id));
    let seq = to_u64(row.try_get("seq").map_err(&db)?);
    let text: String = row.try_get("delta").map_err(&db)?;
    let delta = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        run_id: id,
        what: format!("step {seq}"),
        reason: e.to_string(),
    })?;
    Ok((seq, delta, text.len()))
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
                .items
                .iter()
                .rev()
                .find_map(|i| i.supervisor.clone())
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
    let open: Vec<_> = run.stack.drain(..).map(Into::into).collect();
    run.uncommitted.extend(open);
    if let Some(serde_json::Value::Object(system)) = run.state.get_mut(SYSTEM_SLICE)
        && system.contains_key("call_stack")
    {
        system.insert("call_stack".into(), serde_json::Value::Array(Vec::new()));
    }
    Ok(())
}
