//! The progress of a primary's advisors while some of them are agent sessions under way
//! ([`Pending::Advising`](super::Pending::Advising)): plain serializable data, so a run
//! saved between two rounds of the fork resumes it where it was (see
//! `machine/advisors.rs` and `machine/agent/seats.rs`, ADR 0040).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::slices::Writes;
use super::trace::{Chain, TraceKind};

/// A primary's advisors under way: the primary and how it was reached (kept for its step
/// after the join), the step the fork began at, and each member's seat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvisingRun {
    /// The primary node.
    pub node: Arc<str>,
    /// The supervisor control returns to afterwards.
    pub dispatcher: Arc<str>,
    /// How the primary was reached: `dispatch` or `handoff`.
    pub kind: TraceKind,
    /// The node that handed off to the primary, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Arc<str>>,
    /// Where the primary stands in a chain, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Chain>,
    /// Routers whose own `handoff` is owed (see [`Pending::Handoff`](super::Pending)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owed: Vec<Arc<str>>,
    /// Steps taken before the fork began (the step its advice's nonces are made for).
    pub base: u32,
    /// One seat per member, in `members` order.
    pub seats: Vec<Seat>,
}

/// One advisor's place in a fork: its session still going, or its report in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seat {
    /// The advisor node.
    pub advisor: Arc<str>,
    /// Where it stands.
    pub state: SeatState,
}

/// Where an advisor stands in a fork.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatState {
    /// Its session (this index in the run's sessions) has not ended yet.
    Live {
        /// The session's index in the run's sessions.
        session: u32,
    },
    /// Its report is in.
    Reported(SeatReport),
}

/// An advisor's report, kept until the join writes the advice slice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeatReport {
    /// `ok`, `failed` or `timeout`.
    pub status: SeatStatus,
    /// The report (an agent's exit arguments, a node's output), when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Writes>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Microseconds its calls took.
    pub duration_us: u64,
}

/// How an advisor's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatStatus {
    /// It reported.
    Ok,
    /// It failed (an error, no valid exit, a model error).
    Failed,
    /// A call of it passed its time limit.
    Timeout,
}

impl AdvisingRun {
    /// The members whose sessions are still going, with their session index, in order.
    pub fn live(&self) -> impl Iterator<Item = (usize, &Arc<str>, u32)> {
        self.seats
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s.state {
                SeatState::Live { session } => Some((i, &s.advisor, session)),
                SeatState::Reported(_) => None,
            })
    }
}
