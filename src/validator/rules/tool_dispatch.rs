//! Rule 12f: a tool node is never dispatched (`PG1205`): it is in no `allow`, supervisor
//! `default` or `fallback`, `handoff`, router `destinations`, advisors or team. An agent
//! calls it; its output is the tool's result, not a step of the graph.

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let is_tool = |id: &str| ctx.node(id).is_some_and(|n| n.tool.is_some());
    let mut refuse = |id: &str, pointer: String, how: String| {
        out.push(
            Diagnostic::new(
                Code::DISPATCHABLE_TOOL,
                pointer,
                format!("tool node `{id}` can be dispatched: {how}"),
            )
            .fix(format!(
                "remove `{id}` from there and let an agent call it (list it in an agent's \
                 `tools`), or remove its `tool` field to make it an ordinary node"
            )),
        );
    };
    for s in ctx.reg.supervisors() {
        let sid = s.id.as_str();
        for (i, a) in s.allow.iter().enumerate() {
            if is_tool(a) {
                refuse(
                    a,
                    format!("{}/{i}", join(["supervisors", sid, "allow"])),
                    format!("supervisor `{sid}` allows it"),
                );
            }
        }
        if let Some(fb) = s.fallback.as_deref().filter(|f| is_tool(f)) {
            refuse(
                fb,
                join(["supervisors", sid, "fallback"]),
                format!("it is supervisor `{sid}`'s fallback"),
            );
        }
        if let Some(d) = s
            .default
            .as_ref()
            .and_then(|d| d.target())
            .filter(|d| is_tool(d))
        {
            refuse(
                d,
                join(["supervisors", sid, "default"]),
                format!("supervisor `{sid}`'s default decision names it"),
            );
        }
    }
    for n in ctx.reg.nodes() {
        let nid = n.id.as_str();
        if let Some(h) = n.handoff.as_deref().filter(|h| is_tool(h)) {
            refuse(
                h,
                join(["nodes", nid, "handoff"]),
                format!("node `{nid}` hands off to it"),
            );
        }
        let lists = [
            (
                "router",
                "destinations",
                n.router.as_ref().map(|r| &r.destinations),
                "routes to it",
            ),
            (
                "advisors",
                "members",
                n.advisors.as_ref().map(|a| &a.members),
                "takes advice from it",
            ),
            (
                "team",
                "members",
                n.team.as_ref().map(|t| &t.members),
                "has it as a team member",
            ),
        ];
        for (field, list, ids, how) in lists {
            for (i, id) in ids.into_iter().flatten().enumerate() {
                if is_tool(id) {
                    refuse(
                        id,
                        format!("{}/{i}", join(["nodes", nid, field, list])),
                        format!("node `{nid}` {how}"),
                    );
                }
            }
        }
        if let Some(lead) = n
            .team
            .as_ref()
            .map(|t| t.lead.as_str())
            .filter(|l| is_tool(l))
        {
            refuse(
                lead,
                join(["nodes", nid, "team", "lead"]),
                format!("node `{nid}` has it as its team lead"),
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
    fn a_tool_called_only_by_agents_is_fine() {
        assert!(run(check, agents()).is_empty());
    }

    #[test]
    fn every_way_of_dispatching_a_tool_is_refused() {
        let mut doc = agents();
        doc["supervisors"]["root"]["allow"] = json!(["reply", "lookup"]);
        doc["supervisors"]["root"]["fallback"] = json!("lookup");
        doc["supervisors"]["root"]["default"] = json!({"node": "lookup"});
        doc["nodes"]["r"] = json!({"supervisor": "root", "handoff": "lookup",
            "router": {"destinations": ["reply", "lookup"]}});
        doc["nodes"]["adv"] = json!({"supervisor": "root",
            "advisors": {"members": ["lookup"], "slice": "answer"}});
        doc["nodes"]["t"] = json!({"supervisor": "root",
            "team": {"members": ["lookup"], "lead": "lookup", "slice": "answer"}});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::DISPATCHABLE_TOOL, "/supervisors/root/allow/1".into()),
                (Code::DISPATCHABLE_TOOL, "/supervisors/root/fallback".into()),
                (Code::DISPATCHABLE_TOOL, "/supervisors/root/default".into()),
                (Code::DISPATCHABLE_TOOL, "/nodes/r/handoff".into()),
                (
                    Code::DISPATCHABLE_TOOL,
                    "/nodes/r/router/destinations/1".into()
                ),
                (
                    Code::DISPATCHABLE_TOOL,
                    "/nodes/adv/advisors/members/0".into()
                ),
                (Code::DISPATCHABLE_TOOL, "/nodes/t/team/members/0".into()),
                (Code::DISPATCHABLE_TOOL, "/nodes/t/team/lead".into()),
            ]
        );
    }
}
