//! One test per termination reason that a guard or a failure produces, plus start and
//! build errors.

mod support;

use std::time::Duration;

use pactgraph::runtime::{
    ExecutorBuildError, HandlerError, NodeInput, RunStatus, StartError, TerminationReason as R,
    TraceKind as K, Writes,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, rt, run, user_state};
use tokio_util::sync::CancellationToken;

fn looping(budgets: Value, run: Value) -> Value {
    json!({
        "workflow": "loop",
        "slices": {"n": {"schema": {"type": "integer"}}, "out": {}},
        "budgets": budgets,
        "entry": "root",
        "supervisors": {"root": {"allow": ["work"]}},
        "nodes": {
            "work": {"supervisor": "root", "reads": ["n"], "writes": ["out"],
                     "triggers": [{"priority": 1, "when": true}], "run": run}
        }
    })
}

fn set_out() -> Value {
    json!({"set": {"out": 1}})
}

#[test]
fn max_steps_exceeded() {
    let ex = builder(graph(looping(json!({"max_steps": 5}), set_out())))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Stopped, Some(R::MaxStepsExceeded))
    );
    assert_eq!(o.steps, 5);
    let last = o.trace.to_items().into_iter().last().unwrap();
    assert_eq!((last.kind, last.step), (K::GuardStop, 5));
    assert_eq!(o.state["out"], 1, "committed steps stay");
}

#[test]
fn max_visits_is_a_cycle() {
    let mut doc = looping(json!({}), set_out());
    doc["nodes"]["work"]["max_visits"] = json!(3);
    let o = run(&builder(graph(doc)).build().unwrap(), json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Stopped, Some(R::CycleDetected))
    );
    assert_eq!(o.steps, 3);
    assert!(o.message.as_deref().unwrap().contains("max_visits is 3"));
}

fn with_handler(budgets: Value) -> Value {
    looping(budgets, json!({"handler": "h"}))
}

#[test]
fn a_node_error_fails_the_run_with_its_message() {
    let ex = builder(graph(with_handler(json!({}))))
        .node_handler("h", |_: NodeInput| async {
            Err::<Writes, _>(HandlerError::new("model unavailable"))
        })
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Failed, Some(R::NodeFailed))
    );
    assert_eq!(
        o.message.as_deref(),
        Some("node `work` failed: model unavailable")
    );
}

#[test]
fn a_node_panic_fails_the_run_not_the_process() {
    let ex = builder(graph(with_handler(json!({}))))
        .node_handler("h", |input: NodeInput| async move {
            if input.node == "work" {
                panic!("boom");
            }
            Ok(Writes::new())
        })
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Failed, Some(R::NodeFailed))
    );
    assert_eq!(
        o.message.as_deref(),
        Some("node `work` failed: panicked: boom")
    );
}

#[test]
fn a_policy_error_fails_the_run() {
    let mut doc = with_handler(json!({}));
    doc["supervisors"]["root"]["policy"] = json!({"handler": "p"});
    let ex = builder(graph(doc))
        .node_handler("h", |_: NodeInput| async { Ok(Writes::new()) })
        .policy_handler("p", |_| async { Err(HandlerError::new("no idea")) })
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(o.termination_reason, Some(R::NodeFailed));
    assert!(
        o.message
            .as_deref()
            .unwrap()
            .contains("supervisor `root` failed: no idea")
    );
}

#[test]
fn an_exec_node_that_cannot_run_fails_with_node_failed() {
    let doc = looping(
        json!({}),
        json!({"exec": {"argv": ["./no-such-program-here"]}}),
    );
    let o = run(&builder(graph(doc)).build().unwrap(), json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Failed, Some(R::NodeFailed))
    );
}

fn sleeper() -> impl pactgraph::runtime::NodeHandler {
    |_: NodeInput| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        let mut w = Writes::new();
        w.insert("out".into(), json!("late"));
        Ok(w)
    }
}

#[test]
fn a_node_past_its_time_limit_times_out() {
    let ex = builder(graph(with_handler(json!({"node_timeout_ms": 20}))))
        .node_handler("h", sleeper())
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Stopped, Some(R::Timeout))
    );
    assert!(
        o.message.as_deref().unwrap().contains("within 20 ms"),
        "{:?}",
        o.message
    );
    assert!(o.state.get("out").is_none());
}

#[test]
fn the_run_deadline_caps_a_running_node() {
    let ex = builder(graph(with_handler(json!({"timeout_ms": 30}))))
        .node_handler("h", sleeper())
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Stopped, Some(R::Timeout))
    );
}

#[test]
fn the_run_deadline_is_checked_between_steps() {
    let ex = builder(graph(looping(
        json!({"timeout_ms": 0, "max_steps": 1000}),
        set_out(),
    )))
    .build()
    .unwrap();
    let rt = rt();
    let mut run = ex.start(json!({})).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    rt.block_on(ex.run_in_place(&mut run));
    assert_eq!(run.termination_reason(), Some(R::Timeout));
    assert_eq!(run.steps(), 0);
}

#[test]
fn a_cancelled_token_stops_the_run_between_steps() {
    let token = CancellationToken::new();
    let ex = builder(graph(looping(json!({}), set_out())))
        .cancellation(token.clone())
        .build()
        .unwrap();
    let rt = rt();
    let mut run = ex.start(json!({})).unwrap();
    rt.block_on(ex.step(&mut run));
    assert_eq!(run.steps(), 1);
    token.cancel();
    rt.block_on(ex.run_in_place(&mut run));
    assert_eq!(
        (run.status(), run.termination_reason()),
        (RunStatus::Stopped, Some(R::Cancelled))
    );
    assert_eq!(run.steps(), 1);
}

