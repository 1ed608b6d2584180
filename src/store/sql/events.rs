//! A run's events (docs/spec/events.md): written in the transaction of the checkpoint
//! that made them, read back in `seq` order.

use super::Store;
use crate::runtime::{RunEvent, RunId};
use crate::store::StoreError;
use crate::store::db::{Backend, Exec, sql};
use crate::store::rows::{Cols, to_i64, to_u64};

/// Rows one insert statement writes at most (3 binds each: well under SQLite's limit).
const ROWS_PER_INSERT: usize = 200;

/// Writes `events` (all of run `key`) on `on`, one statement per 200.
pub(super) async fn write_events<E: Exec>(
    on: &mut E,
    key: &str,
    events: &[RunEvent],
) -> Result<(), sqlx::Error> {
    for chunk in events.chunks(ROWS_PER_INSERT) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| format!("(${}, ${}, ${})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
            .collect();
        let statement = format!(
            "INSERT INTO events (run_id, seq, event) VALUES {}",
            values.join(", ")
        );
        let mut q = sql(&statement);
        for e in chunk {
            q = q.bind(key).bind(to_i64(e.seq)).bind(e.to_json_string());
        }
        q.execute(on).await?;
    }
    Ok(())
}

/// `events` (numbered on by one) as a one-statement checkpoint binds them (format 7,
/// ADR 0049): their JSON texts one after the other in one blob, and the JSON array of
/// where each is in it (its byte offset times 2^32 plus its length: one integer an
/// event, which the database splits with a shift and a mask). The database cuts each
/// event out of the blob and keeps it as it is: no text is escaped here or unescaped by
/// the database (format 6 bound a JSON array of strings, escaped and then unescaped by
/// `json_each`).
///
/// Refused (naming the size) when the texts pass [`MAX_EVENT_BYTES`], over what either
/// database keeps in one value.
pub(super) fn events_blob(events: &[RunEvent]) -> Result<(Vec<u8>, String), String> {
    debug_assert!(
        events.windows(2).all(|w| w[1].seq == w[0].seq + 1),
        "a checkpoint's events are numbered on by one"
    );
    let mut texts = Vec::with_capacity(events.len() * 512);
    let mut spans = String::with_capacity(events.len() * 16 + 2);
    spans.push('[');
    for (i, e) in events.iter().enumerate() {
        let start = texts.len();
        e.write_json(&mut texts);
        if texts.len() > MAX_EVENT_BYTES {
            return Err(format!(
                "its events weigh over {MAX_EVENT_BYTES} bytes (event {}), more than the \
                 store keeps in one checkpoint",
                e.seq
            ));
        }
        if i > 0 {
            spans.push(',');
        }
        // Both under 2^30: the span is exact.
        spans.push_str(&(((start as u64) << 32) | (texts.len() - start) as u64).to_string());
    }
    spans.push(']');
    Ok((texts, spans))
}

/// The most bytes a checkpoint's event texts weigh together: 1 GB, SQLite's and
/// PostgreSQL's limit for one value.
pub(super) const MAX_EVENT_BYTES: usize = 1 << 30;

/// The `seq` of run `key`'s last kept event (0 before any), read on `on`.
pub(super) async fn last_seq_on<E: Exec>(on: &mut E, key: &str) -> Result<u64, sqlx::Error>
where
    E::Row: Cols,
{
    let row = sql("SELECT COALESCE(MAX(seq), 0) AS last FROM events WHERE run_id = $1")
        .bind(key)
        .fetch_one(on)
        .await?;
    Ok(to_u64(row.int("last")?))
}

impl<B: Backend> Store<B> {
    /// Run `id`'s kept events after `after`, at most `limit`, in `seq` order.
    pub(super) async fn read_events(
        &self,
        id: RunId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RunEvent>, StoreError> {
        let db = StoreError::db("events", Some(id));
        let rows = sql(
            "SELECT seq, event FROM events WHERE run_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3",
        )
        .bind(id.to_string())
        .bind(to_i64(after))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut self.db.read().await?)
        .await
        .map_err(&db)?;
        rows.iter()
            .map(|row| {
                let text = row.text("event").map_err(&db)?;
                serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                    run_id: id,
                    what: format!("event {}", row.int("seq").unwrap_or(0)),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// The `seq` of run `id`'s last kept event (0 before any).
    pub(super) async fn read_last_event_seq(&self, id: RunId) -> Result<u64, StoreError> {
        last_seq_on(&mut self.db.read().await?, &id.to_string())
            .await
            .map_err(StoreError::db("events", Some(id)))
    }
}
