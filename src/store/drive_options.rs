//! How [`drive`](super::drive()) runs: [`DriveOptions`] (the lease, when steps are
//! committed, the batch limits, callbacks, and what interrupts it).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::RunInfo;
use super::batch::{BATCH_STEPS, BATCH_WAIT, Checkpoints};
use crate::runtime::RunState;

/// How [`drive`](super::drive()) runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DriveOptions {
    /// The lease taken and renewed (renewed before a step once less than half is left).
    pub lease: Duration,
    /// Stop (releasing the run, still running) after this many checkpoints.
    pub max_checkpoints: Option<u64>,
    /// How often a running effect looks for a cancel asked by another process.
    pub cancel_poll: Duration,
    /// Called with the run before each step (a progress line, say).
    pub before_step: Option<fn(&RunState)>,
    /// How often a `waiting` run looks at its dependencies again.
    pub dependency_poll: Duration,
    /// Called with the dependencies not final yet each time a `waiting` run looks.
    pub on_wait: Option<fn(&[RunInfo])>,
    /// Refuse ([`StoreError::WrongStatus`](crate::store::StoreError::WrongStatus)) a run found ended when claimed, instead of
    /// returning it as it is: a worker that listed it runnable, then was paused while
    /// another worker ended it, must not report a second end.
    pub live_only: bool,
    /// When steps are committed: at effects (the default) or every step.
    pub checkpoints: Checkpoints,
    /// At effects, the most pure steps one checkpoint carries ([`BATCH_STEPS`]).
    pub batch_steps: u32,
    /// At effects, the longest pure steps wait (since the last commit) to be committed
    /// ([`BATCH_WAIT`]).
    pub batch_wait: Duration,
    /// When cancelled (the command line's SIGINT or SIGTERM), the drive stops at once:
    /// it drops the effect in flight (killing its program), commits the steps taken
    /// since its last checkpoint, gives its lease up and returns
    /// [`StoreError::Interrupted`](super::StoreError::Interrupted).
    pub interrupt: Option<CancellationToken>,
}

impl Default for DriveOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            max_checkpoints: None,
            cancel_poll: Duration::from_millis(250),
            before_step: None,
            dependency_poll: Duration::from_millis(20),
            on_wait: None,
            live_only: false,
            checkpoints: Checkpoints::Effects,
            batch_steps: BATCH_STEPS,
            batch_wait: BATCH_WAIT,
            interrupt: None,
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
    /// Calling `f` with the run before each step.
    pub fn before_step(mut self, f: fn(&RunState)) -> Self {
        self.before_step = Some(f);
        self
    }
    /// Looking for a cancel every `every` while an effect runs.
    pub fn cancel_poll(mut self, every: Duration) -> Self {
        self.cancel_poll = every;
        self
    }
    /// Looking at a waiting run's dependencies every `every`.
    pub fn dependency_poll(mut self, every: Duration) -> Self {
        self.dependency_poll = every;
        self
    }
    /// Refusing a run that already ended ([`DriveOptions::live_only`]).
    pub fn live_only(mut self, live_only: bool) -> Self {
        self.live_only = live_only;
        self
    }
    /// Committing steps as `checkpoints` says.
    pub fn checkpoints(mut self, checkpoints: Checkpoints) -> Self {
        self.checkpoints = checkpoints;
        self
    }
    /// At effects, committing pure steps once `steps` of them (at least 1) or `wait` have
    /// passed since the last commit (by default [`BATCH_STEPS`] and [`BATCH_WAIT`]).
    pub fn batch(mut self, steps: u32, wait: Duration) -> Self {
        self.batch_steps = steps.max(1);
        self.batch_wait = wait;
        self
    }
    /// Stopping when `token` is cancelled ([`DriveOptions::interrupt`]).
    pub fn interrupt_on(mut self, token: CancellationToken) -> Self {
        self.interrupt = Some(token);
        self
    }
    /// Calling `f` with the dependencies not final yet while the run waits.
    pub fn on_wait(mut self, f: fn(&[RunInfo])) -> Self {
        self.on_wait = Some(f);
        self
    }
}
