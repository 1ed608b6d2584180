//! `pactgraph run --stream` and `pactgraph runs watch` (docs/spec/cli.md), with real
//! processes on both stores: a `worker` executes a run while watchers started before it,
//! during it and after its end follow it through the store.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::cli::{ASKER, Bench, ticker_json, untimed};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// The JSON Lines of `out`, each parsed.
fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Checks `events` are numbered 1..=N by one, each with the event keys first.
fn check_events(events: &[Value], run_id: &str) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "event {i}: {e}");
        assert_eq!(e["run_id"], run_id, "event {i}: {e}");
        let keys: Vec<&str> = e
            .as_object()
            .expect("an object")
            .keys()
            .take(4)
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["seq", "run_id", "event", "at_ms"], "{e}");
    }
    assert_eq!(events[0]["event"], "run_started");
}

/// The kinds of `events`, in order.
fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

/// Proves `run --stream` prints one event a line, numbered without gaps, then the same
/// outcome object `run` prints, with a store (checkpoint events, the same events as
/// `runs watch` reads back) and without one.
#[test]
fn run_stream_prints_events_then_the_outcome() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("wf.json", &ticker_json(3, 10));
        let wf = wf.to_str().unwrap();
        let plain = b.run(&["run", wf, "--quiet", "--name", "plain"]);
        assert_eq!(plain.code, 0, "{}", plain.err);
        b.remove("side.txt");
        let streamed = b.run(&["run", wf, "--quiet", "--stream", "--name", "streamed"]);
        assert_eq!(streamed.code, 0, "{}", streamed.err);
        let mut all = lines(&streamed.out);
        let outcome = all.pop().expect("the outcome last");
        let run_id = outcome["run_id"].as_str().unwrap().to_string();
        check_events(&all, &run_id);
        let k = kinds(&all);
        assert_eq!(k.iter().filter(|e| **e == "run_ended").count(), 1);
        assert_eq!(&k[k.len() - 2..], ["run_ended", "checkpoint"]);
        // Checkpoints 1, 2, ... each closing its transition's events.
        let checkpoints: Vec<u64> = all
            .iter()
            .filter(|e| e["event"] == "checkpoint")
            .map(|e| e["checkpoint"].as_u64().unwrap())
            .collect();
        let expected: Vec<u64> = (1..=checkpoints.len() as u64).collect();
        assert_eq!(checkpoints, expected);
        assert!(checkpoints.len() as u64 > outcome["steps"].as_u64().unwrap());
        // The outcome is `run`'s own object (its id and times aside).
        let mut expected = plain.json();
        expected["run_id"] = outcome["run_id"].clone();
        assert_eq!(untimed(&outcome), untimed(&expected));
        // The history the store keeps is what was streamed.
        let watched = b.run(&["runs", "watch", "streamed"]);
        assert_eq!(watched.code, 0, "{}", watched.err);
        assert_eq!(lines(&watched.out), all);

        // Without a store: the same steps, nothing durable, the outcome last.
        let memory = b.run(&["run", wf, "--quiet", "--stream", "--store", "none"]);
        assert_eq!(memory.code, 0, "{}", memory.err);
        let mut all = lines(&memory.out);
        let outcome = all.pop().unwrap();
        check_events(&all, outcome["run_id"].as_str().unwrap());
        let k = kinds(&all);
        assert!(!k.contains(&"checkpoint"));
        assert_eq!(k.last(), Some(&"run_ended"));
        assert_eq!(
            k.iter().filter(|e| **e == "step").count(),
            outcome_trace_len(&b, wf)
        );
    }
}

/// The trace length of a plain run of `wf` (without a store).
fn outcome_trace_len(b: &Bench, wf: &str) -> usize {
    let r = b.run(&["run", wf, "--quiet", "--trace", "--store", "none"]);
    assert_eq!(r.code, 0, "{}", r.err);
    r.json()["trace"].as_array().unwrap().len()
}

/// Proves `runs watch` follows a run a `worker` process executes: a watch started
/// before the worker, one started mid-run and one after the end all print the whole
/// history (committed events first, then live ones) and exit 0 when it completes; a
/// watch `--after K` prints the rest; a paused run's watch exits 4.
#[test]
fn runs_watch_follows_a_worker_from_before_during_and_after() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("wf.json", &ticker_json(8, 20));
        let wf = wf.to_str().unwrap();
        b.file("slow", "0.15");
        let r = b.run(&["run", wf, "--detach", "--name", "w"]);
        assert_eq!(r.code, 0, "{}", r.err);
        let run_id = r.json()["run_id"].as_str().unwrap().to_string();
        let mut early = b.spawn(&["runs", "watch", "w", "--poll", "20ms"], "early");
        let mut worker = b.spawn(&["worker", "--once", "--poll", "20ms"], "worker");
        // Mid-run: some steps committed, not all.
        assert!(
            b.wait_until(Duration::from_secs(60), || b.side().len() >= 3),
            "the worker took steps: {:?}",
            b.outputs("worker")
        );
        let mut mid = b.spawn(&["runs", "watch", &run_id[..10], "--poll", "20ms"], "mid");
        for (child, tag) in [(&mut early, "early"), (&mut mid, "mid")] {
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(0), "{tag}: {:?}", b.outputs(tag));
        }
        assert!(
            worker.wait().unwrap().success(),
            "{:?}",
            b.outputs("worker")
        );
        assert_eq!(b.status("w"), "completed");
        let after = b.run(&["runs", "watch", "w"]);
        assert_eq!(after.code, 0, "{}", after.err);
        let history = lines(&after.out);
        check_events(&history, &run_id);
        let k = kinds(&history);
        assert_eq!(&k[k.len() - 2..], ["run_ended", "checkpoint"]);
        assert_eq!(k.iter().filter(|e| **e == "step").count(), {
            b.show("w")["trace"].as_array().unwrap().len()
        });
        assert_eq!(lines(&b.outputs("early").0), history, "the early watch");
        assert_eq!(lines(&b.outputs("mid").0), history, "the mid-run watch");
        // Resuming a watch after seq 5.
        let tail = b.run(&["runs", "watch", "w", "--after", "5"]);
        assert_eq!(tail.code, 0);
        assert_eq!(lines(&tail.out), history[5..]);
        // Unknown runs and bad arguments say so.
        let unknown = b.run(&["runs", "watch", "nosuchrun"]);
        assert_eq!(unknown.code, 1, "{}", unknown.err);
        assert!(unknown.err.contains("nosuchrun"), "{}", unknown.err);
        let bad = b.run(&["runs", "watch", "w", "--poll", "soon"]);
        assert_eq!(bad.code, 2, "{}", bad.err);
        b.remove("slow");
    }
}

