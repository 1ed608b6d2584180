//! Teams (brief §5.5): members take turns concurrently in cycles and broadcast, the lead
//! answers after each cycle; failures, time-outs, refused outputs and used-up turns
//! become failure broadcasts; the lead's final writes are the team node's; a team saved
//! between any two steps resumes identically.

mod support;

use std::time::Duration;

use pactgraph::runtime::{
    Executor, HandlerError, NodeInput, RunState, RunStatus, TerminationReason as R, TraceKind as K,
    Writes,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, io};

fn run_to_end(ex: &Executor, state: &mut RunState) {
    io().block_on(ex.run_in_place(state));
}

/// A root supervisor dispatching team node `review` once; `members` are nodes of the
/// root reading `request`, the lead `chair` reads `request`, and the team node writes
/// `decision`. `team` adds fields to the `team` spec.
fn team_doc(members: &[(&str, Value)], lead: Value, team: Value, max_steps: u32) -> Value {
    let mut nodes = serde_json::Map::new();
    for (id, run) in members {
        nodes.insert(
            (*id).to_string(),
            json!({"supervisor": "root", "reads": ["request"], "writes": ["scratch"], "run": run}),
        );
    }
    nodes.insert(
        "chair".into(),
        json!({"supervisor": "root", "reads": ["request"], "writes": ["decision"], "run": lead}),
    );
    let mut spec = json!({"members": members.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
                          "lead": "chair", "slice": "team"});
    if let (Some(s), Value::Object(extra)) = (spec.as_object_mut(), team) {
        s.extend(extra);
    }
    nodes.insert(
        "review".into(),
        json!({"supervisor": "root", "reads": ["request"], "writes": ["decision"],
               "team": spec,
               "triggers": [{"priority": 1, "when": {"path": "/decision", "exists": false}}]}),
    );
    json!({
        "workflow": "team",
        "slices": {"request": {}, "team": {}, "decision": {}, "scratch": {}},
        "budgets": {"max_steps": max_steps},
        "entry": "root",
        "supervisors": {"root": {"allow": ["review"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": nodes
    })
}

fn out(v: Value) -> Writes {
    match v {
        Value::Object(m) => m,
        _ => panic!("test outputs are objects"),
    }
}

fn team_input(input: &NodeInput) -> Value {
    input.view.get("team").cloned().unwrap_or(Value::Null)
}

/// A member that broadcasts `"<me> says <turn>"` and exits on turn `exit_at`.
fn talker(
    exit_at: u64,
) -> impl Fn(NodeInput) -> std::future::Ready<Result<Writes, HandlerError>> + Send + Sync + 'static
{
    move |input: NodeInput| {
        let t = team_input(&input);
        let turn = t["turn"].as_u64().unwrap_or(0);
        let me = t["me"].as_str().unwrap_or("?").to_string();
        let mut o =
            json!({"$broadcast": format!("{me} says {turn}"), "$usage": {"input_tokens": 10}});
        if turn >= exit_at {
            o["$exit"] = json!(true);
        }
        std::future::ready(Ok(out(o)))
    }
}

/// A lead that broadcasts on its first turn and is final on its second (or on any final
/// turn), writing what its inboxes held.
fn two_turn_lead(input: NodeInput) -> std::future::Ready<Result<Writes, HandlerError>> {
    let t = team_input(&input);
    let turn = t["turn"].as_u64().unwrap_or(0);
    let heard = t["inbox"].as_array().map_or(0, Vec::len);
    let o = if turn >= 2 || t["final_turn"] == json!(true) {
        json!({"$final": true, "decision": {"heard": heard, "turn": turn}, "$usage": {"output_tokens": 5}})
    } else {
        json!({"$broadcast": "go on", "$usage": {"output_tokens": 3}})
    };
    std::future::ready(Ok(out(o)))
}

fn kinds_of(transcript: &Value) -> Vec<(String, String)> {
    transcript
        .as_array()
        .expect("a transcript")
        .iter()
        .map(|b| {
            (
                b["from"].as_str().unwrap_or_default().to_string(),
                b["type"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Two cycles: `a` exits on its first turn, `b` talks twice; the lead broadcasts, then
/// answers. Proves the cycle order, inbox contents (no own broadcasts; the lead's message
/// reaches members), the transcript, member statuses and turns, step counting (one per
/// turn) and that the lead's writes land as the team node's.
#[test]
fn a_two_cycle_team_with_an_early_exit_decides() {
    let doc = team_doc(
        &[
            ("a", json!({"handler": "a"})),
            ("b", json!({"handler": "b"})),
        ],
        json!({"handler": "chair"}),
        json!({}),
        40,
    );
    let seen_by_b = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen_by_b.clone();
    let b_talker = talker(9);
    let ex = builder(graph(doc))
        .node_handler("a", talker(1))
        .node_handler("b", move |input: NodeInput| {
            log.lock().expect("lock").push(team_input(&input));
            b_talker(input)
        })
        .node_handler("chair", two_turn_lead)
        .build()
        .expect("builds");
    let mut s = ex.start(json!({"request": "ship?"})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    // The lead's second inbox: b's update of cycle 2 (its own broadcast is not in it).
    assert_eq!(s.state()["decision"], json!({"heard": 1, "turn": 2}));
    let team = &s.state()["team"];
    assert_eq!(
        kinds_of(&team["transcript"]),
        [
            ("a".into(), "exit".into()),
            ("b".into(), "update".into()),
            ("chair".into(), "lead".into()),
            ("b".into(), "update".into()),
        ]
    );
    let seqs: Vec<u64> = team["transcript"]
        .as_array()
        .expect("array")
        .iter()
        .map(|b| b["seq"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(
        team["members"],
        json!({"a": {"status": "exited", "turns": 1}, "b": {"status": "cancelled", "turns": 2}})
    );
    assert_eq!(team["lead_turns"], 2);
    let b_inputs = seen_by_b.lock().expect("lock").clone();
    assert_eq!(b_inputs[0]["inbox"], json!([]), "nothing broadcast yet");
    assert_eq!(b_inputs[0]["turn"], 1);
    let froms: Vec<&str> = b_inputs[1]["inbox"]
        .as_array()
        .expect("inbox")
        .iter()
        .map(|b| b["from"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        froms,
        ["a", "chair"],
        "no own broadcast; the lead's reached b"
    );
    assert_eq!(b_inputs[1]["turn"], 2);
    // Steps: cycle 1 (2 turns) + lead + cycle 2 (1 turn) + final lead turn = 5.
    assert_eq!(s.steps(), 5);
    assert_eq!(s.visits().get("review"), Some(&1));
    assert_eq!(s.visits().get("chair"), Some(&2));
    let turns: Vec<(String, Option<String>)> = s
        .trace()
        .iter()
        .filter(|i| i.kind == K::TeamTurn)
        .map(|i| {
            (
                i.target().unwrap_or_default().to_string(),
                i.source().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(turns.len(), 5, "every turn is in the trace");
    assert!(
        turns
            .iter()
            .all(|(_, src)| src.as_deref() == Some("review")),
        "turn items name the team node"
    );
    assert!(
        s.trace()
            .iter()
            .filter(|i| i.kind == K::TeamTurn)
            .all(|i| i.usage().is_some()),
        "every turn item carries its usage"
    );
    assert_eq!(
        serde_json::to_value(s.usage_total()).expect("data"),
        json!({"input_tokens": 30, "output_tokens": 8})
    );
}

/// A member that errors, one that times out, one that writes a slice and one whose turns
/// run out each become a `failure` broadcast naming it and leave the team (status
/// `failed`); the team still decides.
#[test]
fn failing_members_leave_with_a_failure_broadcast() {
    let mut doc = team_doc(
        &[
            ("errs", json!({"handler": "errs"})),
            ("slow", json!({"handler": "slow"})),
            ("writer", json!({"set": {"scratch": 1}})),
            ("chatty", json!({"handler": "chatty"})),
        ],
        json!({"handler": "chair"}),
        json!({"member_max_turns": 1}),
        40,
    );
    doc["budgets"]["node_timeout_ms"] = json!(200);
    let ex = builder(graph(doc))
        .node_handler("errs", |_| async {
            Err::<Writes, _>(HandlerError::new("the model refused"))
        })
        .node_handler("slow", |_| async {
            tokio::time::sleep(Duration::from_secs(20)).await;
            Ok(Writes::new())
        })
        .node_handler("chatty", talker(99))
        .node_handler("chair", two_turn_lead)
        .build()
        .expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let team = &s.state()["team"];
    let t = team["transcript"].as_array().expect("transcript");
    let failure = |who: &str| {
        t.iter()
            .find(|b| b["from"] == who && b["type"] == "failure")
            .and_then(|b| b["message"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    for who in ["errs", "slow", "writer", "chatty"] {
        let m = failure(who);
        assert!(
            m.starts_with(&format!(
                "member `{who}` failed and is no longer in the team. Reason: "
            )),
            "{who}: {m}"
        );
        assert_eq!(team["members"][who]["status"], "failed", "{who}");
    }
    assert!(failure("errs").contains("the model refused"));
    assert!(failure("slow").contains("timed out"));
    assert!(failure("writer").contains("wrote slice(s) `scratch`"));
    assert!(failure("chatty").contains("used all 1 of its turns"));
    assert_eq!(team["members"]["chatty"]["turns"], 1);
    // Cycle 2 had nobody left: the lead's second turn was final (no member active).
    assert_eq!(team["lead_turns"], 2);
}

/// The lead finalizing in cycle 1 cancels the members still active; an exec member's
/// program (and the child it left running) is gone when the run ends.
#[cfg(target_os = "linux")]
#[test]
fn the_lead_finalizing_cancels_active_members_and_leaves_no_process() {
    let dir = std::env::temp_dir().join(format!("pactgraph-team-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let pidfile = dir.join("member.pid");
    let program = format!(
        "import json, os, subprocess, sys; json.load(sys.stdin); \
         p = subprocess.Popen(['sleep', '60'], stdin=subprocess.DEVNULL, \
         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); \
         open({:?}, 'w').write('%d %d' % (os.getpid(), p.pid)); \
         print(json.dumps({{'$broadcast': 'working on it'}}))",
        pidfile.display().to_string()
    );
    let doc = team_doc(
        &[(
            "worker",
            json!({"exec": {"argv": ["python3", "-c", program]}}),
        )],
        json!({"set": {"$final": true, "decision": "enough"}}),
        json!({}),
        40,
    );
    let ex = builder(graph(doc)).build().expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    let t0 = std::time::Instant::now();
    run_to_end(&ex, &mut s);
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "nothing waited on the child"
    );
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(s.state()["decision"], "enough");
    assert_eq!(
        s.state()["team"]["members"]["worker"],
        json!({"status": "cancelled", "turns": 1})
    );
    let pids: Vec<i32> = std::fs::read_to_string(&pidfile)
        .expect("the member ran")
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    assert_eq!(pids.len(), 2);
    std::thread::sleep(Duration::from_millis(100));
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
        assert!(
            stat.is_empty() || state == Some('Z'),
            "process {pid} is still running: {stat}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lead that never answers `$final` fails the run with `team_no_final` at its last
/// allowed turn.
#[test]
fn a_lead_that_never_finalizes_fails_with_team_no_final() {
    let doc = team_doc(
        &[("a", json!({"handler": "a"}))],
        json!({"set": {"$broadcast": "again"}}),
        json!({"lead_max_turns": 3}),
        40,
    );
    let ex = builder(graph(doc))
        .node_handler("a", talker(99))
        .build()
        .expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(s.status(), RunStatus::Failed);
    assert_eq!(s.termination_reason(), Some(R::TeamNoFinal));
    let msg = s.message().unwrap_or_default();
    assert!(
        msg.contains("lead `chair` of team `review`") && msg.contains("lead_max_turns (3)"),
        "{msg}"
    );
    // 3 cycles of one member turn plus 3 lead turns.
    assert_eq!(s.steps(), 6);
}

/// A broadcast over `max_broadcast_bytes` is replaced by an `overflow` broadcast naming
/// its sender and size, and the lead's next turn is final.
#[test]
fn an_oversized_broadcast_becomes_an_overflow_and_the_lead_must_finish() {
    let doc = team_doc(
        &[
            ("big", json!({"set": {"$broadcast": "x".repeat(100)}})),
            ("small", json!({"set": {"$broadcast": "ok"}})),
        ],
        json!({"handler": "chair"}),
        json!({"max_broadcast_bytes": 50}),
        40,
    );
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let ex = builder(graph(doc))
        .node_handler("chair", move |input: NodeInput| {
            log.lock().expect("lock").push(team_input(&input));
            two_turn_lead(input)
        })
        .build()
        .expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let lead_inputs = seen.lock().expect("lock").clone();
    assert_eq!(lead_inputs.len(), 1, "the lead's first turn was final");
    assert_eq!(lead_inputs[0]["final_turn"], true);
    let t = &s.state()["team"]["transcript"];
    assert_eq!(
        kinds_of(t),
        [
            ("big".into(), "overflow".into()),
            ("small".into(), "update".into())
        ]
    );
    let msg = t[0]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("member `big` (102 bytes) was dropped") && msg.contains("(50)"),
        "{msg}"
    );
}

/// A lead that errors fails the run like any node; a member's `$final` is refused as an
/// invalid output and becomes its failure broadcast.
#[test]
fn lead_errors_fail_the_run_and_members_may_not_finalize() {
    let doc = team_doc(
        &[("m", json!({"set": {"$final": true}}))],
        json!({"handler": "chair"}),
        json!({}),
        40,
    );
    let ex = builder(graph(doc))
        .node_handler("chair", |_| async {
            Err::<Writes, _>(HandlerError::new("lead crashed"))
        })
        .build()
        .expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(s.termination_reason(), Some(R::NodeFailed));
    let msg = s.message().unwrap_or_default();
    assert!(
        msg.contains("the lead of team `chair` failed: lead crashed"),
        "{msg}"
    );
    let turn = s
        .trace()
        .iter()
        .find(|i| i.kind == K::TeamTurn && i.target() == Some("m"))
        .and_then(|i| i.reason())
        .unwrap_or_default()
        .to_string();
    assert!(
        turn.contains("`$final` may be sent only by a team's lead"),
        "{turn}"
    );
}

/// Steps reserved up front: a cycle that cannot fit its member turns plus the lead's in
/// `max_steps` stops the run before any member runs.
#[test]
fn a_cycle_that_cannot_fit_stops_with_max_steps_exceeded() {
    let doc = team_doc(
        &[
            ("a", json!({"handler": "a"})),
            ("b", json!({"handler": "a"})),
        ],
        json!({"handler": "chair"}),
        json!({}),
        2,
    );
    let ex = builder(graph(doc))
        .node_handler("a", talker(99))
        .node_handler("chair", two_turn_lead)
        .build()
        .expect("builds");
    let mut s = ex.start(json!({})).expect("starts");
    run_to_end(&ex, &mut s);
    assert_eq!(s.termination_reason(), Some(R::MaxStepsExceeded));
    assert_eq!(s.steps(), 0);
    assert!(
        s.message()
            .unwrap_or_default()
            .contains("cycle 1 of team `review`")
    );
}

/// A team run saved after every step (run state JSON round trip) and resumed ends with
/// the same state and trace (without timing) as the uninterrupted run.
#[test]
fn a_team_saved_after_every_step_resumes_identically() {
    let doc = team_doc(
        &[
            ("a", json!({"handler": "a"})),
            ("b", json!({"handler": "b"})),
        ],
        json!({"handler": "chair"}),
        json!({}),
        40,
    );
    let ex = builder(graph(doc))
        .node_handler("a", talker(1))
        .node_handler("b", talker(9))
        .node_handler("chair", two_turn_lead)
        .build()
        .expect("builds");
    let mut whole = ex.start(json!({"request": 1})).expect("starts");
    let mut saved = whole.clone();
    run_to_end(&ex, &mut whole);
    let mut hops = 0;
    while saved.status() == RunStatus::Running {
        io().block_on(ex.step(&mut saved));
        saved = RunState::from_json(saved.to_json()).expect("reads back");
        hops += 1;
        assert!(hops < 50, "the run ends");
    }
    assert!(hops >= 5, "the team took several steps ({hops})");
    assert_eq!(saved.state(), whole.state());
    assert_eq!(
        saved.trace().without_timing(),
        whole.trace().without_timing()
    );
    assert_eq!(saved.steps(), whole.steps());
}

/// Driven through the run store one checkpoint at a time (`store::drive` with
/// `max_checkpoints(1)`, the run reloaded from its snapshot and deltas before every
/// step), the team ends exactly as the uninterrupted run: the pending team (transcript and
/// progress) survives every checkpoint.
#[cfg(feature = "store")]
#[test]
fn a_team_driven_one_checkpoint_at_a_time_through_the_store_ends_identically() {
    use pactgraph::runtime::RunRecord;
    use pactgraph::store::{Continue, CreateOptions, DriveOptions, RunStore, SqliteStore, drive};
    let doc = team_doc(
        &[
            ("a", json!({"handler": "a"})),
            ("b", json!({"handler": "b"})),
        ],
        json!({"handler": "chair"}),
        json!({}),
        40,
    );
    let g = graph(doc);
    let document = g.to_document();
    let ex = builder(g)
        .node_handler("a", talker(1))
        .node_handler("b", talker(9))
        .node_handler("chair", two_turn_lead)
        .build()
        .expect("builds");
    let start = ex.start(json!({"request": 1})).expect("starts");
    let mut whole = start.clone();
    run_to_end(&ex, &mut whole);
    io().block_on(async {
        let dir = tempfile::tempdir().expect("a temp dir");
        let url = format!("sqlite:{}", dir.path().join("store.db").display());
        let store = SqliteStore::open(&url).await.expect("opens");
        let record = RunRecord::new(document, start);
        let id = record.run_id;
        store
            .create(&record, &CreateOptions::default())
            .await
            .expect("creates");
        let one = DriveOptions::default().max_checkpoints(1);
        let mut hops = 0;
        let run = loop {
            let run = drive(&ex, &store, id, "worker", &one, Continue::AsStored)
                .await
                .expect("drives");
            assert_eq!(store.load(id).await.expect("loads").record.run, run);
            hops += 1;
            assert!(hops < 50, "the run ends");
            if run.status() != RunStatus::Running {
                break run;
            }
        };
        assert!(hops >= 5, "one checkpoint per step ({hops})");
        assert_eq!(run.state(), whole.state());
        assert_eq!(run.trace().without_timing(), whole.trace().without_timing());
    });
}
