//! Rule 9: recursion (`PG0701`, `PG0702`).
//!
//! Cycles among subgraph calls (a supervisor's allowlist, or a router's destinations)
//! are reported with their path (`fashion -> trends -> fashion`). Budgets bound them, so
//! they are a warning; in strict mode an error unless a subgraph of the cycle sets
//! `max_reentry` explicitly (then they are information).
//! Subgraphs nested statically deeper than `max_depth` can never be entered: warning.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::contracts::pointer::join;
use crate::graph::ContractKind;
use crate::validator::{Code, Context, Diagnostic, Severity};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let subs: Vec<&str> = ctx.reg.subgraphs().map(|g| g.id.as_str()).collect();
    let pos: HashMap<&str, usize> = subs.iter().enumerate().map(|(i, g)| (*g, i)).collect();
    // Edge weight: the pointer of the reference that calls, and who calls.
    let mut calls: DiGraph<(), (String, String)> = DiGraph::with_capacity(subs.len(), subs.len());
    for _ in &subs {
        calls.add_node(());
    }
    let mut added: HashSet<(usize, usize)> = HashSet::new();
    for s in ctx.reg.supervisors() {
        let Some(from) = ctx.level_of_supervisor(&s.id).and_then(|g| pos.get(g)) else {
            continue;
        };
        for (i, t) in s.allow.iter().enumerate() {
            if let Some(&to) = pos.get(t.as_str())
                && added.insert((*from, to))
            {
                let ptr = join(["supervisors", s.id.as_str(), "allow", &i.to_string()]);
                let by = format!("supervisor `{}`", s.id);
                calls.add_edge(NodeIndex::new(*from), NodeIndex::new(to), (ptr, by));
            }
        }
    }
    // A router calls its destination subgraphs from its own level.
    for n in ctx.reg.nodes() {
        let Some(r) = &n.router else { continue };
        let Some(from) = ctx
            .level_of_node(&n.id)
            .ok()
            .flatten()
            .and_then(|g| pos.get(g))
        else {
            continue;
        };
        for (i, d) in r.destinations.iter().enumerate() {
            if let Some(&to) = pos.get(d.as_str())
                && added.insert((*from, to))
            {
                let at = join(["nodes", n.id.as_str(), "router", "destinations"]);
                let by = format!("router `{}`", n.id);
                calls.add_edge(
                    NodeIndex::new(*from),
                    NodeIndex::new(to),
                    (format!("{at}/{i}"), by),
                );
            }
        }
    }
    let mut sccs = kosaraju_scc(&calls);
    for scc in &mut sccs {
        scc.sort();
    }
    sccs.sort();
    for scc in sccs {
        let start = scc[0];
        if scc.len() == 1 && calls.find_edge(start, start).is_none() {
            continue;
        }
        let path = cycle_from(&calls, &scc, start);
        let names: Vec<&str> = path.iter().map(|ix| subs[ix.index()]).collect();
        let bounded = scc.iter().find_map(|ix| {
            let g = ctx.subgraph(subs[ix.index()])?;
            g.max_reentry.map(|n| (g.id.as_str(), n))
        });
        let (pointer, caller) = match calls.find_edge(path[0], path[1]).map(|e| &calls[e]) {
            Some((ptr, by)) => (ptr.clone(), by.clone()),
            None => (
                ContractKind::Subgraph.pointer(names[0]),
                format!("`{}`", names[0]),
            ),
        };
        let mut d = Diagnostic::new(
            Code::RECURSION,
            pointer,
            format!(
                "recursive subgraph calls: {} (first call by {caller})",
                names.join(" -> ")
            ),
        );
        d = match bounded {
            Some((g, n)) => {
                d.message
                    .push_str(&format!("; bounded by `max_reentry: {n}` on `{g}`"));
                d.severity(Severity::Info)
            }
            None => d.fix(format!(
                "set `max_reentry` on subgraph `{}` to state how deep the recursion may go",
                names[0]
            )),
        };
        out.push(d);
    }

    let max_depth = ctx.graph.budgets().max_depth;
    for c in ctx.graph.clusters().values() {
        if let Some(depth) = c.depth.filter(|d| *d > max_depth) {
            out.push(
                Diagnostic::new(
                    Code::TOO_DEEP,
                    ContractKind::Subgraph.pointer(&c.subgraph_id),
                    format!(
                        "subgraph `{}` is nested at depth {depth}, deeper than `max_depth` \
                         {max_depth}: it can never be entered",
                        c.subgraph_id
                    ),
                )
                .fix(format!("raise `budgets.max_depth` to at least {depth}")),
            );
        }
    }
}

