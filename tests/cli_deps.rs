//! Run dependencies and workers through the binary: `run --after` (foreground and
//! `--detach`), the failure policies, timeouts, several dependencies, `worker --once`
//! draining a chain in order, cancel cascades, two workers on one store, and a worker
//! killed mid-run. Real processes against a real SQLite file in a temporary folder.
#![cfg(all(unix, feature = "cli"))]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use support::cli::{Bench, EMIT, FAIL, check_side, check_trace, signal, untimed};

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// One exec step appending `RUN_ID STEP ATTEMPT PID` to `marks.txt`.
const MARK: &str = r#"{"workflow": "mark",
 "slices": {"out": {}},
 "entry": "boss",
 "supervisors": {"boss": {"allow": ["mark"], "default": {"stop_global": {"reason": "done"}}}},
 "nodes": {"mark": {"supervisor": "boss", "reads": [], "writes": ["out"],
   "triggers": [{"when": {"path": "/out", "exists": false}}],
   "run": {"exec": {"argv": ["python3", "mark.py"]}}}}}"#;

const MARK_PY: &str = r#"import json, os, sys
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "marks.txt"), "a") as f:
    f.write(f"{req['run_id']} {req['step']} {req['attempt']} {os.getppid()}\n")
print(json.dumps({"out": True}))
"#;

/// `run FILE --detach ARGS...` → the run id (asserting exit 0 and `status`).
fn detach(b: &Bench, file: &str, args: &[&str], status: &str) -> String {
    let mut all = vec!["run", file, "--detach"];
    all.extend_from_slice(args);
    let r = b.run(&all);
    assert_eq!(r.code, 0, "run --detach {args:?}: {}", r.err);
    let out = r.json();
    assert_eq!(out["status"], status, "{out}");
    out["run_id"].as_str().expect("a run id").to_string()
}

fn worker_once(b: &Bench) -> String {
    let r = b.run(&["worker", "--once"]);
    assert_eq!(r.code, 0, "worker --once: {}", r.err);
    r.err
}

fn trace_ms(show: &Value) -> (u64, u64) {
    let items = show["trace"].as_array().expect("a trace");
    let at = |i: &Value| i["at_ms"].as_u64().expect("at_ms");
    (
        items.first().map(at).expect("a first item"),
        items.last().map(at).expect("a last item"),
    )
}

/// Proves `run --after A --dep-result deps` in the foreground: it waits (`waiting`, held
/// by its process so no worker takes it) while A is queued, starts once a worker has
/// completed A, and finds A's workflow, status, reason and root state (without
/// `system`) in `deps`.
#[test]
fn b_after_a_runs_in_the_foreground_with_a_result() {
    for b in Bench::each(BIN.as_ref()) {
        let emit = b.file("emit.json", EMIT).display().to_string();
        let a = detach(&b, &emit, &[], "queued");
        let waiting = b.spawn(
            &[
                "run",
                &emit,
                "--after",
                &a,
                "--dep-result",
                "deps",
                "--quiet",
            ],
            "b",
        );
        assert!(
            b.wait_until(Duration::from_secs(20), || {
                let list = b.run(&["runs", "list", "--format", "json"]).json();
                list.as_array()
                    .is_some_and(|l| l.iter().any(|r| r["status"] == "waiting"))
            }),
            "B shows as waiting"
        );
        let list = b.run(&["runs", "list", "--format", "json"]).json();
        let row = list
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["status"] == "waiting")
            .unwrap()
            .clone();
        assert_eq!(row["waits_on"], format!("{a} (queued)"), "{row}");
        let log = worker_once(&b);
        assert!(log.contains(&format!("run {a} (emit) started")), "{log}");
        let out = waiting.wait_with_output().expect("B ends");
        assert_eq!(out.status.code(), Some(0), "{}", b.outputs("b").1);
        let result: Value = serde_json::from_str(&b.outputs("b").0).expect("B's result");
        assert_eq!(result["status"], "completed");
        let deps = &result["state"]["deps"][a.as_str()];
        assert_eq!(deps["workflow"], "emit");
        assert_eq!(deps["status"], "completed");
        assert_eq!(deps["state"]["out"], json!({"v": 1}));
        assert!(deps["state"].get("system").is_none(), "{deps}");
        let bid = result["run_id"].as_str().unwrap();
        let show = b.show(bid);
        assert_eq!(show["dependencies"]["after"][0]["run_id"], a.as_str());
        assert_eq!(show["dependencies"]["after"][0]["status"], "completed");
        assert_eq!(b.show(&a)["dependencies"]["dependents"][0]["run_id"], bid);
    }
}

