//! Synthetic workflows of any size, for benchmarks and tests.
//!
//! Every generator returns a [`WorkflowDocument`] that passes the validator, so the same
//! input serves the load, build, validate, DOT and run benchmarks. Compiled only with the
//! `bench` feature, which the crate's own tests, benches and examples turn on.

use indexmap::IndexMap;
use serde_json::json;

use crate::contracts::{
    Budgets, Condition, NodeBehaviour, NodeContract, RoutingDecision, SliceDecl, SubgraphContract,
    SupervisorContract, Trigger, WorkflowDocument,
};

fn slices(names: &[&str]) -> IndexMap<String, SliceDecl> {
    names
        .iter()
        .map(|n| (n.to_string(), SliceDecl::new()))
        .collect()
}

fn keyed<T, F: Fn(&T) -> &str>(items: Vec<T>, id: F) -> IndexMap<String, T> {
    items.into_iter().map(|c| (id(&c).to_string(), c)).collect()
}

/// A supervisor/worker loop: the supervisor dispatches `work` on every decision and the run
/// ends when `max_steps` (= `steps`) is exceeded. Measures the per-step cost of dispatch,
/// boundary checks, the return and the trace.
pub fn supervisor_loop(steps: u32) -> WorkflowDocument {
    WorkflowDocument {
        workflow: "synth_loop".into(),
        slices: slices(&["task", "result"]),
        budgets: Budgets::default().max_steps(steps),
        entry: "boss".into(),
        supervisors: keyed(vec![SupervisorContract::new("boss").allow(["work"])], |s| {
            &s.id
        }),
        nodes: keyed(
            vec![
                NodeContract::new("work")
                    .supervisor("boss")
                    .reads(["task"])
                    .writes(["result"])
                    .trigger(Trigger::new(1, Condition::Const(true)))
                    .run(NodeBehaviour::set([("result", json!({"ok": true}))])),
            ],
            |n| &n.id,
        ),
        ..WorkflowDocument::default()
    }
}

/// A linear handoff chain of `n` nodes (`n0 -> n1 -> ... `), the last one terminal.
pub fn handoff_chain(n: usize) -> WorkflowDocument {
    let n = n.max(1);
    let mut nodes = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = NodeContract::new(format!("n{i}"))
            .supervisor("root")
            .reads(["data"])
            .writes(["data"])
            .run(NodeBehaviour::set([("data", json!({"at": i}))]));
        if i == 0 {
            c = c.trigger(Trigger::new(1, Condition::missing("/data")));
        }
        c = if i + 1 < n {
            c.handoff(format!("n{}", i + 1))
        } else {
            c.terminal(true)
        };
        nodes.push(c);
    }
    WorkflowDocument {
        workflow: "synth_chain".into(),
        slices: slices(&["data"]),
        budgets: Budgets::default().max_steps(u32::try_from(n).unwrap_or(u32::MAX)),
        entry: "root".into(),
        supervisors: keyed(vec![SupervisorContract::new("root").allow(["n0"])], |s| {
            &s.id
        }),
        nodes: keyed(nodes, |n| &n.id),
        ..WorkflowDocument::default()
    }
}

/// The root calls the subgraph `leaf` again and again; each call runs one node and
/// returns. `calls` entries are allowed, then the run stops on `max_steps`.
pub fn repeated_calls(calls: u32) -> WorkflowDocument {
    WorkflowDocument {
        workflow: "synth_calls".into(),
        slices: slices(&["task", "result"]),
        budgets: Budgets::default()
            .max_steps(calls.saturating_mul(2))
            .max_reentry(calls),
        entry: "root".into(),
        supervisors: keyed(
            vec![
                SupervisorContract::new("root").allow(["leaf"]),
                SupervisorContract::new("leaf_supervisor")
                    .allow(["leaf_work"])
                    .default_decision(RoutingDecision::stop_local()),
            ],
            |s| &s.id,
        ),
        subgraphs: keyed(
            vec![
                SubgraphContract::new("leaf")
                    .entrypoint("leaf_supervisor")
                    .reads(["task"])
                    .writes(["result"])
                    .trigger(Trigger::new(1, Condition::Const(true)))
                    .max_reentry(calls),
            ],
            |g| &g.id,
        ),
        nodes: keyed(
            vec![
                NodeContract::new("leaf_work")
                    .supervisor("leaf_supervisor")
                    .reads(["task"])
                    .writes(["result"])
                    .trigger(Trigger::new(1, Condition::missing("/result")))
                    .run(NodeBehaviour::set([("result", json!({"ok": true}))])),
            ],
            |n| &n.id,
        ),
        ..WorkflowDocument::default()
    }
}

