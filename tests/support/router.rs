//! Routers under test: a workflow whose router chooses among two nodes and a subgraph,
//! a router handler answering from a script, running a run to its end (whole or saved and
//! loaded between steps), and reading its dispatches and chain stages.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use pactgraph::runtime::{
    Chain, ChainTrigger, Executor, HandlerError, NodeInput, RunState, TraceItem, TraceKind as K,
};
use serde_json::{Value, json};

use super::runtime::{rt, writes};

/// Runs to the end, keeping the run state.
pub fn run_state(ex: &Executor, input: Value) -> RunState {
    let mut state = ex.start(input).expect("the input is valid");
    rt().block_on(ex.run_in_place(&mut state));
    state
}

/// Runs step by step, saving and loading the run state between every two steps.
pub fn run_saved(ex: &Executor, input: Value) -> RunState {
    let mut state = ex.start(input).expect("the input is valid");
    let rt = rt();
    while state.is_running() {
        state = RunState::from_json(state.to_json()).expect("reads back");
        rt.block_on(ex.step(&mut state));
    }
    state
}

/// Root supervisor `root` dispatches router `r` once (while `/done` is absent); the
/// router chooses among node `a`, node `b` and subgraph `sub`. `a` and `b` write `done`;
/// `sub` writes `done` too, through its node `work`.
pub fn routed(router: Value, run: Value) -> Value {
    json!({
        "workflow": "routed",
        "slices": {"request": {}, "pick": {}, "done": {}, "note": {}, "scratch": {}},
        "entry": "root",
        "supervisors": {
            "root": {"allow": ["r"], "default": {"stop_global": {"reason": "finished"}}},
            "sub_sup": {"allow": ["work"]}
        },
        "subgraphs": {
            "sub": {"entrypoint": "sub_sup", "supervisors": ["sub_sup"],
                    "reads": ["request", "note"], "writes": ["done"]}
        },
        "nodes": {
            "r": {"supervisor": "root", "reads": ["request"], "writes": ["pick", "scratch"],
                  "triggers": [{"when": {"path": "/done", "exists": false}}],
                  "router": router, "run": run},
            "a": {"supervisor": "root", "reads": ["note"], "writes": ["done"],
                  "run": {"set": {"done": "a"}}},
            "b": {"supervisor": "root", "reads": ["note"], "writes": ["done"],
                  "run": {"set": {"done": "b"}}},
            "work": {"supervisor": "sub_sup", "reads": ["request", "note"], "writes": ["done"],
                     "triggers": [{"when": {"path": "/done", "exists": false}}],
                     "terminal": true, "run": {"handler": "work"}}
        }
    })
}

/// What the router handler saw, per call: `(step, attempt, error)`.
pub type Seen = Arc<Mutex<Vec<(u32, u32, Option<String>)>>>;

/// A router handler answering with `outputs` in order (the last one repeated), recording
/// what it was given.
pub fn scripted(
    ex: pactgraph::runtime::ExecutorBuilder,
    outputs: Vec<Value>,
    seen: &Seen,
) -> Executor {
    let seen = Arc::clone(seen);
    let outputs = Arc::new(outputs);
    ex.node_handler("router", move |input: NodeInput| {
        let seen = Arc::clone(&seen);
        let outputs = Arc::clone(&outputs);
        async move {
            let mut s = seen.lock().expect("not poisoned");
            s.push((input.step, input.attempt, input.error.clone()));
            let i = (s.len() - 1).min(outputs.len() - 1);
            match &outputs[i] {
                Value::Object(m) => Ok::<_, HandlerError>(m.clone()),
                _ => Err(HandlerError::new("test outputs are objects")),
            }
        }
    })
    .node_handler("work", |input: NodeInput| async move {
        let note = input.view.get("note").cloned().unwrap_or(Value::Null);
        Ok::<_, HandlerError>(writes(&[("done", json!({"sub": true, "note": note}))]))
    })
    .build()
    .expect("builds")
}

pub fn items_of<'a>(s: &'a RunState, node: &str) -> Vec<&'a TraceItem> {
    s.trace()
        .iter()
        .filter(|i| matches!(i.kind, K::Dispatch | K::Handoff) && i.target() == Some(node))
        .collect()
}

pub fn chain(root: &str, stage: u32, trigger: ChainTrigger) -> Option<Chain> {
    Some(Chain {
        root: root.into(),
        stage,
        trigger,
    })
}
