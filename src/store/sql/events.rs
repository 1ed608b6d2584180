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

/// `events` (numbered on by one) as the JSON array of their texts a one-statement
/// checkpoint binds (format 6: the store keeps each string as it is, numbering them from
/// the first event's `seq`), written in one pass.
pub(super) fn events_json(events: &[RunEvent]) -> String {
    debug_assert!(
        events.windows(2).all(|w| w[1].seq == w[0].seq + 1),
        "a checkpoint's events are numbered on by one"
    );
    let mut out = Vec::with_capacity(events.len() * 512);
    out.push(b'[');
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &e.to_json_string()).expect("a string is plain data");
    }
    out.push(b']');
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

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