/// Proves the failure policies: after a failed A, B (`abort`, the default) fails with
/// `dependency_failed` before any step, its message naming A and its status, and cannot
/// be resumed; C (`continue`) runs and finds A's failure in its result slice.
#[test]
fn a_failed_dependency_aborts_or_is_passed_on() {
    for b in Bench::each(BIN.as_ref()) {
        let fail = b.file("fail.json", FAIL).display().to_string();
        let emit = b.file("emit.json", EMIT).display().to_string();
        let a = detach(&b, &fail, &[], "queued");
        let abort = detach(&b, &emit, &["--after", &a], "waiting");
        let carry_on = detach(
            &b,
            &emit,
            &[
                "--after",
                &a,
                "--on-dep-failure",
                "continue",
                "--dep-result",
                "deps",
            ],
            "waiting",
        );
        worker_once(&b);
        assert_eq!(b.status(&a), "failed");
        let shown = b.show(&abort);
        assert_eq!(shown["run"]["status"], "failed");
        assert_eq!(shown["run"]["termination_reason"], "dependency_failed");
        assert_eq!(shown["run"]["steps"], 0, "no step ran");
        let message = shown["message"].as_str().unwrap();
        assert!(
            message.contains(&a) && message.contains("failed") && message.contains("fail"),
            "{message}"
        );
        let resumed = b.run(&["runs", "resume", &abort]);
        assert_eq!(resumed.code, 1, "{}", resumed.err);
        assert!(resumed.err.contains("dependency_failed"), "{}", resumed.err);
        let shown = b.show(&carry_on);
        assert_eq!(shown["run"]["status"], "completed");
        assert_eq!(shown["state"]["deps"][a.as_str()]["status"], "failed");
        assert_eq!(
            shown["state"]["deps"][a.as_str()]["termination_reason"],
            "node_failed"
        );
    }
}

/// Proves `--dep-timeout`: B waits on a run nobody runs and fails with
/// `dependency_timeout` (exit 1), naming the dependency and its status.
#[test]
fn a_dependency_timeout_fails_the_run() {
    for b in Bench::each(BIN.as_ref()) {
        let emit = b.file("emit.json", EMIT).display().to_string();
        let a = detach(&b, &emit, &[], "queued");
        let r = b.run(&[
            "run",
            &emit,
            "--after",
            &a,
            "--dep-timeout",
            "300ms",
            "--quiet",
        ]);
        assert_eq!(r.code, 1, "{}", r.err);
        let out = r.json();
        assert_eq!(out["status"], "failed");
        assert_eq!(out["termination_reason"], "dependency_timeout");
        let shown = b.show(out["run_id"].as_str().unwrap());
        let message = shown["message"].as_str().unwrap();
        assert!(
            message.contains(&a) && message.contains("queued"),
            "{message}"
        );
    }
}

