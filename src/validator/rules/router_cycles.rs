//! Rule 10f: unbounded router cycles (`PG0817`). Routes to nodes and handoffs move from
//! node to node with no supervisor deciding in between; a cycle of such moves that passes
//! through a router can repeat until a budget stops the run. It is bounded when a node on
//! it sets `max_visits`, or when it passes through a supervisor (a route into a subgraph,
//! whose entrypoint decides, or a node returning to its supervisor: neither is an edge
//! here). An unbounded cycle is an error that prints its path. Cycles of handoffs alone
//! are `PG0801`.

use std::collections::VecDeque;

use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    if !ctx.reg.nodes().any(|n| n.router.is_some()) {
        return;
    }
    let count = ctx.reg.nodes().len();
    // Edge weight: true for a route, false for a handoff.
    let mut moves: DiGraph<(), bool> = DiGraph::with_capacity(count, count);
    for _ in 0..count {
        moves.add_node(());
    }
    for (i, n) in ctx.reg.nodes().enumerate() {
        let from = NodeIndex::new(i);
        if let Some(t) = n.handoff.as_deref().and_then(|t| ctx.reg.node_index(t)) {
            moves.add_edge(from, NodeIndex::new(t), false);
        }
        // A router naming itself is `PG0812`'s.
        for d in n.router.iter().flat_map(|r| &r.destinations) {
            if let Some(t) = ctx.reg.node_index(d).filter(|&t| t != i) {
                moves.add_edge(from, NodeIndex::new(t), true);
            }
        }
    }
    let mut sccs = kosaraju_scc(&moves);
    for scc in &mut sccs {
        scc.sort();
    }
    sccs.sort();
    let id = |ix: NodeIndex| ctx.reg.node_at(ix.index()).map_or("?", |c| c.id.as_str());
    for scc in sccs {
        let inside = |ix: NodeIndex| scc.binary_search(&ix).is_ok();
        // The first router of the component with a route staying inside it.
        let Some(&start) = scc.iter().find(|&&ix| {
            moves
                .edges(ix)
                .any(|e| *e.weight() && inside(petgraph::visit::EdgeRef::target(&e)))
        }) else {
            continue;
        };
        let bounded = scc
            .iter()
            .find_map(|&ix| ctx.reg.node_at(ix.index())?.max_visits.map(|_| id(ix)));
        if bounded.is_some() {
            continue;
        }
        let path = shortest_cycle(&moves, start, &inside);
        let names: Vec<&str> = path.iter().map(|&ix| id(ix)).collect();
        out.push(
            Diagnostic::new(
                Code::ROUTER_CYCLE,
                join(["nodes", id(start), "router"]),
                format!(
                    "unbounded router cycle: {} (no supervisor decides in between and no \
                     node on it sets max_visits)",
                    names.join(" -> ")
                ),
            )
            .fix(format!(
                "set `max_visits` on a node of the cycle (say `{}`), or let the cycle go \
                 through a supervisor (return to it instead of routing or handing off)",
                id(start)
            )),
        );
    }
}

/// The shortest closed path from `start` back to it, staying inside the component.
fn shortest_cycle(
    g: &DiGraph<(), bool>,
    start: NodeIndex,
    inside: &dyn Fn(NodeIndex) -> bool,
) -> Vec<NodeIndex> {
    let mut prev: Vec<Option<NodeIndex>> = vec![None; g.node_count()];
    let mut queue = VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(v) = queue.pop_front() {
        let mut next: Vec<NodeIndex> = g.neighbors(v).filter(|w| inside(*w)).collect();
        next.sort();
        for w in next {
            if w == start {
                last = Some(v);
                break 'search;
            }
            if prev[w.index()].is_none() {
                prev[w.index()] = Some(v);
                queue.push_back(w);
            }
        }
    }
    let mut path = vec![start];
    let mut at = last;
    while let Some(v) = at {
        if v == start {
            break;
        }
        path.push(v);
        at = prev[v.index()];
    }
    let end = path.len();
    path[1..end].reverse();
    path.push(start);
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, graph, run};
    use serde_json::json;

    fn looped() -> serde_json::Value {
        let mut doc = base();
        doc["supervisors"]["root"]["allow"] = json!(["sub", "reply", "r"]);
        doc["nodes"]["r"] = json!({"supervisor": "root", "triggers": [{"when": true}],
            "router": {"destinations": ["a", "reply"]}});
        doc["nodes"]["a"] = json!({"supervisor": "root", "handoff": "b"});
        doc["nodes"]["b"] = json!({"supervisor": "root", "handoff": "r"});
        doc
    }

    #[test]
    fn a_cycle_through_a_router_is_reported_with_its_path() {
        let doc = looped();
        assert_eq!(
            run(check, doc.clone()),
            vec![(Code::ROUTER_CYCLE, "/nodes/r/router".into())]
        );
        let r = crate::validator::Validator::new().validate(&graph(doc));
        let d = r.with_code(Code::ROUTER_CYCLE).next().expect("reported");
        assert!(d.message.contains("r -> a -> b -> r"), "{}", d.message);
        assert_eq!(d.severity, crate::validator::Severity::Error);
    }

    #[test]
    fn max_visits_or_a_supervisor_in_between_bounds_it() {
        let mut doc = looped();
        doc["nodes"]["b"]["max_visits"] = json!(3);
        assert!(run(check, doc).is_empty());
        // `b` returns to its supervisor, which decides again: no cycle here.
        let mut doc = looped();
        doc["nodes"]["b"] = json!({"supervisor": "root"});
        assert!(run(check, doc).is_empty());
        // A router routing into a subgraph: its entrypoint decides.
        let mut doc = looped();
        doc["nodes"]["r"]["router"]["destinations"] = json!(["sub"]);
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn two_routers_routing_to_each_other() {
        let mut doc = base();
        doc["nodes"]["r1"] = json!({"supervisor": "root", "router": {"destinations": ["r2"]}});
        doc["nodes"]["r2"] =
            json!({"supervisor": "root", "router": {"destinations": ["r1", "reply"]}});
        let found = run(check, doc.clone());
        assert_eq!(found, vec![(Code::ROUTER_CYCLE, "/nodes/r1/router".into())]);
        let r = crate::validator::Validator::new().validate(&graph(doc));
        let d = r.with_code(Code::ROUTER_CYCLE).next().expect("reported");
        assert!(d.message.contains("r1 -> r2 -> r1"), "{}", d.message);
    }
}
