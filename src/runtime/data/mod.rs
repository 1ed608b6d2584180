//! Plain data, below every other room of the runtime: the run state and what it holds
//! (frames, the pending step, a team's progress, the trace, usage), the outcome, ids and
//! the clock. Nothing here imports from the rest of the runtime; the state machine
//! (`machine`), the effects (`effects`) and the executor all build on it.

mod accounting;
mod advising;
mod call_items;
mod callstack;
mod candidates;
pub(crate) mod changes;
mod clock;
pub(crate) mod decision_memo;
mod decision_trace;
mod event_bus;
mod event_text;
mod events;
mod json_text;
#[cfg(unix)]
mod ms_cache;
mod outcome;
mod output;
mod pending;
mod projected;
mod run_id;
mod run_state;
mod run_state_wire;
mod session;
mod slices;
mod status;
mod team_state;
mod text_buf;
mod trace;

pub use accounting::Accounting;
pub use advising::{AdvisingRun, Seat, SeatReport, SeatState, SeatStatus};
pub use call_items::{CallRecord, HttpAttempt, ModelCallItem, ToolCallItem, ToolCallStatus};
pub use callstack::{Frame, KeptChild, Owed, UncommittedFrame};
pub use candidates::Candidates;
pub use changes::SliceChange;
pub use clock::Clock;
pub use decision_trace::DecisionTrace;
pub use event_bus::{DEFAULT_EVENT_BUFFER, DeltaPublisher, RunEvents, Subscription};
pub use event_text::write_transition_events;
pub use events::{EventKind, EventStamp, RunEvent, transition_event_count, transition_events};
pub use outcome::{RunOutcome, RunSummary};
pub use output::{
    BROADCAST_KEY, COST_USD, EXIT_KEY, FINAL_KEY, INPUT_TOKENS, MESSAGE_KEY, NodeOutput,
    OUTPUT_TOKENS, ROUTE_KEY, USAGE_KEY, Usage, WALL_MS,
};
pub use pending::Pending;
pub use projected::ProjectedState;
pub use run_id::{RunId, RunIdError};
pub use run_state::RunState;
pub use session::{Session, ToolCaller};
pub use slices::{State, Writes};
pub use status::{RunStatus, TerminationReason};
pub use team_state::{Broadcast, BroadcastKind, MemberProgress, MemberStatus, TeamPhase, TeamRun};
pub use trace::{Chain, ChainTrigger, IntoId, ItemDetail, MAX_TRACE_DEPTH, TraceItem, TraceKind};

pub(crate) use callstack::{commit, pick, pick_with_room};
pub(crate) use clock::{elapsed, now_ms};
pub(crate) use output::{Role, accept_as};
pub(crate) use run_state::Control;
pub(crate) use slices::DECISION_TRACE;
pub(crate) use team_state::turn_input;
pub(crate) use trace::trace_depth;
