//! One path from a node to a call: [`node_call`] turns a node's behaviour into the call
//! that runs it, for every pattern alike (a dispatched or handed-off node, a router, an
//! advisor, a team member, a team's lead). A new behaviour is added here (and in
//! [`NodeRun`]) and every pattern gets it.

use std::sync::Arc;

use crate::runtime::data::{RunState, Writes};
use crate::runtime::effects::{Call, CallIds, NodeInput, node_stdin};
use crate::runtime::plan::agent::AgentPlan;
use crate::runtime::plan::{NodePlan, NodeRun};

/// How a node runs once planned: one call, a model session, or nothing.
pub(crate) enum NodeCall<'p> {
    /// A handler call or a program run.
    Call(Call),
    /// A model session (an agent node): its plan and the read view its templates see.
    /// Its model and tool calls are steps of their own (see `agent/`).
    Session(&'p AgentPlan, Writes),
}

impl NodeCall<'_> {
    /// The call, for a pattern whose members are plain calls (agents are refused there
    /// by the builder); a session is `Err` with what to say.
    pub(crate) fn into_call(self) -> Result<Call, String> {
        match self {
            NodeCall::Call(c) => Ok(c),
            NodeCall::Session(..) => Err("an agent cannot take part in this pattern".into()),
        }
    }
}

/// The call that runs node `np` as call `ids` of `run` (its input the read view `view`
/// builds, and `error` for a router run again after an invalid route): a handler call,
/// a program run, or an agent's session. `None` for a node that calls nothing (a `set`
/// node, or one without behaviour: its writes are [`NodePlan::constant_writes`]); `view`
/// is then not built.
pub(crate) fn node_call<'p>(
    np: &'p NodePlan,
    run: &RunState,
    ids: CallIds,
    view: impl FnOnce() -> Writes,
    error: Option<String>,
) -> Option<NodeCall<'p>> {
    Some(NodeCall::Call(match &np.run {
        NodeRun::Handler(h) => Call::Node(
            h.clone(),
            NodeInput {
                node: np.id.to_string(),
                view: view(),
                depth: run.depth(),
                subgraph: run.current_subgraph().map(str::to_string),
                step: ids.step,
                run_id: ids.run_id,
                attempt: ids.attempt,
                error,
            },
        ),
        NodeRun::Exec(spec) => Call::Program(
            Arc::clone(spec),
            node_stdin(&np.id, view(), ids, error),
            Some(ids),
        ),
        NodeRun::Agent(agent) => return Some(NodeCall::Session(agent, view())),
        NodeRun::Set(_) | NodeRun::Nothing => return None,
    }))
}
