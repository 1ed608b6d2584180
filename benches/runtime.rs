//! Per-step cost of the executor with contracts enforced and the trace recorded:
//! a supervisor/worker loop, and a subgraph call plus return.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use pactgraph::GraphBuilder;
use pactgraph::contracts::WorkflowDocument;
use pactgraph::runtime::{Executor, ExecutorBuilder, NodeInput, RunEvents};
use pactgraph::validator::ValidGraph;
use serde_json::{Map, Value, json};

/// `step()` calls measured per iteration.
const CALLS: u32 = 1000;
/// Budget high enough that the measured calls never hit a guard.
const BUDGET: u32 = 1_000_000;

fn builder(doc: Value) -> ExecutorBuilder {
    let doc = WorkflowDocument::from_value(doc).expect("valid");
    let graph = GraphBuilder::from_document(doc).build().expect("resolves");
    Executor::builder(ValidGraph::new(graph).expect("the bench workflows are valid"))
}

fn executor(doc: Value) -> Executor {
    builder(doc).build().expect("builds")
}

/// A rule-based supervisor that dispatches a `set` worker on every step.
fn worker_loop() -> Executor {
    executor(json!({
        "workflow": "loop",
        "slices": {"request": {}, "out": {"schema": {"type": "object"}}},
        "budgets": {"max_steps": BUDGET},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["work"]}},
        "nodes": {"work": {"supervisor": "boss", "reads": ["request"], "writes": ["out"],
            "triggers": [{"priority": 1, "when": {"path": "/request/go", "equals": true}}],
            "run": {"set": {"out": {"n": 1}}}}}
    }))
}

/// The same loop with a handler worker that reads its slice and writes a new value on
/// every step (a read view, an async handler call and a changed state each step).
fn handler_loop() -> Executor {
    builder(json!({
        "workflow": "loop",
        "slices": {"request": {}, "out": {"schema": {"type": "object"}}},
        "budgets": {"max_steps": BUDGET},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["work"]}},
        "nodes": {"work": {"supervisor": "boss", "reads": ["out"], "writes": ["out"],
            "triggers": [{"priority": 1, "when": {"path": "/request/go", "equals": true}}],
            "run": {"handler": "count"}}}
    }))
    .node_handler("count", |input: NodeInput| async move {
        let n = input
            .view
            .get("out")
            .and_then(|o| o["n"].as_u64())
            .unwrap_or(0);
        let mut writes = Map::new();
        writes.insert("out".into(), json!({"n": n + 1}));
        Ok(writes)
    })
    .build()
    .expect("builds")
}

/// A root supervisor calling a subgraph whose supervisor returns at once.
fn call_return() -> Executor {
    executor(json!({
        "workflow": "calls",
        "slices": {"request": {}, "out": {}, "answer": {}},
        "budgets": {"max_steps": BUDGET, "max_reentry": BUDGET},
        "entry": "root",
        "supervisors": {"root": {"allow": ["g"]}, "inner": {"allow": ["idle"]}},
        "subgraphs": {"g": {"entrypoint": "inner", "supervisors": ["inner"],
            "reads": ["request"], "writes": ["out"],
            "input_schema": {"type": "object", "required": ["request"]},
            "output_schema": {"type": "object"},
            "result_slice": "answer",
            "triggers": [{"priority": 1, "when": {"path": "/request/go", "equals": true}}]}},
        // `inner` must allow something (an empty allow is a validator error); `idle`
        // has no triggers, so `inner` always takes its default (`stop_local`) at once.
        "nodes": {"idle": {"supervisor": "inner", "writes": ["out"]}}
    }))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let input = json!({"request": {"go": true}});
    // One `step()` of the loop = a rule-based decision, a node run with its boundary checks
    // and slice schema, and the dispatch/return trace items (the handler loop adds a read
    // view, an async handler call and a new value written each step). One subgraph round trip = two
    // `step()`s: decide + enter (input schema, copy-on-call), decide + return (output
    // schema, commit, result slice).
    for (name, ex) in [
        ("supervisor_worker_loop/1000_steps", worker_loop()),
        ("supervisor_handler_loop/1000_steps", handler_loop()),
        ("subgraph_call_and_return/500_round_trips", call_return()),
    ] {
        c.bench_function(name, |b| {
            b.iter_batched(
                || ex.start(input.clone()).expect("valid input"),
                |mut run| {
                    rt.block_on(async {
                        for _ in 0..CALLS {
                            ex.step(&mut run).await;
                        }
                    });
                    assert!(run.is_running());
                    run
                },
                BatchSize::SmallInput,
            )
        });
    }
    // Ending a run: the last step, its end item and `system` synced. The trace is not
    // copied (`system.decision_trace` is projected when the outcome is serialized).
    c.bench_function("finish_run_with_1000_step_trace", |b| {
        let ex = executor(json!({
            "workflow": "loop",
            "slices": {"request": {}, "out": {}},
            "budgets": {"max_steps": CALLS},
            "entry": "boss",
            "supervisors": {"boss": {"allow": ["work"]}},
            "nodes": {"work": {"supervisor": "boss", "writes": ["out"],
                "triggers": [{"priority": 1, "when": true}], "run": {"set": {"out": 1}}}}
        }));
        b.iter_batched(
            || {
                let mut run = ex.start(input.clone()).expect("valid input");
                rt.block_on(async {
                    for _ in 0..CALLS {
                        ex.step(&mut run).await;
                    }
                });
                run
            },
            |mut run| {
                rt.block_on(ex.step(&mut run));
                assert!(!run.is_running());
                run
            },
            BatchSize::SmallInput,
        )
    });
}

