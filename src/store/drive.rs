//! The drive functions: claim a stored run, drive it ([`Driver`](super::driver)), let it
//! go; and [`drive_created_then`], which makes something of the run as it ended while its
//! last checkpoint is written and its lease given up.

use super::drive_options::DriveOptions;
use super::driver::Driver;
use super::{
    CreateOptions, Lease, PreparedCreate, RunInfo, RunStore, StoreError, StoredRun, duration_ms,
};
use crate::contracts::WorkflowDocument;
use crate::runtime::{Executor, RunId, RunRecord, RunState};

/// How [`drive_with`] continues a stored run before stepping it.
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

/// Continues run `id` from its last checkpoint with `executor` (built from the run's
/// document) as `owner`: [`drive_with`] with [`Continue::AsStored`].
pub async fn drive<S: RunStore>(
    executor: &Executor,
    store: &S,
    id: RunId,
    owner: &str,
    options: &DriveOptions,
) -> Result<RunState, StoreError> {
    drive_with(executor, store, id, owner, options, Continue::AsStored).await
}

/// Claims the lease on run `id` for `owner`, loads the run, continues it as `how` says,
/// steps it with [`Executor::begin_step`], [`Executor::perform`],
/// [`Executor::resolve_step`] and [`Executor::commit_step`], checkpoints its steps as
/// [`DriveOptions::checkpoints`] says (at effects: a step that performed an effect at once,
/// with the pure steps before it; pure steps at a pause, the end, or once a batch is full;
/// or every step), renews the lease as it goes (between steps, and while an effect runs, each time
/// half of it is left) and releases it at the end. Returns the run as last checkpointed.
/// Needs a tokio runtime with time enabled.
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
/// [`StoreError::Interrupted`] is returned. Dropping the future mid-step instead loses
/// the step in flight and the pure steps not yet committed, which a later drive
/// recomputes (call [`RunStore::interrupt`] then, so that the next effect's attempt
/// counts the one in flight).
pub async fn drive_with<S: RunStore>(
    executor: &Executor,
    store: &S,
    id: RunId,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
) -> Result<RunState, StoreError> {
    drive_with_inner(executor, store, id, owner, options, how, NO_THEN)
        .await
        .map(unmade)
}

/// [`drive_with`], and `then` made of the run as it ended ([`drive_created_then`] says
/// how and when).
pub async fn drive_with_then<S: RunStore, T: Send + 'static>(
    executor: &Executor,
    store: &S,
    id: RunId,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
    then: impl FnOnce(&RunState) -> T + Send + 'static,
) -> Result<(RunState, T), StoreError> {
    drive_with_inner(executor, store, id, owner, options, how, Some(then))
        .await
        .map(made)
}

/// Claims run `id` for `owner` and drives it, with `then` when given.
async fn drive_with_inner<S: RunStore, T: Send + 'static>(
    executor: &Executor,
    store: &S,
    id: RunId,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
    then: Option<impl FnOnce(&RunState) -> T + Send + 'static>,
) -> Result<(RunState, Option<T>), StoreError> {
    let lease = store.claim(id, owner, options.lease).await?;
    let driver = Driver::new(executor, store, &lease, options, None, None);
    drive_then(driver, how, then).await
}

/// The `then` of a drive given none.
const NO_THEN: Option<fn(&RunState)> = None;

/// The run, from a drive given no `then` ([`NO_THEN`]).
fn unmade((run, _): (RunState, Option<()>)) -> RunState {
    run
}

/// The run and what `then` made of it, from a drive given a `then`.
fn made<T>((run, made): (RunState, Option<T>)) -> (RunState, T) {
    (
        run,
        made.expect("`then` is called when the drive ends without an error"),
    )
}

