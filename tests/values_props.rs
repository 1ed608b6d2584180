//! The claim behind `GET /api/runs/{id}/trace?values=true` (ADR 0043, ADR 0048): for
//! every node run of every run, the input `trace_with_values` rebuilds from the run's kept
//! events equals what the node read. Over random valid workflows (the generator of
//! `runtime_props`: subgraphs calling each other, handoffs, terminals, guards) whose nodes
//! are one in-process handler recording the read view it is given, with, in part of the
//! cases, a root supervisor that asks for clarification (answered up to three times: the
//! answer a resume writes) and a root node advised by another node (a fork and its join).
//! Each run is made three ways: in memory with an event bus, and driven through the
//! SQLite and the PostgreSQL store (`PG_URL`; in CI both), and the values of the three
//! are the same, byte for byte.
#![cfg(feature = "serve")]

mod support;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{
    DEFAULT_EVENT_BUFFER, Executor, HandlerError, NodeInput, RunEvents, RunRecord, RunState,
    RunStatus, TraceItem, Writes, sync_node,
};
use pactgraph::serve::trace_with_values;
use pactgraph::store::{Continue, CreateOptions, DriveOptions, RunStore, drive};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use support::random_workflow::{Gen, input, workflow};
use support::runtime::{builder, graph, rt};
use support::stores::{backends, open_with};

/// Answers given to a paused run before it is left paused.
const ANSWERS: usize = 3;

/// What each handler call read: `(node, its view without `system`)`, in call order.
type Reads = Arc<Mutex<Vec<(String, Map<String, Value>)>>>;

/// The generator's workflow made observable: every node runs the handler `rec`; the
/// root's nodes also read `clarification`; in some cases the root's default decision asks
/// for clarification, and in some its first node is advised by a new node `adv`.
/// Returns it with the slice each node writes.
fn instrumented(seed: u64) -> (Value, HashMap<String, String>) {
    let (mut doc, _) = workflow(seed);
    let mut g = Gen(seed ^ 0x5EED);
    let mut writes_of = HashMap::new();
    doc["slices"]["clarification"] = json!({});
    let nodes = doc["nodes"].as_object_mut().expect("nodes");
    for (id, node) in nodes.iter_mut() {
        node["run"] = json!({"handler": "rec"});
        writes_of.insert(id.clone(), node["writes"][0].as_str().unwrap().to_string());
        if node["supervisor"] == "root" {
            node["reads"] = json!(["s0", "s1", "s2", "clarification"]);
        }
    }
    if g.chance(50) {
        nodes.insert(
            "adv".into(),
            json!({"supervisor": "root", "reads": ["s0", "s1", "s2", "clarification"],
                   "writes": ["s0"], "run": {"handler": "rec"}}),
        );
        writes_of.insert("adv".into(), "s0".into());
        // `n0` is the root's (every supervisor owns the node of its own index).
        nodes["n0"]["advisors"] = json!({"members": ["adv"], "slice": "advice"});
        nodes["n0"]["reads"] = json!(["s0", "s1", "s2", "clarification", "advice"]);
        doc["slices"]["advice"] = json!({});
    }
    if g.chance(50) {
        // The root must still be able to end the run (PG0602): a terminal node of its
        // own (one without a handoff or advisors); without one the default stays.
        let nodes = doc["nodes"].as_object_mut().expect("nodes");
        let own = nodes.iter_mut().rev().find(|(id, n)| {
            *id != "adv"
                && n["supervisor"] == "root"
                && n.get("handoff").is_none()
                && n.get("advisors").is_none()
        });
        if let Some((_, node)) = own {
            node["terminal"] = json!(true);
            // Chosen once an answer is there: a node run reading the answer.
            let answered =
                json!({"priority": 9, "when": {"path": "/clarification", "exists": true}});
            match node["triggers"].as_array_mut() {
                Some(t) => t.push(answered),
                None => node["triggers"] = json!([answered]),
            }
            doc["supervisors"]["root"]["default"] =
                json!({"ask_clarification": {"question": "which slice next?"}});
        }
    }
    (doc, writes_of)
}

/// The executor: handler `rec` records its view and writes `{"by", "k"}` (a counter, so
/// no two writes are alike) to its node's slice.
fn executor(
    doc: Value,
    writes_of: HashMap<String, String>,
    reads: Reads,
    counter: Arc<AtomicU64>,
) -> Executor {
    let rec = move |input: NodeInput| -> Result<Writes, HandlerError> {
        let mut view = input.view.clone();
        view.remove("system");
        reads.lock().unwrap().push((input.node.clone(), view));
        let k = counter.fetch_add(1, Ordering::Relaxed);
        let slice = writes_of[&input.node].clone();
        let mut out = Writes::new();
        out.insert(slice, json!({"by": input.node, "k": k}));
        Ok(out)
    };
    builder(graph(doc))
        .node_handler("rec", sync_node(rec))
        .build()
        .unwrap()
}

