//! The runtime: routing decisions, budgets, the call stack, the decision trace and the
//! executor.
//!
//! In rooms, each importing only from the rooms below it (see `docs/architecture.md` and
//! ADR 0025): `data` (the run as plain data), `effects` (calls described as data, the
//! handler interface, guarded execution, programs), `plan` (the compiled workflow the
//! executor reads), `machine` (the state machine: plan, resolve, commit, one file or
//! folder per pattern), and on top the executor, its builder and the run record.
//!
//! A run is a [`RunState`] (plain serializable data) that an [`Executor`] advances one
//! step at a time. Each step is planned from the run without changing it, waits on at
//! most a policy call and a node call ([`Effect`]s), and is then committed in one
//! synchronous transition ([`Step`]); the executor's `docs/spec/runtime.md` gives the
//! semantics.

mod agents;
mod builder;
mod data;
mod effects;
mod executor;
mod machine;
mod plan;
#[cfg(test)]
mod planning_clock;
mod record;
#[cfg(test)]
mod step_counts;
#[cfg(test)]
mod testing;

pub use builder::{ExecutorBuildError, ExecutorBuilder, document_dir};
pub use data::{
    Accounting, AdvisingRun, BROADCAST_KEY, Broadcast, BroadcastKind, COST_USD, CallRecord,
    Candidates, Chain, ChainTrigger, Clock, DEFAULT_EVENT_BUFFER, DecisionTrace, DeltaPublisher,
    EXIT_KEY, EventKind, EventStamp, FINAL_KEY, Frame, HttpAttempt, INPUT_TOKENS, IntoId,
    ItemDetail, KeptChild, MAX_TRACE_DEPTH, MESSAGE_KEY, MemberProgress, MemberStatus,
    ModelCallItem, NodeOutput, OUTPUT_TOKENS, Owed, Pending, ProjectedState, ROUTE_KEY, RunEvent,
    RunEvents, RunId, RunIdError, RunOutcome, RunState, RunStatus, RunSummary, Seat, SeatReport,
    SeatState, SeatStatus, Session, SliceChange, State, Subscription, TeamPhase, TeamRun,
    TerminationReason, ToolCallItem, ToolCallStatus, ToolCaller, TraceItem, TraceKind, USAGE_KEY,
    UncommittedFrame, Usage, WALL_MS, Writes, transition_event_count, transition_events,
    write_transition_events,
};
pub use effects::{
    BoxFuture, Effect, EffectKind, EffectOutput, HandlerError, NodeHandler, NodeInput,
    PolicyHandler, PolicyInput, RunContext, sync_node, sync_policy,
};
pub use executor::{Executor, ResumeError, ResumeErrorKind, StartError};
pub use machine::Step;
pub use plan::TraceView;
pub use record::{RUN_RECORD_FORMAT, RecordError, RunRecord, digest_of};

/// The slice `resume` writes the answer to (defined with the contracts, which the
/// validator reads too).
pub use crate::contracts::CLARIFICATION_SLICE;
