//! Packed event chunks, the same scenario on both stores: SQLite keeps a packed chunk as a
//! `BLOB` value (ADR 0059, `tests/store_packed_chunks.rs`), PostgreSQL in its `packed`
//! column (ADR 0063, `tests/pg_packed_chunks.rs`). Each test says how its store keeps a
//! chunk; this runs real `pactgraph` processes against it.

use serde_json::Value;

use super::cli::{ASKER, Bench};

/// A loop of `set` steps (no program, no model): many steps, a chunk a checkpoint.
pub const LOOP: &str = r#"{"workflow": "loop", "slices": {"task": {}, "result": {}},
  "budgets": {"max_steps": 40}, "entry": "boss",
  "supervisors": {"boss": {"allow": ["work"]}},
  "nodes": {"work": {"supervisor": "boss", "reads": ["task"], "writes": ["result"],
    "triggers": [{"priority": 1, "when": true}], "run": {"set": {"result": {"ok": true}}}}}}"#;

/// Runs [`LOOP`] as `loop`, checkpointed every step (a chunk a checkpoint, and a trace a
/// load puts back from the chunks): stopped by its `max_steps`.
fn run_loop(b: &Bench) -> super::cli::Ran {
    let lp = b.file("loop.json", LOOP);
    let r = b.run(&[
        "run",
        lp.to_str().unwrap(),
        "--quiet",
        "--name",
        "loop",
        "--checkpoints",
        "steps",
    ]);
    assert_eq!(r.code, 3, "{}", r.err);
    r
}

fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Proves that the store packs its chunks (`kinds` says how each chunk of the bench's
/// store is kept, in key order: `packed` or `text`) and reads them back: a run
/// checkpointed every step (a chunk a checkpoint) shows its trace, put back from the
/// chunks, the same from another process; a paused run resumed continues its history,
/// numbered on without a gap; a cancel, which writes its chunk outside a checkpoint
/// statement, packs it too.
pub fn chunks_are_packed_and_read_back(b: &Bench, kinds: &dyn Fn(&Bench) -> Vec<String>) {
    let all_packed = |b: &Bench| {
        let kinds = kinds(b);
        assert!(kinds.iter().all(|k| k == "packed"), "packed: {kinds:?}");
        kinds.len()
    };
    let wf = b.file("ask.json", ASKER);
    let streamed = b.paused_stream(&wf, "paused");
    run_loop(b);
    let shown = b.run(&["runs", "show", "loop", "--trace"]);
    assert_eq!(shown.code, 0, "{}", shown.err);
    assert!(all_packed(b) > 40, "a chunk a checkpoint");
    let again = b.run(&["runs", "show", "loop", "--trace"]);
    assert_eq!(again.out, shown.out, "runs show, byte for byte");
    let watched_loop = b.run(&["runs", "watch", "loop"]);
    assert_eq!(watched_loop.code, 3, "stopped: {}", watched_loop.err);
    let before = b.history_until_pause("paused", &streamed, "the history kept");

    // Resumed: its new chunks are packed, its history continued.
    b.resume_yes("paused");
    all_packed(b);
    let watched = b.run(&["runs", "watch", "paused"]);
    assert_eq!(watched.code, 0, "{}", watched.err);
    assert!(watched.out.starts_with(&before.out), "the history is kept");
    let events = lines(&watched.out);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "numbered on without a gap");
    }
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(&names[names.len() - 2..], ["run_ended", "checkpoint"]);

    // A cancel writes its chunk outside a checkpoint statement: packed too, read back.
    let r = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--name", "gone"]);
    assert_eq!(r.code, 4, "{}", r.err);
    let before_cancel = all_packed(b);
    let cancelled = b.run(&["runs", "cancel", "gone"]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.err);
    assert_eq!(
        all_packed(b),
        before_cancel + 1,
        "the cancel's chunk, packed"
    );
    let watched = b.run(&["runs", "watch", "gone"]);
    assert_eq!(watched.code, 3, "stopped: {}", watched.err);
    let events = lines(&watched.out);
    assert!(
        events.iter().any(|e| e["event"] == "run_ended"),
        "{}",
        watched.out
    );
}

/// Proves a packed chunk that does not unpack is reported as corrupt, naming the run and
/// the events, by `runs watch` and by `runs show --trace` (a load), not a panic nor a
/// silent gap: `damage` cuts every packed chunk of the bench's store after its length.
pub fn a_damaged_chunk_is_named(b: &Bench, damage: &dyn Fn(&Bench)) {
    let r = run_loop(b);
    damage(b);
    let run_id = r.json()["run_id"].as_str().unwrap().to_string();
    for args in [
        &["runs", "watch", "loop"][..],
        &["runs", "show", "loop", "--trace"],
    ] {
        let ran = b.run(args);
        assert_eq!(ran.code, 1, "{args:?}: {}", ran.err);
        assert!(ran.err.contains(&run_id), "{args:?}: {}", ran.err);
        assert!(ran.err.contains("packed events"), "{args:?}: {}", ran.err);
    }
}
