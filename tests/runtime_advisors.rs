//! Advisors (brief §5.4): members run concurrently before the primary, each failure
//! becomes a report, the join always completes and the primary always runs; the advice
//! slice holds the reports and the nonce-tagged text; steps are reserved up front;
//! cancelling the run kills every member's program.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pactgraph::runtime::{
    Executor, HandlerError, NodeInput, RunState, RunStatus, TerminationReason as R, TraceKind as K,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, io, writes};

fn run_to_end(ex: &Executor, state: &mut RunState) {
    io().block_on(ex.run_in_place(state));
}

/// Root dispatches `primary` once (after its advisors), then stops. `members` are nodes
/// of the root that read `request`; `primary` reads `request` and `advice`.
fn advised(members: &[(&str, Value)], timeout_ms: Option<u64>, max_steps: u32) -> Value {
    let mut nodes = serde_json::Map::new();
    for (id, run) in members {
        nodes.insert(
            (*id).to_string(),
            json!({"supervisor": "root", "reads": ["request"], "writes": ["scratch"], "run": run}),
        );
    }
    let mut advisors = json!({"members": members.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
                              "slice": "advice"});
    if let Some(t) = timeout_ms {
        advisors["timeout_ms"] = t.into();
    }
    nodes.insert(
        "primary".into(),
        json!({"supervisor": "root", "reads": ["request", "advice"], "writes": ["answer"],
               "run": {"handler": "primary"}, "advisors": advisors,
               "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]}),
    );
    json!({
        "workflow": "advisors",
        "slices": {"request": {}, "advice": {}, "answer": {}, "scratch": {}},
        "budgets": {"max_steps": max_steps},
        "entry": "root",
        "supervisors": {"root": {"allow": ["primary"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": nodes
    })
}

/// The primary answers with what it was given: the number of reports and the tagged text.
async fn primary(input: NodeInput) -> Result<pactgraph::runtime::Writes, HandlerError> {
    let advice = input.view.get("advice").cloned().unwrap_or(Value::Null);
    Ok(writes(&[("answer", json!({"saw": advice}))]))
}

#[test]
fn failing_members_become_reports_and_the_primary_still_runs() {
    let doc = advised(
        &[
            ("errs", json!({"handler": "errs"})),
            ("panics", json!({"handler": "panics"})),
            ("slow", json!({"handler": "slow"})),
            (
                "garbage",
                json!({"exec": {"argv": ["python3", "-c", "print('not json')"]}}),
            ),
            ("fine", json!({"set": {"scratch": {"tip": "be brief"}}})),
        ],
        Some(3_000),
        40,
    );
    let ex = builder(graph(doc))
        .node_handler("errs", |_| async {
            Err::<pactgraph::runtime::Writes, _>(HandlerError::new("the model refused"))
        })
        .node_handler("panics", |_| async {
            if true {
                panic!("advisor bug");
            }
            Ok(writes(&[]))
        })
        .node_handler("slow", |_| async {
            tokio::time::sleep(Duration::from_secs(20)).await;
            Ok(writes(&[]))
        })
        .node_handler("primary", primary)
        .build()
        .expect("builds");
    let mut s = ex.start(json!({"request": "ship it?"})).expect("starts");
    let t0 = Instant::now();
    run_to_end(&ex, &mut s);
    assert!(t0.elapsed() < Duration::from_secs(15), "the 3 s bound held");
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let advice = &s.state()["answer"]["saw"];
    assert_eq!(advice["primary"], "primary");
    let reports = advice["reports"].as_array().expect("reports");
    let got: Vec<(&str, &str)> = reports
        .iter()
        .map(|r| {
            (
                r["advisor"].as_str().unwrap_or_default(),
                r["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("errs", "failed"),
            ("panics", "failed"),
            ("slow", "timeout"),
            ("garbage", "failed"),
            ("fine", "ok")
        ]
    );
    assert!(
        reports[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the model refused"))
    );
    assert!(
        reports[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("advisor bug"))
    );
    assert!(
        reports[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("3000 ms"))
    );
    assert_eq!(reports[3]["output"], Value::Null);
    assert_eq!(
        reports[4]["output"],
        json!({"scratch": {"tip": "be brief"}})
    );
    // The members' writes are not applied.
    assert!(s.state().get("scratch").is_none());
    // The tagged text: the request block, then one block per member in order.
    let tagged = advice["tagged"].as_str().expect("tagged text");
    assert!(tagged.starts_with("<original_user_request__"), "{tagged}");
    assert!(tagged.contains("{\"request\":\"ship it?\"}"), "{tagged}");
    assert!(
        tagged
            .contains("Advisor `errs` failed: the model refused. No advice is available from it."),
        "{tagged}"
    );
    assert!(
        tagged.contains("agent=\"fine\">\n{\"scratch\":{\"tip\":\"be brief\"}}\n</advisory__"),
        "{tagged}"
    );
    let order: Vec<usize> = ["errs", "panics", "slow", "garbage", "fine"]
        .iter()
        .map(|id| {
            tagged
                .find(&format!("agent=\"{id}\""))
                .expect("a block per member")
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{tagged}");
    // Trace: decision, fork, five advisor items, join, then the primary's own step.
    let kinds: Vec<K> = s.trace().to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds[..9],
        [
            K::Decision,
            K::Fork,
            K::Advisor,
            K::Advisor,
            K::Advisor,
            K::Advisor,
            K::Advisor,
            K::Join,
            K::Dispatch
        ]
    );
    // Each member is a step and a visit; the primary is the step after them.
    assert_eq!(s.visits().get("fine"), Some(&1));
    let dispatch = &s.trace().to_items()[8];
    assert_eq!(dispatch.step, 6);
    let member_steps: Vec<u32> = s.trace().to_items()[2..7].iter().map(|i| i.step).collect();
    assert_eq!(member_steps, [1, 2, 3, 4, 5]);
}

/// 8 members that each wait 300 ms finish together: the fork-join is concurrent (one
/// after the other they would take 2.4 s). The bench `advisors` measures the same with
/// programs.
#[test]
fn members_run_at_the_same_time() {
    let members: Vec<(String, Value)> = (0..8)
        .map(|i| (format!("m{i}"), json!({"handler": "wait"})))
        .collect();
    let refs: Vec<(&str, Value)> = members
        .iter()
        .map(|(id, v)| (id.as_str(), v.clone()))
        .collect();
    let ex = builder(graph(advised(&refs, None, 40)))
        .node_handler("wait", |_| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(writes(&[]))
        })
        .node_handler("primary", primary)
        .build()
        .expect("builds");
    let mut s = ex.start(json!({"request": 1})).expect("starts");
    let t0 = Instant::now();
    run_to_end(&ex, &mut s);
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let reports = s.state()["answer"]["saw"]["reports"]
        .as_array()
        .expect("reports")
        .clone();
    assert!(reports.iter().all(|r| r["status"] == "ok"), "{reports:#?}");
    assert!(
        t0.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn the_step_budget_is_reserved_before_any_member_starts() {
    let ran = Arc::new(AtomicU32::new(0));
    let count = |ran: Arc<AtomicU32>| {
        move |_: NodeInput| {
            ran.fetch_add(1, Ordering::SeqCst);
            async { Ok(writes(&[])) }
        }
    };
    // Three members and the primary need four steps; three are allowed.
    let doc = advised(
        &[
            ("a", json!({"handler": "count"})),
            ("b", json!({"handler": "count"})),
            ("c", json!({"handler": "count"})),
        ],
        None,
        3,
    );
    let ex = builder(graph(doc))
        .node_handler("count", count(Arc::clone(&ran)))
        .node_handler("primary", primary)
        .build()
        .expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(s.termination_reason(), Some(R::MaxStepsExceeded));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no member ran");
    assert!(
        s.message()
            .is_some_and(|m| m.contains("need 4 steps but 3 are left")),
        "{:?}",
        s.message()
    );
    assert_eq!(s.steps(), 0);
}

/// The nonces are 12 lowercase hex digits, distinct per block, the same when the same run
/// is replayed from the same saved state, and different in another run.
#[test]
fn nonces_replay_identically_and_differ_across_runs() {
    let doc = advised(
        &[
            ("a", json!({"set": {"scratch": 1}})),
            ("b", json!({"set": {"scratch": 2}})),
        ],
        None,
        40,
    );
    let ex = builder(graph(doc))
        .node_handler("primary", primary)
        .build()
        .expect("builds");
    let nonces = |s: &RunState| -> Vec<String> {
        let tagged = s.state()["answer"]["saw"]["tagged"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        tagged
            .split("__")
            .skip(1)
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_hexdigit)
                    .collect::<String>()
            })
            .collect()
    };
    let start = ex.start(json!({"request": "q"})).expect("starts");
    let mut first = start.clone();
    run_to_end(&ex, &mut first);
    let mut replay = RunState::from_json(start.to_json()).expect("reads back");
    run_to_end(&ex, &mut replay);
    let mut other = ex.start(json!({"request": "q"})).expect("starts");
    run_to_end(&ex, &mut other);

    let n = nonces(&first);
    // Opening and closing tags per block: 3 blocks, 6 tags, 3 distinct nonces.
    assert_eq!(n.len(), 6, "{n:?}");
    assert!(n.iter().all(|x| {
        x.len() == 12
            && x.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    }));
    let mut distinct = n.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3);
    assert_eq!(nonces(&replay), n, "a replay of the same run is identical");
    assert_eq!(first.state()["answer"], replay.state()["answer"]);
    assert!(
        nonces(&other).iter().all(|x| !n.contains(x)),
        "another run has other nonces"
    );
}

/// A run saved right after its fork step (advice written, primary pending) resumes and
/// ends exactly as the uninterrupted run.
#[test]
fn a_run_saved_between_the_fork_and_the_primary_resumes() {
    let doc = advised(&[("a", json!({"set": {"scratch": "x"}}))], None, 40);
    let ex = builder(graph(doc))
        .node_handler("primary", primary)
        .build()
        .expect("builds");
    let mut whole = ex.start(json!({"request": 1})).expect("starts");
    let mut saved = whole.clone();
    run_to_end(&ex, &mut whole);
    io().block_on(ex.step(&mut saved));
    assert!(
        saved.state().get("advice").is_some(),
        "the fork step wrote the advice"
    );
    let mut back = RunState::from_json(saved.to_json()).expect("reads back");
    run_to_end(&ex, &mut back);
    assert_eq!(back.state(), whole.state());
    assert_eq!(
        back.trace().without_timing(),
        whole.trace().without_timing()
    );
}

/// Cancelling the run while members run kills their programs: none is left in `/proc`.
#[cfg(target_os = "linux")]
#[test]
fn cancelling_during_the_fork_leaves_no_process_behind() {
    let dir = std::env::temp_dir().join(format!("pactgraph-adv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let program = |i: usize| {
        let pidfile = dir.join(format!("{i}.pid"));
        json!({"exec": {"argv": ["python3", "-c", format!(
            "import os, time; open({:?}, 'w').write(str(os.getpid())); time.sleep(60)",
            pidfile.display().to_string())]}})
    };
    let doc = advised(
        &[("a", program(0)), ("b", program(1)), ("c", program(2))],
        None,
        40,
    );
    let ex = builder(graph(doc))
        .node_handler("primary", primary)
        .build()
        .expect("builds");
    let token = ex.cancellation_token();
    let mut s = ex.start(json!({})).expect("starts");
    let pids = |dir: &std::path::Path| -> Vec<i32> {
        (0..3)
            .filter_map(|i| std::fs::read_to_string(dir.join(format!("{i}.pid"))).ok())
            .filter_map(|t| t.trim().parse().ok())
            .collect()
    };
    let t0 = Instant::now();
    io().block_on(async {
        let cancel = async {
            while pids(&dir).len() < 3 && t0.elapsed() < Duration::from_secs(20) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            token.cancel();
        };
        tokio::join!(ex.run_in_place(&mut s), cancel);
    });
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert_eq!(
        s.termination_reason(),
        Some(R::Cancelled),
        "{:?}",
        s.message()
    );
    let started = pids(&dir);
    assert_eq!(started.len(), 3, "every member started");
    std::thread::sleep(Duration::from_millis(200));
    for pid in started {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting to be reaped: not running.
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        assert!(
            matches!(state, None | Some("Z")),
            "process {pid} still runs: {stat}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let kinds: Vec<K> = s.trace().to_items().iter().map(|i| i.kind).collect();
    assert!(kinds.contains(&K::Join), "the join completed: {kinds:?}");
}

/// A primary that may not run (its `max_visits` used up) is refused before its advisors
/// start: no member runs for a node that will not.
#[test]
fn a_primary_past_its_max_visits_is_refused_before_its_advisors_run() {
    let ran = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&ran);
    let mut doc = advised(&[("a", json!({"handler": "count"}))], None, 40);
    doc["nodes"]["primary"]["max_visits"] = json!(1);
    // The primary does not write `answer` here, so the root dispatches it again.
    doc["nodes"]["primary"]["run"] = json!({"set": {}});
    let ex = builder(graph(doc))
        .node_handler("count", move |_: NodeInput| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(writes(&[])) }
        })
        .build()
        .expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(
        s.termination_reason(),
        Some(R::CycleDetected),
        "{:?}",
        s.message()
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the advisor ran for the first visit only"
    );
    assert_eq!(s.visits().get("primary"), Some(&1));
}