/// A root supervisor whose policy decides every step (always `work`, a `set` node) until
/// `max_steps` ends the run: `decisions` policy calls, each given the level's state with a
/// fresh `system` slice (and so `system.decision_trace`).
fn policy_loop(decisions: u32, policy: Value) -> ExecutorBuilder {
    builder(json!({
        "workflow": "policy_loop",
        "slices": {"request": {}, "out": {}},
        "budgets": {"max_steps": decisions},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["work"], "policy": policy}},
        "nodes": {"work": {"supervisor": "boss", "writes": ["out"], "run": {"set": {"out": 1}}}}
    }))
}

/// Whole runs whose every decision is a policy call: the cost of one call must not grow
/// with the run (the policy is given the recent trace items, not the whole trace).
fn policy_run(c: &mut Criterion) {
    use pactgraph::runtime::{PolicyInput, TraceView};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let input = json!({"request": {}});
    let mut group = c.benchmark_group("policy_run");
    group.sample_size(10);
    // A handler policy that serializes its input as a program's stdin would be.
    let handler = |decisions: u32, view: TraceView| {
        policy_loop(decisions, json!({"handler": "p"}))
            .trace_view(view)
            .policy_handler("p", |input: PolicyInput| async move {
                let text = serde_json::to_string(&input.state).expect("plain JSON");
                std::hint::black_box(text);
                Ok::<_, pactgraph::runtime::HandlerError>("work".into())
            })
            .build()
            .expect("builds")
    };
    // A program policy (`sh`, one process per decision, reading all of its stdin).
    let program = |decisions: u32| {
        policy_loop(
            decisions,
            json!({"exec": {"argv": ["sh", "-c", "cat >/dev/null; echo '\"work\"'"]}}),
        )
        .build()
        .expect("builds")
    };
    for (name, ex) in [
        (
            "10000_decisions_handler_recent_trace",
            handler(10_000, TraceView::default()),
        ),
        (
            "1000_decisions_handler_recent_trace",
            handler(1_000, TraceView::default()),
        ),
        (
            "1000_decisions_handler_full_trace",
            handler(1_000, TraceView::Full),
        ),
        ("1000_decisions_program", program(1_000)),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let run = ex.start(input.clone()).expect("valid input");
                let outcome = rt.block_on(ex.run(run));
                assert!(outcome.steps > 0);
                outcome
            })
        });
    }
    group.finish();
}

/// A whole run of 2,000 `set` steps with no event subscriber, with one whose buffer never
/// fills, and with one that never reads (buffer 16, full from the first steps): a stalled
/// subscriber must cost no more than a roomy one (brief 11: a slow subscriber never slows
/// the run; drops are counted instead).
fn run_events(c: &mut Criterion) {
    const STEPS: u32 = 2_000;
    let ex = executor(json!({
        "workflow": "ticker",
        "slices": {"n": {}},
        "budgets": {"max_steps": STEPS},
        "entry": "root",
        "supervisors": {"root": {"allow": ["tick"], "default": {"stop_global": {}}}},
        "nodes": {"tick": {"supervisor": "root", "reads": ["n"], "writes": ["n"],
            "triggers": [{"priority": 1, "when": true}],
            "run": {"set": {"n": 1}}}}
    }));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("run_events");
    for (label, buffer) in [
        ("none", None),
        ("roomy", Some(1_000_000)),
        ("stalled_16", Some(16)),
    ] {
        group.bench_function(label, |b| {
            b.iter_batched(
                || {
                    let Some(buffer) = buffer else {
                        return (ex.clone(), None);
                    };
                    let events = RunEvents::new();
                    let sub = events.subscribe(buffer);
                    (ex.with_events(events), Some(sub))
                },
                |(ex, sub)| {
                    let run = ex.start(json!({})).expect("starts");
                    let outcome = rt.block_on(ex.run(run));
                    assert_eq!(outcome.steps, STEPS);
                    drop(sub);
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, bench, policy_run, run_events);
criterion_main!(benches);
