//! The stable diagnostic codes.

use std::fmt;

use serde::{Serialize, Serializer};

use super::Severity;

/// A stable diagnostic code, shown as `PG` and four digits. Families by hundreds:
/// `PG00xx` documents and references, `PG01xx` the slices the runtime writes, `PG02xx` boundaries,
/// `PG03xx` allowlists, `PG04xx` membership, `PG05xx` reachability, `PG06xx` exits,
/// `PG07xx` recursion, `PG08xx` handoffs, routers, advisors and teams, `PG09xx` schemas,
/// `PG10xx` budgets, `PG11xx` information and `PG12xx` agents, models and tools.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Code(pub u16);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $num:literal, $sev:ident, $title:literal;)*) => {
        impl Code {
            $($(#[$doc])* pub const $name: Code = Code($num);)*

            /// Every code, in numeric order.
            pub const ALL: &'static [Code] = &[$(Code::$name),*];

            /// The severity a diagnostic with this code has outside strict mode.
            pub fn severity(self) -> Severity {
                match self.0 {
                    $($num => Severity::$sev,)*
                    _ => Severity::Error,
                }
            }

            /// A short title for the code.
            pub fn title(self) -> &'static str {
                match self.0 {
                    $($num => $title,)*
                    _ => "unknown code",
                }
            }
        }
    };
}

