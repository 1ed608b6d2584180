//! Node `retry` policies: failed attempts are traced (`retry` items) and tried again
//! within the same step, with exponential backoff, before the run fails; what is not
//! covered by `on` (or marked permanent) fails at once; programs see the attempt.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pactgraph::runtime::{
    Executor, HandlerError, RunState, RunStatus, TerminationReason as R, TraceKind as K,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, io, run_with_io, writes};

/// Root dispatches `work` (writes `out`) once, then stops.
fn one_node(run: Value, retry: Value) -> Value {
    json!({
        "workflow": "retry",
        "slices": {"out": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["work"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "work": {"supervisor": "root", "writes": ["out"], "run": run, "retry": retry,
                     "triggers": [{"priority": 1, "when": {"path": "/out", "exists": false}}]}
        }
    })
}

/// A handler that fails `fails` times (with `error`), then writes `out`; it records the
/// attempt numbers it was given.
fn flaky(
    fails: u32,
    error: fn() -> HandlerError,
) -> (
    impl pactgraph::runtime::NodeHandler,
    Arc<std::sync::Mutex<Vec<u32>>>,
) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicU32::new(0));
    let log = Arc::clone(&seen);
    let handler = move |input: pactgraph::runtime::NodeInput| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        log.lock().expect("not poisoned").push(input.attempt);
        async move {
            if n < fails {
                Err(error())
            } else {
                Ok(writes(&[("out", json!(n + 1))]))
            }
        }
    };
    (handler, seen)
}

/// An executor for [`one_node`] with handler `flaky` as `h`.
fn with_flaky(h: impl pactgraph::runtime::NodeHandler, retry: Value) -> Executor {
    builder(graph(one_node(json!({"handler": "flaky"}), retry)))
        .node_handler("flaky", h)
        .build()
        .expect("builds")
}

fn retry_items(s: &RunState) -> Vec<(u32, String)> {
    s.trace()
        .iter()
        .filter(|i| i.kind == K::Retry)
        .map(|i| (i.step, i.reason().unwrap_or_default().to_string()))
        .collect()
}

#[test]
fn a_handler_that_fails_twice_succeeds_on_the_third_attempt_in_one_step() {
    let (h, seen) = flaky(2, || HandlerError::new("model unavailable"));
    let ex = with_flaky(h, json!({"max_attempts": 3, "backoff_ms": 1}));
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(s.state()["out"], 3);
    assert_eq!(*seen.lock().expect("not poisoned"), [1, 2, 3]);
    // Two failed attempts traced, in the node's step, before its dispatch item.
    let retries = retry_items(&s);
    assert_eq!(retries.len(), 2, "{:#?}", s.trace().to_items());
    assert!(retries.iter().all(|(step, _)| *step == retries[0].0));
    assert_eq!(
        retries[0].1,
        "attempt 1 failed (failed): model unavailable; attempt 2 in 1 ms"
    );
    assert_eq!(
        retries[1].1,
        "attempt 2 failed (failed): model unavailable; attempt 3 in 2 ms"
    );
    let kinds: Vec<K> = s.trace().to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [
            K::Decision,
            K::Retry,
            K::Retry,
            K::Dispatch,
            K::Return,
            K::Decision,
            K::End
        ]
    );
    // Retries are not steps: the run takes as many as one whose first attempt succeeds.
    let (h, _) = flaky(0, || HandlerError::new("never"));
    let ex = with_flaky(h, json!({"max_attempts": 3, "backoff_ms": 1}));
    assert_eq!(s.steps(), run_with_io(&ex, json!({})).steps());
}

#[test]
fn when_every_attempt_fails_the_run_fails_with_the_last_error() {
    let (h, seen) = flaky(u32::MAX, || HandlerError::new("still down"));
    let ex = with_flaky(h, json!({"max_attempts": 3}));
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Failed);
    assert_eq!(s.termination_reason(), Some(R::NodeFailed));
    assert_eq!(*seen.lock().expect("not poisoned"), [1, 2, 3]);
    assert_eq!(retry_items(&s).len(), 2);
    assert!(s.message().is_some_and(|m| m.contains("still down")));
    assert!(s.state().get("out").is_none(), "nothing applied");
}

#[test]
fn a_permanent_error_and_a_failure_outside_on_are_not_retried() {
    let (h, seen) = flaky(1, || HandlerError::new("bad request").permanent());
    let ex = with_flaky(h, json!({"max_attempts": 5}));
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::NodeFailed));
    assert_eq!(*seen.lock().expect("not poisoned"), [1]);
    assert!(retry_items(&s).is_empty());

    let (h, seen) = flaky(1, || HandlerError::new("transient"));
    let ex = with_flaky(h, json!({"max_attempts": 5, "on": ["timeout"]}));
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.termination_reason(), Some(R::NodeFailed));
    assert_eq!(*seen.lock().expect("not poisoned"), [1]);
}

#[test]
fn waits_double_between_attempts() {
    let (h, _) = flaky(3, || HandlerError::new("busy"));
    let ex = with_flaky(h, json!({"max_attempts": 4, "backoff_ms": 40}));
    let t0 = Instant::now();
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    // 40 + 80 + 160 ms of waits: a lower bound only (this is not a timing benchmark).
    assert!(
        t0.elapsed() >= Duration::from_millis(280),
        "{:?}",
        t0.elapsed()
    );
    let waits: Vec<String> = retry_items(&s)
        .into_iter()
        .map(|(_, r)| r.rsplit(" in ").next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(waits, ["40 ms", "80 ms", "160 ms"]);
}

/// A program that times out on its first attempt and answers on its second: the time-out
/// is retried (`on: ["timeout"]`), the program sees `attempt` on stdin and in
/// `PACTGRAPH_ATTEMPT`, and the run completes.
#[test]
fn a_program_timing_out_once_is_retried_and_sees_its_attempt() {
    let code = r#"
import json, os, sys, time
msg = json.load(sys.stdin)
assert str(msg["attempt"]) == os.environ["PACTGRAPH_ATTEMPT"]
if msg["attempt"] == 1:
    time.sleep(5)
print(json.dumps({"out": {"attempt": msg["attempt"], "step": msg["step"]}}))
"#;
    let ex = builder(graph(one_node(
        json!({"exec": {"argv": ["python3", "-c", code], "timeout_ms": 1500}}),
        json!({"max_attempts": 2, "on": ["timeout"]}),
    )))
    .build()
    .expect("builds");
    let s = run_with_io(&ex, json!({}));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(s.state()["out"], json!({"attempt": 2, "step": 0}));
    let retries = retry_items(&s);
    assert_eq!(retries.len(), 1);
    assert!(
        retries[0].1.starts_with("attempt 1 failed (timeout): "),
        "{}",
        retries[0].1
    );
}

/// Cancelling the run during a backoff wait ends the wait at once (cancelled), without
/// another attempt.
#[test]
fn cancelling_during_a_backoff_wait_stops_the_run() {
    let (h, seen) = flaky(u32::MAX, || HandlerError::new("down"));
    let ex = with_flaky(h, json!({"max_attempts": 3, "backoff_ms": 60_000}));
    let token = ex.cancellation_token();
    let mut state = ex.start(json!({})).expect("starts");
    let t0 = Instant::now();
    io().block_on(async {
        let cancel = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            token.cancel();
            std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = ex.run_in_place(&mut state) => {}
            _ = cancel => {}
        }
    });
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert_eq!(state.termination_reason(), Some(R::Cancelled));
    assert_eq!(*seen.lock().expect("not poisoned"), [1]);
}
