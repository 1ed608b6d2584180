//! The runtime: routing decisions, budgets, the call stack, the decision trace and the
//! executor.
//!
//! A run is a [`RunState`] (plain serializable data) that an [`Executor`] advances one
//! step at a time; see `docs/spec/runtime.md` for the semantics.

mod budgets;
mod builder;
mod callstack;
mod conditions;
mod decisions;
pub mod exec;
mod executor;
mod guarded;
mod handlers;
mod rules;
mod run_state;
mod status;
mod trace;
mod transitions;

pub use builder::{Clock, ExecutorBuildError, ExecutorBuilder};
pub use callstack::{Frame, UncommittedFrame};
pub use executor::{CLARIFICATION_SLICE, Executor, ResumeError, StartError};
pub use handlers::{
    BoxFuture, HandlerError, NodeHandler, NodeInput, PolicyHandler, PolicyInput, RunContext,
    Writes, sync_node, sync_policy,
};
pub use rules::{RuleOutcome, decide_by_rules};
pub use run_state::{Pending, ProjectedState, RunOutcome, RunState};
pub use status::{RunStatus, TerminationReason};
pub use trace::{DecisionTrace, TraceItem, TraceKind};
