//! Building an agent's plan (see [`AgentPlan`]), for an agent node or a supervisor's
//! policy agent: its model client, its exit tools and the tool nodes it may call, each
//! function schema compiled once. Part of the builder; refuses, with a clear error,
//! agents in parts they cannot play yet.

use std::sync::Arc;

use super::builder::ExecutorBuildError;
use super::plan::agent::{
    ADVISOR_REPORT, AgentPlan, Exit, ExitKind, FINAL_REPORT, HANDOFF_TO, ROUTE, TEAM_BROADCAST,
    ToolPlan, advisor_report_parameters, allows_strict, broadcast_parameters,
    final_report_parameters, handoff_parameters, route_parameters, tool_result_parameters,
};
use crate::contracts::pointer::join;
use crate::contracts::{
    AgentSpec, CLARIFICATION_SLICE, NodeContract, SYSTEM_SLICE, SupervisorContract,
};
use crate::graph::CompiledGraph;
use crate::model::ToolDef;

/// The plan of agent node `n` running `spec`.
pub(super) fn agent_plan(
    graph: &CompiledGraph,
    n: &NodeContract,
    spec: &AgentSpec,
) -> Result<AgentPlan, ExecutorBuildError> {
    let fail = |message: String| ExecutorBuildError::Agent {
        id: n.id.clone(),
        message,
        pointer: join(["nodes", n.id.as_str(), "run", "agent"]),
    };
    let writes: Vec<String> = n
        .writes
        .iter()
        .filter(|w| *w != SYSTEM_SLICE)
        .cloned()
        .collect();
    // An advisor's exit arguments are its report (brief 10.2): one without `writes`
    // reports a text, `{"report": string}`.
    let plain_advisor = advises(graph, n) && writes.is_empty();
    let parameters = if plain_advisor {
        advisor_report_parameters()
    } else {
        final_report_parameters(&writes, |s| {
            graph.slices().get(s).and_then(|d| d.schema.clone())
        })
    };
    let report = |answers| -> Result<Exit, ExecutorBuildError> {
        let description = if plain_advisor {
            "Report your advice: `report` is its text. Call it once, when you have finished."
                .to_string()
        } else {
            final_report_description(&writes)
        };
        let tool = tool_plan(FINAL_REPORT.into(), description, parameters.clone())
            .map_err(|e| fail(format!("its final_report schema does not compile: {e}")))?;
        Ok(Exit {
            kind: ExitKind::Report { answers },
            tool,
        })
    };
    let team = team_part(graph, n);
    let exits = match &n.router {
        _ if matches!(team, Some(TeamPart::Member)) => vec![broadcast_exit(true).map_err(fail)?],
        _ if let Some(TeamPart::Lead(writes)) = &team => {
            // The lead answers with the team node's writes; `final_report` is forced on
            // its final turn.
            let parameters = final_report_parameters(writes, |s| {
                graph.slices().get(s).and_then(|d| d.schema.clone())
            });
            let tool = tool_plan(
                FINAL_REPORT.into(),
                format!(
                    "Give the team's answer and end the team: one property per result ({}).",
                    writes.join(", ")
                ),
                parameters,
            )
            .map_err(|e| fail(format!("its final_report schema does not compile: {e}")))?;
            let last = Exit {
                kind: ExitKind::Final,
                tool,
            };
            vec![last, broadcast_exit(false).map_err(fail)?]
        }
        // An agent called as a tool: its result goes back to the caller.
        None if n.tool.is_some() => {
            let tool = tool_plan(
                FINAL_REPORT.into(),
                "Return your result to the agent that called you, as `result` (an object \
                 or a text). Call it once, when you have finished."
                    .into(),
                tool_result_parameters(),
            )
            .map_err(|e| fail(format!("its final_report schema does not compile: {e}")))?;
            vec![Exit {
                kind: ExitKind::Result,
                tool,
            }]
        }
        None => vec![report(false)?],
        Some(r) => {
            let tool = tool_plan(
                HANDOFF_TO.into(),
                format!(
                    "Hand the request off to the one destination that should handle it: {}.",
                    r.destinations.join(", ")
                ),
                handoff_parameters(&r.destinations),
            )
            .map_err(|e| fail(format!("its handoff_to schema does not compile: {e}")))?;
            let mut exits = vec![Exit {
                kind: ExitKind::Handoff,
                tool,
            }];
            if r.may_answer {
                exits.push(report(true)?);
            }
            exits
        }
    };
    let text_slice = match writes.as_slice() {
        _ if team.is_some() => None,
        [only] if n.router.is_none() && n.tool.is_none() => Some(only.clone()),
        [] if plain_advisor => Some(ADVISOR_REPORT.to_string()),
        _ => None,
    };
    session_plan(graph, spec, exits, text_slice, &fail)
}

/// The plan of supervisor `s`'s policy agent running `spec`: its exit tool is `route`
/// (see [`route_parameters`]), `ask_clarification` offered when the document declares a
/// `clarification` slice.
pub(super) fn policy_plan(
    graph: &CompiledGraph,
    s: &SupervisorContract,
    spec: &AgentSpec,
) -> Result<AgentPlan, ExecutorBuildError> {
    let fail = |message: String| ExecutorBuildError::AgentPolicy {
        id: s.id.clone(),
        message,
        pointer: join(["supervisors", s.id.as_str(), "policy", "agent"]),
    };
    let clarify = graph.slices().contains_key(CLARIFICATION_SLICE);
    let tool = tool_plan(
        ROUTE.into(),
        format!(
            "Decide what happens next: one of {} (stop_local ends this level, stop_global \
             the run{}). Say why in `reason`.",
            s.allow.join(", "),
            if clarify {
                "; ask_clarification pauses the run to ask the user `question`"
            } else {
                ""
            }
        ),
        route_parameters(&s.allow, clarify),
    )
    .map_err(|e| fail(format!("its route schema does not compile: {e}")))?;
    let exits = vec![Exit {
        kind: ExitKind::Route,
        tool,
    }];
    session_plan(graph, spec, exits, None, &fail)
}

