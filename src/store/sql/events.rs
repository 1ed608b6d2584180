//! A run's events (docs/spec/events.md): written in the transaction of the checkpoint
//! that made them, read back in `seq` order.

use super::Store;
use crate::runtime::{EventStamp, RunEvent, RunId, RunState, write_transition_events};
use crate::store::StoreError;
use crate::store::db::{Backend, Exec, sql};
use crate::store::packed::ChunkValue;
use crate::store::rows::{Cols, to_i64, to_u64};

/// Writes the events of run `run`'s transition from trace index `trace_from`, made by
/// checkpoint `seq` and numbered from `stamp`, on `on` as one chunk, packed, into column
/// `column` (`Dialect::packed_column`).
pub(super) async fn write_events<E: Exec>(
    on: &mut E,
    (run, trace_from): (&RunState, usize),
    (seq, column): (u64, &str),
    stamp: EventStamp,
) -> Result<(), StoreError> {
    let id = run.run_id;
    let chunk = transition_chunk(run, trace_from, seq, stamp)
        .map_err(|reason| StoreError::CannotContinue { run_id: id, reason })?;
    let Some((first, last)) = chunk.seqs else {
        return Ok(());
    };
    sql(&format!(
        "INSERT INTO event_chunks (run_id, first_seq, last_seq, seq, {column}) \
         VALUES ($1, $2, $3, $4, $5)"
    ))
    .bind(id.to_string())
    .bind(to_i64(first))
    .bind(to_i64(last))
    .bind(to_i64(seq))
    .bind(&ChunkValue::pack(&chunk.texts))
    .execute(on)
    .await
    .map_err(StoreError::db("writing events", Some(id)))?;
    Ok(())
}

/// The events of one checkpoint as one chunk (format 8, ADR 0053): their JSON texts one
/// after the other, each ended by a line break but the last (a compact JSON text holds
/// none). The database keeps the chunk as it is, one row for the checkpoint's events;
/// readers cut out the events they need ([`cut_chunk`]).
pub(super) struct Chunk {
    /// The texts (UTF-8: written from `&str` pieces only; a reader checks them,
    /// `ChunkValue::texts`).
    pub(super) texts: Vec<u8>,
    /// The `seq` of the first and the last event (`None` when there is none).
    pub(super) seqs: Option<(u64, u64)>,
}

/// The events `transition_events(run, trace_from, Some(seq), stamp)` makes, as one
/// [`Chunk`]: written straight from the run (`write_transition_events`, ADR 0056), no
/// event made.
///
/// Refused (naming the size and the events) when the texts pass [`MAX_EVENT_BYTES`],
/// over what either database keeps in one value.
pub(super) fn transition_chunk(
    run: &RunState,
    trace_from: usize,
    seq: u64,
    stamp: EventStamp,
) -> Result<Chunk, String> {
    let mut texts = Vec::new();
    let seqs = write_transition_events(run, trace_from, Some(seq), stamp, &mut texts);
    if texts.len() > MAX_EVENT_BYTES {
        let (first, last) = seqs.unwrap_or_default();
        return Err(format!(
            "its events weigh over {MAX_EVENT_BYTES} bytes (events {first} to {last}), more \
             than the store keeps in one checkpoint"
        ));
    }
    // Written from UTF-8 text only, and packed as bytes: every reader checks the texts it
    // unpacks (`ChunkValue::texts`), so a linear pass here would only check them twice.
    debug_assert!(std::str::from_utf8(&texts).is_ok(), "event texts are UTF-8");
    Ok(Chunk { texts, seqs })
}

/// The events of chunk `texts` (events `first` on, one JSON text a line) after `after`:
/// each event's `seq` and text. `None` when the chunk does not hold as many lines as
/// `last` says.
pub(super) fn cut_chunk(
    texts: &str,
    first: u64,
    last: u64,
    after: u64,
) -> Option<Vec<(u64, &str)>> {
    let lines = texts.split('\n');
    let mut cut = Vec::new();
    let mut seq = first;
    for line in lines {
        if seq > last {
            return None;
        }
        if seq > after {
            cut.push((seq, line));
        }
        seq += 1;
    }
    (seq == last + 1).then_some(cut)
}

/// How an error names checkpoint `seq`'s event chunk.
pub(super) fn chunk_name(seq: u64) -> String {
    format!("the events of checkpoint {seq}")
}

