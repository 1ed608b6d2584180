//! The one statement that writes a checkpoint to SQLite, and SQLite's side of deciding
//! when it carries a snapshot (`crate::store::weights`).

use std::sync::LazyLock;

use super::*;

impl SqliteStore {
    /// Whether checkpoint `seq` of run `id`, leaving `run` and a delta of `delta_bytes`,
    /// carries a snapshot.
    pub(super) fn wants_snapshot(
        &self,
        id: RunId,
        seq: u64,
        run: &RunState,
        delta_bytes: usize,
    ) -> bool {
        self.weights
            .wants_snapshot(self.snapshot_every, id, seq, run, delta_bytes)
    }

    /// Records a checkpoint of run `id` (see [`Weights::weigh`]).
    pub(super) fn weigh(
        &self,
        id: RunId,
        running: bool,
        delta_bytes: usize,
        snapshot: Option<usize>,
    ) {
        self.weights.weigh(id, running, delta_bytes, snapshot);
    }

    /// Forgets run `id`'s weights (it was released).
    pub(super) fn forget(&self, id: RunId) {
        self.weights.forget(id);
    }
}

/// The checkpoint statement: one insert into the `checkpoint_in` view (migration 0003),
/// returning the run row as the trigger left it.
pub(super) fn checkpoint_sql() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        let returning: Vec<String> = INFO
            .split(',')
            .map(str::trim)
            .map(|c| format!("(SELECT {c} FROM runs WHERE id = checkpoint_in.run_id) AS {c}"))
            .collect();
        format!(
            "INSERT INTO checkpoint_in (run_id, seq, steps, status, termination_reason, \
             now_ms, owner, running, next_key, next_attempt, digest, document, delta, \
             snapshot) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) \
             RETURNING {}",
            returning.join(", ")
        )
    });
    &SQL
}

/// Whether `e` is the `checkpoint_in` trigger refusing a checkpoint (the fence failed).
pub(super) fn is_refusal(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.message().contains("pactgraph: checkpoint refused"))
}