/// [`drive_with`] of run `created`, which this process just stored with
/// [`RunStore::create`] (its row as the create returned it, its record as given): the run
/// is claimed but not loaded again, its state handed over as it is in memory (what a load
/// would rebuild from the snapshot the create wrote, byte for byte). `pactgraph run` drives
/// the run it creates this way: a load would parse back the snapshot (the whole input)
/// it has just written. A run created claimed by `owner` ([`CreateOptions::claimed_by`])
/// is not claimed again.
///
/// [`CreateOptions::claimed_by`]: super::CreateOptions::claimed_by
pub async fn drive_created<S: RunStore>(
    executor: &Executor,
    store: &S,
    created: StoredRun,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
) -> Result<RunState, StoreError> {
    drive_created_inner(executor, store, created, owner, options, how, NO_THEN)
        .await
        .map(unmade)
}

/// [`drive_created`], and `then` made of the run as it ended, as the drive gives it back:
/// `then` is called on a thread of the runtime's blocking pool while the run's last
/// checkpoint is written and its lease given up, and what it made is returned with the run
/// once all three are done (ADR 0069). `pactgraph run` renders the outcome it prints this
/// way: the run's last commit and its release are not waited for before that work starts.
///
/// `then` is called only when the drive's steps ended without an error (a last
/// checkpoint whose refusal comes back at once, before the steps are over, is one), and
/// what it made is dropped when the last checkpoint or the release then fails (that error is
/// returned): what it made is about a run whose every step is committed only when this
/// returns `Ok`. A panic in `then` is resumed here, after the lease is given up.
pub async fn drive_created_then<S: RunStore, T: Send + 'static>(
    executor: &Executor,
    store: &S,
    created: StoredRun,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
    then: impl FnOnce(&RunState) -> T + Send + 'static,
) -> Result<(RunState, T), StoreError> {
    drive_created_inner(executor, store, created, owner, options, how, Some(then))
        .await
        .map(made)
}

/// [`drive_created_then`] of `record`, stored as `prepared` (its [`PreparedCreate::of`])
/// with `create`'s options, created claimed by `owner` for [`DriveOptions::lease`] while
/// its first steps are taken (ADR 0069): the create is in flight as a checkpoint is, and
/// waited for as one before the run's first effect, its first checkpoint, any other call
/// to the store and the end. Steps taken before it are pure: a create that fails (a name
/// taken, the database's error) loses nothing but them, and its error is returned.
///
/// A run with dependencies (`create.dependencies`) is created first, then driven: it
/// waits for them through the store.
#[allow(clippy::too_many_arguments)]
pub async fn drive_creating_then<S: RunStore, T: Send + 'static>(
    executor: &Executor,
    store: &S,
    record: RunRecord,
    prepared: PreparedCreate,
    create: &CreateOptions,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
    then: impl FnOnce(&RunState) -> T + Send + 'static,
) -> Result<(RunState, T), StoreError> {
    if prepared.run_id() != record.run_id {
        return Err(StoreError::CannotContinue {
            run_id: record.run_id,
            reason: format!("its create was prepared for run {}", prepared.run_id()),
        });
    }
    let create = create.clone().claimed_by(owner, options.lease);
    if create.dependencies.is_some() {
        let info = store.create_prepared(prepared, &create).await?;
        let created = StoredRun::created(info, record);
        return drive_created_then(executor, store, created, owner, options, how, then).await;
    }
    // The lease as the create takes it, counted from before it is sent (the database
    // counts from when it runs: later).
    let lease = Lease {
        run_id: record.run_id,
        owner: owner.to_string(),
        expires_ms: store
            .clock()
            .now_ms()
            .saturating_add(duration_ms(options.lease)),
    };
    // The row as the create writes it (what the drive reads of it: a run running, its
    // first attempt, no cancel asked), until its answer replaces it.
    let info = RunInfo::creating(&prepared, &create, &lease);
    let mut driver = Driver::new(
        executor,
        store,
        &lease,
        options,
        Some(StoredRun::created(info, record)),
        Some(0),
    );
    driver.writing_first(Box::pin(store.create_prepared(prepared, &create)));
    drive_then(driver, how, Some(then)).await.map(made)
}

