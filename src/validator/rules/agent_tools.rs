//! Rule 12d: an agent's `tools` name tool nodes (`PG1209`: a node with a `tool` field),
//! each once (`PG1213`).

use foldhash::{HashSet, HashSetExt};

use super::agent_sites::agents;
use crate::graph::ContractKind;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for site in agents(ctx) {
        let mut seen = HashSet::with_capacity(site.spec.tools.len());
        for (i, t) in site.spec.tools.iter().enumerate() {
            let pointer = format!("{}/{i}", site.field("tools"));
            if !seen.insert(t.as_str()) {
                out.push(
                    Diagnostic::new(
                        Code::DUPLICATE_TOOL,
                        pointer,
                        format!("{} lists tool `{t}` more than once", site.who()),
                    )
                    .fix(format!("remove the repeated `{t}`")),
                );
                continue;
            }
            let (what, fix) = match ctx.kind_of(t) {
                Some(ContractKind::Node) if ctx.node(t).is_some_and(|n| n.tool.is_some()) => {
                    continue;
                }
                Some(ContractKind::Node) => (
                    format!("node `{t}`, which has no `tool` field"),
                    format!(
                        "make `{t}` a tool node: add \"tool\": {{\"description\": ..., \
                         \"parameters\": {{\"type\": \"object\", ...}}}} to it (a tool node \
                         writes no slices and is never dispatched)"
                    ),
                ),
                Some(kind) => (
                    format!("{kind} `{t}`"),
                    "name a node with a `tool` field: supervisors and subgraphs cannot be \
                     called as tools"
                        .to_string(),
                ),
                None => (
                    format!("`{t}`, which is not declared"),
                    format!("declare a node `{t}` with a `tool` field and a `run`, or remove it"),
                ),
            };
            out.push(
                Diagnostic::new(
                    Code::NOT_A_TOOL,
                    pointer,
                    format!("{} offers as a tool {what}", site.who()),
                )
                .fix(fix),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{agents, run};
    use serde_json::json;

    #[test]
    fn tool_nodes_are_fine() {
        assert!(run(check, agents()).is_empty());
    }

    #[test]
    fn anything_else_or_a_repeat_is_refused() {
        let mut doc = agents();
        doc["nodes"]["reply"]["run"]["agent"]["tools"] =
            json!(["lookup", "reply", "root", "ghost", "lookup"]);
        let p = |i: usize| format!("/nodes/reply/run/agent/tools/{i}");
        assert_eq!(
            run(check, doc),
            vec![
                (Code::NOT_A_TOOL, p(1)),
                (Code::NOT_A_TOOL, p(2)),
                (Code::NOT_A_TOOL, p(3)),
                (Code::DUPLICATE_TOOL, p(4)),
            ]
        );
    }
}
