//! When a checkpoint carries a snapshot (both stores decide alike).
//!
//! A snapshot is written when the deltas since the last one weigh a quarter of it (or
//! at a pause, at the end, every `snapshot_every` checkpoints when set,
//! and at a run's first checkpoint in this process). It replaces the run's previous
//! snapshot and the step rows it covers. So loading replays at most a quarter of the
//! snapshot's bytes in deltas, and the snapshots a run writes over its life weigh about
//! five times its deltas at most: a snapshot that grows with the state is written at
//! geometrically spaced steps, not every N steps (which costs quadratic time and space).
//!
//! The deltas are weighed without their trace items (ADR 0049): the trace is
//! append-only, each item is read once by a load whether it comes from the snapshot or
//! from a delta after it, so trace items replayed cost a load nothing a snapshot would
//! save. Weighing them (format 6 and before) fired a snapshot at almost every batch of
//! pure steps, each rewriting the whole trace: quadratic in the trace's length. The
//! snapshot is weighed whole, trace included, since that is what writing the next one
//! costs: weighed without its trace, the snapshot of a small state fell due every few
//! checkpoints under `--checkpoints steps`, each rewriting the whole trace (quadratic
//! again). So a run writes snapshots of about four times its deltas' bytes (trace aside)
//! at most, and trace growth alone writes none. A run loaded in this process is weighed
//! as stored, trace included, until its next snapshot (an estimate on the safe side: it
//! brings that snapshot forward).
//!
//! Complexity: O(1) per checkpoint to decide (a hash map entry per run being written).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::runtime::{RunId, RunState, RunStatus};

/// How much a run's latest snapshot (bytes of JSON, whole) and the deltas after it (their
/// trace items aside) weigh.
#[derive(Debug, Clone, Copy)]
struct Weight {
    snapshot: usize,
    replay: usize,
}

/// The weights of the runs this store writes or loaded to write. Losing an entry only
/// brings the next snapshot forward.
#[derive(Debug, Default)]
pub(crate) struct Weights(Mutex<HashMap<RunId, Weight>>);

/// A snapshot is due when the deltas since the last one weigh this fraction (1/N) of it.
/// Replaying a delta costs about twice what reading the same bytes of snapshot does, so
/// a quarter keeps a load within ~1.25 snapshot reads, for snapshots that weigh, over a
/// run's life, about five times its trace (geometric steps of 1.25).
const REPLAY_SHARE: usize = 4;

/// Entries kept at most; past it the map starts again (a long-lived process that loads
/// many runs it never writes would otherwise grow it).
const MAX_WEIGHTS: usize = 4096;

/// Runs `f` on `map`, a per-run map of what a store only keeps to save work (the
/// weights): a poisoned map, or one past `max` entries, starts again
/// empty, which costs only that work.
pub(crate) fn with_per_run<V, T>(
    map: &Mutex<HashMap<RunId, V>>,
    max: usize,
    f: impl FnOnce(&mut HashMap<RunId, V>) -> T,
) -> T {
    let mut map = map.lock().unwrap_or_else(|poisoned| {
        let mut map = poisoned.into_inner();
        map.clear();
        map
    });
    if map.len() > max {
        map.clear();
    }
    f(&mut map)
}

impl Weights {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<RunId, Weight>) -> T) -> T {
        with_per_run(&self.0, MAX_WEIGHTS, f)
    }

    /// Run `id` was loaded: its snapshot weighs `snapshot` bytes and the deltas replayed
    /// after it `replay`.
    pub(crate) fn loaded(&self, id: RunId, snapshot: usize, replay: usize) {
        self.with(|map| map.insert(id, Weight { snapshot, replay }));
    }
}

impl Weights {
    /// Whether checkpoint `seq` of run `id` (with a snapshot at least every
    /// `snapshot_every` checkpoints when set), leaving `run` and a delta weighing
    /// `delta_bytes` (its trace items aside), carries a snapshot.
    pub(crate) fn wants_snapshot(
        &self,
        snapshot_every: Option<u64>,
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
        if !run.is_running() || snapshot_every.is_some_and(|n| seq.is_multiple_of(n)) {
            return true;
        }
        self.with(|map| {
            map.get(&id)
                .is_none_or(|w| (w.replay + delta_bytes) * REPLAY_SHARE >= w.snapshot)
        })
    }

    /// Records a checkpoint of `delta_bytes` (its trace items aside) and its snapshot's
    /// text if it carried one (weighed whole), for run `id`, which is still `running` or
    /// not.
    pub(crate) fn weigh(
        &self,
        id: RunId,
        running: bool,
        delta_bytes: usize,
        snapshot: Option<&str>,
    ) {
        let snapshot = snapshot.map(str::len);
        self.with(|map| {
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
    pub(crate) fn forget(&self, id: RunId) {
        self.with(|map| map.remove(&id));
    }
}
