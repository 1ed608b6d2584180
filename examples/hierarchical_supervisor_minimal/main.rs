//! The minimal hierarchical supervisor: `domain_supervisor` calls the `fashion` subgraph,
//! whose `fashion_supervisor` dispatches `trend`; `trend` writes inside the fashion
//! boundary; `fashion_supervisor` returns with `stop_local` and an output, which the parent
//! maps to its `answer` slice before ending with `stop_global`.
//!
//! The contracts are written in Rust here, with a Rust node handler and a Rust policy; the
//! same workflow as a document is `examples/workflows/fashion.json` (rule-based, with a
//! `set` node), and both end in the same state.
//!
//! Run with `cargo run --example hierarchical_supervisor_minimal`.

use pactgraph::contracts::SupervisorOutput;
use pactgraph::runtime::{Clock, Executor, HandlerError, NodeInput, PolicyInput, Writes};
use pactgraph::validator::ValidGraph;
use pactgraph::{
    Condition, GraphBuilder, NodeBehaviour, NodeContract, RoutingDecision, SliceDecl,
    SubgraphContract, SupervisorContract, Trigger, WorkflowDocument,
};
use serde_json::json;

fn contracts() -> GraphBuilder {
    GraphBuilder::new("fashion_advisor")
        .slice(
            "request",
            SliceDecl::new().schema(json!({"type": "object"})),
        )
        .slice(
            "fashion",
            SliceDecl::new().schema(json!({"type": "object"})),
        )
        .slice("answer", SliceDecl::new())
        .entry("domain_supervisor")
        // The parent: rule-based. `fashion` wins while there is no answer; then the
        // default ends the run.
        .supervisor(
            SupervisorContract::new("domain_supervisor")
                .allow(["fashion", "reply"])
                .fallback("reply")
                .default_decision(RoutingDecision::stop_global("answered")),
        )
        // The child's supervisor decides in Rust.
        .supervisor(
            SupervisorContract::new("fashion_supervisor")
                .allow(["trend"])
                .handler("fashion_policy"),
        )
        .subgraph(
            SubgraphContract::new("fashion")
                .entrypoint("fashion_supervisor")
                .reads(["request"])
                .writes(["fashion"])
                .trigger(Trigger::new(
                    10,
                    Condition::All(vec![
                        Condition::equals("/request/topic", json!("fashion")),
                        Condition::missing("/answer"),
                    ]),
                ))
                .input_schema(json!({"type": "object", "required": ["request"],
                    "properties": {"request": {"type": "object", "required": ["topic"]}}}))
                .output_schema(json!({"type": "object", "required": ["fashion"]}))
                .result_slice("answer"),
        )
        .node(
            NodeContract::new("trend")
                .supervisor("fashion_supervisor")
                .reads(["request"])
                .writes(["fashion"])
                .run(NodeBehaviour::handler("trend")),
        )
        .node(
            NodeContract::new("reply")
                .supervisor("domain_supervisor")
                .reads(["request"])
                .writes(["answer"])
                .trigger(Trigger::new(1, Condition::missing("/answer")))
                .run(NodeBehaviour::set([(
                    "answer",
                    json!({"text": "I can only help with fashion."}),
                )]))
                .terminal(true),
        )
}

/// `fashion_supervisor`: run `trend` once, then return its finding as the output.
async fn fashion_policy(input: PolicyInput) -> Result<SupervisorOutput, HandlerError> {
    Ok(match input.state.get("fashion") {
        None => "trend".into(), // a legacy bare string works too
        Some(found) => RoutingDecision::stop_local_with(json!({"fashion": found})).into(),
    })
}

/// `trend`: sees only `request`, writes only `fashion`.
async fn trend(input: NodeInput) -> Result<Writes, HandlerError> {
    let topic = input.view.get("request").and_then(|r| r.get("topic"));
    if topic != Some(&json!("fashion")) {
        return Err(HandlerError::new("trend only knows about fashion"));
    }
    let mut writes = Writes::new();
    writes.insert("fashion".into(), json!({"trend": "wide-leg trousers"}));
    Ok(writes)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let executor = Executor::builder(ValidGraph::new(contracts().build()?)?)
        .policy_handler("fashion_policy", fashion_policy)
        .node_handler("trend", trend)
        .clock(Clock::Frozen)
        .build()?;
    let input = json!({"request": {"topic": "fashion"}});
    let outcome = executor.run(executor.start(input.clone())?).await;

    let mut state = outcome.state.clone();
    state.shift_remove("system"); // the trace is printed below
    println!(
        "status: {} ({})",
        outcome.status,
        outcome.termination_reason.map_or("-", |r| r.as_str())
    );
    println!("steps: {}", outcome.steps);
    println!("final state:\n{}\n", serde_json::to_string_pretty(&state)?);
    println!("decision trace:\n{}", outcome.trace.to_table());

    // The same workflow as a document ends in the same state.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/workflows/fashion.json"
    );
    let (doc, _) = WorkflowDocument::load(path)?;
    let graph = ValidGraph::new(GraphBuilder::from_document(doc).build()?)?;
    let from_doc = Executor::builder(graph).build()?;
    let mut other = from_doc.run(from_doc.start(input)?).await.state;
    other.shift_remove("system");
    assert_eq!(other, state, "the document and the Rust contracts agree");
    println!("examples/workflows/fashion.json ends in the same state.");
    Ok(())
}
