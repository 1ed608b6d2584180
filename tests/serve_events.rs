//! `pactgraph serve`'s event streams and its stop, over real HTTP on loopback, on both
//! stores: `GET /api/runs/{id}/events` (history, then live; `Last-Event-ID`;
//! keep-alives; a bound on streams) and SIGTERM during a run (interrupted, resumable).
#![cfg(feature = "store")]

mod serve_support;
mod support;

use std::time::Duration;

use serde_json::json;
use serve_support::{Server, SseRead, sse};
use support::cli::{Bench, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

fn seqs(read: &SseRead) -> Vec<u64> {
    read.events
        .iter()
        .map(|e| e.data["seq"].as_u64().unwrap())
        .collect()
}

/// Proves a stream opened before a run moves gets every event in order, ids equal to
/// `seq`, live as the embedded worker commits them, ending after `run_ended`; that
/// `Last-Event-ID: K` resumes with K+1; and that the history matches `runs watch`.
#[test]
fn events_stream_history_then_live_and_resume_from_last_event_id() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("ticker.json", &ticker_json(3, 20));
        b.file("slow", "0.3");
        let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": "ticker", "name": "live"})),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        let read = sse(
            &s.addr,
            &format!("/api/runs/{id}/events"),
            &[],
            Duration::from_secs(60),
            |_| false,
        );
        assert_eq!(read.status, 200);
        assert!(read.ended, "the stream ends with the run");
        let n = read.events.len() as u64;
        assert!(n >= 4, "{read:?}");
        assert_eq!(seqs(&read), (1..=n).collect::<Vec<_>>());
        for e in &read.events {
            assert_eq!(e.id.as_deref(), Some(e.data["seq"].to_string().as_str()));
            assert_eq!(e.data["run_id"], id.as_str());
        }
        assert_eq!(read.events[0].data["event"], "run_started");
        assert!(read.events.iter().any(|e| e.data["event"] == "run_ended"));
        let watched = b.run(&["runs", "watch", &id]);
        assert_eq!(watched.code, 0, "{}", watched.err);
        let lines: Vec<serde_json::Value> = watched
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let data: Vec<serde_json::Value> = read.events.iter().map(|e| e.data.clone()).collect();
        assert_eq!(data, lines);

        // Resumed after event 2: 3.. only.
        let again = sse(
            &s.addr,
            "/api/runs/live/events",
            &[("Last-Event-ID", "2")],
            Duration::from_secs(30),
            |_| false,
        );
        assert_eq!(seqs(&again), (3..=n).collect::<Vec<_>>());
        let bad = sse(
            &s.addr,
            &format!("/api/runs/{id}/events"),
            &[("Last-Event-ID", "two")],
            Duration::from_secs(10),
            |_| false,
        );
        assert_eq!(bad.status, 400);
    }
}

/// Proves an idle stream gets keep-alive comments, and streams past `--max-streams`
/// get 503 while the others go on.
#[test]
fn idle_streams_are_kept_alive_and_bounded() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(2, 20));
    // No workers: the run stays queued and its stream idle.
    let s = Server::start(
        &b,
        "serve",
        &["--keep-alive", "200ms", "--max-streams", "2"],
    );
    let id = s
        .call("POST", "/api/runs", Some(&json!({"workflow": "ticker"})))
        .json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/runs/{id}/events");
    let addr = s.addr.clone();
    let p = path.clone();
    let holder =
        std::thread::spawn(move || sse(&addr, &p, &[], Duration::from_millis(1500), |_| false));
    let addr = s.addr.clone();
    let p = path.clone();
    let holder2 =
        std::thread::spawn(move || sse(&addr, &p, &[], Duration::from_millis(1500), |_| false));
    std::thread::sleep(Duration::from_millis(500));
    let third = sse(&s.addr, &path, &[], Duration::from_secs(5), |_| false);
    assert_eq!(third.status, 503);
    let held = holder.join().unwrap();
    let held2 = holder2.join().unwrap();
    assert_eq!(held.status, 200);
    assert_eq!(held2.status, 200);
    assert!(held.events.is_empty());
    assert!(held.comments >= 3, "keep-alives: {held:?}");
}

/// Proves SIGTERM during a run stops the server (exit 0): the run in flight is
/// interrupted, its lease given up, and a worker later finishes it.
#[test]
fn sigterm_during_a_run_interrupts_it_and_releases_its_lease() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("ticker.json", &ticker_json(3, 20));
        b.file("slow", "30");
        let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": "ticker", "name": "cut"})),
        );
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        s.wait_status(&id, "running");
        assert!(s.wait_until(Duration::from_secs(30), || !b.pids().is_empty()));
        let log_before = s.log();
        let started = std::time::Instant::now();
        let code = s.stop("TERM");
        assert_eq!(code, 0, "{log_before}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "stopped without waiting for the step"
        );
        assert_eq!(b.status("cut"), "interrupted");
        let shown = b.show("cut");
        assert_eq!(shown["run"]["owner"], serde_json::Value::Null, "{shown}");
        // Its program was killed with it.
        for pid in b.pids() {
            assert!(
                b.wait_until(Duration::from_secs(10), || support::cli::process_gone(pid)),
                "pid {pid} left running"
            );
        }
        // A run resumed through the API (no workers) is interrupted the same way.
        let s = Server::start(&b, "resumer", &[]);
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": "ticker", "name": "api"})),
        );
        let api = r.json()["run_id"].as_str().unwrap().to_string();
        let r = s.call("POST", &format!("/api/runs/{api}/resume"), None);
        assert_eq!(r.status, 202, "{}", r.text());
        s.wait_status(&api, "running");
        assert_eq!(s.stop("TERM"), 0);
        assert_eq!(b.status("api"), "interrupted");

        b.remove("slow");
        let w = b.run(&["worker", "--once"]);
        assert_eq!(w.code, 0, "{}", w.err);
        assert_eq!(b.status("cut"), "completed");
        assert_eq!(b.status("api"), "completed");
    }
}
