//! A worker: takes the runs a store says are runnable (queued, waiting runs whose
//! dependencies settled, interrupted runs), oldest first, claims each under a lease it
//! renews, and drives up to N of them at once until told to stop (or, with `once`, until
//! nothing is runnable).
//!
//! Scheduling polls the store every [`WorkerOptions::poll`] (20 ms by default): a run
//! whose dependencies end is taken within one poll of it.

use std::future::Future;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::{DriveOptions, RunStore, StoreError, StoredRun, drive, local_owner};
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
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            concurrency: 1,
            once: false,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(20),
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
    /// The worker stopped while the run was being driven: its step in flight was
    /// abandoned and its lease given up (the run is `interrupted`).
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
/// to `concurrency` of them at once with [`drive`] and reports each start and end to
/// `report`. When `stop` resolves the runs being driven are dropped mid-step (their
/// programs killed) and interrupted, and their leases given up; the worker then returns.
///
/// Several workers (in one process or many) never drive the same run at once: each
/// run is claimed first, and the claim is exclusive while its lease is current.
pub async fn work<S, F, R>(
    store: &S,
    options: &WorkerOptions,
    executor_for: F,
    mut report: R,
    stop: impl Future<Output = ()>,
) -> Result<WorkSummary, StoreError>
where
    S: RunStore,
    F: Fn(&StoredRun) -> Result<Executor, String>,
    R: FnMut(WorkEvent<'_>),
{
    let drive_options = DriveOptions::default().lease(options.lease);
    let mut summary = WorkSummary::default();
    let mut running = FuturesUnordered::new();
    // Runs being driven, with their owners (to interrupt them on a stop).
    let mut held: Vec<(RunId, String)> = Vec::new();
    tokio::pin!(stop);
    loop {
        let mut took = false;
        if running.len() < options.concurrency {
            let free = options.concurrency - running.len();
            for info in store.runnable(free + held.len()).await? {
                if running.len() >= options.concurrency {
                    break;
                }
                if held.iter().any(|(id, _)| *id == info.id) {
                    continue;
                }
                let owner = local_owner();
                match store.claim(info.id, &owner, options.lease).await {
                    Ok(_) => {}
                    // Another worker took it between the query and the claim.
                    Err(StoreError::LeaseHeld { .. }) => continue,
                    Err(e) => return Err(e),
                }
                report(WorkEvent::Started {
                    id: info.id,
                    workflow: &info.workflow,
                    owner: &owner,
                });
                took = true;
                held.push((info.id, owner.clone()));
                let id = info.id;
                let executor_for = &executor_for;
                let drive_options = &drive_options;
                running.push(async move {
                    let result = match store.load(id).await {
                        Ok(stored) => match executor_for(&stored) {
                            Ok(executor) => {
                                drive(&executor, store, id, &owner, drive_options).await
                            }
                            Err(reason) => {
                                let _ = store.release(id, &owner).await;
                                Err(StoreError::CannotContinue { run_id: id, reason })
                            }
                        },
                        Err(e) => {
                            let _ = store.release(id, &owner).await;
                            Err(e)
                        }
                    };
                    (id, result)
                });
            }
        }
        if running.is_empty() && !took {
            if options.once {
                return Ok(summary);
            }
            tokio::select! {
                () = tokio::time::sleep(options.poll) => continue,
                () = &mut stop => return Ok(summary),
            }
        }
        tokio::select! {
            Some((id, result)) = running.next() => {
                held.retain(|(h, _)| *h != id);
                if result.is_ok() {
                    summary.finished += 1;
                } else {
                    summary.errors += 1;
                }
                report(WorkEvent::Ended { id, result: &result });
            }
            () = tokio::time::sleep(options.poll), if running.len() < options.concurrency => {}
            () = &mut stop => {
                // Dropping the drives abandons their steps (and kills their programs).
                drop(running);
                for (id, owner) in &held {
                    match store.interrupt(*id, owner).await {
                        Ok(()) | Err(StoreError::LeaseLost { .. }) => {}
                        Err(e) => return Err(e),
                    }
                    summary.interrupted += 1;
                    report(WorkEvent::Interrupted { id: *id });
                }
                return Ok(summary);
            }
        }
    }
}
