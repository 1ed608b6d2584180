//! Run status and termination reasons.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// More steps to take.
    Running,
    /// Ended normally (`stop_global`, `stop_local` at the root, a terminal node).
    Completed,
    /// Ended by a guard (budgets, cycles, deadline, cancellation).
    Stopped,
    /// Ended by an error (a node failed, a boundary or schema was violated).
    Failed,
    /// Paused by `ask_clarification`; resume with an answer.
    AwaitingInput,
}

impl RunStatus {
    /// True once the run can take no more steps without a resume.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Running)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Stopped => "stopped",
            RunStatus::Failed => "failed",
            RunStatus::AwaitingInput => "awaiting_input",
        })
    }
}

/// Why a run (or a level of it) ended, or why a decision was overridden.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TerminationReason {
    /// A supervisor chose `stop_global`.
    StopGlobal,
    /// `stop_local` at the root, or a child's `should_end` honoured.
    StopLocal,
    /// A terminal node (or exitpoint) ended the root level.
    Terminal,
    /// The run paused for a clarification.
    AwaitingInput,
    /// More than `max_steps` steps.
    MaxStepsExceeded,
    /// Entering deeper than `max_depth`.
    MaxDepthExceeded,
    /// A subgraph entered more than `max_reentry` times, or a node past `max_visits`.
    CycleDetected,
    /// A decision outside the allowlist, or naming an unknown id.
    AllowlistViolation,
    /// A node wrote outside its `writes`.
    WriteBoundaryViolation,
    /// A subgraph's input failed its `input_schema`.
    SubgraphInputInvalid,
    /// A subgraph's output failed its `output_schema`.
    SubgraphOutputInvalid,
    /// A node or policy returned an error, panicked or printed garbage.
    NodeFailed,
    /// The run deadline or a node's time limit passed.
    Timeout,
    /// The run was cancelled.
    Cancelled,
    /// A node's output broke the output envelope: an unknown `$` key, a `$` key its role
    /// may not send, or a malformed `$usage`.
    InvalidOutput,
    /// A chain stage reached through a handoff got an input its `input_schema` rejects.
    InvalidChainPayload,
    /// A router named no valid destination in `$route`, on its first run and on each
    /// retry.
    InvalidRoute,
    /// A dependency of the run ended other than `completed` (with `on_dep_failure: abort`),
    /// before any step.
    DependencyFailed,
    /// A dependency was not final by the run's dependency timeout.
    DependencyTimeout,
    /// The nodes' reported usage reached the run's `max_tokens` or `max_cost_usd`.
    BudgetExceeded,
    /// A supervisor asked a subgraph to clarify that is not `chat`, or that has not
    /// returned at its level.
    ClarifyUnavailable,
    /// A team's lead did not answer `$final: true` on its final turn (no member was
    /// active, its `lead_max_turns` was reached, or a broadcast overflowed).
    TeamNoFinal,
    /// A model call of an agent failed for good: a status that is not retried, or the
    /// retries ran out (the message names the node, the model and the status).
    ModelError,
    /// An agent session used its `max_turns` without a valid exit tool call.
    AgentNoExit,
}

impl TerminationReason {
    /// The reason as written in traces and output (`max_steps_exceeded`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationReason::StopGlobal => "stop_global",
            TerminationReason::StopLocal => "stop_local",
            TerminationReason::Terminal => "terminal",
            TerminationReason::AwaitingInput => "awaiting_input",
            TerminationReason::MaxStepsExceeded => "max_steps_exceeded",
            TerminationReason::MaxDepthExceeded => "max_depth_exceeded",
            TerminationReason::CycleDetected => "cycle_detected",
            TerminationReason::AllowlistViolation => "allowlist_violation",
            TerminationReason::WriteBoundaryViolation => "write_boundary_violation",
            TerminationReason::SubgraphInputInvalid => "subgraph_input_invalid",
            TerminationReason::SubgraphOutputInvalid => "subgraph_output_invalid",
            TerminationReason::NodeFailed => "node_failed",
            TerminationReason::Timeout => "timeout",
            TerminationReason::Cancelled => "cancelled",
            TerminationReason::InvalidOutput => "invalid_output",
            TerminationReason::InvalidChainPayload => "invalid_chain_payload",
            TerminationReason::InvalidRoute => "invalid_route",
            TerminationReason::DependencyFailed => "dependency_failed",
            TerminationReason::DependencyTimeout => "dependency_timeout",
            TerminationReason::BudgetExceeded => "budget_exceeded",
            TerminationReason::ClarifyUnavailable => "clarify_unavailable",
            TerminationReason::TeamNoFinal => "team_no_final",
            TerminationReason::ModelError => "model_error",
            TerminationReason::AgentNoExit => "agent_no_exit",
        }
    }

    /// True for the guards (budgets, cycles, deadline, cancellation): status `stopped`.
    pub fn is_guard(self) -> bool {
        matches!(
            self,
            TerminationReason::MaxStepsExceeded
                | TerminationReason::MaxDepthExceeded
                | TerminationReason::CycleDetected
                | TerminationReason::Timeout
                | TerminationReason::Cancelled
                | TerminationReason::BudgetExceeded
        )
    }
}

impl fmt::Display for TerminationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