/// Proves a watch with `--until-pause` ends at a pause with exit 4 (as `run` does), after
/// the `paused` event.
#[test]
fn runs_watch_until_pause_of_a_paused_run_exits_4() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file(
            "ask.json",
            r#"{"workflow": "asker", "slices": {"clarification": {}}, "entry": "root",
                "supervisors": {"root": {"allow": ["x"],
                  "default": {"ask_clarification": {"question": "which?"}}}},
                "nodes": {"x": {"supervisor": "root", "writes": ["clarification"],
                  "terminal": true,
                  "triggers": [{"priority": 1, "when": {"path": "/clarification", "exists": true}}],
                  "run": {"set": {"clarification": 1}}}}}"#,
        );
        let r = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--name", "ask"]);
        assert_eq!(r.code, 4, "{}", r.err);
        let watched = b.run(&["runs", "watch", "ask", "--until-pause"]);
        assert_eq!(watched.code, 4, "{}", watched.err);
        let events = lines(&watched.out);
        let k = kinds(&events);
        assert_eq!(&k[k.len() - 2..], ["paused", "checkpoint"]);
        let paused = &events[events.len() - 2];
        assert_eq!(paused["question"], "which?");
    }
}

/// Waits up to `limit` for `child` to exit: its code, or `None` while it still runs.
fn exited_within(child: &mut std::process::Child, limit: std::time::Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status.code().unwrap_or(-1));
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Proves `runs watch` follows a run through its pause: a watch started while the run
/// is queued sees a `worker` process take it to its pause, prints `paused` and keeps
/// following (still running a second later); a `runs resume --answer` process resumes
/// it, and the same watch prints the resume and the end and exits 0, its events the
/// run's whole history. On PostgreSQL a second watch polls only every 30 s: it still
/// ends within seconds of the run, woken by the checkpoint's `NOTIFY`.
#[test]
fn runs_watch_follows_a_run_through_its_pause_and_resume() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("ask.json", ASKER);
        let r = b.run(&["run", wf.to_str().unwrap(), "--detach", "--name", "ask"]);
        assert_eq!(r.code, 0, "{}", r.err);
        let run_id = r.json()["run_id"].as_str().unwrap().to_string();
        let on_pg = b.store.starts_with("postgres");
        let mut watch = b.spawn(&["runs", "watch", "ask", "--poll", "20ms"], "watch");
        let mut slow = on_pg.then(|| b.spawn(&["runs", "watch", "ask", "--poll", "30s"], "slow"));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let w = b.run(&["worker", "--once"]);
        assert_eq!(w.code, 0, "{}", w.err);
        assert_eq!(b.status("ask"), "awaiting_input");
        assert!(
            b.wait_until(std::time::Duration::from_secs(20), || {
                b.outputs("watch").0.contains("\"paused\"")
            }),
            "the watch printed the pause: {:?}",
            b.outputs("watch")
        );
        assert_eq!(
            exited_within(&mut watch, std::time::Duration::from_secs(1)),
            None,
            "the watch goes on at a pause: {:?}",
            b.outputs("watch")
        );
        let resumed = b.run(&[
            "runs",
            "resume",
            "ask",
            "--answer",
            "the blue one",
            "--quiet",
        ]);
        assert_eq!(resumed.code, 0, "{}", resumed.err);
        let started = std::time::Instant::now();
        assert_eq!(
            exited_within(&mut watch, std::time::Duration::from_secs(30)),
            Some(0),
            "{:?}",
            b.outputs("watch")
        );
        let events = lines(&b.outputs("watch").0);
        check_events(&events, &run_id);
        let k = kinds(&events);
        assert!(k.contains(&"paused"), "{k:?}");
        let resume = events
            .iter()
            .position(|e| e["item"]["kind"] == "resume")
            .expect("the resume's step");
        let paused = k.iter().position(|k| *k == "paused").unwrap();
        assert!(paused < resume, "{k:?}");
        assert_eq!(&k[k.len() - 2..], ["run_ended", "checkpoint"]);
        let history = lines(&b.run(&["runs", "watch", "ask"]).out);
        assert_eq!(events, history, "the watch printed the whole history");
        if let Some(slow) = &mut slow {
            let code = exited_within(slow, std::time::Duration::from_secs(15));
            assert_eq!(code, Some(0), "woken by NOTIFY: {:?}", b.outputs("slow"));
            assert!(started.elapsed() < std::time::Duration::from_secs(20));
            assert_eq!(lines(&b.outputs("slow").0), history);
        }
    }
}
