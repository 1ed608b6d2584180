//! Loading a run: its row, document, latest snapshot and the deltas after it, in one
//! statement (one moment of the database, and one round trip to it).

use super::Store;
use super::events::{MAX_EVENT_BYTES, chunk_name};
use crate::contracts::WorkflowDocument;
use crate::runtime::{RunId, RunRecord, RunState};
use crate::store::db::{Backend, sql};
use crate::store::rows::{Cols, INFO, info_from_row, replay, to_i64, to_u64};
use crate::store::{StoreError, StoredRun};

/// The parts of a load, in the order its statement returns them (column `part`).
const ROW: i64 = 0;
/// See [`ROW`].
const DOCUMENT: i64 = 1;
/// See [`ROW`].
const SNAPSHOT: i64 = 2;
/// See [`ROW`].
const STEP: i64 = 3;
/// See [`ROW`]: the event chunks of the step rows' checkpoints (their trace items).
const CHUNK: i64 = 4;

/// The load statement (`$1` the run's id, `$2` the checkpoint to load up to, `NULL` for
/// its last; `int` the dialect's integer cast, `packed` what it reads a chunk's packed
/// column as, `Dialect::packed_read`): the run's row first (its [`INFO`]
/// columns, `format`, `workflow_file`, `base_dir`, `snapshot_seq` and `at`, the
/// checkpoint loaded), then the document, the latest snapshot at or before `at`, the
/// step rows after it up to `at` (those of the `steps` table and the deltas kept in event
/// chunks, format 13), in order, and the event chunks of those checkpoints
/// (their trace items, format 8), in order. The rows after the first carry their number
/// in `seq` and their text in `delta` (the document, the snapshot's run state, a step's
/// delta, a chunk's texts unless packed), a chunk's packed texts in `packed`, every
/// other column `NULL`. One statement reads one snapshot of the database
/// on both backends, as the read transaction of four statements it replaces did.
fn load_sql(int: &str, packed: &str) -> String {
    // The `packed` column of the rows that are not chunks: typed, so that PostgreSQL
    // matches it with the chunks' `BYTEA` (an untyped `NULL` resolves as text).
    const NO_PACKED: &str = "CAST(NULL AS BYTEA)";
    // A row after the first: `seq` in its place among the `INFO` columns (a compound
    // select matches columns by position), every other one `NULL`.
    let body = |part: i64, seq: &str, (text, packed): (&str, &str), from: &str| {
        let info: Vec<String> = INFO
            .split(',')
            .map(str::trim)
            .map(|c| match c {
                "seq" => format!("{seq} AS seq"),
                _ => format!("NULL AS {c}"),
            })
            .collect();
        format!(
            " UNION ALL SELECT CAST({part} AS BIGINT) AS part, {}, NULL AS format, \
             NULL AS workflow_file, NULL AS base_dir, NULL AS snapshot_seq, NULL AS at, \
             {text} AS delta, {packed} AS packed FROM {from}",
            info.join(", ")
        )
    };
    format!(
        "WITH r AS (SELECT {INFO}, format, workflow_file, base_dir, snapshot_seq, \
           CASE WHEN $2{int} IS NULL OR $2{int} > seq THEN seq ELSE $2{int} END AS at \
           FROM runs WHERE id = $1), \
         s AS (SELECT seq, run_state FROM snapshots \
           WHERE run_id = $1 AND seq <= (SELECT at FROM r) ORDER BY seq DESC LIMIT 1) \
         SELECT CAST({ROW} AS BIGINT) AS part, {INFO}, format, workflow_file, base_dir, \
           snapshot_seq, at, NULL AS delta, {NO_PACKED} AS packed FROM r{}{}{}{}{} \
         ORDER BY part, seq",
        body(
            DOCUMENT,
            "NULL",
            ("d.document", NO_PACKED),
            "documents d WHERE d.digest = (SELECT digest FROM r)"
        ),
        body(SNAPSHOT, "s.seq", ("s.run_state", NO_PACKED), "s"),
        body(
            STEP,
            "st.seq",
            ("st.delta", NO_PACKED),
            "steps st WHERE st.run_id = $1 AND st.seq > (SELECT seq FROM s) \
             AND st.seq <= (SELECT at FROM r)"
        ),
        // The deltas kept in their chunks (format 13, ADR 0079): step rows too, ordered
        // among the others by `seq` (a checkpoint has one or the other).
        body(
            STEP,
            "ec.seq",
            ("ec.delta", NO_PACKED),
            "event_chunks ec WHERE ec.run_id = $1 AND ec.delta IS NOT NULL \
             AND ec.seq > (SELECT seq FROM s) AND ec.seq <= (SELECT at FROM r)"
        ),
        body(
            CHUNK,
            "ec.seq",
            ("ec.events", packed),
            "event_chunks ec WHERE ec.run_id = $1 AND ec.seq > (SELECT seq FROM s) \
             AND ec.seq <= (SELECT at FROM r)"
        ),
    )
}