/// Proves several dependencies at once: B (after A1 and A2) starts only after both
/// ended, with both results in its slice, and `runs graph` draws both edges.
#[test]
fn several_dependencies_at_once() {
    for b in Bench::each(BIN.as_ref()) {
        let emit = b.file("emit.json", EMIT).display().to_string();
        let a1 = detach(&b, &emit, &[], "queued");
        let a2 = detach(&b, &emit, &[], "queued");
        let bid = detach(
            &b,
            &emit,
            &["--after", &a1, "--depends-on", &a2, "--dep-result", "deps"],
            "waiting",
        );
        worker_once(&b);
        let shown = b.show(&bid);
        assert_eq!(shown["run"]["status"], "completed");
        let deps = shown["state"]["deps"].as_object().unwrap();
        assert_eq!(
            deps.keys().collect::<Vec<_>>(),
            vec![&a1, &a2],
            "one entry per dependency, in the order given"
        );
        let start = trace_ms(&shown).0;
        for a in [&a1, &a2] {
            assert!(trace_ms(&b.show(a)).1 <= start, "B started after {a} ended");
        }
        let dot = b.run(&["runs", "graph", &bid]);
        assert_eq!(dot.code, 0, "{}", dot.err);
        for a in [&a1, &a2] {
            assert!(
                dot.out.contains(&format!("\"{a}\" -> \"{bid}\"")),
                "{}",
                dot.out
            );
        }
        assert!(
            dot.out.contains("fillcolor=\"#c8e6c9\""),
            "completed is green"
        );
        let mermaid = b.run(&["runs", "graph", "--mermaid"]);
        assert!(
            mermaid.out.contains(&format!("r{a1} --> r{bid}")),
            "{}",
            mermaid.out
        );
        assert_eq!(
            b.run(&["runs", "graph", &bid]).out,
            dot.out,
            "the same graph twice, byte for byte"
        );
    }
}

/// Proves a chain of three detached runs (A, B after A, C after B) is drained by one
/// `worker --once` in order: each run's first trace item comes after its dependency's
/// last, and the worker logs one start and one end line per run.
#[test]
fn a_chain_of_three_detached_runs_drains_in_order() {
    for b in Bench::each(BIN.as_ref()) {
        let emit = b.file("emit.json", EMIT).display().to_string();
        let a = detach(&b, &emit, &[], "queued");
        let bb = detach(&b, &emit, &["--after", &a], "waiting");
        let c = detach(&b, &emit, &["--after", &bb], "waiting");
        let log = worker_once(&b);
        let mut last_end = 0;
        for id in [&a, &bb, &c] {
            let shown = b.show(id);
            assert_eq!(shown["run"]["status"], "completed", "{id}");
            let (first, last) = trace_ms(&shown);
            assert!(first >= last_end, "{id} started after its dependency ended");
            last_end = last;
            assert_eq!(
                log.matches(&format!("run {id} (emit) started")).count(),
                1,
                "{log}"
            );
            assert_eq!(
                log.matches(&format!("run {id} ended completed")).count(),
                1,
                "{log}"
            );
        }
        let starts: Vec<usize> = [&a, &bb, &c]
            .iter()
            .map(|id| log.find(&format!("run {id} (emit) started")).unwrap())
            .collect();
        assert!(starts.windows(2).all(|w| w[0] < w[1]), "{log}");
    }
}

/// Proves a cancel cascades: cancelling A (queued) ends B (after A, `abort`) with
/// `dependency_failed` at once, and that ends C (after B) too; D (after A, `continue`)
/// is left to run, and does.
#[test]
fn cancelling_a_dependency_settles_its_dependents() {
    for b in Bench::each(BIN.as_ref()) {
        let emit = b.file("emit.json", EMIT).display().to_string();
        let a = detach(&b, &emit, &[], "queued");
        let bb = detach(&b, &emit, &["--after", &a], "waiting");
        let c = detach(&b, &emit, &["--after", &bb], "waiting");
        let d = detach(
            &b,
            &emit,
            &["--after", &a, "--on-dep-failure", "continue"],
            "waiting",
        );
        let r = b.run(&["runs", "cancel", &a]);
        assert_eq!(r.code, 0, "{}", r.err);
        assert!(
            r.out.contains(&format!(
                "run {bb} (waiting on {a}) ended: dependency_failed"
            )),
            "{}",
            r.out
        );
        assert!(
            r.out.contains(&format!(
                "run {c} (waiting on {bb}) ended: dependency_failed"
            )),
            "{}",
            r.out
        );
        let shown = b.show(&bb);
        assert_eq!(shown["run"]["termination_reason"], "dependency_failed");
        assert!(
            shown["message"]
                .as_str()
                .unwrap()
                .contains("stopped (cancelled)")
        );
        assert_eq!(b.status(&c), "failed");
        assert_eq!(b.status(&d), "waiting");
        worker_once(&b);
        assert_eq!(b.status(&d), "completed");
    }
}

