//! A worker: takes the runs a store says are runnable (queued, waiting runs whose
//! dependencies settled, interrupted runs), oldest first, claims each under a lease it
//! renews, and drives up to N of them at once until told to stop (or, with `once`, until
//! nothing is runnable).
//!
//! Scheduling: the store is asked for runnable runs at once when a slot frees up, runs
//! were just taken, or the store says runs became runnable ([`RunStore::wakeups`]:
//! PostgreSQL's `LISTEN`/`NOTIFY`), and every [`WorkerOptions::poll`] (20 ms by default)
//! while nothing is found, so a run whose dependencies end (in another process) is taken
//! at once on PostgreSQL, within one poll on SQLite (or of a lost notification).

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio_util::sync::CancellationToken;

use super::drive::drive_claimed;
use super::{Checkpoints, Continue, DriveOptions, RunStore, StoreError, StoredRun, local_owner};
use crate::runtime::{Executor, RunId, RunState};

/// How a worker runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// Runs driven at once (at least 1).
    pub concurrency: usize,
    /// Exit when nothing is runnable and nothing is being driven.
    pub once: bool,
    /// The lease taken on each run (renewed while it runs).
    pub lease: Duration,
    /// How often the store is asked for runnable runs.
    pub poll: Duration,
    /// Whether to listen for the store's word that runs became runnable
    /// ([`RunStore::wakeups`]: PostgreSQL's `LISTEN`) besides polling (the default);
    /// off, for a connection pooler that does not pass `LISTEN` on, say.
    pub listen: bool,
    /// When the runs' steps are committed (at effects by default).
    pub checkpoints: Checkpoints,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            concurrency: 1,
            once: false,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(20),
            listen: true,
            checkpoints: Checkpoints::Effects,
        }
    }
}

impl WorkerOptions {
    /// `n` runs at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
    /// Exiting when nothing is runnable.
    pub fn once(mut self, once: bool) -> Self {
        self.once = once;
        self
    }
    /// Leases of `lease`.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// Polling every `poll`.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
    /// Listening for wakeups from the store (or polling only).
    pub fn listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// Committing the runs' steps as `checkpoints` says.
    pub fn checkpoints(mut self, checkpoints: Checkpoints) -> Self {
        self.checkpoints = checkpoints;
        self
    }
}

/// What happened to one run a worker took.
#[derive(Debug)]
#[non_exhaustive]
pub enum WorkEvent<'a> {
    /// It was claimed and is about to be driven.
    Started {
        /// The run.
        id: RunId,
        /// Its workflow.
        workflow: &'a str,
        /// The owner driving it.
        owner: &'a str,
    },
    /// Driving it ended: the run as last checkpointed, or the error.
    Ended {
        /// The run.
        id: RunId,
        /// How.
        result: &'a Result<RunState, StoreError>,
    },
    /// The worker stopped while the run was being driven: its effect in flight was
    /// abandoned, the steps before it committed, and its lease given up (the run is
    /// `interrupted`).
    Interrupted {
        /// The run.
        id: RunId,
    },
}

/// What a worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkSummary {
    /// Runs driven to an end or a pause.
    pub finished: u64,
    /// Runs whose driving failed (a store error, an executor that could not be built).
    pub errors: u64,
    /// Runs interrupted by the stop.
    pub interrupted: u64,
}