async fn drive_created_inner<S: RunStore, T: Send + 'static>(
    executor: &Executor,
    store: &S,
    created: StoredRun,
    owner: &str,
    options: &DriveOptions,
    how: Continue,
    then: Option<impl FnOnce(&RunState) -> T + Send + 'static>,
) -> Result<(RunState, Option<T>), StoreError> {
    // Created claimed by `owner` (`CreateOptions::claimed_by`): its lease as the create
    // took it, on the database's clock; else claimed now.
    let info = &created.info;
    let lease = match (info.owner.as_deref(), info.lease_expires_ms) {
        (Some(holder), Some(expires_ms)) if holder == owner => Lease {
            run_id: info.id,
            owner: owner.to_string(),
            expires_ms,
        },
        _ => store.claim(info.id, owner, options.lease).await?,
    };
    // A run just created has no event yet (a create writes none): its events are numbered
    // from 1 without asking the store (one round trip fewer, ADR 0060). Had another
    // process written some since, it would have moved the run's `seq` too, and this
    // drive's first checkpoint would be refused with them.
    let driver = Driver::new(executor, store, &lease, options, Some(created), Some(0));
    drive_then(driver, how, then).await
}

/// [`drive_with`] on a run `lease` already holds, loaded as `loaded` when given (a
/// worker claims and loads a run to build its executor: the drive does neither again);
/// the `seq` of its last kept event `last_event` when known (else read from the store).
pub(crate) async fn drive_claimed<S: RunStore>(
    executor: &Executor,
    store: &S,
    loaded: Option<StoredRun>,
    lease: &Lease,
    options: &DriveOptions,
    how: Continue,
    last_event: Option<u64>,
) -> Result<RunState, StoreError> {
    let driver = Driver::new(executor, store, lease, options, loaded, last_event);
    drive_then(driver, how, NO_THEN).await.map(unmade)
}

/// Drives `driver`'s run as `how` says, with `then` (when given) made of the run as it
/// ended while its last checkpoint is written and its lease given up; lets it go.
async fn drive_then<S: RunStore, T: Send + 'static>(
    mut driver: Driver<'_, S>,
    how: Continue,
    then: Option<impl FnOnce(&RunState) -> T + Send + 'static>,
) -> Result<(RunState, Option<T>), StoreError> {
    let run_id = driver.id();
    // The run as its steps ended; its last checkpoint may still be being written.
    let run = match driver.run(how).await {
        Ok(run) => run,
        Err(e) => return Err(give_up(&mut driver, e).await),
    };
    let Some(then) = then else {
        end(&mut driver).await?;
        return Ok((run, None));
    };
    // The run goes to a thread of the blocking pool and back: this task goes on polling
    // the last checkpoint's answer and the release (on PostgreSQL, its connection is
    // driven by those polls).
    let making = tokio::task::spawn_blocking(move || {
        let made = then(&run);
        (run, made)
    });
    let ended = end(&mut driver).await;
    let (run, made) = match making.await {
        Ok(both) => both,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => {
                return Err(StoreError::CannotContinue {
                    run_id,
                    reason: format!("making the outcome of the run as it ended: {e}"),
                });
            }
        },
    };
    ended?;
    Ok((run, Some(made)))
}

/// Waits for the last checkpoint, if it is still being written, then releases the lease
/// of a drive whose steps ended without an error, unless that checkpoint gave it up (a run
/// that stopped running, on PostgreSQL: ADR 0071). A last checkpoint that fails stops the
/// drive as any failed store call does ([`give_up`]).
async fn end<S: RunStore>(driver: &mut Driver<'_, S>) -> Result<(), StoreError> {
    if let Err(e) = driver.written().await {
        return Err(give_up(driver, e).await);
    }
    if driver.let_go() {
        return Ok(());
    }
    release(driver).await
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
async fn give_up<S: RunStore>(driver: &mut Driver<'_, S>, error: StoreError) -> StoreError {
    // A checkpoint still being written when the drive stopped on an error of its own is
    // waited for (so that the lease is given up after it, not beside it); its own error
    // is only logged: the drive's came first.
    let id = driver.id();
    if let Err(e) = driver.written().await {
        tracing::debug!("the checkpoint in flight when run {id}'s drive stopped: {e}");
    }
    let (store, owner) = (driver.store(), driver.owner());
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
