//! Rule 7: every supervisor, node and subgraph is reachable from `entry` (`PG0501`,
//! warning). Members of an unreachable subgraph are covered by the subgraph's warning.
//! A tool node is never dispatched: it is reached when an agent lists it in `tools`.

use foldhash::{HashSet, HashSetExt};

use petgraph::visit::EdgeRef;

use crate::graph::{ContractKind, EdgeKind, VertexKind};
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let graph = ctx.graph.graph();
    let Some(start) = ctx.graph.index_of(ctx.graph.entry()) else {
        return; // unknown entry: PG0002 already says so
    };
    let mut seen = vec![false; graph.node_count()];
    let mut called: HashSet<&str> = HashSet::new();
    let mut stack = vec![start];
    seen[start.index()] = true;
    while let Some(v) = stack.pop() {
        let mut push = |w: petgraph::graph::NodeIndex, stack: &mut Vec<_>| {
            if !seen[w.index()] {
                seen[w.index()] = true;
                stack.push(w);
            }
        };
        for e in graph.edges(v) {
            if let EdgeKind::Call { subgraph }
            | EdgeKind::Route {
                subgraph: Some(subgraph),
            } = e.weight()
            {
                called.insert(subgraph.as_str());
            }
            push(e.target(), &mut stack);
        }
        // A fallback node runs without a dispatch edge.
        if graph[v].kind != VertexKind::Supervisor {
            continue;
        }
        if let Some(fb) = ctx
            .supervisor(&graph[v].id)
            .and_then(|s| s.fallback.as_deref())
            .filter(|fb| ctx.kind_of(fb) == Some(ContractKind::Node))
            .and_then(|fb| ctx.graph.index_of(fb))
        {
            push(fb, &mut stack);
        }
    }
    let unreached: HashSet<&str> = graph
        .node_indices()
        .filter(|ix| !seen[ix.index()])
        .map(|ix| graph[ix].id.as_str())
        .collect();
    let reached = |id: &str| !unreached.contains(id);
    let dead_level = |level: Option<&str>| level.is_some_and(|g| !called.contains(g));
    let fix = "call it from a reachable supervisor's `allow`, or remove it";

    for s in ctx.reg.supervisors() {
        if !reached(&s.id) && !dead_level(ctx.level_of_supervisor(&s.id)) {
            out.push(
                Diagnostic::new(
                    Code::UNREACHABLE,
                    ContractKind::Supervisor.pointer(&s.id),
                    format!(
                        "supervisor `{}` is never reached from entry `{}`",
                        s.id,
                        ctx.graph.entry()
                    ),
                )
                .fix(fix),
            );
        }
    }
    for g in ctx.reg.subgraphs() {
        if !called.contains(g.id.as_str()) {
            out.push(
                Diagnostic::new(
                    Code::UNREACHABLE,
                    ContractKind::Subgraph.pointer(&g.id),
                    format!(
                        "subgraph `{}` is never called on a path from entry `{}`",
                        g.id,
                        ctx.graph.entry()
                    ),
                )
                .fix(fix),
            );
        }
    }
    let offered: HashSet<&str> = super::agent_sites::agents(ctx)
        .iter()
        .flat_map(|a| a.spec.tools.iter().map(String::as_str))
        .collect();
    for n in ctx.reg.nodes() {
        let level = ctx.level_of_node(&n.id).ok().flatten();
        if n.tool.is_some() {
            if !reached(&n.id) && !offered.contains(n.id.as_str()) {
                out.push(
                    Diagnostic::new(
                        Code::UNREACHABLE,
                        ContractKind::Node.pointer(&n.id),
                        format!("tool node `{}` is offered by no agent", n.id),
                    )
                    .fix("list it in the `tools` of an agent, or remove it"),
                );
            }
            continue;
        }
        if !reached(&n.id) && !dead_level(level) {
            out.push(
                Diagnostic::new(
                    Code::UNREACHABLE,
                    ContractKind::Node.pointer(&n.id),
                    format!(
                        "node `{}` is never reached from entry `{}`",
                        n.id,
                        ctx.graph.entry()
                    ),
                )
                .fix("allow it in a reachable supervisor, or hand off to it"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::json;

    #[test]
    fn valid_base_has_no_findings() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn orphans_are_reported_once_per_dead_subgraph() {
        let mut doc = base();
        doc["supervisors"]["root"]["allow"] = json!(["reply"]);
        doc["supervisors"]["lost"] = json!({"allow": ["lost_node"]});
        doc["nodes"]["lost_node"] = json!({"supervisor": "lost"});
        doc["nodes"]["handed"] = json!({"supervisor": "root"});
        doc["nodes"]["reply"]["handoff"] = "handed".into();
        assert_eq!(
            run(check, doc),
            vec![
                (Code::UNREACHABLE, "/supervisors/lost".into()),
                (Code::UNREACHABLE, "/subgraphs/sub".into()),
                (Code::UNREACHABLE, "/nodes/lost_node".into()),
            ]
        );
    }

    #[test]
    fn fallback_nodes_count_as_reached() {
        let mut doc = base();
        doc["nodes"]["fb"] = json!({"supervisor": "root"});
        doc["supervisors"]["root"]["fallback"] = "fb".into();
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn tool_nodes_are_reached_through_the_agents_offering_them() {
        use crate::validator::rules::testing::agents;
        assert!(run(check, agents()).is_empty());
        let mut doc = agents();
        doc["nodes"]["reply"]["run"]["agent"]["tools"] = json!([]);
        assert_eq!(
            run(check, doc),
            vec![(Code::UNREACHABLE, "/nodes/lookup".into())]
        );
    }
}
