//! Helpers shared by the runtime tests.
#![allow(dead_code)]

use std::path::Path;

use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{Clock, Executor, ExecutorBuilder, RunOutcome, RunRecord, TraceKind};
use pactgraph::validator::ValidGraph;
use pactgraph::{CompiledGraph, GraphBuilder};
use serde_json::{Value, json};

/// A single-threaded tokio runtime with timers and I/O (the PostgreSQL store's sockets).
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A single-threaded tokio runtime with I/O and timers (for `exec` nodes).
pub fn io() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Starts a run with `input` and runs it to its end on [`io`], keeping the run state.
pub fn run_with_io(ex: &Executor, input: Value) -> pactgraph::runtime::RunState {
    let mut state = ex.start(input).expect("the input is valid");
    io().block_on(ex.run_in_place(&mut state));
    state
}

/// Compiles a workflow document given as JSON.
pub fn graph(doc: Value) -> CompiledGraph {
    let doc = WorkflowDocument::from_value(doc).expect("a valid document");
    GraphBuilder::from_document(doc)
        .build()
        .expect("ids resolve")
}

/// Compiles a shipped workflow file.
pub fn graph_file(rel: &str) -> CompiledGraph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let (doc, map) = WorkflowDocument::load(&path).expect("the shipped workflow loads");
    GraphBuilder::from_document(doc)
        .source_map(map)
        .build()
        .expect("ids resolve")
}

/// An executor builder with a frozen clock, for a graph the validator must accept.
pub fn builder(g: CompiledGraph) -> ExecutorBuilder {
    Executor::builder(valid(g)).clock(Clock::Frozen)
}

/// The graph, validated (panics with the report when the validator refuses it).
pub fn valid(g: CompiledGraph) -> ValidGraph {
    match ValidGraph::new(g) {
        Ok(v) => v,
        Err(rejected) => panic!("{rejected}: {:#?}", rejected.report),
    }
}

/// Runs to the end.
pub fn run(ex: &Executor, input: Value) -> RunOutcome {
    let state = ex.start(input).expect("the input is valid");
    rt().block_on(ex.run(state))
}

/// The trace as `(kind, supervisor, target)` triples.
pub fn path(o: &RunOutcome) -> Vec<(TraceKind, String, String)> {
    o.trace
        .iter()
        .map(|i| {
            (
                i.kind,
                i.supervisor().unwrap_or_default().to_string(),
                i.target().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The state without the runtime's `system` slice.
pub fn user_state(o: &RunOutcome) -> Value {
    let mut s = o.state.clone();
    s.shift_remove("system");
    Value::Object(s)
}

/// A policy that returns the scripted outputs in order, then `stop_global`.
pub fn script(
    outputs: Vec<pactgraph::contracts::SupervisorOutput>,
) -> impl pactgraph::runtime::PolicyHandler {
    let queue = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        outputs,
    )));
    move |_input: pactgraph::runtime::PolicyInput| {
        let next = queue.lock().expect("not poisoned").pop_front();
        async move {
            Ok(next.unwrap_or_else(|| {
                pactgraph::RoutingDecision::stop_global("script exhausted").into()
            }))
        }
    }
}

/// `{slice: value}` as node writes.
pub fn writes(pairs: &[(&str, Value)]) -> pactgraph::runtime::Writes {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

/// A loop of `max_steps` `set` steps (node `tick` writing `n`, always triggered), stopped
/// by the step budget: the small run the store, lease and event tests share.
pub fn ticker(max_steps: u32) -> Value {
    serde_json::json!({
        "workflow": "ticker",
        "slices": {"n": {}},
        "budgets": {"max_steps": max_steps},
        "entry": "root",
        "supervisors": {"root": {"allow": ["tick"], "default": {"stop_global": {}}}},
        "nodes": {"tick": {"supervisor": "root", "reads": ["n"], "writes": ["n"],
            "triggers": [{"priority": 1, "when": true}],
            "run": {"set": {"n": 1}}}}
    })
}

/// The executor of a [`ticker`] of `max_steps` and a new run of it, created in `store`.
#[cfg(feature = "store")]
pub async fn created_ticker<S: pactgraph::store::RunStore>(
    store: &S,
    max_steps: u32,
) -> (Executor, RunRecord) {
    created_record(store, ticker(max_steps), |b| b).await
}

/// Builds an executor for `doc` (handlers added by `with`), starts a run with input `{}`
/// and creates its record in `store`.
#[cfg(feature = "store")]
pub async fn created_doc(
    store: &pactgraph::store::AnyStore,
    doc: Value,
    with: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
) -> (Executor, pactgraph::runtime::RunId) {
    let (ex, record) = created_record(store, doc, with).await;
    (ex, record.run_id)
}

/// [`started_with`] input `{}`, the record created in `store`.
#[cfg(feature = "store")]
async fn created_record<S: pactgraph::store::RunStore>(
    store: &S,
    doc: Value,
    with: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
) -> (Executor, RunRecord) {
    let (ex, record) = started_with(doc, json!({}), with);
    store
        .create(&record, &pactgraph::store::CreateOptions::default())
        .await
        .expect("creates");
    (ex, record)
}

/// One step of `run`, with its delta (the run before and after, compared).
#[cfg(feature = "store")]
pub async fn step_delta(
    ex: &Executor,
    run: &mut pactgraph::runtime::RunState,
) -> pactgraph::store::StepDelta {
    let before = pactgraph::store::Before::of(run);
    ex.step(run).await;
    pactgraph::store::StepDelta::between(&before, run)
}

/// The shared [`ticker`] (node `tick` writes a constant to `n` each
/// step), named `workflow`, with a slice `big` given at start and never written.
pub fn ticker_named(max_steps: u32, workflow: &str) -> Value {
    let mut doc = ticker(max_steps);
    doc["workflow"] = json!(workflow);
    doc["slices"]["big"] = json!({});
    doc
}

/// An executor for `doc` and a fresh record of a run of it with `input`.
pub fn started(doc: Value, input: Value) -> (Executor, RunRecord) {
    started_with(doc, input, |b| b)
}

/// [`started`] with handlers added to the executor by `with`.
pub fn started_with(
    doc: Value,
    input: Value,
    with: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
) -> (Executor, RunRecord) {
    let g = graph(doc);
    let document = g.to_document();
    let ex = with(builder(g)).build().expect("builds");
    let run = ex.start(input).expect("starts");
    (ex, RunRecord::new(document, run))
}
