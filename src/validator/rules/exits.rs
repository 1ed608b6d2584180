//! Rule 8: exits (`PG0601`-`PG0603`). Each subgraph can return (an exitpoint, a
//! terminal node, a router that may answer, or a supervisor that can `stop_local`); the root can end; no cycle of
//! dispatch edges is closed to every exit.
//!
//! A supervisor can stop when it has a policy (its program may return a stop) or when it
//! is rule-based with a default of `stop_local` (the default default) or `stop_global`.

use foldhash::{HashMap, HashMapExt, HashSet};

use petgraph::Direction;
use petgraph::algo::kosaraju_scc;
use petgraph::graph::NodeIndex;
use petgraph::visit::{EdgeFiltered, EdgeRef};

use crate::contracts::{RoutingDecision, SupervisorContract};
use crate::graph::{ContractKind, EdgeKind, VertexKind};
use crate::validator::{Code, Context, Diagnostic};

/// True when the supervisor may end its level by itself.
pub(crate) fn can_stop(s: &SupervisorContract) -> bool {
    !s.is_rule_based()
        || matches!(
            s.default,
            None | Some(RoutingDecision::StopLocal(_)) | Some(RoutingDecision::StopGlobal(_))
        )
}

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let graph = ctx.graph.graph();
    let exitpoints: HashSet<&str> = ctx
        .reg
        .subgraphs()
        .flat_map(|g| g.exitpoints.iter().map(String::as_str))
        .collect();
    let is_exit = |ix: NodeIndex| {
        let v = &graph[ix];
        match v.kind {
            VertexKind::Supervisor => ctx.supervisor(&v.id).is_some_and(can_stop),
            VertexKind::Node => {
                ctx.node(&v.id)
                    .is_some_and(|n| n.terminal || n.router.as_ref().is_some_and(|r| r.may_answer))
                    || exitpoints.contains(v.id.as_str())
            }
        }
    };
    let level_of = |ix: NodeIndex| {
        let v = &graph[ix];
        match v.kind {
            VertexKind::Supervisor => Ok(ctx.level_of_supervisor(&v.id)),
            VertexKind::Node => ctx.level_of_node(&v.id),
        }
    };

    // Which levels have at least one exit.
    let mut has_exit: HashMap<Option<&str>, bool> = HashMap::new();
    let mut exits = Vec::new();
    for ix in graph.node_indices() {
        let Ok(level) = level_of(ix) else { continue };
        let e = is_exit(ix);
        if e {
            exits.push(ix);
        }
        *has_exit.entry(level).or_insert(false) |= e;
    }
    for g in ctx.reg.subgraphs() {
        let members = g
            .supervisors
            .iter()
            .any(|s| ctx.level_of_supervisor(s) == Some(g.id.as_str()));
        if members && !has_exit.get(&Some(g.id.as_str())).copied().unwrap_or(false) {
            out.push(
                Diagnostic::new(
                    Code::NO_RETURN,
                    ContractKind::Subgraph.pointer(&g.id),
                    format!(
                        "subgraph `{}` can never return: no exitpoint, no terminal node, and no \
                         member supervisor can `stop_local`",
                        g.id
                    ),
                )
                .fix("declare an exitpoint, mark a node `terminal`, or give a supervisor a stopping `default`"),
            );
        }
    }
    let entry_known = ctx.kind_of(ctx.graph.entry()) == Some(ContractKind::Supervisor);
    if entry_known && !has_exit.get(&None).copied().unwrap_or(false) {
        out.push(
            Diagnostic::new(
                Code::NO_END,
                "/entry",
                "the root level can never end the run: no terminal node and no root \
                 supervisor can stop",
            )
            .fix("mark a root node `terminal` or give a root supervisor a `stop_global` default"),
        );
    }

    // Cycles of dispatch, return and handoff edges that reach no exit.
    // Calls (and routes into subgraphs) leave the level.
    let crosses = |k: &EdgeKind| {
        matches!(
            k,
            EdgeKind::Call { .. } | EdgeKind::Route { subgraph: Some(_) }
        )
    };
    let local = EdgeFiltered::from_fn(graph, |e| !crosses(e.weight()));
    let mut reaches_exit = vec![false; graph.node_count()];
    let mut stack = exits;
    for &ix in &stack {
        reaches_exit[ix.index()] = true;
    }
    while let Some(v) = stack.pop() {
        for e in graph.edges_directed(v, Direction::Incoming) {
            if crosses(e.weight()) {
                continue;
            }
            let w = e.source();
            if !reaches_exit[w.index()] {
                reaches_exit[w.index()] = true;
                stack.push(w);
            }
        }
    }
    let mut sccs = kosaraju_scc(&local);
    for scc in &mut sccs {
        scc.sort();
    }
    sccs.sort();
    for scc in sccs {
        let Some(&sup) = scc
            .iter()
            .find(|ix| graph[**ix].kind == VertexKind::Supervisor)
        else {
            continue; // pure handoff cycles are rule 10's
        };
        let cyclic = scc.len() > 1 || graph.find_edge(sup, sup).is_some();
        if !cyclic || scc.iter().any(|ix| reaches_exit[ix.index()]) {
            continue;
        }
        let Ok(level) = level_of(sup) else { continue };
        if !has_exit.get(&level).copied().unwrap_or(false) {
            continue; // the whole level is already reported
        }
        let names: Vec<&str> = scc.iter().map(|ix| graph[*ix].id.as_str()).collect();
        out.push(
            Diagnostic::new(
                Code::DISPATCH_CYCLE,
                ContractKind::Supervisor.pointer(&graph[sup].id),
                format!(
                    "dispatch cycle without exit: {} keep handing control to each other and \
                     none of them can stop",
                    names.join(", ")
                ),
            )
            .fix(format!(
                "give supervisor `{}` a stopping `default`, or make a node of the cycle terminal",
                graph[sup].id
            )),
        );
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
    fn subgraph_and_root_without_exit() {
        let mut doc = base();
        doc["supervisors"]["sub_sup"]["default"] = json!({"node": "work"});
        doc["supervisors"]["root"]["default"] = json!({"node": "reply"});
        doc["nodes"]["reply"]["terminal"] = false.into();
        assert_eq!(
            run(check, doc.clone()),
            vec![
                (Code::NO_RETURN, "/subgraphs/sub".into()),
                (Code::NO_END, "/entry".into())
            ]
        );
        doc["subgraphs"]["sub"]["exitpoints"] = json!(["work"]);
        doc["supervisors"]["root"]["policy"] = json!({"handler": "h"});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn closed_dispatch_cycle_in_a_level_that_can_exit() {
        let mut doc = base();
        doc["supervisors"]["loop_sup"] = json!({"allow": ["spin"], "default": {"node": "spin"}});
        doc["nodes"]["spin"] = json!({"supervisor": "loop_sup"});
        doc["nodes"]["into"] = json!({"supervisor": "loop_sup"});
        doc["supervisors"]["root"]["allow"] = json!(["sub", "reply", "into"]);
        assert_eq!(
            run(check, doc),
            vec![(Code::DISPATCH_CYCLE, "/supervisors/loop_sup".into())]
        );
    }
}
