//! Effects: the calls a step waits on, described as data by planning ([`Effect`]) and
//! performed by a driver; the handler interface they call ([`NodeHandler`],
//! [`PolicyHandler`]), guarded execution (panics caught, time limits, cancellation) and
//! programs (`exec`). Above plain data; below the plan (which holds the handlers) and the
//! state machine. Nothing here touches a run.

mod cancel_watch;
mod effect;
pub(crate) mod exec;
mod guarded;
mod handlers;
mod perform;
mod tools;

pub use effect::{Effect, EffectKind, EffectOutput};
pub use handlers::{
    BoxFuture, HandlerError, NodeHandler, NodeInput, PolicyHandler, PolicyInput, RunContext,
    sync_node, sync_policy,
};

pub(crate) use cancel_watch::CancelWatch;
pub(crate) use effect::{
    Call, CallIds, Member, MemberCall, ModelCall, ModelReply, Produced, Report, ReportStatus,
    ToolInvocation, node_stdin,
};
pub(crate) use guarded::Fault;
pub(crate) use handlers::{SharedNode, SharedPolicy};
pub(crate) use perform::Performer;
