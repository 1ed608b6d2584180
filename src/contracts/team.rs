//! `Team`: member nodes that broadcast to each other in cycles, and a lead that answers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::strings;

/// A node's `team` field: running the node runs the team (brief §5.5). In each cycle
/// every active member takes one turn, concurrently, and may broadcast (`$broadcast`) or
/// leave (`$exit`); then the lead takes one turn with what was broadcast and either
/// starts the next cycle (`$broadcast`) or ends the team (`$final: true`, its writes
/// applied as the team node's). The engine writes the transcript to `slice`.
///
/// ```
/// use pactgraph::{NodeContract, Team};
/// let n = NodeContract::new("review")
///     .writes(["decision"])
///     .team(Team::new(["critic", "optimist"], "chair", "team").member_max_turns(3));
/// let team = n.team.expect("set");
/// assert_eq!((team.member_max_turns, team.lead_max_turns), (3, 12));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Team {
    /// The member nodes, in declaration order (which orders each cycle's broadcasts).
    pub members: Vec<String>,
    /// The lead node: it reads each cycle's broadcasts and gives the team's answer.
    pub lead: String,
    /// The slice members and the lead read their team input from, and that holds the
    /// transcript when the team ends (declared).
    pub slice: String,
    /// Most turns a member may take; one more cycle needing it fails it.
    #[serde(default = "default_member_max_turns")]
    pub member_max_turns: u32,
    /// Most turns the lead may take; the last one must be final.
    #[serde(default = "default_lead_max_turns")]
    pub lead_max_turns: u32,
    /// The largest broadcast (its `message` serialized as JSON, in bytes); a larger one
    /// is replaced by an `overflow` broadcast and the lead's next turn is final.
    #[serde(default = "default_max_broadcast_bytes")]
    pub max_broadcast_bytes: u64,
}

fn default_member_max_turns() -> u32 {
    6
}

fn default_lead_max_turns() -> u32 {
    12
}

fn default_max_broadcast_bytes() -> u64 {
    65_536
}

impl Team {
    /// A team of `members` led by `lead`, its input and transcript in `slice`, with the
    /// default limits (6 member turns, 12 lead turns, 65536-byte broadcasts).
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(
        members: I,
        lead: impl Into<String>,
        slice: impl Into<String>,
    ) -> Self {
        Self {
            members: strings(members),
            lead: lead.into(),
            slice: slice.into(),
            member_max_turns: default_member_max_turns(),
            lead_max_turns: default_lead_max_turns(),
            max_broadcast_bytes: default_max_broadcast_bytes(),
        }
    }

    /// Sets the most turns a member may take.
    pub fn member_max_turns(mut self, n: u32) -> Self {
        self.member_max_turns = n;
        self
    }

    /// Sets the most turns the lead may take.
    pub fn lead_max_turns(mut self, n: u32) -> Self {
        self.lead_max_turns = n;
        self
    }

    /// Sets the largest broadcast, in bytes of JSON.
    pub fn max_broadcast_bytes(mut self, n: u64) -> Self {
        self.max_broadcast_bytes = n;
        self
    }
}
