//! Driving a stored run: claim it, step it, checkpoint every step, renew the lease, let
//! it go.

use std::time::Duration;

use super::delta::{Before, StepDelta};
use super::{Checkpoint, RunStore, StoreError, duration_ms, now_ms};
use crate::runtime::{Executor, RunId, RunState};

/// How [`drive`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriveOptions {
    /// The lease taken and renewed (renewed before a step once less than half is left).
    pub lease: Duration,
    /// Stop (releasing the run, still running) after this many checkpoints.
    pub max_checkpoints: Option<u64>,
}

impl Default for DriveOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            max_checkpoints: None,
        }
    }
}

impl DriveOptions {
    /// A lease of `lease`.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// At most `n` checkpoints.
    pub fn max_checkpoints(mut self, n: u64) -> Self {
        self.max_checkpoints = Some(n);
        self
    }
}

/// Continues run `id` from its last checkpoint with `executor` (built from the run's
/// document) as `owner`: claims the lease, loads the run, steps it with
/// [`Executor::begin_step`], [`Executor::perform`], [`Executor::resolve_step`] and
/// [`Executor::commit_step`], checkpoints every committed step, renews the lease as it
/// goes (between steps, and while an effect runs, each time half of it is left) and
/// releases it at the end. Returns the run as last checkpointed. Needs a tokio runtime
/// with time enabled (for the renewals).
///
/// A step whose checkpoint is refused (its lease lost to another owner, say) is not
/// kept: the error is returned and the run in the store is as its last checkpoint left
/// it. Dropping the future mid-step loses only the step in flight.
pub async fn drive<S: RunStore>(
    executor: &Executor,
    store: &S,
    id: RunId,
    owner: &str,
    options: &DriveOptions,
) -> Result<RunState, StoreError> {
    let lease = store.claim(id, owner, options.lease).await?;
    let result = steps(executor, store, id, owner, options, lease.expires_ms).await;
    let released = store.release(id, owner).await;
    let run = result?;
    released?;
    Ok(run)
}

async fn steps<S: RunStore>(
    executor: &Executor,
    store: &S,
    id: RunId,
    owner: &str,
    options: &DriveOptions,
    mut lease_expires_ms: u64,
) -> Result<RunState, StoreError> {
    let stored = store.load(id).await?;
    let mut seq = stored.record.seq;
    let mut run = stored.record.run;
    let half = duration_ms(options.lease) / 2;
    let mut done = 0u64;
    while run.is_running() && options.max_checkpoints.is_none_or(|m| done < m) {
        if lease_expires_ms.saturating_sub(now_ms()) < half {
            lease_expires_ms = store.renew(id, owner, options.lease).await?.expires_ms;
        }
        let before = Before::of(&run);
        let mut step = executor.begin_step(&run);
        while let Some(effect) = step.take_effect() {
            // The lease is renewed while the effect runs, each time half of it is left;
            // losing it abandons the effect (dropping it kills its program).
            let perform = executor.perform(effect);
            tokio::pin!(perform);
            let output = loop {
                let left = lease_expires_ms.saturating_sub(now_ms());
                let wait = Duration::from_millis(left.saturating_sub(half));
                tokio::select! {
                    output = &mut perform => break output,
                    () = tokio::time::sleep(wait) => {
                        lease_expires_ms = store.renew(id, owner, options.lease).await?.expires_ms;
                    }
                }
            };
            executor.resolve_step(&run, &mut step, output);
        }
        executor.commit_step(&mut run, step);
        let delta = StepDelta::between(&before, &run);
        store
            .checkpoint(id, owner, Checkpoint::new(seq + 1, &delta, &run))
            .await?;
        seq += 1;
        done += 1;
    }
    Ok(run)
}
