//! Loading a run: its row, document, latest snapshot and the deltas after it.

use super::*;

impl SqliteStore {
    /// Loads run `id` as of its checkpoint `upto` (its last when `None`).
    pub(super) async fn load_upto(
        &self,
        id: RunId,
        upto: Option<u64>,
    ) -> Result<StoredRun, StoreError> {
        let now = now_ms();
        let db = StoreError::db("load", Some(id));
        let key = id.to_string();
        let corrupt = |what: String, reason: String| StoreError::Corrupt {
            run_id: id,
            what,
            reason,
        };
        // One read transaction: the row, snapshot and deltas of one moment.
        let mut tx = self.pool.begin().await.map_err(&db)?;
        let row = sqlx::query(&format!(
            "SELECT {INFO}, format, workflow_file, base_dir, snapshot_seq FROM runs WHERE id = ?1"
        ))
        .bind(&key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(&db)?
        .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        let info = info_from_row(&row, now)?;
        let at = upto.map_or(info.seq, |u| u.min(info.seq));
        let format: i64 = row.try_get("format").map_err(&db)?;
        let workflow_file: Option<String> = row.try_get("workflow_file").map_err(&db)?;
        let base_dir: Option<String> = row.try_get("base_dir").map_err(&db)?;
        let info_snapshot_seq = to_u64(row.try_get("snapshot_seq").map_err(&db)?);
        let doc_row = sqlx::query("SELECT document FROM documents WHERE digest = ?1")
            .bind(&info.digest)
            .fetch_optional(&mut *tx)
            .await
            .map_err(&db)?
            .ok_or_else(|| corrupt("document".into(), format!("{} is missing", info.digest)))?;
        let doc_text: String = doc_row.try_get("document").map_err(&db)?;
        let mut document: WorkflowDocument = serde_json::from_str(&doc_text)
            .map_err(|e| corrupt("document".into(), e.to_string()))?;
        document.fill_ids();
        let snap = sqlx::query(
            "SELECT seq, run_state FROM snapshots WHERE run_id = ?1 AND seq <= ?2 \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(&key)
        .bind(to_i64(at))
        .fetch_optional(&mut *tx)
        .await
        .map_err(&db)?
        .ok_or_else(|| StoreError::Compacted {
            run_id: id,
            seq: at,
            snapshot_seq: info_snapshot_seq,
        })?;
        let snap_seq = to_u64(snap.try_get("seq").map_err(&db)?);
        let snap_text: String = snap.try_get("run_state").map_err(&db)?;
        let mut run: RunState = serde_json::from_str(&snap_text)
            .map_err(|e| corrupt(format!("snapshot {snap_seq}"), e.to_string()))?;
        let rows = sqlx::query(
            "SELECT seq, delta FROM steps WHERE run_id = ?1 AND seq > ?2 AND seq <= ?3 \
             ORDER BY seq",
        )
        .bind(&key)
        .bind(to_i64(snap_seq))
        .bind(to_i64(at))
        .fetch_all(&mut *tx)
        .await
        .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
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
