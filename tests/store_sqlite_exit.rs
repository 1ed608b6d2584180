//! A `pactgraph` command ends without closing its SQLite store (ADR 0059): what its run
//! committed stays in the WAL, as after a crash, for the next process to read, instead of
//! being copied into the database file (and both synced) at every exit. Real processes on
//! a real SQLite file.
#![cfg(feature = "store")]

mod support;

use support::cli::{ASKER, Bench};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// The WAL's size in bytes (0 when there is none).
fn wal_bytes(b: &Bench) -> u64 {
    std::fs::metadata(b.dir.join("store.db-wal")).map_or(0, |m| m.len())
}

/// A loop of `set` steps that stops at its `max_steps`.
const LOOP: &str = r#"{"workflow": "loop", "slices": {"task": {}, "result": {}},
  "budgets": {"max_steps": 20}, "entry": "boss",
  "supervisors": {"boss": {"allow": ["work"]}},
  "nodes": {"work": {"supervisor": "boss", "reads": ["task"], "writes": ["result"],
    "triggers": [{"priority": 1, "when": true}], "run": {"set": {"result": {"ok": true}}}}}}"#;

/// Proves that after each of several commands the WAL is still there and has grown by
/// the run's pages (the checkpoint of the last connection to close deletes it), and that
/// each next process reads what the last one committed: every run is listed with its
/// steps, and a paused run is resumed to its end. The runs print a 100 KB state, as the
/// bench's do: on the code before ADR 0059 the store's close then won its race with the
/// exit in 8 of 10 runs (the WAL copied into the database, synced and deleted).
#[test]
fn commands_leave_the_wal_and_the_next_process_reads_it() {
    let b = Bench::new(BIN);
    let lp = b.file("loop.json", LOOP);
    let big: Vec<String> = (0..10_000).map(|i| format!("item-{i:04}")).collect();
    let input = b.file(
        "input.json",
        &serde_json::json!({ "task": big }).to_string(),
    );
    let input = format!("@{}", input.display());
    let mut last = 0;
    for i in 0..5 {
        let name = format!("r{i}");
        let r = b.run(&[
            "run",
            lp.to_str().unwrap(),
            "--input",
            &input,
            "--name",
            &name,
        ]);
        assert_eq!(r.code, 3, "{}", r.err);
        let wal = wal_bytes(&b);
        assert!(wal > last, "run {i}: the WAL grew ({last} -> {wal} bytes)");
        last = wal;
    }
    let listed = b.run(&["runs", "list", "--format", "json"]);
    assert_eq!(listed.code, 0, "{}", listed.err);
    let listed: serde_json::Value = serde_json::from_str(&listed.out).expect("JSON");
    let runs = listed.as_array().expect("an array");
    assert_eq!(runs.len(), 5, "{listed}");
    assert!(runs.iter().all(|r| r["steps"] == 20), "{listed}");
    let wf = b.file("ask.json", ASKER);
    let r = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--name", "ask"]);
    assert_eq!(r.code, 4, "{}", r.err);
    let r = b.run(&["runs", "resume", "ask", "--answer", "yes", "--quiet"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(b.status("ask"), "completed");
    assert!(wal_bytes(&b) > last, "the WAL is kept");
}