/// The shortest cycle through `start` inside its component, as a closed path.
fn cycle_from(
    calls: &DiGraph<(), (String, String)>,
    scc: &[NodeIndex],
    start: NodeIndex,
) -> Vec<NodeIndex> {
    let inside: HashSet<NodeIndex> = scc.iter().copied().collect();
    let mut prev: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        let mut next: Vec<NodeIndex> = calls.neighbors(v).collect();
        next.sort();
        for w in next {
            if w == start {
                let mut back = Vec::new();
                let mut at = v;
                while at != start {
                    back.push(at);
                    at = prev[&at];
                }
                back.reverse();
                let mut path = vec![start];
                path.extend(back);
                path.push(start);
                return path;
            }
            if inside.contains(&w) && w != start && !prev.contains_key(&w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start, start]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::Validator;
    use crate::validator::rules::testing::{base, graph, run};
    use serde_json::json;

    fn two_level() -> serde_json::Value {
        let mut doc = base();
        doc["supervisors"]["sub_sup"]["allow"] = json!(["work", "trends"]);
        doc["supervisors"]["trends_sup"] = json!({"allow": ["t", "sub"]});
        doc["subgraphs"]["trends"] = json!({"entrypoint": "trends_sup", "supervisors": ["trends_sup"],
            "reads": ["request"], "writes": ["out"], "triggers": [{"when": true}]});
        doc["nodes"]["t"] =
            json!({"supervisor": "trends_sup", "writes": ["out"], "triggers": [{"when": true}]});
        doc
    }

    #[test]
    fn valid_base_has_no_findings() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn cycle_is_reported_with_its_path_and_strictness() {
        let g = graph(two_level());
        let report = Validator::new().validate(&g);
        let d = report.with_code(Code::RECURSION).next().expect("reported");
        assert!(d.message.contains("sub -> trends -> sub"), "{}", d.message);
        assert_eq!(d.pointer, "/supervisors/sub_sup/allow/1");
        assert_eq!(d.severity, Severity::Warning);
        let strict = Validator::new().strict(true).validate(&g);
        assert_eq!(
            strict.with_code(Code::RECURSION).next().map(|d| d.severity),
            Some(Severity::Error)
        );

        let mut doc = two_level();
        doc["subgraphs"]["trends"]["max_reentry"] = 3.into();
        let strict = Validator::new().strict(true).validate(&graph(doc));
        let d = strict
            .with_code(Code::RECURSION)
            .next()
            .expect("still reported");
        assert_eq!(d.severity, Severity::Info);
    }

    #[test]
    fn a_router_routing_into_a_subgraph_is_a_call() {
        // `trends` routes back into `sub` through a router instead of its allowlist.
        let mut doc = two_level();
        doc["supervisors"]["trends_sup"] = json!({"allow": ["t", "back"]});
        doc["nodes"]["back"] = json!({"supervisor": "trends_sup", "triggers": [{"when": true}],
            "router": {"destinations": ["t", "sub"]}});
        let report = Validator::new().validate(&graph(doc));
        let d = report.with_code(Code::RECURSION).next().expect("reported");
        assert!(d.message.contains("sub -> trends -> sub"), "{}", d.message);
        assert!(
            d.message.contains("first call by supervisor `sub_sup`"),
            "{}",
            d.message
        );
        let mut doc = two_level();
        doc["supervisors"]["sub_sup"]["allow"] = json!(["work", "go"]);
        doc["nodes"]["go"] = json!({"supervisor": "sub_sup", "triggers": [{"when": true}],
            "router": {"destinations": ["work", "trends"]}});
        let report = Validator::new().validate(&graph(doc));
        let d = report.with_code(Code::RECURSION).next().expect("reported");
        assert_eq!(d.pointer, "/nodes/go/router/destinations/1");
        assert!(
            d.message.contains("first call by router `go`"),
            "{}",
            d.message
        );
    }

    #[test]
    fn self_recursion_and_nesting_deeper_than_max_depth() {
        let mut doc = base();
        doc["supervisors"]["sub_sup"]["allow"] = json!(["work", "sub"]);
        assert_eq!(
            run(check, doc),
            vec![(Code::RECURSION, "/supervisors/sub_sup/allow/1".into())]
        );
        let mut doc = two_level();
        doc["supervisors"]["trends_sup"]["allow"] = json!(["t"]);
        doc["budgets"] = json!({"max_depth": 1});
        assert_eq!(
            run(check, doc),
            vec![(Code::TOO_DEEP, "/subgraphs/trends".into())]
        );
    }
}