/// Proves an unknown dependency is a usage error (exit 2) that names it, and that
/// nothing is stored; `--after` without a store is one too.
#[test]
fn an_unknown_dependency_is_a_usage_error() {
    for b in Bench::each(BIN.as_ref()) {
        let emit = b.file("emit.json", EMIT).display().to_string();
        let r = b.run(&["run", &emit, "--after", "01ZZZZZZZZZZZZZZZZZZZZZZZZ"]);
        assert_eq!(r.code, 2, "{}", r.err);
        assert!(r.err.contains("01ZZZZZZZZZZZZZZZZZZZZZZZZ"), "{}", r.err);
        let list = b.run(&["runs", "list", "--format", "json"]).json();
        assert_eq!(list, json!([]), "nothing was stored");
        let r = b.run(&["run", &emit, "--after", "x", "--store", "none"]);
        assert_eq!(r.code, 2, "{}", r.err);
        let r = b.run(&["run", &emit, "--dep-result", "deps"]);
        assert_eq!(r.code, 2, "{}", r.err);
    }
}

/// Proves two workers on one store never run the same run: 200 detached one-step exec
/// runs drained by two `worker --once --concurrency 2` processes at the same time; each
/// run's program ran exactly once (one mark, attempt 1), every run completed with
/// contiguous trace steps, and both workers took some.
#[test]
fn two_workers_never_run_the_same_run() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("mark.py", MARK_PY);
        let mark = b.file("mark.json", MARK).display().to_string();
        let ids: Vec<String> = (0..200).map(|_| detach(&b, &mark, &[], "queued")).collect();
        let w1 = b.spawn(&["worker", "--once", "--concurrency", "2"], "w1");
        let w2 = b.spawn(&["worker", "--once", "--concurrency", "2"], "w2");
        for w in [w1, w2] {
            let out = w.wait_with_output().expect("a worker ends");
            assert_eq!(out.status.code(), Some(0));
        }
        let marks = std::fs::read_to_string(b.dir.join("marks.txt")).expect("marks");
        let mut per_run: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
        let mut workers = std::collections::BTreeSet::new();
        for line in marks.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            per_run
                .entry(parts[0])
                .or_default()
                .push((parts[1], parts[2]));
            workers.insert(parts[3]);
        }
        assert_eq!(per_run.len(), 200, "every run marked");
        for (run, marks) in &per_run {
            assert_eq!(
                marks,
                &vec![("0", "1")],
                "run {run} ran once (step 0, attempt 1)"
            );
        }
        assert_eq!(workers.len(), 2, "both workers took runs");
        let list = b
            .run(&["runs", "list", "--format", "json", "--limit", "0"])
            .json();
        let rows = list.as_array().unwrap();
        assert_eq!(rows.len(), 200);
        assert!(rows.iter().all(|r| r["status"] == "completed"), "{list}");
        for id in ids.iter().step_by(20) {
            check_trace(&b.show(id)["trace"], 1);
        }
        let (l1, l2) = (b.outputs("w1").1, b.outputs("w2").1);
        for id in &ids {
            let started = l1.matches(&format!("run {id} ")).count()
                + l2.matches(&format!("run {id} ")).count();
            assert_eq!(started, 2, "one start and one end line for {id}");
        }
    }
}

