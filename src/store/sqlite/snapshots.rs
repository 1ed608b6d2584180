//! When a checkpoint carries a snapshot, and the one statement that writes a checkpoint.
//!
//! A snapshot is written when the deltas since the last one weigh a quarter of it (or
//! at a pause, at the end, every [`SqliteOptions::snapshot_every`] checkpoints when set,
//! and at a run's first checkpoint in this process). It replaces the run's previous
//! snapshot and the step rows it covers. So loading replays at most a quarter of the
//! snapshot's bytes in deltas, and the snapshots a run writes over its life weigh about
//! five times its deltas at most: a snapshot that grows with the trace is written at
//! geometrically spaced steps, not every N steps (which costs quadratic time and space).
//!
//! Complexity: O(1) per checkpoint to decide (a hash map entry per run being written).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use super::*;

/// How much a run's latest snapshot and the deltas after it weigh (bytes of JSON).
#[derive(Debug, Clone, Copy)]
struct Weight {
    snapshot: usize,
    replay: usize,
}

/// The weights of the runs this store writes or loaded to write. Losing an entry only
/// brings the next snapshot forward.
#[derive(Debug, Default)]
pub(super) struct Weights(Mutex<HashMap<RunId, Weight>>);

/// A snapshot is due when the deltas since the last one weigh this fraction (1/N) of it.
/// Replaying a delta costs about twice what reading the same bytes of snapshot does, so
/// a quarter keeps a load within ~1.25 snapshot reads, for snapshots that weigh, over a
/// run's life, about five times its trace (geometric steps of 1.25).
const REPLAY_SHARE: usize = 4;

/// Entries kept at most; past it the map starts again (a long-lived process that loads
/// many runs it never writes would otherwise grow it).
const MAX_WEIGHTS: usize = 4096;

impl Weights {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<RunId, Weight>) -> T) -> T {
        // A poisoned map only held weights: start again.
        let mut map = self.0.lock().unwrap_or_else(|poisoned| {
            let mut map = poisoned.into_inner();
            map.clear();
            map
        });
        if map.len() > MAX_WEIGHTS {
            map.clear();
        }
        f(&mut map)
    }

    /// Run `id` was loaded: its snapshot weighs `snapshot` bytes and the deltas replayed
    /// after it `replay`.
    pub(super) fn loaded(&self, id: RunId, snapshot: usize, replay: usize) {
        self.with(|map| map.insert(id, Weight { snapshot, replay }));
    }
}

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
        // A run ended `failed` or `stopped` may be reopened as it was before this step
        // (`load_at(seq - 1)`): no snapshot, so the one before and the deltas after it stay.
        if matches!(run.status(), RunStatus::Failed | RunStatus::Stopped) {
            return false;
        }
        if !run.is_running() || self.snapshot_every.is_some_and(|n| seq.is_multiple_of(n)) {
            return true;
        }
        self.weights.with(|map| {
            map.get(&id)
                .is_none_or(|w| (w.replay + delta_bytes) * REPLAY_SHARE >= w.snapshot)
        })
    }

    /// Records checkpoint of `delta_bytes` (and a snapshot of `snapshot` bytes if one)
    /// for run `id`, which is still `running` or not.
    pub(super) fn weigh(
        &self,
        id: RunId,
        running: bool,
        delta_bytes: usize,
        snapshot: Option<usize>,
    ) {
        self.weights.with(|map| {
            if !running {
                map.remove(&id);
                return;
            }
            match (snapshot, map.get_mut(&id)) {
                (Some(snapshot), _) => {
                    map.insert(
                        id,
                        Weight {
                            snapshot,
                            replay: 0,
                        },
                    );
                }
                (None, Some(w)) => w.replay += delta_bytes,
                (None, None) => {}
            }
        });
    }

    /// Forgets run `id`'s weights (it was released).
    pub(super) fn forget(&self, id: RunId) {
        self.weights.with(|map| map.remove(&id));
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