codes! {
    /// The document could not be read, parsed or deserialized.
    LOAD = 0, Error, "document cannot be loaded";
    /// Two contracts share an id.
    ID_COLLISION = 1, Error, "id collision";
    /// A reference names no contract.
    UNKNOWN_ID = 2, Error, "unknown id";
    /// A reference names a contract of the wrong kind.
    WRONG_KIND = 3, Error, "id of the wrong kind";
    /// A slice name (reads, writes, trigger path, result_slice) is not declared.
    UNKNOWN_SLICE = 4, Error, "undeclared slice";
    /// A trigger path is not a JSON Pointer starting with a slice.
    BAD_PATH = 5, Error, "malformed trigger path";
    /// The reserved slice `system` is written.
    SYSTEM_WRITE = 101, Error, "write to the reserved slice `system`";
    /// A supervisor can decide `ask_clarification` but no `clarification` slice is
    /// declared (information only when just a `policy` may ask).
    NO_CLARIFICATION_SLICE = 102, Warning, "clarification without a `clarification` slice";
    /// A slice name begins with `$` (reserved for the node output envelope).
    RESERVED_SLICE_NAME = 103, Error, "slice name beginning with `$`";
    /// A member node reads a slice outside its subgraph's boundary.
    BOUNDARY_READ = 201, Error, "read outside the subgraph boundary";
    /// A member node writes a slice outside its subgraph's `writes`.
    BOUNDARY_WRITE = 202, Error, "write outside the subgraph boundary";
    /// A trigger evaluated inside a subgraph reads a slice the subgraph cannot see.
    BOUNDARY_TRIGGER = 203, Error, "trigger outside the subgraph boundary";
    /// A nested subgraph's boundary is not within its caller's.
    BOUNDARY_NESTED = 204, Error, "nested boundary wider than the caller's";
    /// `result_slice` is not writable at the caller's level.
    RESULT_SLICE = 205, Error, "result slice outside the caller's boundary";
    /// A supervisor has an empty allowlist.
    EMPTY_ALLOW = 301, Error, "empty allowlist";
    /// An allowlist names a node owned at another level.
    ALLOW_OTHER_LEVEL = 302, Error, "allowlist entry from another level";
    /// The fallback node is not in the allowlist.
    FALLBACK_NOT_ALLOWED = 303, Error, "fallback not in the allowlist";
    /// An allowed entry without triggers can never be chosen by a rule-based supervisor.
    NEVER_CHOSEN = 304, Warning, "allowed entry can never be chosen";
    /// The default decision names an entry outside the allowlist.
    DEFAULT_NOT_ALLOWED = 305, Error, "default decision outside the allowlist";
    /// A supervisor is a member of more than one subgraph.
    MULTI_MEMBERSHIP = 401, Error, "supervisor in several subgraphs";
    /// A subgraph's entrypoint is not one of its member supervisors.
    ENTRYPOINT_NOT_MEMBER = 402, Error, "entrypoint not a member";
    /// The workflow's entry supervisor is a member of a subgraph.
    ENTRY_IN_SUBGRAPH = 403, Error, "entry inside a subgraph";
    /// An exitpoint is not a node of its subgraph.
    EXITPOINT_NOT_MEMBER = 404, Error, "exitpoint not a member";
    /// A supervisor, node or subgraph cannot be reached from `entry`.
    UNREACHABLE = 501, Warning, "unreachable";
    /// A subgraph has no way to return.
    NO_RETURN = 601, Error, "subgraph cannot return";
    /// The root level has no way to end the run.
    NO_END = 602, Error, "workflow cannot end";
    /// A cycle of dispatch edges with no exit.
    DISPATCH_CYCLE = 603, Error, "dispatch cycle without exit";
    /// Subgraphs call each other in a cycle.
    RECURSION = 701, Warning, "recursive subgraph calls";
    /// Static nesting deeper than `max_depth`.
    TOO_DEEP = 702, Warning, "nesting deeper than max_depth";
    /// Handoffs form a cycle.
    HANDOFF_CYCLE = 801, Error, "handoff cycle";
    /// A handoff target is owned at another level.
    HANDOFF_OTHER_LEVEL = 802, Error, "handoff to another level";
    /// The upstream output schema does not provide what the downstream input requires.
    HANDOFF_SCHEMA = 803, Error, "handoff schemas do not match";
    /// A node has both `terminal` and `handoff` (the runtime would ignore one of them).
    TERMINAL_HANDOFF = 804, Error, "terminal node with a handoff";
    /// The hop-fit proof cannot decide whether a handoff's schemas fit.
    HANDOFF_SCHEMA_UNDECIDED = 805, Info, "handoff fit not decided";
    /// A router declares no destination.
    ROUTER_NO_DESTINATIONS = 810, Error, "router without destinations";
    /// A router names the same destination twice.
    ROUTER_DUPLICATE_DESTINATION = 811, Error, "duplicate router destination";
    /// A router names itself as a destination.
    ROUTER_SELF_DESTINATION = 812, Error, "router routes to itself";
    /// A router's destination node is owned at another level.
    ROUTER_OTHER_LEVEL = 813, Error, "router destination at another level";
    /// A router's `message_slice` is not a declared slice (or is `system`).
    ROUTER_MESSAGE_SLICE = 814, Error, "undeclared router message slice";
    /// A router's destination does not read its `message_slice`.
    ROUTER_MESSAGE_UNREAD = 815, Warning, "router message not read by a destination";
    /// A router is `terminal` (it names its successor; `may_answer` lets it end its level).
    ROUTER_TERMINAL = 816, Error, "terminal router";
    /// Routers and handoffs form a cycle that no supervisor decision or `max_visits`
    /// bounds.
    ROUTER_CYCLE = 817, Error, "unbounded router cycle";
    /// An advisor is missing, not a node, the primary itself, or listed twice.
    BAD_ADVISOR = 820, Error, "invalid advisor";
    /// An advisor has `terminal`, `handoff`, `router` or `advisors` of its own.
    ADVISOR_WITH_PATTERN = 821, Error, "advisor with a pattern of its own";
    /// The advice slice is not declared, or the primary does not read it.
    BAD_ADVICE_SLICE = 822, Error, "advice slice not declared or not read";
    /// `advisors.members` is empty.
    NO_ADVISORS = 823, Warning, "advisors without members";
    /// A team member is missing, not a node, the team node itself, the lead, or listed
    /// twice.
    BAD_TEAM_MEMBER = 830, Error, "invalid team member";
    /// A team's lead is missing, not a node, or the team node itself.
    BAD_TEAM_LEAD = 831, Error, "invalid team lead";
    /// A team member or lead has `terminal`, `handoff`, `router`, `team` or `advisors`.
    TEAM_PARTICIPANT_WITH_PATTERN = 832, Error, "team member or lead with a pattern";
    /// A team node has a `run` (or `router`, or `advisors`): running it runs the team.
    TEAM_NODE_WITH_RUN = 833, Error, "team node with its own run";
    /// The team slice is not declared (or is `system`).
    BAD_TEAM_SLICE = 834, Error, "team slice not declared";
    /// `team.members` is empty.
    NO_TEAM_MEMBERS = 835, Warning, "team without members";
    /// `member_max_turns` or `lead_max_turns` is 0.
    TEAM_NO_TURNS = 836, Error, "team limit of zero turns";
    /// A supervisor's `clarify` default names a subgraph it may not call, or one that is
    /// not `chat`.
    CLARIFY_UNAVAILABLE = 840, Error, "clarify default cannot clarify";
    /// A `chat` subgraph's boundary does not read `clarification`.
    CHAT_WITHOUT_CLARIFICATION = 841, Warning, "chat subgraph does not read clarification";
    /// A JSON Schema does not compile.
    BAD_SCHEMA = 901, Error, "invalid JSON Schema";
    /// `max_steps` is 0.
    ZERO_STEPS = 1001, Error, "max_steps is 0";
    /// `max_depth` is 0 while subgraphs exist.
    ZERO_DEPTH = 1002, Error, "max_depth is 0 with subgraphs";
    /// `max_reentry` is 0 while subgraphs exist.
    ZERO_REENTRY = 1003, Error, "max_reentry is 0";
    /// A budget or limit is absurdly large, or a timeout or `max_visits` is 0.
    ABSURD_BUDGET = 1004, Warning, "absurd budget";
    /// A node's `retry` policy can never run an attempt (`max_attempts: 0`).
    ZERO_ATTEMPTS = 1005, Error, "retry with max_attempts 0";
    /// A node's `retry` policy never retries (`on: []`, `max_attempts: 1`, or a node that
    /// cannot fail: no handler or program).
    RETRY_NEVER = 1006, Warning, "retry that never retries";
    /// `max_tokens` is 0, or `max_cost_usd` is 0 or negative: no step can ever run.
    ZERO_USAGE_BUDGET = 1007, Error, "usage budget of 0 or less";
    /// A slice is written by several nodes.
    SHARED_WRITE = 1101, Info, "slice written by several nodes";
    /// A slice is written but never read.
    WRITE_ONLY = 1102, Info, "slice written but never read";
    /// An agent names a model that is not a key of `models`.
    UNKNOWN_MODEL = 1201, Error, "unknown model";
    /// A model's `params` hold a key the engine sets itself.
    ENGINE_PARAM = 1202, Error, "model parameter the engine sets";
    /// An agent's `instructions` or `prompt` is not a valid MiniJinja template.
    BAD_TEMPLATE = 1203, Error, "template does not parse";
    /// A template names a variable that is neither a slice the agent sees nor `input`.
    TEMPLATE_UNKNOWN_VARIABLE = 1204, Error, "template names a slice not read";
    /// A tool node can be dispatched (it is in an `allow`, a `default`, a `fallback`, a
    /// `handoff`, router `destinations`, advisors or a team).
    DISPATCHABLE_TOOL = 1205, Error, "tool node reachable by dispatch";
    /// A tool node has no `description`, no `parameters` or no `run`.
    INCOMPLETE_TOOL = 1206, Error, "incomplete tool node";
    /// A tool node writes slices (its output is the tool's result).
    TOOL_WRITES = 1207, Error, "tool node that writes slices";
    /// A tool's `parameters` is not an object schema (`{"type": "object", ...}`).
    BAD_TOOL_PARAMETERS = 1208, Error, "tool parameters not an object schema";
    /// An agent's `tools` names something that is not a tool node.
    NOT_A_TOOL = 1209, Error, "not a tool node";
    /// An agent's `max_turns` is 0.
    ZERO_TURNS = 1210, Error, "agent limit of zero turns";
    /// A tool node is `terminal`, has a `handoff`, `triggers`, `router`, `advisors` or
    /// `team`: none applies to a tool.
    TOOL_WITH_PATTERN = 1211, Error, "tool node with a pattern";
    /// A tool node's id cannot be a function name: not 1-64 letters, digits, `_` or `-`,
    /// or an exit tool's name (`final_report`, `handoff_to`, `team_broadcast`, `route`).
    BAD_TOOL_NAME = 1212, Error, "tool id unusable as a function name";
    /// An agent lists the same tool twice.
    DUPLICATE_TOOL = 1213, Error, "tool listed twice";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PG{:04}", self.0)
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_sorted_and_shown_with_four_digits() {
        assert!(Code::ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(Code::UNKNOWN_SLICE.to_string(), "PG0004");
        assert_eq!(Code::ZERO_STEPS.to_string(), "PG1001");
        assert_eq!(Code::UNREACHABLE.severity(), Severity::Warning);
        assert_eq!(Code::WRITE_ONLY.severity(), Severity::Info);
        assert_eq!(Code(9999).title(), "unknown code");
    }
}
