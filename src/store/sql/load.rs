//! Loading a run: its row, document, latest snapshot and the deltas after it, in one read
//! transaction (one moment of the database).

use super::Store;
use crate::contracts::WorkflowDocument;
use crate::runtime::{RunId, RunRecord, RunState};
use crate::store::db::{Backend, Begin, Conn, Tx, sql};
use crate::store::rows::{Cols, INFO, info_from_row, replay, to_i64, to_u64};
use crate::store::{StoreError, StoredRun};

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
        // One read transaction (PostgreSQL: REPEATABLE READ, one snapshot of the database
        // for all its statements): the row, snapshot and deltas of one moment.
        let mut c = self.db.read().await?;
        let mut tx = c.begin(Begin::Read).await.map_err(&db)?;
        let row = sql(&format!(
            "SELECT {INFO}, format, workflow_file, base_dir, snapshot_seq FROM runs WHERE id = $1"
        ))
        .bind(&key)
        .fetch_optional(&mut tx)
        .await
        .map_err(&db)?
        .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        let info = info_from_row(&row, now)?;
        let at = upto.map_or(info.seq, |u| u.min(info.seq));
        let format = row.int("format").map_err(&db)?;
        let workflow_file = row.opt_text("workflow_file").map_err(&db)?;
        let base_dir = row.opt_text("base_dir").map_err(&db)?;
        let info_snapshot_seq = to_u64(row.int("snapshot_seq").map_err(&db)?);
        let doc_row = sql("SELECT document FROM documents WHERE digest = $1")
            .bind(&info.digest)
            .fetch_optional(&mut tx)
            .await
            .map_err(&db)?
            .ok_or_else(|| corrupt("document".into(), format!("{} is missing", info.digest)))?;
        let doc_text = doc_row.text("document").map_err(&db)?;
        let mut document: WorkflowDocument = serde_json::from_str(&doc_text)
            .map_err(|e| corrupt("document".into(), e.to_string()))?;
        document.fill_ids();
        let snap = sql(
            "SELECT seq, run_state FROM snapshots WHERE run_id = $1 AND seq <= $2 \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(&key)
        .bind(to_i64(at))
        .fetch_optional(&mut tx)
        .await
        .map_err(&db)?
        .ok_or_else(|| StoreError::Compacted {
            run_id: id,
            seq: at,
            snapshot_seq: info_snapshot_seq,
        })?;
        let snap_seq = to_u64(snap.int("seq").map_err(&db)?);
        let snap_text = snap.text("run_state").map_err(&db)?;
        let mut run: RunState = serde_json::from_str(&snap_text)
            .map_err(|e| corrupt(format!("snapshot {snap_seq}"), e.to_string()))?;
        let rows = sql(
            "SELECT seq, delta FROM steps WHERE run_id = $1 AND seq > $2 AND seq <= $3 \
             ORDER BY seq",
        )
        .bind(&key)
        .bind(to_i64(snap_seq))
        .bind(to_i64(at))
        .fetch_all(&mut tx)
        .await
        .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        drop(c);
        let replay = replay(id, &mut run, &rows, snap_seq, at)?;
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