/// Works on `store` until `stop` resolves (or, with [`WorkerOptions::once`], until
/// nothing is runnable): claims runnable runs oldest first, builds each one's executor
/// with `executor_for` (from the stored run: its document, base folder...), drives up
/// to `concurrency` of them at once with [`drive`](crate::store::drive()) and reports each start and end to
/// `report`. When `stop` resolves the runs being driven are interrupted
/// ([`DriveOptions::interrupt`]): each drops its effect in flight (its program killed),
/// commits the steps it took since its last checkpoint and gives its lease up (a drive
/// not done within 5 s is dropped mid-step and interrupted); the worker then returns.
///
/// Several workers (in one process or many) never drive the same run at once: each
/// run is claimed first, and the claim is exclusive while its lease is current.
///
/// Every store call of a run (its claim included) happens inside that run's future,
/// and the look for more runs is polled together with them: a run's future that holds
/// the store's write connection is never left unpolled while another call waits for it.
pub async fn work<S, F, R>(
    store: &S,
    options: &WorkerOptions,
    executor_for: F,
    report: R,
    stop: impl Future<Output = ()>,
) -> Result<WorkSummary, StoreError>
where
    S: RunStore,
    F: Fn(&StoredRun) -> Result<Executor, String>,
    R: FnMut(WorkEvent<'_>),
{
    // A run found ended when the drive claims it again (this worker was paused after the
    // check below) is not reported a second time.
    // The stop interrupts the drives: each commits its pending steps and lets its run go.
    let interrupt = CancellationToken::new();
    let drive_options = DriveOptions::default()
        .lease(options.lease)
        .live_only(true)
        .checkpoints(options.checkpoints)
        .interrupt_on(interrupt.clone());
    let report = Mutex::new(report);
    let emit = |event: WorkEvent<'_>| {
        // A report that panicked once still reports.
        let mut r = report
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (*r)(event);
    };
    let mut summary = WorkSummary::default();
    let mut running = FuturesUnordered::new();
    // Runs taken (being claimed or driven), with their owners: skipped when the store
    // lists them again, interrupted on a stop.
    let mut held: Vec<(RunId, String)> = Vec::new();
    // When the store is next asked (a deadline, so that runs ending often do not keep
    // putting the look off).
    let mut next_look = tokio::time::Instant::now();
    // Looks in a row the store failed.
    let mut unanswered: u32 = 0;
    // The store's word that runs became runnable (PostgreSQL's `LISTEN`): a look at once
    // instead of at the next poll. Polling stays, for the words lost.
    let wakeups = if options.listen {
        store.wakeups().await
    } else {
        None
    };
    tokio::pin!(stop);
    loop {
        let want = options.concurrency.saturating_sub(running.len());
        let skip = held.len();
        let look = async {
            match &wakeups {
                Some(w) => tokio::select! {
                    () = tokio::time::sleep_until(next_look) => {}
                    () = w.next() => {}
                },
                None => tokio::time::sleep_until(next_look).await,
            }
            store.runnable(want + skip).await
        };
        tokio::select! {
            found = look, if want > 0 => {
                // The store not answering (a database restarting, a network cut) does not
                // end a long-lived worker: it says so and asks again, less often each time
                // (up to every 5 s). Its runs in flight fail their next store call and are
                // resumed from their last commit once the store is back.
                let found = match found {
                    Ok(found) => {
                        unanswered = 0;
                        found
                    }
                    Err(e) if !options.once => {
                        unanswered = unanswered.saturating_add(1);
                        let wait = retry_after(options.poll, unanswered);
                        tracing::warn!(
                            "the run store did not answer ({e}); asking again in {} ms",
                            wait.as_millis()
                        );
                        next_look = tokio::time::Instant::now() + wait;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let mut took = 0;
                for info in found {
                    if took == want {
                        break;
                    }
                    if held.iter().any(|(id, _)| *id == info.id) {
                        continue;
                    }
                    let owner = local_owner();
                    held.push((info.id, owner.clone()));
                    took += 1;
                    let (executor_for, drive_options, emit) = (&executor_for, &drive_options, &emit);
                    running.push(async move {
                        let id = info.id;
                        let lease = match store.claim(id, &owner, options.lease).await {
                            Ok(lease) => lease,
                            // Another worker took it between the look and the claim.
                            Err(StoreError::LeaseHeld { .. }) => return (id, None),
                            Err(e) => return (id, Some(Err(e))),
                        };
                        // Loaded once, under the lease: for its executor and the drive.
                        let stored = match store.load(id).await {
                            Ok(stored) => stored,
                            Err(e) => {
                                let _ = store.release(id, &owner).await;
                                return (id, Some(Err(e)));
                            }
                        };
                        // Listed runnable, but another worker may have ended it (and let it
                        // go) since: nothing to do, and no second end to report.
                        if stored.info.status.is_ended() {
                            let _ = store.release(id, &owner).await;
                            return (id, None);
                        }
                        emit(WorkEvent::Started {
                            id,
                            workflow: &info.workflow,
                            owner: &owner,
                        });
                        let result = match executor_for(&stored) {
                            Ok(executor) => {
                                drive_claimed(
                                    &executor,
                                    store,
                                    Some(stored),
                                    &lease,
                                    drive_options,
                                    Continue::AsStored,
                                    None,
                                )
                                .await
                            }
                            Err(reason) => {
                                let _ = store.release(id, &owner).await;
                                Err(StoreError::CannotContinue { run_id: id, reason })
                            }
                        };
                        match result {
                            Err(StoreError::WrongStatus { status, .. }) if status.is_ended() => {
                                (id, None)
                            }
                            result => (id, Some(result)),
                        }
                    });
                }
                if took == 0 && running.is_empty() && options.once {
                    return Ok(summary);
                }
                // Nothing new: wait a poll before asking again. Runs taken: ask again at
                // once if slots are left.
                if took == 0 {
                    next_look = tokio::time::Instant::now() + options.poll;
                }
            }
            Some((id, outcome)) = running.next() => {
                held.retain(|(h, _)| *h != id);
                // A slot is free: look for work at once.
                next_look = tokio::time::Instant::now();
                if let Some(result) = outcome {
                    if result.is_ok() {
                        summary.finished += 1;
                    } else {
                        summary.errors += 1;
                    }
                    emit(WorkEvent::Ended { id, result: &result });
                }
            }
            () = &mut stop => {
                // Each drive drops its effect in flight (killing its program), commits the
                // steps it took since its last checkpoint and lets its run go
                // (`StoreError::Interrupted`). Those not done within `STOP_GRACE` are
                // dropped, abandoning their steps, and interrupted below.
                interrupt.cancel();
                let grace = tokio::time::sleep(STOP_GRACE);
                tokio::pin!(grace);
                while !running.is_empty() {
                    tokio::select! {
                        Some((id, outcome)) = running.next() => {
                            held.retain(|(h, _)| *h != id);
                            match outcome {
                                Some(Err(StoreError::Interrupted { .. })) => {
                                    summary.interrupted += 1;
                                    emit(WorkEvent::Interrupted { id });
                                }
                                Some(result) => {
                                    if result.is_ok() {
                                        summary.finished += 1;
                                    } else {
                                        summary.errors += 1;
                                    }
                                    emit(WorkEvent::Ended { id, result: &result });
                                }
                                None => {}
                            }
                        }
                        () = &mut grace => break,
                    }
                }
                drop(running);
                for (id, owner) in &held {
                    match store.interrupt(*id, owner).await {
                        Ok(()) => {
                            summary.interrupted += 1;
                            emit(WorkEvent::Interrupted { id: *id });
                        }
                        // Not claimed yet, or already let go.
                        Err(StoreError::LeaseLost { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                return Ok(summary);
            }
        }
    }
}

/// How long a stopping worker waits for its drives to commit their pending steps and let
/// their runs go before it drops them.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long a worker waits before asking a store that failed `n` looks in a row again:
/// the poll doubled each time, at most 5 s.
fn retry_after(poll: Duration, n: u32) -> Duration {
    let doubled = poll.saturating_mul(1u32 << n.min(16));
    doubled.clamp(poll, Duration::from_secs(5).max(poll))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_the_poll_to_five_seconds() {
        let poll = Duration::from_millis(20);
        assert_eq!(retry_after(poll, 1), Duration::from_millis(40));
        assert_eq!(retry_after(poll, 3), Duration::from_millis(160));
        assert_eq!(retry_after(poll, 30), Duration::from_secs(5));
        let slow = Duration::from_secs(9);
        assert_eq!(retry_after(slow, 2), slow, "never under the poll");
    }
}
