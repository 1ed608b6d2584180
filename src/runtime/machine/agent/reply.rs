//! Reading a model's reply: a valid exit (`final_report`, or plain text a lone string
//! slice or an agent tool accepts), tool calls to answer, or text to answer with a request for the exit
//! tool. Arguments are always checked here; a mistake is said with the JSON Pointer and
//! what was expected, for the model to mend.

use serde_json::Value;

use crate::model::ChatMessage;
use crate::runtime::data::{NodeOutput, Writes};
use crate::runtime::plan::agent::{AgentPlan, ExitKind, ToolPlan};
use crate::runtime::plan::{Plan, check, check_at};

/// What a reply asks for.
// Made once per model call and matched at once: boxing the output would allocate for
// nothing.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Verdict {
    /// The session ends with this output (writes, a router's route, or a policy's
    /// `route` arguments).
    Exit(NodeOutput),
    /// Tool calls to answer (some may be mistakes, answered as such).
    Calls,
    /// Text without a tool call that is not an exit.
    Text,
}

/// The user message that answers a text reply that does not end the session.
pub(crate) fn ask_for_exit(agent: &AgentPlan) -> String {
    format!(
        "A text reply does not end this task. Call the tool `{}` with your result.",
        agent.exit().def.name
    )
}

/// Reads a reply (see [`Verdict`]).
pub(crate) fn judge(plan: &Plan, agent: &AgentPlan, reply: &ChatMessage) -> Verdict {
    if !reply.tool_calls.is_empty() {
        return reply
            .tool_calls
            .iter()
            .find_map(|c| exit_output(agent, &c.name, &c.arguments)?.ok())
            .map_or(Verdict::Calls, Verdict::Exit);
    }
    let text = reply.content.as_deref().filter(|t| !t.trim().is_empty());
    if let (Some(text), Some(exit)) = (text, agent.exits.first())
        && exit.kind == ExitKind::Result
    {
        // An agent tool's plain text is its result.
        let mut writes = Writes::new();
        writes.insert("result".into(), Value::String(text.to_string()));
        return Verdict::Exit(NodeOutput::new(writes));
    }
    if let (Some(slice), Some(text)) = (&agent.text_slice, &reply.content) {
        let value = Value::String(text.clone());
        let accepted = plan
            .slice_schemas
            .get(slice)
            .is_none_or(|s| check(s, &value).is_ok());
        if accepted && !text.trim().is_empty() {
            let mut writes = Writes::new();
            writes.insert(slice.clone(), value);
            return Verdict::Exit(NodeOutput::new(writes));
        }
    }
    Verdict::Text
}

/// What a call of exit tool `name` gives (`None`: `name` is no exit tool): the node's
/// output, or the mistake in its `arguments`.
pub(crate) fn exit_output(
    agent: &AgentPlan,
    name: &str,
    arguments: &str,
) -> Option<Result<NodeOutput, String>> {
    let exit = agent.exit_named(name)?;
    let args = match arguments_of(&exit.tool, arguments) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return Some(Err(format!(
                "the arguments of `{name}` must be a JSON object"
            )));
        }
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(match exit.kind {
        // A decision's arguments, read when the decision is planned.
        ExitKind::Report { answers: false } | ExitKind::Route | ExitKind::Result => {
            NodeOutput::new(args)
        }
        ExitKind::Report { answers: true } => NodeOutput::new(args).answered(),
        ExitKind::Broadcast | ExitKind::LeadBroadcast => {
            let message = args.get("message").cloned().unwrap_or(Value::Null);
            let out = NodeOutput::new(Writes::new()).with_broadcast(message);
            if args.get("exit") == Some(&Value::Bool(true)) {
                out.exiting()
            } else {
                out
            }
        }
        ExitKind::Final => NodeOutput::new(args).finalized(),
        ExitKind::Handoff => {
            let mut out = NodeOutput::new(Writes::new());
            if let Some(Value::String(to)) = args.get("agent") {
                out = out.with_route(to.clone());
            }
            if let Some(Value::String(m)) = args.get("message") {
                out = out.with_message(m.clone());
            }
            out
        }
    }))
}

/// A tool call's `arguments`, parsed and checked against the tool's parameters, or the
/// mistake in words: where (a JSON Pointer) and what was expected.
pub(crate) fn arguments_of(tool: &ToolPlan, arguments: &str) -> Result<Value, String> {
    let name = &tool.def.name;
    let value: Value = if arguments.trim().is_empty() {
        Value::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(arguments)
            .map_err(|e| format!("the arguments of `{name}` are not valid JSON: {e}"))?
    };
    if let Some(schema) = &tool.schema
        && let Err((at, msg)) = check_at(schema, &value)
    {
        return Err(format!(
            "the arguments of `{name}` do not fit its parameters at `{at}`: {msg}. Call \
             `{name}` again with arguments that fit."
        ));
    }
    Ok(value)
}

/// The content of a tool message saying `error`.
pub(crate) fn error_content(error: &str) -> String {
    serde_json::json!({ "error": error }).to_string()
}
