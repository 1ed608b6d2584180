//! [`drive`]: claim a stored run, drive it ([`Driver`](super::driver)), let it go.

use super::drive_options::DriveOptions;
use super::driver::Driver;
use super::{Lease, RunStore, StoreError, StoredRun};
use crate::contracts::WorkflowDocument;
use crate::runtime::{Executor, RunId, RunState};

/// How [`drive`] continues a stored run before stepping it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Continue {
    /// From its last checkpoint, as it is (a queued, running or interrupted run).
    AsStored,
    /// A run awaiting input, with the answer (the resume is one checkpoint).
    Answer(String),
    /// A run ended by its last step (failed, or stopped by a guard such as
    /// `max_steps_exceeded`) is reopened as it was before that step, which is tried again
    /// with its next attempt; with a document, the run continues under it (higher
    /// budgets). The reopening is one checkpoint.
    Reopen(Option<Box<WorkflowDocument>>),
}

/// Claims the lease on run `id` for `owner` (a run its create left claimed by `owner`,
/// [`CreateOptions::claimed_by`], keeps its attempt), loads the run, continues it as `how`
/// says, steps it with [`Executor::begin_step`], [`Executor::perform`],
/// [`Executor::resolve_step`] and [`Executor::commit_step`], checkpoints its steps as
/// [`DriveOptions::checkpoints`] says (at effects: a step that performed an effect at once,
/// with the pure steps before it; pure steps at a pause, the end, or once a batch is full;
/// or every step), one checkpoint at a time, each answered before the next step; renews
/// the lease as it goes (between steps, and while an effect runs, each time half of it is
/// left) and releases it at the end. Returns the run as last checkpointed. Needs a tokio
/// runtime with time enabled.
///
/// Each node call gets the attempt the store keeps for its step: 1, or more when the
/// step is run again (its previous owner died or was interrupted mid-step, or it is a
/// reopened failed step). A cancel asked through [`RunStore::cancel`] while the run runs
/// is seen at the next checkpoint or within [`DriveOptions::cancel_poll`] while an effect
/// runs: the effect is dropped (its program killed) and the run is checkpointed as
/// stopped (`cancelled`).
///
/// A checkpoint that is refused (its lease lost to another owner, say) keeps none of its
/// steps: the error is returned and the run in the store is as its last checkpoint left
/// it. [`DriveOptions::interrupt`] stops it cleanly: the effect in flight is dropped,
/// the steps taken since the last checkpoint are committed, the lease is given up
/// ([`RunStore::interrupt`] when an effect was in flight, else released) and
/// [`StoreError::Interrupted`] is returned. Cancel safety: dropping the future mid-step
/// loses the step in flight and the pure steps not yet committed, which a later drive
/// recomputes (call [`RunStore::interrupt`] then, so that the next effect's attempt
/// counts the one in flight); a checkpoint whose write was dropped is committed or not,
/// whole.
///
/// [`CreateOptions::claimed_by`]: super::CreateOptions::claimed_by
pub async fn drive<S: RunStore>(
    executor: &Executor,
    store: &S,
    id: RunId,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
) -> Result<RunState, StoreError> {
    let lease = store.claim(id, owner, options.lease).await?;
    drive_claimed(executor, store, None, &lease, options, how, None).await
}

/// [`drive`] on a run `lease` already holds, loaded as `loaded` when given (a worker
/// claims and loads a run to build its executor: the drive does neither again); the `seq`
/// of its last kept event `last_event` when known (else read from the store).
pub(crate) async fn drive_claimed<S: RunStore>(
    executor: &Executor,
    store: &S,
    loaded: Option<StoredRun>,
    lease: &Lease,
    options: &DriveOptions,
    how: Continue,
    last_event: Option<u64>,
) -> Result<RunState, StoreError> {
    let mut driver = Driver::new(executor, store, lease, options, loaded, last_event);
    let run = match driver.run(how).await {
        Ok(run) => run,
        Err(e) => return Err(give_up(&driver, e).await),
    };
    if !driver.let_go() {
        release(&driver).await?;
    }
    Ok(run)
}

/// Releases the drive's lease; one that lapsed and no one took is given up as after an
/// interruption (a release is fenced like a checkpoint: its step may run again, and its
/// next attempt is one more).
async fn release<S: RunStore>(driver: &Driver<'_, S>) -> Result<(), StoreError> {
    let (store, id, owner) = (driver.store(), driver.id(), driver.owner());
    match store.release(id, owner).await {
        Err(StoreError::LeaseLost { holder: None, .. }) => store.interrupt(id, owner).await,
        other => other,
    }
}

/// Gives up the lease of a drive stopped by `error`, which is returned (an error giving
/// the lease up is not: the drive's came first).
async fn give_up<S: RunStore>(driver: &Driver<'_, S>, error: StoreError) -> StoreError {
    let (store, id, owner) = (driver.store(), driver.id(), driver.owner());
    // A failed store call (a commit refused for want of space, an I/O error) or a lease
    // found lapsed stops the run at once: its lease is given up as after an interruption
    // (the step in flight may have run: its next attempt is one more), so `runs resume`
    // continues it. A lapsed lease no one took yet is still this owner's to give up: a
    // clean release would let the step run again as the same attempt. If the store cannot
    // record even that, the lease lapses (or its owner's process ends).
    // An interruption that dropped an effect in flight is given up the same way; one
    // between steps (every step committed, none in flight) is a clean release.
    let released = match &error {
        StoreError::Database { .. }
        | StoreError::LeaseLost { .. }
        | StoreError::Interrupted {
            in_flight: true, ..
        } => store.interrupt(id, owner).await,
        _ => release(driver).await,
    };
    if let Err(e) = released {
        tracing::debug!("giving up run {id}'s lease after its drive stopped: {e}");
    }
    error
}
