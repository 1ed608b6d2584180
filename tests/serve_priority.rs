//! `pactgraph serve` serves below the priority it runs at (ADR 0052): its serving threads
//! (HTTP, event streams, their store's threads) at `--serve-nice`, its runs' threads and
//! the programs its runs start at the process's own, read back from `/proc` as `ps -L`
//! shows them; a bad `--serve-nice` is a usage error. Linux only (niceness per thread).
#![cfg(all(feature = "store", target_os = "linux"))]

mod serve_support;
mod support;

use std::time::Duration;

use serde_json::json;
use serve_support::{Server, sse_run};
use support::cli::{Bench, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// A task's (thread's or process's) command name and niceness, from its `stat` (field 2
/// in parentheses, which may hold spaces; field 19 the niceness).
fn stat_of(path: &str) -> Option<(String, i32)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (head, after) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let nice = after.split_whitespace().nth(16)?.parse().ok()?;
    Some((comm, nice))
}

/// Every thread of process `pid`: (TID, command name, niceness).
fn threads_of(pid: u32) -> Vec<(u32, String, i32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads") {
        let tid: u32 = entry
            .expect("an entry")
            .file_name()
            .to_string_lossy()
            .parse()
            .expect("a TID");
        if let Some((comm, nice)) = stat_of(&format!("/proc/{pid}/task/{tid}/stat")) {
            out.push((tid, comm, nice));
        }
    }
    out
}

/// The children of process `pid` (the programs its threads started), with their niceness.
fn children_of(pid: u32) -> Vec<(u32, i32)> {
    let mut out = Vec::new();
    for (tid, _, _) in threads_of(pid) {
        let list =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")).unwrap_or_default();
        for child in list
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            if let Some((_, nice)) = stat_of(&format!("/proc/{child}/stat")) {
                out.push((child, nice));
            }
        }
    }
    out
}

/// Proves, on each store, that with `--serve-nice 7` every serving thread (and, on
/// SQLite, the connection threads of the serving store) runs at niceness 7 while the
/// main thread, the runs' threads and the program a run's `exec` step starts keep the
/// process's niceness; and that the run, streamed to a client meanwhile, completes with
/// every event delivered (the serving side, niced, still serves).
#[test]
fn serving_threads_are_niced_and_runs_keep_the_process_priority() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("ticker.json", &ticker_json(3, 20));
        b.file("slow", "0.3");
        let s = Server::start(
            &b,
            "serve",
            &["--workers", "1", "--poll", "20ms", "--serve-nice", "7"],
        );
        let pid = s.child.id();
        let base = stat_of(&format!("/proc/{pid}/stat"))
            .expect("the process")
            .1;
        let nice = 7.max(base);
        assert!(
            s.log().contains("serving at niceness 7"),
            "the start line says it: {}",
            s.log()
        );
        let r = s.call("POST", "/api/runs", Some(&json!({"workflow": "ticker"})));
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["run_id"].as_str().expect("a run id").to_string();
        // The run's `exec` step: a child of a runs thread, at the process's niceness.
        let mut programs = Vec::new();
        let seen = s.wait_until(Duration::from_secs(30), || {
            programs = children_of(pid);
            !programs.is_empty()
        });
        assert!(seen, "the run started a program: {}", s.log());
        assert!(
            programs.iter().all(|(_, n)| *n == base),
            "a run's program keeps niceness {base}: {programs:?}"
        );
        let threads = threads_of(pid);
        let named = |name: &str| -> Vec<&(u32, String, i32)> {
            threads.iter().filter(|t| t.1 == name).collect()
        };
        let serving = named("pactgraph-serve");
        let runs = named("pactgraph-runs");
        assert!(
            serving.len() >= 3,
            "two workers and the accept loop's: {threads:?}"
        );
        assert!(
            serving.iter().all(|t| t.2 == nice),
            "every serving thread at {nice}: {threads:?}"
        );
        assert_eq!(runs.len(), 2, "the runs' two workers: {threads:?}");
        assert!(
            runs.iter().all(|t| t.2 == base),
            "every runs thread at {base}: {threads:?}"
        );
        let main = threads
            .iter()
            .find(|t| t.0 == pid)
            .expect("the main thread");
        assert_eq!(main.2, base, "the main thread keeps {base}: {threads:?}");
        if b.store.starts_with("sqlite:") {
            let sqlite: Vec<i32> = threads
                .iter()
                .filter(|t| t.1.starts_with("sqlx-sqlite"))
                .map(|t| t.2)
                .collect();
            assert!(
                sqlite.contains(&base) && sqlite.contains(&nice),
                "the runs' store's threads at {base}, the serving store's at {nice}: \
                 {threads:?}"
            );
            assert!(
                sqlite.iter().all(|n| *n == base || *n == nice),
                "{threads:?}"
            );
        }
        let read = sse_run(&s.addr, &id);
        let seqs: Vec<u64> = read
            .events
            .iter()
            .filter_map(|e| e.data["seq"].as_u64())
            .collect();
        assert!(read.ended, "the server ended the stream");
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "every event, in order"
        );
        assert!(
            read.events.iter().any(|e| e.data["event"] == "run_ended"),
            "the run's end streamed: {:?}",
            read.events
        );
        s.wait_released(&id, "completed");
    }
}

/// Proves `--serve-nice 0` leaves every thread at the process's niceness.
#[test]
fn serve_nice_zero_serves_at_the_process_priority() {
    let b = Bench::new(BIN);
    let s = Server::start(&b, "serve", &["--serve-nice", "0"]);
    let pid = s.child.id();
    let base = stat_of(&format!("/proc/{pid}/stat"))
        .expect("the process")
        .1;
    let threads = threads_of(pid);
    assert!(
        threads.iter().any(|t| t.1 == "pactgraph-serve"),
        "{threads:?}"
    );
    assert!(threads.iter().all(|t| t.2 == base), "{threads:?}");
}

/// Proves a niceness outside 0..=19 is refused at start: exit 2, naming the option.
#[test]
fn a_serve_nice_out_of_range_is_a_usage_error() {
    let b = Bench::new(BIN);
    for bad in ["20", "-1", "ten"] {
        let option = format!("--serve-nice={bad}");
        let ran = b.run(&["serve", "--listen", "127.0.0.1:0", &option]);
        assert_eq!(ran.code, 2, "--serve-nice {bad}: {}", ran.err);
        assert!(ran.err.contains("--serve-nice"), "{}", ran.err);
    }
}
