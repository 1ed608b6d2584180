//! The runtime: routing decisions, budgets, the call stack, the decision trace and the
//! executor.

pub mod exec;
mod status;
mod trace;

pub use status::{RunStatus, TerminationReason};
pub use trace::{DecisionTrace, TraceItem, TraceKind};