/// A chain of `levels` nested subgraphs (`level1` calls `level2` ...); the deepest runs
/// one node, then every level returns. Budgets allow exactly that depth.
pub fn nested_levels(levels: u32) -> WorkflowDocument {
    let levels = levels.max(1);
    let mut supervisors = vec![
        SupervisorContract::new("root")
            .allow(["level1"])
            .default_decision(RoutingDecision::stop_global("done")),
    ];
    let mut subgraphs = Vec::new();
    for l in 1..=levels {
        let sup = format!("level{l}_supervisor");
        let allow = if l < levels {
            vec![format!("level{}", l + 1)]
        } else {
            vec!["deep_work".to_string()]
        };
        supervisors.push(SupervisorContract::new(sup.clone()).allow(allow));
        subgraphs.push(
            SubgraphContract::new(format!("level{l}"))
                .entrypoint(sup)
                .reads(["task"])
                .writes(["result"])
                .trigger(Trigger::new(1, Condition::missing("/result"))),
        );
    }
    let deep = NodeContract::new("deep_work")
        .supervisor(format!("level{levels}_supervisor"))
        .reads(["task"])
        .writes(["result"])
        .trigger(Trigger::new(1, Condition::missing("/result")))
        .run(NodeBehaviour::set([("result", json!({"depth": levels}))]));
    WorkflowDocument {
        workflow: "synth_nested".into(),
        slices: slices(&["task", "result"]),
        budgets: Budgets::default()
            .max_depth(levels)
            .max_steps(levels * 2 + 2),
        entry: "root".into(),
        supervisors: keyed(supervisors, |s| &s.id),
        subgraphs: keyed(subgraphs, |g| &g.id),
        nodes: keyed(vec![deep], |n| &n.id),
        ..WorkflowDocument::default()
    }
}

/// A large workflow: `nodes` nodes spread over `subgraphs` subgraphs (plus a few at the
/// root), each subgraph with one supervisor, its own slice, triggers, and a handoff pair
/// in every group of ten nodes.
pub fn clustered(nodes: usize, subgraphs: usize) -> WorkflowDocument {
    let subgraphs = subgraphs.max(1);
    let per = (nodes / subgraphs).max(1);
    let mut sups = Vec::with_capacity(subgraphs + 1);
    let mut subs = Vec::with_capacity(subgraphs);
    let mut all_nodes = Vec::with_capacity(nodes);
    let mut slice_names: IndexMap<String, SliceDecl> = IndexMap::new();
    slice_names.insert("input".into(), SliceDecl::new());
    let mut root_allow = Vec::with_capacity(subgraphs);
    for g in 0..subgraphs {
        let gid = format!("g{g}");
        let sup = format!("g{g}_supervisor");
        let slice = format!("s{g}");
        slice_names.insert(slice.clone(), SliceDecl::new());
        let mut allow = Vec::with_capacity(per);
        for k in 0..per {
            let id = format!("g{g}_n{k}");
            let mut c = NodeContract::new(id.clone())
                .supervisor(sup.clone())
                .reads(["input", slice.as_str()])
                .writes([slice.as_str()])
                .run(NodeBehaviour::set([(slice.clone(), json!({"by": id}))]));
            if k % 10 == 0 && k + 1 < per {
                c = c.handoff(format!("g{g}_n{}", k + 1));
            }
            c = c.trigger(Trigger::new(
                i64::try_from(k).unwrap_or(0),
                Condition::missing(format!("/{slice}")),
            ));
            allow.push(id);
            all_nodes.push(c);
        }
        sups.push(
            SupervisorContract::new(sup.clone())
                .allow(allow)
                .default_decision(RoutingDecision::stop_local()),
        );
        subs.push(
            SubgraphContract::new(gid.clone())
                .entrypoint(sup)
                .reads(["input", slice.as_str()])
                .writes([slice.as_str()])
                .trigger(Trigger::new(1, Condition::missing(format!("/{slice}")))),
        );
        root_allow.push(gid);
    }
    sups.insert(
        0,
        SupervisorContract::new("root")
            .allow(root_allow)
            .default_decision(RoutingDecision::stop_global("all done")),
    );
    WorkflowDocument {
        workflow: format!("synth_clustered_{nodes}"),
        slices: slice_names,
        budgets: Budgets::default().max_steps(u32::try_from(nodes * 2 + 10).unwrap_or(u32::MAX)),
        entry: "root".into(),
        supervisors: keyed(sups, |s| &s.id),
        subgraphs: keyed(subs, |g| &g.id),
        nodes: keyed(all_nodes, |n| &n.id),
        ..WorkflowDocument::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::GraphBuilder;

    #[test]
    fn every_generator_builds_and_round_trips() {
        for doc in [
            supervisor_loop(10),
            handoff_chain(5),
            repeated_calls(4),
            nested_levels(3),
            clustered(200, 10),
        ] {
            let text = doc.to_json_pretty();
            let (back, _) =
                WorkflowDocument::parse(&text, crate::contracts::DocumentFormat::Json).unwrap();
            assert_eq!(back, doc);
            let g = GraphBuilder::from_document(doc).build().unwrap();
            assert!(g.graph().node_count() > 0);
        }
        let g = GraphBuilder::from_document(clustered(200, 10))
            .build()
            .unwrap();
        assert_eq!(g.registry().nodes().len(), 200);
        assert_eq!(g.clusters().len(), 10);
        assert_eq!(g.cluster("g3").unwrap().nodes.len(), 20);
        let g = GraphBuilder::from_document(nested_levels(3))
            .build()
            .unwrap();
        assert_eq!(g.cluster("level3").unwrap().depth, Some(3));
    }
}