/// The most bytes a checkpoint's event texts weigh together: 1 GB, SQLite's and
/// PostgreSQL's limit for one value.
pub(super) const MAX_EVENT_BYTES: usize = 1 << 30;

/// The `seq` of run `key`'s last kept event (0 before any), read on `on`.
pub(super) async fn last_seq_on<E: Exec>(on: &mut E, key: &str) -> Result<u64, sqlx::Error>
where
    E::Row: Cols,
{
    // Chunks follow each other: the last by `first_seq` (the key) ends the run's events.
    let row = sql(
        "SELECT COALESCE((SELECT last_seq FROM event_chunks WHERE run_id = $1 \
         ORDER BY first_seq DESC LIMIT 1), 0) AS last",
    )
    .bind(key)
    .fetch_one(on)
    .await?;
    Ok(to_u64(row.int("last")?))
}

/// The chunks of run `$1` that hold events after `$2`: from the one holding event `$2` + 1
/// (found through the key, not by reading every chunk of the run) on.
const CHUNKS_AFTER: &str = "FROM event_chunks WHERE run_id = $1 AND last_seq > $2 \
     AND first_seq >= COALESCE((SELECT MAX(first_seq) FROM event_chunks \
       WHERE run_id = $1 AND first_seq <= $2 + 1), 0)";

impl<B: Backend> Store<B> {
    /// Run `id`'s kept events after `after`, at most `limit`, in `seq` order: cut out of
    /// the chunks that hold them (their bounds read first, then only the chunks needed).
    pub(super) async fn read_events(
        &self,
        id: RunId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RunEvent>, StoreError> {
        let db = StoreError::db("events", Some(id));
        if limit == 0 {
            return Ok(Vec::new());
        }
        let key = id.to_string();
        let mut c = self.db.read().await?;
        // Each chunk holds at least one event after `after`: `limit` chunks are enough.
        let bounds = sql(&format!(
            "SELECT first_seq, last_seq {CHUNKS_AFTER} ORDER BY first_seq LIMIT $3"
        ))
        .bind(&key)
        .bind(to_i64(after))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut c)
        .await
        .map_err(&db)?;
        let mut count = 0u64;
        let mut upto = None;
        for row in &bounds {
            let first = to_u64(row.int("first_seq").map_err(&db)?);
            let last = to_u64(row.int("last_seq").map_err(&db)?);
            count += last - first.max(after + 1) + 1;
            upto = Some(first);
            if count >= limit as u64 {
                break;
            }
        }
        let Some(upto) = upto else {
            return Ok(Vec::new());
        };
        let rows = sql(&format!(
            "SELECT first_seq, last_seq, events, {} AS packed {CHUNKS_AFTER} \
             AND first_seq <= $3 ORDER BY first_seq",
            self.dialect.packed_read()
        ))
        .bind(&key)
        .bind(to_i64(after))
        .bind(to_i64(upto))
        .fetch_all(&mut c)
        .await
        .map_err(&db)?;
        drop(c);
        let mut events = Vec::with_capacity(limit.min(count as usize));
        for row in &rows {
            let first = to_u64(row.int("first_seq").map_err(&db)?);
            let last = to_u64(row.int("last_seq").map_err(&db)?);
            let texts = row
                .chunk("events", "packed")
                .map_err(&db)?
                .texts(MAX_EVENT_BYTES)
                .map_err(|reason| StoreError::Corrupt {
                    run_id: id,
                    what: format!("events {first} to {last}"),
                    reason,
                })?;
            let cut = cut_chunk(&texts, first, last, after).ok_or_else(|| StoreError::Corrupt {
                run_id: id,
                what: format!("events {first} to {last}"),
                reason: "the chunk does not hold one event a line".into(),
            })?;
            for (seq, text) in cut {
                if events.len() == limit {
                    return Ok(events);
                }
                let event = serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
                    run_id: id,
                    what: format!("event {seq}"),
                    reason: e.to_string(),
                })?;
                events.push(event);
            }
        }
        Ok(events)
    }

    /// The `seq` of run `id`'s last kept event (0 before any).
    pub(super) async fn read_last_event_seq(&self, id: RunId) -> Result<u64, StoreError> {
        last_seq_on(&mut self.db.read().await?, &id.to_string())
            .await
            .map_err(StoreError::db("events", Some(id)))
    }
}