impl<B: Backend> Store<B> {
    /// Loads run `id` as of its checkpoint `upto` (its last when `None`).
    pub(super) async fn load_upto(
        &self,
        id: RunId,
        upto: Option<u64>,
    ) -> Result<StoredRun, StoreError> {
        let now = self.now();
        let db = StoreError::db("load", Some(id));
        let key = id.to_string();
        let corrupt = |what: String, reason: String| StoreError::Corrupt {
            run_id: id,
            what,
            reason,
        };
        let rows = sql(&load_sql(
            self.dialect.int_param,
            self.dialect.packed_read(),
        ))
        .bind(&key)
        .bind(upto.map(to_i64))
        .fetch_all(&mut self.db.read().await?)
        .await
        .map_err(&db)?;
        let part = |i: usize| -> Result<Option<i64>, StoreError> {
            rows.get(i).map(|r| r.int("part")).transpose().map_err(&db)
        };
        let Some(row) = rows.first().filter(|_| matches!(part(0), Ok(Some(ROW)))) else {
            return Err(StoreError::NotFound { key });
        };
        let info = info_from_row(row, now)?;
        let at = to_u64(row.int("at").map_err(&db)?);
        let format = row.int("format").map_err(&db)?;
        let workflow_file = row.opt_text("workflow_file").map_err(&db)?;
        let base_dir = row.opt_text("base_dir").map_err(&db)?;
        let info_snapshot_seq = to_u64(row.int("snapshot_seq").map_err(&db)?);
        if part(1)? != Some(DOCUMENT) {
            return Err(corrupt(
                "document".into(),
                format!("{} is missing", info.digest),
            ));
        }
        let doc_text = rows[1].text("delta").map_err(&db)?;
        let mut document: WorkflowDocument = serde_json::from_str(&doc_text)
            .map_err(|e| corrupt("document".into(), e.to_string()))?;
        document.fill_ids();
        if part(2)? != Some(SNAPSHOT) {
            return Err(StoreError::Compacted {
                run_id: id,
                seq: at,
                snapshot_seq: info_snapshot_seq,
            });
        }
        let snap = &rows[2];
        let snap_seq = to_u64(snap.int("seq").map_err(&db)?);
        let snap_text = snap.text("delta").map_err(&db)?;
        let mut run: RunState = serde_json::from_str(&snap_text)
            .map_err(|e| corrupt(format!("snapshot {snap_seq}"), e.to_string()))?;
        // The step rows, then the event chunks of their checkpoints (the trace items).
        let rest = &rows[3..];
        let steps = rest.partition_point(|r| matches!(r.int("part"), Ok(STEP)));
        let chunks = rest[steps..]
            .iter()
            .map(|r| {
                let seq = to_u64(r.int("seq").map_err(&db)?);
                let texts = r.chunk("delta", "packed").map_err(&db)?;
                let texts = texts.texts(MAX_EVENT_BYTES);
                Ok((
                    seq,
                    texts.map_err(|reason| corrupt(chunk_name(seq), reason))?,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let replay = replay(id, &mut run, &rest[..steps], &chunks, (snap_seq, at))?;
        if upto.is_none() && run.is_running() {
            self.weights.loaded(id, snap_text.len(), replay);
        }
        let record = RunRecord {
            format: u32::try_from(format).unwrap_or(0),
            run_id: id,
            seq: at,
            workflow_file,
            base_dir,
            document,
            digest: info.digest.clone(),
            run,
        };
        Ok(StoredRun { info, record })
    }
}
