//! The runtime: routing decisions, budgets, the call stack, the decision trace and the
//! executor.
//!
//! A run is a [`RunState`] (plain serializable data) that an [`Executor`] advances one
//! step at a time. Each step is planned from the run without changing it, waits on at
//! most a policy call and a node call ([`Effect`]s), and is then committed in one
//! synchronous transition ([`Step`]); the executor's `docs/spec/runtime.md` gives the
//! semantics.

mod accounting;
mod advisors;
mod budgets;
mod builder;
mod callstack;
mod changes;
mod clarify;
mod decide;
mod decisions;
mod effects;
pub mod exec;
mod executor;
mod failures;
mod guarded;
mod handlers;
mod outcome;
mod output;
mod pending;
mod plan_node;
mod record;
mod retry;
mod route;
mod rules;
mod run_state;
mod status;
mod step;
mod team;
mod team_commit;
mod team_state;
#[cfg(test)]
mod testing;
mod trace;
mod transitions;
mod views;

pub use accounting::Accounting;
pub use builder::{Clock, ExecutorBuildError, ExecutorBuilder, TraceView};
pub use callstack::{Frame, KeptChild, Owed, UncommittedFrame};
pub use effects::{Effect, EffectKind, EffectOutput};
pub use executor::{CLARIFICATION_SLICE, Executor, ResumeError, ResumeErrorKind, StartError};
pub use handlers::{
    BoxFuture, HandlerError, NodeHandler, NodeInput, PolicyHandler, PolicyInput, RunContext,
    Writes, sync_node, sync_policy,
};
pub use outcome::{RunOutcome, RunSummary};
pub use output::{
    BROADCAST_KEY, COST_USD, EXIT_KEY, FINAL_KEY, INPUT_TOKENS, MESSAGE_KEY, NodeOutput,
    OUTPUT_TOKENS, ROUTE_KEY, USAGE_KEY, Usage, WALL_MS,
};
pub use record::{RUN_RECORD_FORMAT, RecordError, RunId, RunIdError, RunRecord, digest_of};
pub use run_state::{Pending, ProjectedState, RunState, State};
pub use status::{RunStatus, TerminationReason};
pub use step::Step;
pub use team_state::{Broadcast, BroadcastKind, MemberProgress, MemberStatus, TeamPhase, TeamRun};
pub use trace::{
    Chain, ChainTrigger, DecisionTrace, ItemDetail, MAX_TRACE_DEPTH, TraceItem, TraceKind,
};
