//! Checking a node's writes before commit applies any: the node's `writes`, the current
//! subgraph's boundary, the node's `output_schema` and each slice's schema. A `set`
//! node's constant writes are checked once at the root level when the plan is built
//! ([`root_verdicts`]), so the loop step reads the verdict instead of checking them again
//! (ADR 0064).

use serde_json::Value;

use super::step::Level;
use crate::contracts::SYSTEM_SLICE;
use crate::runtime::data::TerminationReason;
use crate::runtime::plan::{NodePlan, NodeRun, Plan, Verdict, check};

/// Checks `writes` (an object of slices) of node `np` at `level`: each slice inside the
/// node's `writes` and the boundary of the level's subgraph, the node's `output_schema`,
/// and each slice's schema, in that order; the first refusal is the verdict.
#[inline(always)]
pub(crate) fn writes_verdict(
    plan: &Plan,
    level: Level<'_>,
    np: &NodePlan,
    writes: &Value,
) -> Verdict {
    let (id, contract) = (&np.id, np.contract(&plan.graph));
    let Value::Object(w) = writes else {
        return Ok(());
    };
    let boundary = level.frame.map(|(sg, _)| (&sg.id, &sg.contract.writes));
    for slice in w.keys() {
        let inside = slice != SYSTEM_SLICE
            && contract.writes.iter().any(|x| x == slice)
            && boundary.is_none_or(|(_, b)| b.iter().any(|x| x == slice));
        if !inside {
            let mut msg = format!(
                "node `{id}` wrote slice `{slice}` outside its writes [{}]",
                contract.writes.join(", ")
            );
            if let Some((g, b)) = boundary {
                msg.push_str(&format!(
                    " or the boundary of subgraph `{g}` [{}]",
                    b.join(", ")
                ));
            }
            return Err((TerminationReason::WriteBoundaryViolation, msg));
        }
    }
    if let Some(schema) = &np.output_schema
        && let Err(msg) = check(schema, writes)
    {
        let msg = format!("the output of node `{id}` does not match its output_schema: {msg}");
        return Err((TerminationReason::NodeFailed, msg));
    }
    for (slice, value) in w {
        if let Some(schema) = plan.slice_schemas.get(slice)
            && let Err(msg) = check(schema, value)
        {
            let msg =
                format!("node `{id}` wrote slice `{slice}` that does not match its schema: {msg}");
            return Err((TerminationReason::NodeFailed, msg));
        }
    }
    Ok(())
}

/// The verdict on each `set` node's constant writes at the root level (`None` for other
/// nodes), in the order of the plan's nodes: what [`writes_verdict`] gives there on every
/// commit, since neither the writes nor the checks change from run to run.
pub(crate) fn root_verdicts(plan: &Plan) -> Vec<Option<Verdict>> {
    plan.nodes
        .values()
        .map(|np| match &np.run {
            NodeRun::Set(writes) => Some(writes_verdict(plan, Level { frame: None }, np, writes)),
            _ => None,
        })
        .collect()
}

/// The verdict on node `np`'s `writes` at `level`: read from the plan for a `set` node's
/// constant at the root level, checked otherwise.
#[inline(always)]
pub(crate) fn verdict_at(
    plan: &Plan,
    level: Level<'_>,
    np: &NodePlan,
    writes: &Value,
    constant: bool,
) -> Verdict {
    match (&np.root_verdict, level.frame, constant) {
        (Some(Ok(())), None, true) => Ok(()),
        (Some(Err((reason, msg))), None, true) => Err((*reason, msg.clone())),
        _ => writes_verdict(plan, level, np, writes),
    }
}
