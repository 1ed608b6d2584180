//! The state machine: a step planned from the run (decide, gate, describe the call as an
//! effect), resolved with the effect's output, and committed in one synchronous
//! transition. One file or folder per pattern, as each adds its own planning and commit:
//! nodes (`plan_node.rs`), supervisors (`decide.rs`, `decisions.rs`), chains and routers
//! (`chains.rs`), advisors (`advisors.rs`), teams (`team/`), clarify (`clarify.rs`),
//! node retries (`retry.rs`). Shared by all: the step's data (`step.rs`), the planning
//! type ([`Planner`]), one path from a node to its call (`calls.rs`), budgets, the views
//! nodes and policies read (`views.rs`) and the commit type (`commit.rs`, `failures.rs`).
//!
//! Above plain data, the effects and the plan; below the executor, which reads the clock,
//! holds the cancellation token and calls [`Planner::begin`], [`Planner::resolve`] and
//! [`commit_step`].

mod advisors;
mod agent;
mod budgets;
mod calls;
mod chains;
mod clarify;
mod commit;
mod decide;
mod decisions;
mod failures;
mod levels;
mod plan_node;
mod planner;
mod planning;
mod retry;
mod step;
mod step_parts;
mod team;
mod views;
mod writes;

pub use step::Step;

pub(crate) use planner::Planner;
pub(crate) use planning::{commit_in_place, commit_step};
pub(crate) use step::item;
pub(crate) use writes::root_verdicts;
