//! The runtime: routing decisions, budgets, the call stack, the decision trace and the
//! executor.
//!
//! A run is a [`RunState`] (plain serializable data) that an [`Executor`] advances one
//! step at a time. Each step is planned from the run without changing it, waits on at
//! most a policy call and a node call ([`Effect`]s), and is then committed in one
//! synchronous transition ([`Step`]); the executor's `docs/spec/runtime.md` gives the
//! semantics.

mod advisors;
mod budgets;
mod builder;
mod clarify;
mod data;
mod decide;
mod decisions;
mod effects;
pub mod exec;
mod executor;
mod failures;
mod guarded;
mod handlers;
mod plan_node;
mod record;
mod retry;
mod route;
mod rules;
mod step;
mod team;
mod team_commit;
#[cfg(test)]
mod testing;
mod transitions;
mod views;

pub use builder::{ExecutorBuildError, ExecutorBuilder};
pub use data::{
    Accounting, BROADCAST_KEY, Broadcast, BroadcastKind, COST_USD, Chain, ChainTrigger, Clock,
    DecisionTrace, EXIT_KEY, FINAL_KEY, Frame, INPUT_TOKENS, ItemDetail, KeptChild,
    MAX_TRACE_DEPTH, MESSAGE_KEY, MemberProgress, MemberStatus, NodeOutput, OUTPUT_TOKENS, Owed,
    Pending, ProjectedState, ROUTE_KEY, RunId, RunIdError, RunOutcome, RunState, RunStatus,
    RunSummary, State, TeamPhase, TeamRun, TerminationReason, TraceItem, TraceKind, USAGE_KEY,
    UncommittedFrame, Usage, WALL_MS, Writes,
};
pub use effects::{Effect, EffectKind, EffectOutput};
pub use executor::{CLARIFICATION_SLICE, Executor, ResumeError, ResumeErrorKind, StartError};
pub use handlers::{
    BoxFuture, HandlerError, NodeHandler, NodeInput, PolicyHandler, PolicyInput, RunContext,
    sync_node, sync_policy,
};
pub use record::{RUN_RECORD_FORMAT, RecordError, RunRecord, digest_of};
pub use step::Step;
