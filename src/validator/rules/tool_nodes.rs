//! Rule 12g: a tool node is complete and plain. It has a `description`, object-schema
//! `parameters` and a `run` (`PG1206`, `PG1208`); it writes no slices (`PG1207`: its
//! output is the tool's result); it has no `terminal`, `handoff`, `triggers`, `router`,
//! `advisors` or `team` (`PG1211`); its id can be a function name and is no exit tool's
//! (`PG1212`). Whether `parameters` compiles as a JSON Schema is rule 11's (`PG0901`).

use serde_json::Value;

use crate::contracts::NodeContract;
use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

/// The exit tools' names (brief 10.2), which a tool node's id may not take.
pub(crate) const EXIT_TOOLS: &[&str] = &["final_report", "handoff_to", "team_broadcast", "route"];

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let Some(tool) = &n.tool else { continue };
        let id = n.id.as_str();
        let at = |field: &str| join(["nodes", id, field]);
        let at_tool = |field: &str| join(["nodes", id, "tool", field]);
        if tool.description.trim().is_empty() {
            out.push(
                Diagnostic::new(
                    Code::INCOMPLETE_TOOL,
                    at_tool("description"),
                    format!("tool node `{id}` has no `description`: the model would not know what it does"),
                )
                .fix("describe what the tool does and when to call it in `tool.description`"),
            );
        }
        match &tool.parameters {
            Value::Null => out.push(
                Diagnostic::new(
                    Code::INCOMPLETE_TOOL,
                    at_tool("parameters"),
                    format!("tool node `{id}` has no `parameters` schema"),
                )
                .fix(
                    "declare the arguments: \"parameters\": {\"type\": \"object\", \
                     \"properties\": {...}, \"required\": [...]}",
                ),
            ),
            Value::Object(schema) if schema.get("type") == Some(&Value::from("object")) => {}
            other => out.push(
                Diagnostic::new(
                    Code::BAD_TOOL_PARAMETERS,
                    at_tool("parameters"),
                    format!(
                        "the `parameters` of tool node `{id}` is not an object schema ({}): \
                         a tool's arguments are always one JSON object",
                        describe(other)
                    ),
                )
                .fix("write it as {\"type\": \"object\", \"properties\": {...}}"),
            ),
        }
        if n.run.is_none() {
            out.push(
                Diagnostic::new(
                    Code::INCOMPLETE_TOOL,
                    join(["nodes", id]),
                    format!("tool node `{id}` has no `run`: nothing would compute its result"),
                )
                .fix("give it a `run`: `exec`, `handler`, `set` or `agent`"),
            );
        }
        for (i, w) in n.writes.iter().enumerate() {
            out.push(
                Diagnostic::new(
                    Code::TOOL_WRITES,
                    format!("{}/{i}", at("writes")),
                    format!(
                        "tool node `{id}` writes slice `{w}`: a tool's output is its result, \
                         returned to the model, never written to the state"
                    ),
                )
                .fix(format!(
                    "remove `{w}` from its `writes`; let the calling agent write it through \
                     `final_report`"
                )),
            );
        }
        for field in patterns(n) {
            out.push(
                Diagnostic::new(
                    Code::TOOL_WITH_PATTERN,
                    at(field),
                    format!(
                        "tool node `{id}` has `{field}`, which means nothing for a tool: it \
                         runs only when an agent calls it"
                    ),
                )
                .fix(format!("remove `{field}` from `{id}`")),
            );
        }
        if let Some(why) = bad_name(id) {
            out.push(
                Diagnostic::new(
                    Code::BAD_TOOL_NAME,
                    join(["nodes", id]),
                    format!("tool node `{id}` cannot be offered to a model: {why}"),
                )
                .fix("rename the node: 1-64 letters, digits, `_` or `-`, not an exit tool's name"),
            );
        }
    }
}

/// The dispatch fields a tool node declares.
fn patterns(n: &NodeContract) -> Vec<&'static str> {
    let mut out = Vec::new();
    if n.terminal {
        out.push("terminal");
    }
    if n.handoff.is_some() {
        out.push("handoff");
    }
    if !n.triggers.is_empty() {
        out.push("triggers");
    }
    if n.router.is_some() {
        out.push("router");
    }
    if n.advisors.is_some() {
        out.push("advisors");
    }
    if n.team.is_some() {
        out.push("team");
    }
    out
}

/// Why `id` cannot be a Chat Completions function name, if it cannot.
fn bad_name(id: &str) -> Option<String> {
    if EXIT_TOOLS.contains(&id) {
        return Some(format!("`{id}` is the name of an exit tool"));
    }
    let valid = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    (!valid).then(|| "a function name is 1-64 letters, digits, `_` or `-`".to_string())
}

fn describe(v: &Value) -> String {
    match v {
        Value::Object(m) => match m.get("type") {
            Some(t) => format!("its `type` is {t}"),
            None => "it has no `type`".into(),
        },
        Value::Array(_) => "an array".into(),
        Value::String(_) => "a string".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(_) => "a number".into(),
        Value::Null => "null".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{agents, run};
    use serde_json::json;

    #[test]
    fn a_complete_plain_tool_is_fine() {
        assert!(run(check, agents()).is_empty());
    }

    #[test]
    fn missing_parts_are_refused() {
        let mut doc = agents();
        doc["nodes"]["lookup"] = json!({"supervisor": "root", "tool": {}});
        assert_eq!(
            run(check, doc),
            vec![
                (
                    Code::INCOMPLETE_TOOL,
                    "/nodes/lookup/tool/description".into()
                ),
                (
                    Code::INCOMPLETE_TOOL,
                    "/nodes/lookup/tool/parameters".into()
                ),
                (Code::INCOMPLETE_TOOL, "/nodes/lookup".into()),
            ]
        );
    }

    #[test]
    fn parameters_must_be_an_object_schema() {
        for bad in [
            json!({"type": "string"}),
            json!({}),
            json!([1]),
            json!(true),
        ] {
            let mut doc = agents();
            doc["nodes"]["lookup"]["tool"]["parameters"] = bad;
            assert_eq!(
                run(check, doc),
                vec![(
                    Code::BAD_TOOL_PARAMETERS,
                    "/nodes/lookup/tool/parameters".into()
                )]
            );
        }
    }

    #[test]
    fn writes_patterns_and_names_are_refused() {
        let mut doc = agents();
        let tool = doc["nodes"]["lookup"].clone();
        let mut route = tool.clone();
        route["writes"] = json!(["answer"]);
        route["terminal"] = json!(true);
        route["triggers"] = json!([{"when": true}]);
        doc["nodes"]["route"] = route;
        doc["nodes"]["has space"] = tool;
        assert_eq!(
            run(check, doc),
            vec![
                (Code::TOOL_WRITES, "/nodes/route/writes/0".into()),
                (Code::TOOL_WITH_PATTERN, "/nodes/route/terminal".into()),
                (Code::TOOL_WITH_PATTERN, "/nodes/route/triggers".into()),
                (Code::BAD_TOOL_NAME, "/nodes/route".into()),
                (Code::BAD_TOOL_NAME, "/nodes/has space".into()),
            ]
        );
    }
}
