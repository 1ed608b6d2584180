//! The run row as a store's last checkpoint of it left it (ADR 0057), so that PostgreSQL's
//! checkpoint without a snapshot returns only the columns a checkpoint changes or another
//! writer may have changed ([`super::rows::CHANGED`]), not the whole row: the columns a
//! checkpoint never changes (name, workflow, digest, creation and expiry times) come from
//! here, the ones it writes from its own binds. Returning the 16 info columns cost the
//! server about 52,000 instructions a checkpoint more than returning 5 (every scan of the
//! statement's `up` clause builds a tuple of all of them).
//!
//! An entry is written when the store creates or loads a running run, and from every
//! checkpoint's answer, and forgotten when the run stops running here (released, ended,
//! refused). A missing entry only costs the next checkpoint the full answer (and the
//! server one more statement to plan on the connection); an entry is never used for a
//! checkpoint carrying a document (the digest changes: that checkpoint carries a
//! snapshot, whose statement answers the whole row). The digest is the only such column a checkpoint changes, and no other writer
//! changes any of them while this store holds the run's lease.
//!
//! Complexity: O(1) per checkpoint (a hash map entry per run being written).

use std::collections::HashMap;
use std::sync::Mutex;

use super::RunInfo;
use super::weights::with_per_run;
use crate::runtime::RunId;

/// Entries kept at most; past it the map starts again (as `Weights`).
const MAX_ENTRIES: usize = 4096;

/// The last [`RunInfo`] a checkpoint of each run this store writes returned.
#[derive(Debug, Default)]
pub(crate) struct LastInfos(Mutex<HashMap<RunId, RunInfo>>);

impl LastInfos {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<RunId, RunInfo>) -> T) -> T {
        // A poisoned or overfull map only held copies of rows: it starts again.
        with_per_run(&self.0, MAX_ENTRIES, f)
    }

    /// Run `id`'s row as its last checkpoint here left it, if known.
    pub(crate) fn get(&self, id: RunId) -> Option<RunInfo> {
        self.with(|map| map.get(&id).cloned())
    }

    /// Keeps `info`, the row a checkpoint of a run left, while the run is `running` here;
    /// forgets it otherwise.
    pub(crate) fn put(&self, info: &RunInfo, running: bool) {
        self.with(|map| {
            if running {
                map.insert(info.id, info.clone());
            } else {
                map.remove(&info.id);
            }
        });
    }

    /// Forgets run `id`'s row (released, or a checkpoint of it refused).
    pub(crate) fn forget(&self, id: RunId) {
        self.with(|map| map.remove(&id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredStatus;

    fn info(id: RunId, seq: u64) -> RunInfo {
        RunInfo {
            id,
            name: Some("n".into()),
            workflow: "w".into(),
            digest: "d".into(),
            status: StoredStatus::Running,
            termination_reason: None,
            steps: 1,
            seq,
            created_ms: 1,
            updated_ms: 2,
            expires_ms: None,
            owner: Some("o".into()),
            lease_expires_ms: Some(3),
            attempt_key: None,
            attempt: 1,
            cancel_requested: false,
        }
    }

    /// Proves an entry is kept while its run runs here and gone once it does not (ended
    /// or forgotten), and that another run's entry is untouched.
    #[test]
    fn an_entry_lives_while_its_run_runs_here() {
        let infos = LastInfos::default();
        let (a, b) = (RunId::new(), RunId::new());
        infos.put(&info(a, 1), true);
        infos.put(&info(b, 7), true);
        assert_eq!(infos.get(a).map(|i| i.seq), Some(1));
        infos.put(&info(a, 2), true);
        assert_eq!(infos.get(a).map(|i| i.seq), Some(2));
        infos.put(&info(a, 3), false);
        assert!(infos.get(a).is_none());
        infos.put(&info(a, 4), true);
        infos.forget(a);
        assert!(infos.get(a).is_none());
        assert_eq!(infos.get(b).map(|i| i.seq), Some(7));
    }
}
