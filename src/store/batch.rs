//! When a driven run's steps are committed (brief section 13, ADR 0035): every step
//! (`--checkpoints steps`), or at effects (`--checkpoints effects`, the default).
//!
//! At effects, a step that performed an effect the engine cannot repeat (a handler, an
//! `exec` program, a model or tool call, an advisor, a team member: anything the step
//! awaited) is committed as soon as it is resolved, before any later effect starts; the
//! steps without effects before it (rule-based decisions, `set` nodes, calls, returns,
//! handoffs, budget checks) are committed with it, in the same checkpoint. Pure steps are
//! also committed at a pause, a wait or the end, before the lease is given up, and when
//! [`BATCH_STEPS`] steps or [`BATCH_WAIT`] have passed since the last commit. A crash can
//! lose only pure steps, which the resumed run recomputes identically.
//!
//! A batch is one [`StepDelta`]: the run's change log (ADR 0029) is started at the last
//! commit and read at the next, so the slices the batch's steps wrote are merged by key
//! (a slice written by several steps is stored once, as it is at the commit) and a slice
//! no step wrote costs nothing. Nothing is copied per step.

use std::time::{Duration, Instant};

use super::delta::{Before, StepDelta};
use crate::runtime::RunState;

/// How many steps a batch of pure steps holds at most before it is committed.
pub const BATCH_STEPS: u32 = 256;

/// How long a batch of pure steps waits at most (since the last commit) to be committed.
pub const BATCH_WAIT: Duration = Duration::from_millis(100);

/// When [`drive`](super::drive()) commits the steps it takes (`--checkpoints`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Checkpoints {
    /// At effects: a step whose effect cannot be repeated is committed before the next
    /// effect starts, with the pure steps before it; pure steps also at a pause, a wait,
    /// the end, and every [`BATCH_STEPS`] steps or [`BATCH_WAIT`]. The default.
    #[default]
    Effects,
    /// Every step, one checkpoint each.
    Steps,
}

impl Checkpoints {
    /// The name used on the command line (`effects`, `steps`).
    pub fn as_str(self) -> &'static str {
        match self {
            Checkpoints::Effects => "effects",
            Checkpoints::Steps => "steps",
        }
    }
}

/// When a batch of pure steps is full: at most `steps` steps, or `wait` since the last
/// commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) steps: u32,
    pub(crate) wait: Duration,
}

impl Limits {
    /// The limits of `checkpoints`: one step for [`Checkpoints::Steps`].
    pub(crate) fn of(checkpoints: Checkpoints, steps: u32, wait: Duration) -> Self {
        match checkpoints {
            Checkpoints::Effects => Self {
                steps: steps.max(1),
                wait,
            },
            Checkpoints::Steps => Self {
                steps: 1,
                wait: Duration::ZERO,
            },
        }
    }
}

/// The steps taken since the last commit of a run: what the run was at that commit (its
/// change log running since), how many steps, and when the batch started.
#[derive(Debug)]
pub(crate) struct Batch {
    before: Before,
    steps: u32,
    since: Instant,
}

impl Batch {
    /// A batch starting now, at `run` as last committed (its change log started).
    pub(crate) fn start(run: &mut RunState) -> Self {
        Self {
            before: Before::tracking(run),
            steps: 0,
            since: Instant::now(),
        }
    }

    /// Counts one more step taken; true when the batch is to be committed now: the step
    /// performed an effect, the run is no longer running (a pause or an end), or the
    /// batch reached `limits`.
    pub(crate) fn took(&mut self, run: &RunState, effectful: bool, limits: Limits) -> bool {
        self.steps += 1;
        effectful
            || !run.is_running()
            || self.steps >= limits.steps
            || self.since.elapsed() >= limits.wait
    }

    /// Steps taken since the last commit.
    pub(crate) fn steps(&self) -> u32 {
        self.steps
    }

    /// What the batch's steps changed, merged (one delta from the last commit to `run`);
    /// ends the change log.
    pub(crate) fn delta(&self, run: &mut RunState) -> StepDelta {
        StepDelta::since(&self.before, run)
    }
}
