//! SQLite's own row writes: a snapshot written apart from a checkpoint (a cancel).

use super::*;

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