/// Proves failover between workers: a worker killed with SIGKILL mid-run (lease 1 s)
/// leaves its run `interrupted` once the lease lapses; a second worker resumes it from
/// its last committed step, and it ends exactly as an uninterrupted run (state and
/// trace, timestamps aside), each step in the side file once or, for the step in
/// flight, twice with a higher attempt.
#[test]
fn a_killed_workers_run_is_resumed_by_another_after_its_lease_lapses() {
    const TICKS: u32 = 8;
    for b in Bench::each(BIN.as_ref()) {
        let wf = b
            .file("wf.json", &support::cli::ticker_json(TICKS, 40))
            .display()
            .to_string();
        // The uninterrupted run, in its own folder.
        let clean = Bench::new(BIN);
        let clean_wf = clean
            .file("wf.json", &support::cli::ticker_json(TICKS, 40))
            .display()
            .to_string();
        let whole = clean.run(&["run", &clean_wf, "--quiet"]);
        assert_eq!(whole.code, 0, "{}", whole.err);
        let whole = clean.show(whole.json()["run_id"].as_str().unwrap());

        b.file("slow", "0.15");
        let id = detach(&b, &wf, &[], "queued");
        let first = b.spawn(&["worker", "--lease", "1s"], "w1");
        assert!(
            b.wait_until(Duration::from_secs(30), || b.side().len() >= 3),
            "the first worker ran some steps"
        );
        signal(&first, "KILL");
        let _ = { first }.wait();
        let second = b.run(&["worker", "--once", "--lease", "1s"]);
        // The lease may still be current when the second worker first looks: it then finds
        // nothing runnable and exits; look again once it has lapsed.
        if !b.status(&id).eq("completed") {
            std::thread::sleep(Duration::from_millis(1200));
            let again = b.run(&["worker", "--once", "--lease", "1s"]);
            assert!(
                again.err.contains(&format!("run {id} (ticker) started")),
                "{}",
                again.err
            );
        } else {
            assert!(
                second.err.contains(&format!("run {id} (ticker) started")),
                "{}",
                second.err
            );
        }
        let done = b.show(&id);
        assert_eq!(done["run"]["status"], "completed");
        assert_eq!(untimed(&done["state"]), untimed(&whole["state"]));
        assert_eq!(untimed(&done["trace"]), untimed(&whole["trace"]));
        check_trace(&done["trace"], TICKS);
        check_side(&b.side(), TICKS, 1);
    }
}

/// Proves SIGTERM to a worker interrupts the run in flight: the program it was running
/// is killed, the run is `interrupted` (resumable) with its lease given up, the worker
/// logs it and exits 0.
#[test]
fn sigterm_interrupts_a_workers_runs_and_exits_0() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b
            .file("wf.json", &support::cli::ticker_json(3, 10))
            .display()
            .to_string();
        b.file("slow", "30");
        let id = detach(&b, &wf, &[], "queued");
        let w = b.spawn(&["worker"], "w");
        assert!(
            b.wait_until(Duration::from_secs(30), || !b.pids().is_empty()),
            "the program started"
        );
        signal(&w, "TERM");
        let out = w.wait_with_output().expect("the worker ends");
        assert_eq!(out.status.code(), Some(0), "{}", b.outputs("w").1);
        let log = b.outputs("w").1;
        assert!(log.contains(&format!("run {id} interrupted")), "{log}");
        for pid in b.pids() {
            assert!(
                b.wait_until(Duration::from_secs(5), || support::cli::process_gone(pid)),
                "program {pid} was killed"
            );
        }
        let shown = b.show(&id);
        assert_eq!(shown["run"]["status"], "interrupted");
        assert_eq!(shown["run"]["owner"], Value::Null, "the lease was given up");
    }
}
