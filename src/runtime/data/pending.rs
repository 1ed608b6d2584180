//! `Pending`: what the next step of a running run does (a supervisor decides, a chain
//! stage or an advised node runs, a router runs again, a router's destination subgraph is
//! entered, a team's next cycle or lead turn, an agent session's next call). Part of the
//! run state; split from `run_state.rs`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::advising::AdvisingRun;
use super::team_state::TeamRun;
use super::trace::{Chain, TraceKind};

/// What the next step of a running run does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
// A plain tag byte: read on every step (and dropped with the old control), it is cheaper to
// decode than a niche once the rarer router variants are in (measured on `bench loop`).
#[repr(u8)]
pub enum Pending {
    /// The supervisor decides (at the current level).
    Decide {
        /// The deciding supervisor.
        supervisor: Arc<str>,
    },
    /// A node runs next without a decision (a handoff).
    Handoff {
        /// The node to run.
        node: Arc<str>,
        /// The supervisor control returns to afterwards.
        dispatcher: Arc<str>,
        /// The node that handed off (the trace item's `source`).
        from: Arc<str>,
        /// Where `node` stands in its chain (the trace item's `chain`).
        chain: Chain,
        /// Routers whose own `handoff` is still owed, innermost last: when this chain
        /// completes, the last one's handoff runs instead of control returning.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        owed: Vec<Arc<str>>,
    },
    /// A router runs again because its last `$route` was invalid.
    Retry {
        /// The router.
        node: Arc<str>,
        /// The supervisor control returns to afterwards.
        dispatcher: Arc<str>,
        /// How the router was reached (`dispatch` or `handoff`), as on its first run.
        kind: TraceKind,
        /// The trace item's `source`, as on its first run.
        source: Option<Arc<str>>,
        /// Where the router stands in its chain.
        chain: Chain,
        /// The router's run number in this routing (2 for the first retry; its call is
        /// attempt 1 of a new step).
        run: u32,
        /// What was wrong with the last route: `error` on the program's stdin.
        error: String,
        /// As for [`Pending::Handoff`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        owed: Vec<Arc<str>>,
    },
    /// A router's destination subgraph is entered, as if the router's supervisor had
    /// decided it.
    Call {
        /// The subgraph.
        subgraph: Arc<str>,
        /// The calling supervisor (the router's dispatcher).
        caller: Arc<str>,
        /// The router that named it.
        router: Arc<str>,
        /// Where the subgraph stands in the router's chain (the call item's `chain`).
        chain: Chain,
        /// As for [`Pending::Handoff`]: owed once the subgraph returns.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        owed: Vec<Arc<str>>,
    },
    /// A node whose advisors have reported runs next (the reports are in its advice
    /// slice); it is reached as it was when the advisors started.
    Advised {
        /// The node to run (the primary).
        node: Arc<str>,
        /// The supervisor control returns to afterwards.
        dispatcher: Arc<str>,
        /// How it was reached: `dispatch` or `handoff`.
        kind: TraceKind,
        /// The node that handed off to it, if any (the trace item's `source`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Arc<str>>,
        /// Where it stands in a chain, if it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain: Option<Chain>,
        /// As for [`Pending::Handoff`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        owed: Vec<Arc<str>>,
    },
    /// An agent node's session is under way: its next model call, or the tool calls of
    /// its last reply, is next. The conversation is in the run's sessions.
    Session {
        /// The agent node.
        node: Arc<str>,
        /// The supervisor control returns to afterwards.
        dispatcher: Arc<str>,
        /// How it was reached: `dispatch` or `handoff` (its item's kind when it ends).
        kind: TraceKind,
        /// Its item's `source` when it ends (the dispatching supervisor, or the node that
        /// handed off to it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Arc<str>>,
        /// Where it stands in a chain, if it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain: Option<Chain>,
        /// As for [`Pending::Handoff`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        owed: Vec<Arc<str>>,
        /// The session's index in the run's sessions.
        session: u32,
    },
    /// A supervisor's policy agent is deciding (brief 10.2): its next model call, or the
    /// tool calls of its last reply, is next; a reply with a valid `route` call is the
    /// decision, planned in the next step. The conversation is in the run's sessions.
    Deciding {
        /// The deciding supervisor.
        supervisor: Arc<str>,
        /// The session's index in the run's sessions.
        session: u32,
        /// Model calls the session made before this decision: a clarification continues
        /// the entrypoint's last session (brief 10.3), and `max_turns` counts this
        /// decision's calls only.
        #[serde(default, skip_serializing_if = "is_zero")]
        earlier: u32,
    },
    /// A team is under way: its members' next cycle, or its lead's next turn, is next.
    /// Boxed: it carries the team's transcript and progress.
    Team(Box<TeamRun>),
    /// A primary's advisors are under way, some of them agent sessions: the next round
    /// of their fork (each live session's next call, at once) is next. Boxed: it carries
    /// every member's seat.
    Advising(Box<AdvisingRun>),
}

impl Pending {
    /// The supervisor in charge of the level the next step happens in.
    pub fn supervisor(&self) -> &Arc<str> {
        match self {
            Pending::Decide { supervisor } | Pending::Deciding { supervisor, .. } => supervisor,
            Pending::Handoff { dispatcher, .. }
            | Pending::Retry { dispatcher, .. }
            | Pending::Advised { dispatcher, .. }
            | Pending::Session { dispatcher, .. } => dispatcher,
            Pending::Team(team) => &team.dispatcher,
            Pending::Advising(a) => &a.dispatcher,
            Pending::Call { caller, .. } => caller,
        }
    }
}

/// Whether a count is zero (left out when serialized).
fn is_zero(n: &u32) -> bool {
    *n == 0
}
