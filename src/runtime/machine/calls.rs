//! One path from a node to a call: [`node_call`] turns a node's behaviour into the call
//! that runs it, for every pattern alike (a dispatched or handed-off node, a router, an
//! advisor, a team member, a team's lead). A new behaviour is added here (and in
//! [`NodeRun`]) and every pattern gets it.

use std::sync::Arc;

use crate::runtime::data::{RunState, Writes};
use crate::runtime::effects::{Call, CallIds, NodeInput, node_stdin};
use crate::runtime::plan::{NodePlan, NodeRun};

/// The call that runs node `np` as call `ids` of `run` (its input the read view `view`
/// builds, and `error` for a router run again after an invalid route): a handler call or
/// a program run. `None` for a node that calls nothing (a `set` node, or one without
/// behaviour: its writes are [`NodePlan::constant_writes`]); `view` is then not built.
pub(crate) fn node_call(
    np: &NodePlan,
    run: &RunState,
    ids: CallIds,
    view: impl FnOnce() -> Writes,
    error: Option<String>,
) -> Option<Call> {
    match &np.run {
        NodeRun::Handler(h) => Some(Call::Node(
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
        )),
        NodeRun::Exec(spec) => Some(Call::Program(
            Arc::clone(spec),
            node_stdin(&np.id, view(), ids, error),
            Some(ids),
        )),
        NodeRun::Set(_) | NodeRun::Nothing => None,
    }
}
