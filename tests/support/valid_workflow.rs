//! `valid_workflow`: a generator of valid workflows for the validator's property tests
//! and benchmark. It stays here rather than in the library's `graph::synth` (feature
//! `bench`) because the property tests shape it (`Shape`) and mutate it rule by rule.
#![allow(dead_code)]

use pactgraph::contracts::{Condition, SupervisorPolicy};
use pactgraph::{
    Budgets, NodeContract, RoutingDecision, SliceDecl, SubgraphContract, SupervisorContract,
    Trigger, WorkflowDocument,
};
use serde_json::json;

/// The shape of a generated workflow.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Number of subgraphs, laid out as a tree (subgraph `k >= fanout` is called by
    /// subgraph `k / fanout - 1`; the first `fanout` are called by the root).
    pub subgraphs: usize,
    /// Nodes per subgraph (at least 1).
    pub nodes_per_subgraph: usize,
    /// Children per subgraph (at least 1).
    pub fanout: usize,
    /// Each subgraph ends with a handoff chain `n[m-2] -> n[m-1]` (when m >= 2).
    pub handoffs: bool,
    /// Slices, subgraphs and handoff pairs carry JSON Schemas.
    pub schemas: bool,
    /// Every `policy_every`-th subgraph supervisor has a policy (0: all rule-based).
    pub policy_every: usize,
}

/// The parent subgraph of subgraph `k`, if it is not called from the root.
pub fn parent(shape: &Shape, k: usize) -> Option<usize> {
    let f = shape.fanout.max(1);
    (k >= f).then(|| k / f - 1)
}

/// Static depth of every subgraph (1 for those the root calls).
pub fn depths(shape: &Shape) -> Vec<u32> {
    let mut d = vec![1u32; shape.subgraphs];
    for k in 0..shape.subgraphs {
        if let Some(p) = parent(shape, k) {
            d[k] = d[p] + 1;
        }
    }
    d
}

pub fn sub(k: usize) -> String {
    format!("g{k}")
}
pub fn sup(k: usize) -> String {
    format!("g{k}_sup")
}
pub fn node(k: usize, j: usize) -> String {
    format!("g{k}_n{j}")
}
pub fn slice(k: usize) -> String {
    format!("s{k}")
}

fn object_requiring(prop: &str) -> serde_json::Value {
    json!({"type": "object", "required": [prop], "properties": {prop: {"type": "object"}}})
}

/// A workflow every rule accepts (only information diagnostics).
pub fn valid_workflow(shape: &Shape) -> WorkflowDocument {
    let n = shape.subgraphs;
    let m = shape.nodes_per_subgraph.max(1);
    let depth = depths(shape);
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for k in 0..n {
        match parent(shape, k) {
            Some(p) => children[p].push(k),
            None => roots.push(k),
        }
    }
    // A subgraph writes its own slice and every descendant's.
    let mut writes: Vec<Vec<String>> = (0..n).map(|k| vec![slice(k)]).collect();
    for k in (0..n).rev() {
        if let Some(p) = parent(shape, k) {
            let mine = std::mem::take(&mut writes[k]);
            writes[p].extend(mine.iter().cloned());
            writes[k] = mine;
        }
    }

    let mut doc = WorkflowDocument {
        workflow: format!("synthetic_{n}x{m}"),
        entry: "root".into(),
        ..WorkflowDocument::default()
    };
    let request = if shape.schemas {
        SliceDecl::new().schema(json!({"type": "object"}))
    } else {
        SliceDecl::new()
    };
    doc.slices.insert("request".into(), request);
    doc.slices.insert("answer".into(), SliceDecl::new());
    for k in 0..n {
        doc.slices.insert(slice(k), SliceDecl::new());
    }
    let max_depth = depth.iter().copied().max().unwrap_or(1);
    doc.budgets = Budgets::default().max_depth(max_depth.max(1));

    let mut root_allow: Vec<String> = roots.iter().map(|k| sub(*k)).collect();
    root_allow.push("reply".into());
    doc.supervisors.insert(
        "root".into(),
        SupervisorContract::new("root")
            .allow(root_allow)
            .fallback("reply")
            .default_decision(RoutingDecision::stop_global("nothing to do")),
    );
    doc.nodes.insert(
        "reply".into(),
        NodeContract::new("reply")
            .supervisor("root")
            .reads(["request"])
            .writes(["answer"])
            .trigger(Trigger::default())
            .terminal(true),
    );

    let chain = shape.handoffs && m >= 2;
    for k in 0..n {
        let own = slice(k);
        let pending = Condition::missing(format!("/{own}"));
        let mut allow: Vec<String> = (0..if chain { m - 1 } else { m })
            .map(|j| node(k, j))
            .collect();
        allow.extend(children[k].iter().map(|c| sub(*c)));
        let mut s = SupervisorContract::new(sup(k)).allow(allow);
        if shape.policy_every > 0 && k % shape.policy_every == 0 {
            s = s.policy(SupervisorPolicy::Handler("route".into()));
        }
        doc.supervisors.insert(sup(k), s);
        let mut g = SubgraphContract::new(sub(k))
            .entrypoint(sup(k))
            .reads(["request"])
            .writes(writes[k].clone())
            .trigger(Trigger {
                priority: 1,
                when: pending.clone(),
            });
        if shape.schemas {
            g = g
                .input_schema(
                    json!({"type": "object", "properties": {"request": {"type": "object"}}}),
                )
                .output_schema(json!({"type": "object"}));
        }
        doc.subgraphs.insert(sub(k), g);
        for j in 0..m {
            let mut c = NodeContract::new(node(k, j))
                .supervisor(sup(k))
                .reads(["request"])
                .writes([own.clone()]);
            let target = chain && j == m - 1;
            if target {
                c = c.reads(["request".to_string(), own.clone()]);
                if shape.schemas {
                    c = c.input_schema(object_requiring(&own));
                }
            } else {
                c = c.trigger(Trigger {
                    priority: j as i64,
                    when: Condition::All(vec![
                        pending.clone(),
                        Condition::equals("/request/topic", json!("x")),
                    ]),
                });
            }
            if chain && j == m - 2 {
                c = c.handoff(node(k, m - 1));
                if shape.schemas {
                    c = c.output_schema(object_requiring(&own));
                }
            }
            doc.nodes.insert(node(k, j), c);
        }
    }
    doc.fill_ids();
    doc
}