/// Without the `agents` feature no session can run: every agent is refused, naming it.
#[cfg(not(feature = "agents"))]
fn session_plan(
    _: &CompiledGraph,
    _: &AgentSpec,
    _: Vec<Exit>,
    _: Option<String>,
    fail: &dyn Fn(String) -> ExecutorBuildError,
) -> Result<AgentPlan, ExecutorBuildError> {
    Err(fail(
        "pactgraph was built without the `agents` feature, which agents need".into(),
    ))
}

/// What every session's plan needs besides its exit tools: the model and its client,
/// and the tool nodes offered, their parameters compiled.
#[cfg(feature = "agents")]
fn session_plan(
    graph: &CompiledGraph,
    spec: &AgentSpec,
    exits: Vec<Exit>,
    text_slice: Option<String>,
    fail: &dyn Fn(String) -> ExecutorBuildError,
) -> Result<AgentPlan, ExecutorBuildError> {
    let Some(model) = graph.models().get(&spec.model) else {
        return Err(fail(format!(
            "its model `{}` is not in the document's `models`",
            spec.model
        )));
    };
    let client = crate::model::client::ChatClient::new(model)
        .map_err(|e| fail(format!("its model `{}`: {e}", spec.model)))?;
    let mut tools = Vec::with_capacity(spec.tools.len());
    for id in &spec.tools {
        let tool = graph
            .registry()
            .get_node(id)
            .ok_or_else(|| fail(format!("its tool `{id}` is not a node")))?;
        let Some(t) = &tool.tool else {
            return Err(fail(format!("its tool `{id}` has no `tool` field")));
        };
        let plan = tool_plan(
            id.as_str().into(),
            t.description.clone(),
            t.parameters.clone(),
        )
        .map_err(|e| fail(format!("the parameters of tool `{id}` do not compile: {e}")))?;
        tools.push(plan);
    }
    Ok(AgentPlan {
        model: spec.model.clone(),
        client: Arc::new(client),
        price: model.price,
        spec: spec.clone(),
        exits,
        tools,
        text_slice,
    })
}

/// The part node `n` plays in a team, if any.
enum TeamPart {
    /// A member: it exits with `team_broadcast` `{"message", "exit"}`.
    Member,
    /// The lead of a team node writing these slices: `final_report` (the writes) or
    /// `team_broadcast` `{"message"}`.
    Lead(Vec<String>),
}

/// The part node `n` plays in a team, if any (the validator keeps a node in one team).
fn team_part(graph: &CompiledGraph, n: &NodeContract) -> Option<TeamPart> {
    graph.registry().nodes().find_map(|other| {
        let t = other.team.as_ref()?;
        if t.lead == n.id {
            let writes = other
                .writes
                .iter()
                .filter(|w| *w != SYSTEM_SLICE)
                .cloned()
                .collect();
            Some(TeamPart::Lead(writes))
        } else {
            t.members.contains(&n.id).then_some(TeamPart::Member)
        }
    })
}

/// The `team_broadcast` exit of a member (`{"message", "exit"}`) or of the lead
/// (`{"message"}`).
fn broadcast_exit(member: bool) -> Result<Exit, String> {
    let description = if member {
        "Send your message to the team (`message`); set `exit` to leave the team. This ends \
         your turn; your next turn brings what the others said."
    } else {
        "Send a message to the team's members (`message`) and start another cycle."
    };
    let tool = tool_plan(
        TEAM_BROADCAST.into(),
        description.into(),
        broadcast_parameters(member),
    )
    .map_err(|e| format!("its team_broadcast schema does not compile: {e}"))?;
    let kind = if member {
        ExitKind::Broadcast
    } else {
        ExitKind::LeadBroadcast
    };
    Ok(Exit { kind, tool })
}

/// Whether node `n` is some node's advisor.
fn advises(graph: &CompiledGraph, n: &NodeContract) -> bool {
    graph.registry().nodes().any(|o| {
        o.advisors
            .as_ref()
            .is_some_and(|a| a.members.contains(&n.id))
    })
}

/// What the model is told `final_report` does.
fn final_report_description(writes: &[String]) -> String {
    if writes.is_empty() {
        "Report that the task is done. Call it once, when you have finished.".into()
    } else {
        format!(
            "Report your final answer: one property per result ({}). Call it once, when you \
             have finished; its arguments are checked and any mistake is told to you.",
            writes.join(", ")
        )
    }
}

/// A function offered to the model, its argument schema compiled (`strict` when the
/// schema allows it).
fn tool_plan(
    node: Arc<str>,
    description: String,
    parameters: serde_json::Value,
) -> Result<ToolPlan, String> {
    let parameters = match parameters {
        serde_json::Value::Null => serde_json::json!({"type": "object", "properties": {}}),
        p => p,
    };
    let schema = jsonschema::validator_for(&parameters).map_err(|e| e.to_string())?;
    Ok(ToolPlan {
        def: ToolDef {
            name: node.to_string(),
            description,
            strict: allows_strict(&parameters),
            parameters,
        },
        node,
        schema: Some(Arc::new(schema)),
    })
}