#[test]
fn runs_on_executors_with_their_own_tokens_are_cancelled_one_at_a_time() {
    let shared = builder(graph(looping(json!({}), set_out())))
        .build()
        .unwrap();
    let first_token = shared.cancellation_token().child_token();
    let first = shared.with_cancellation(first_token.clone());
    let second = shared.with_cancellation(shared.cancellation_token().child_token());
    let rt = rt();
    let mut a = first.start(json!({})).unwrap();
    let mut b = second.start(json!({})).unwrap();
    rt.block_on(first.step(&mut a));
    rt.block_on(second.step(&mut b));
    first_token.cancel();
    rt.block_on(first.run_in_place(&mut a));
    rt.block_on(second.run_in_place(&mut b));
    assert_eq!(
        (a.status(), a.termination_reason(), a.steps()),
        (RunStatus::Stopped, Some(R::Cancelled), 1)
    );
    // The other run went on to its own end: the loop's step budget.
    assert_eq!(b.termination_reason(), Some(R::MaxStepsExceeded));
    assert!(b.steps() > 1);
    assert!(!shared.cancellation_token().is_cancelled());
    // Cancelling the shared executor's token stops the runs derived from it.
    let third = shared.with_cancellation(shared.cancellation_token().child_token());
    let mut c = third.start(json!({})).unwrap();
    shared.cancellation_token().cancel();
    rt.block_on(third.run_in_place(&mut c));
    assert_eq!((c.termination_reason(), c.steps()), (Some(R::Cancelled), 0));
}

#[test]
fn cancelling_aborts_a_running_node() {
    let ex = builder(graph(with_handler(json!({}))))
        .node_handler("h", sleeper())
        .build()
        .unwrap();
    let token = ex.cancellation_token();
    let rt = rt();
    let o = rt.block_on(async {
        let run = ex.start(json!({})).unwrap();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            token.cancel();
        });
        ex.run(run).await
    });
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Stopped, Some(R::Cancelled))
    );
    assert!(
        o.message
            .as_deref()
            .unwrap()
            .contains("while node `work` ran")
    );
    assert!(o.state.get("out").is_none());
}

#[test]
fn node_and_slice_schemas_are_enforced() {
    let mut doc = looping(json!({}), json!({"set": {"out": "text"}}));
    doc["nodes"]["work"]["output_schema"] = json!({"properties": {"out": {"type": "integer"}}});
    let o = run(&builder(graph(doc)).build().unwrap(), json!({}));
    assert_eq!(o.termination_reason, Some(R::NodeFailed));
    assert!(o.message.as_deref().unwrap().contains("output_schema"));
    let mut doc = looping(json!({}), set_out());
    doc["nodes"]["work"]["input_schema"] = json!({"required": ["n"]});
    let o = run(&builder(graph(doc)).build().unwrap(), json!({}));
    assert!(o.message.as_deref().unwrap().contains("input_schema"));
    let mut doc = looping(json!({}), json!({"set": {"out": 1}}));
    doc["slices"]["out"] = json!({"schema": {"type": "string"}});
    let o = run(&builder(graph(doc)).build().unwrap(), json!({}));
    assert_eq!(o.termination_reason, Some(R::NodeFailed));
    assert!(
        o.message.as_deref().unwrap().contains("slice `out`"),
        "{:?}",
        o.message
    );
    assert_eq!(user_state(&o), json!({}));
}

#[test]
fn start_refuses_undeclared_or_invalid_slices() {
    let ex = builder(graph(looping(json!({}), set_out())))
        .build()
        .unwrap();
    assert_eq!(
        ex.start(json!({"n": 1, "bogus": 1, "other": 2}))
            .unwrap_err(),
        StartError::UndeclaredSlices(vec!["bogus".into(), "other".into()])
    );
    assert!(
        matches!(ex.start(json!({"n": "x"})), Err(StartError::SliceInvalid { slice, .. }) if slice == "n")
    );
    assert_eq!(ex.start(json!([])).unwrap_err(), StartError::NotAnObject);
    assert_eq!(
        ex.start(json!({"system": 1})).unwrap_err(),
        StartError::SystemNotAnObject
    );
    let run = ex.start(json!({"system": {"mine": true}})).unwrap();
    assert_eq!(run.state()["system"]["mine"], true);
    assert_eq!(run.state_json()["system"]["decision_trace"], json!([]));
    assert!(run.state()["system"].get("decision_trace").is_none());
    assert_eq!(run.state()["system"]["budgets"]["max_steps"], 40);
}

#[test]
fn build_names_a_missing_handler() {
    let err = builder(graph(with_handler(json!({})))).build().unwrap_err();
    assert!(
        matches!(&err, ExecutorBuildError::MissingHandler { handler, id, .. } if handler == "h" && id == "work")
    );
    assert!(err.to_string().contains(r#"{"handler": "h"}"#), "{err}");
}

#[test]
fn executors_and_runs_can_move_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<pactgraph::runtime::Executor>();
    send_sync::<pactgraph::runtime::RunState>();
    let ex = builder(graph(looping(json!({"max_steps": 3}), set_out())))
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let run = ex.start(json!({})).unwrap();
    let task = rt.spawn({
        let ex = ex.clone();
        async move { ex.run(run).await }
    });
    let o = rt.block_on(task).unwrap();
    assert_eq!(o.termination_reason, Some(R::MaxStepsExceeded));
}
