//! Opening a new store from many processes at the same moment (the migration race): 40
//! `pactgraph run` processes started at once on a store that does not exist yet (a new
//! SQLite file; a new PostgreSQL schema) all migrate it safely and complete their runs.
#![cfg(all(unix, feature = "cli"))]

mod support;

use std::time::{Duration, Instant};

use support::cli::Bench;

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// Processes started at once.
const PROCESSES: usize = 40;

/// A workflow of three `set` steps that completes.
const THREE: &str = r#"{"workflow": "three",
 "slices": {"a": {}, "b": {}, "c": {}},
 "entry": "boss",
 "supervisors": {"boss": {"allow": ["x", "y", "z"], "default": {"stop_global": {}}}},
 "nodes": {
  "x": {"supervisor": "boss", "writes": ["a"],
        "triggers": [{"priority": 3, "when": {"not": {"path": "/a", "exists": true}}}],
        "run": {"set": {"a": 1}}},
  "y": {"supervisor": "boss", "writes": ["b"],
        "triggers": [{"priority": 2, "when": {"not": {"path": "/b", "exists": true}}}],
        "run": {"set": {"b": 2}}},
  "z": {"supervisor": "boss", "writes": ["c"], "terminal": true,
        "triggers": [{"priority": 1, "when": true}],
        "run": {"set": {"c": 3}}}}}"#;

/// Proves 40 processes opening one new store at once all complete their runs: every
/// process exits 0 with its run `completed`, and the store lists 40 completed runs.
/// Before, on SQLite, about a quarter failed with `migrations: while executing migration
/// 2: ... duplicate column name: attempt_key`.
#[test]
fn forty_processes_opening_a_new_store_at_once_all_complete() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("three.json", THREE);
        let wf = wf.to_str().expect("a UTF-8 path");
        let started = Instant::now();
        let children: Vec<_> = (0..PROCESSES)
            .map(|i| b.spawn(&["run", wf, "--quiet"], &format!("p{i}")))
            .collect();
        let mut failed = Vec::new();
        for (i, mut child) in children.into_iter().enumerate() {
            let status = child.wait().expect("waits");
            let (out, err) = b.outputs(&format!("p{i}"));
            let completed = serde_json::from_str::<serde_json::Value>(&out)
                .is_ok_and(|v| v["status"] == "completed");
            if !status.success() || !completed {
                failed.push(format!("process {i}: {status}: {out} {err}"));
            }
        }
        eprintln!(
            "{PROCESSES} processes on a new store: {} ms",
            started.elapsed().as_millis()
        );
        assert!(failed.is_empty(), "{}", failed.join("\n"));
        let list = b
            .run(&["runs", "list", "--format", "json", "--limit", "1000"])
            .json();
        let runs = list.as_array().expect("a list");
        assert_eq!(runs.len(), PROCESSES);
        assert!(runs.iter().all(|r| r["status"] == "completed"), "{list}");
        assert!(started.elapsed() < Duration::from_secs(120));
    }
}
