//! A `set` node's constant writes are checked once, when the executor is built, at the
//! root level (ADR 0064). These tests prove the verdict read from the plan is the check
//! commit makes on any other node's writes: for all constants, `writes` lists, slice
//! schemas and output schemas, a `set` node and a handler node returning the same object
//! end the run the same way (status, reason, message, state, trace), and a refused
//! constant applies nothing. (Inside a subgraph the writes are checked at commit; the
//! validator refuses a `set` node writing past its subgraph's boundary, so that path is
//! the handler's.)

mod support;

use pactgraph::runtime::{NodeInput, RunOutcome, RunStatus, TerminationReason};
use pactgraph::validator::ValidGraph;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use support::runtime::{graph, rt};

/// A one-step workflow: `boss` dispatches `n`, which writes `constant` (as a `set` node,
/// or through handler `h`) and ends the run.
fn doc(
    constant: &Map<String, Value>,
    writes: &[&str],
    schemas: &[(&str, Value)],
    output_schema: Option<&Value>,
    set: bool,
) -> Value {
    let mut slices = Map::new();
    for name in ["a", "b"] {
        let decl = match schemas.iter().find(|(s, _)| *s == name) {
            Some((_, schema)) => json!({"schema": schema}),
            None => json!({}),
        };
        slices.insert(name.into(), decl);
    }
    let mut node = json!({
        "supervisor": "boss", "writes": writes, "terminal": true,
        "triggers": [{"priority": 1, "when": true}],
        "run": if set { json!({"set": constant}) } else { json!({"handler": "h"}) },
    });
    if let Some(s) = output_schema {
        node["output_schema"] = s.clone();
    }
    json!({
        "workflow": "constant", "slices": slices, "entry": "boss",
        "supervisors": {"boss": {"allow": ["n"]}},
        "nodes": {"n": node},
    })
}

/// Runs `doc` to its end (`None` when the validator refuses the document).
fn run(doc: Value, constant: &Map<String, Value>) -> Option<RunOutcome> {
    let g = graph(doc);
    let valid = ValidGraph::new(g).ok()?;
    let writes = constant.clone();
    let ex = pactgraph::runtime::Executor::builder(valid)
        .clock(pactgraph::runtime::Clock::Frozen)
        .node_handler("h", move |_: NodeInput| {
            let w = writes.clone();
            async move { Ok(w) }
        })
        .build()
        .expect("builds");
    Some(rt().block_on(ex.run(ex.start(json!({})).expect("valid input"))))
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..3).prop_map(|n| json!(n)),
        "[xy]{0,2}".prop_map(Value::String),
        Just(json!({"k": 1})),
    ]
}

fn schema() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(json!({"type": "integer"}))),
        Just(Some(json!({"type": "string", "minLength": 1}))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// For all constants (slices declared, undeclared and `system`), `writes` lists and
    /// schemas: the `set` node (its verdict read from the plan) and the handler node (its
    /// writes checked at commit) end the run identically.
    #[test]
    fn a_constants_verdict_is_the_commit_check(
        entries in prop::collection::vec((prop::sample::select(vec!["a", "b", "system", "zz"]), leaf()), 0..4),
        writes in prop::sample::subsequence(vec!["a", "b"], 0..=2),
        schema_a in schema(),
        schema_b in schema(),
        output in prop_oneof![Just(None), Just(Some(json!({"type": "object", "required": ["a"]})))],
    ) {
        let constant: Map<String, Value> = entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let schemas: Vec<(&str, Value)> = [("a", schema_a), ("b", schema_b)]
            .into_iter()
            .filter_map(|(s, v)| v.map(|v| (s, v)))
            .collect();
        let set = doc(&constant, &writes, &schemas, output.as_ref(), true);
        let handler = doc(&constant, &writes, &schemas, output.as_ref(), false);
        let Some(by_set) = run(set, &constant) else {
            // Refused before it runs: no verdict to compare.
            return Ok(());
        };
        let by_handler = run(handler, &constant).expect("the handler twin validates too");
        prop_assert_eq!(by_set.status, by_handler.status);
        prop_assert_eq!(by_set.termination_reason, by_handler.termination_reason);
        prop_assert_eq!(&by_set.message, &by_handler.message);
        prop_assert_eq!(&by_set.state, &by_handler.state);
        prop_assert_eq!(by_set.trace.without_timing(), by_handler.trace.without_timing());
    }
}

/// A constant its slice's schema refuses fails the run at the root with the check's own
/// message, and nothing of it is applied; one the schema accepts completes the run.
#[test]
fn a_refused_constant_fails_with_the_checks_message_and_applies_nothing() {
    let constant: Map<String, Value> =
        [("a".to_string(), json!("text")), ("b".into(), json!("ok"))]
            .into_iter()
            .collect();
    let schemas = [("a", json!({"type": "integer"}))];
    let out = run(doc(&constant, &["a", "b"], &schemas, None, true), &constant)
        .expect("the validator does not check constants against slice schemas");
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(out.termination_reason, Some(TerminationReason::NodeFailed));
    let msg = out.message.as_deref().unwrap_or_default();
    assert!(
        msg.starts_with("node `n` wrote slice `a` that does not match its schema: "),
        "{msg}"
    );
    assert!(
        out.state.get("a").is_none(),
        "nothing applied: {:?}",
        out.state
    );
    assert!(
        out.state.get("b").is_none(),
        "nothing applied: {:?}",
        out.state
    );

    let fine: Map<String, Value> = [("a".to_string(), json!(7))].into_iter().collect();
    let out = run(doc(&fine, &["a"], &schemas, None, true), &fine).expect("valid");
    assert_eq!(out.status, RunStatus::Completed);
    assert_eq!(out.state["a"], json!(7));
}