/// Checks the rebuilt inputs against the recorded reads: every node run's item has an
/// `input` (none `input_unknown`), equal to what the node's call read, call by call per
/// node; every call is matched. Returns the `values` of every item (`null` for items that
/// are not node runs).
fn check(trace: &Value, reads: &Reads) -> Result<Vec<Value>, TestCaseError> {
    let mut calls: HashMap<String, VecDeque<Map<String, Value>>> = HashMap::new();
    for (node, view) in reads.lock().unwrap().drain(..) {
        calls.entry(node).or_default().push_back(view);
    }
    let mut values = Vec::new();
    for item in trace.as_array().unwrap() {
        let Some(v) = item.get("values") else {
            values.push(Value::Null);
            continue;
        };
        prop_assert!(v.get("input_unknown").is_none(), "{item}");
        let node = item["target"].as_str().unwrap();
        let read = calls.get_mut(node).and_then(VecDeque::pop_front);
        prop_assert_eq!(
            Some(v["input"].as_object().unwrap().clone()),
            read,
            "node run {} of `{}`",
            item,
            node
        );
        values.push(v.clone());
    }
    prop_assert!(
        calls.values().all(VecDeque::is_empty),
        "calls without an item: {:?}",
        calls
    );
    Ok(values)
}

/// The trace's items with their values, as the server gives them.
fn rebuilt(
    items: &[TraceItem],
    events: &[pactgraph::runtime::RunEvent],
    doc: &WorkflowDocument,
) -> Value {
    trace_with_values(items, events, doc)
}

proptest! {
    // Each case runs in memory and opens a fresh store on each backend.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_rebuilt_input_of_every_node_run_is_what_it_read(seed in any::<u64>()) {
        let (doc, writes_of) = instrumented(seed);
        let document: WorkflowDocument = graph(doc.clone()).to_document();
        let reads: Reads = Arc::default();
        let counter = Arc::new(AtomicU64::new(0));
        let ex = executor(doc, writes_of, Arc::clone(&reads), Arc::clone(&counter));
        let rt = rt();
        // One start for the three: the same run id (which the advice's nonces derive from).
        let start = ex.start(input(seed)).unwrap();

        // In memory, the events published on a bus.
        let bus = RunEvents::new();
        let mut sub = bus.subscribe(DEFAULT_EVENT_BUFFER * 16);
        let with_bus = ex.with_events(bus);
        let mut run: RunState = start.clone();
        let mut answered = 0;
        loop {
            rt.block_on(with_bus.run_in_place(&mut run));
            if run.status() != RunStatus::AwaitingInput || answered == ANSWERS {
                break;
            }
            answered += 1;
            run = with_bus.resume(run, format!("answer {answered}")).unwrap();
        }
        drop(with_bus);
        let events = rt.block_on(async {
            let mut got = Vec::new();
            while let Some(e) = sub.next().await {
                prop_assert_eq!(e.dropped, 0);
                got.push(e);
            }
            Ok(got)
        })?;
        let memory = check(&rebuilt(&run.trace().to_items(), &events, &document), &reads)?;
        let answers = answered;

        for backend in backends() {
            counter.store(0, Ordering::Relaxed);
            let stored = rt.block_on(async {
                let held = open_with(backend, None).await;
                let store = held.store.clone();
                let record = RunRecord::new(document.clone(), start.clone());
                let id = record.run_id;
                store.create(&record, &CreateOptions::default()).await.unwrap();
                let mut how = Continue::AsStored;
                let mut answered = 0;
                let run = loop {
                    let run = drive(&ex, &store, id, "a", &DriveOptions::default(), how)
                        .await
                        .unwrap();
                    if run.status() != RunStatus::AwaitingInput || answered == ANSWERS {
                        break run;
                    }
                    answered += 1;
                    how = Continue::Answer(format!("answer {answered}"));
                };
                prop_assert_eq!(answered, answers);
                let events = store.events(id, 0, usize::MAX).await.unwrap();
                let items = store.load(id).await.unwrap().record.run.trace().to_items().clone();
                prop_assert_eq!(&items, &run.trace().to_items());
                check(&rebuilt(&items, &events, &document), &reads)
            })?;
            // The same values whichever store kept them, and as in memory.
            prop_assert_eq!(
                serde_json::to_string(&stored).unwrap(),
                serde_json::to_string(&memory).unwrap(),
                "{}", backend
            );
        }
    }
}

/// The generated space holds what the property is about: over the seeds the property
/// sees, node runs inside subgraphs, after a return, after a resume (an answer) and
/// after an advisors' join all occur, so the rebuild is exercised past every kind of
/// change it follows, not only on flat chains.
#[test]
fn generated_runs_reach_every_change_the_rebuild_follows() {
    let rt = rt();
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..300u64 {
        let (doc, writes_of) = instrumented(seed);
        let ex = executor(doc, writes_of, Arc::default(), Arc::default());
        let mut run = ex.start(input(seed)).unwrap();
        let mut answered = 0;
        loop {
            rt.block_on(ex.run_in_place(&mut run));
            if run.status() != RunStatus::AwaitingInput || answered == ANSWERS {
                break;
            }
            answered += 1;
            run = ex.resume(run, "yes").unwrap();
        }
        let mut after = Vec::new();
        for item in &run.trace().to_items() {
            let kind = format!("{:?}", item.kind);
            if item.ran_node().is_some() && matches!(kind.as_str(), "Dispatch" | "Handoff") {
                if item.depth > 0 {
                    seen.insert("node in a subgraph".to_string());
                }
                for a in &after {
                    seen.insert(format!("node after {a}"));
                }
                after.clear();
            }
            let from_subgraph = item.source.as_deref().is_some_and(|s| s.starts_with('g'));
            if kind == "Return" && from_subgraph {
                after.push("a subgraph's Return".to_string());
            } else if matches!(kind.as_str(), "Resume" | "Join" | "Call") {
                after.push(kind);
            }
        }
    }
    for want in [
        "node in a subgraph",
        "node after Call",
        "node after a subgraph's Return",
        "node after Resume",
        "node after Join",
    ] {
        assert!(seen.contains(want), "{want} never seen: {seen:?}");
    }
}
