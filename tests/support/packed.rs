//! Packed event chunks against the text chunks of an older format, the same scenario on
//! both stores: SQLite packs from format 11 (ADR 0059, `tests/store_packed_chunks.rs`),
//! PostgreSQL from format 12 (ADR 0063, `tests/pg_packed_chunks.rs`). Each test says how
//! its store keeps a chunk and how it goes back to the older format; this runs real
//! `pactgraph` processes against it.

use serde_json::Value;

use super::cli::{ASKER, Bench};

/// A loop of `set` steps (no program, no model): many steps, a chunk a checkpoint.
pub const LOOP: &str = r#"{"workflow": "loop", "slices": {"task": {}, "result": {}},
  "budgets": {"max_steps": 40}, "entry": "boss",
  "supervisors": {"boss": {"allow": ["work"]}},
  "nodes": {"work": {"supervisor": "boss", "reads": ["task"], "writes": ["result"],
    "triggers": [{"priority": 1, "when": true}], "run": {"set": {"result": {"ok": true}}}}}}"#;

/// What the scenario needs of a store.
pub struct OldFormat<'a> {
    /// The format before chunks were packed.
    pub old: i64,
    /// How each chunk of the bench's store is kept, in key order: `packed` or `text`.
    pub kinds: &'a dyn Fn(&Bench) -> Vec<String>,
    /// The store's format now.
    pub format: &'a dyn Fn(&Bench) -> i64,
    /// Takes the bench's store back to [`OldFormat::old`]: every packed chunk unpacked into
    /// the text that format wrote, the later migrations forgotten.
    pub back: &'a dyn Fn(&Bench),
}

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

/// Proves that the store packs its chunks, and that a store written at the older format
/// (text chunks) loads, shows and watches byte for byte as it did, then takes packed
/// chunks beside its text ones when its paused run is resumed: `runs watch` of the whole
/// history is the old history followed by the new events, numbered on without a gap, and
/// `runs show --trace` of a run whose trace is put back from its chunks (checkpointed
/// every step) is the same before and after the store went back and was migrated again.
/// A cancel, which writes its chunk outside a checkpoint statement, packs it too.
pub fn old_format_loads_and_goes_on(b: &Bench, store: &OldFormat<'_>) {
    let current = pactgraph::store::STORE_FORMAT;
    let wf = b.file("ask.json", ASKER);
    let streamed = b.paused_stream(&wf, "old");
    run_loop(b);
    let shown = b.run(&["runs", "show", "loop", "--trace"]);
    assert_eq!(shown.code, 0, "{}", shown.err);
    let watched_loop = b.run(&["runs", "watch", "loop"]);
    assert_eq!(watched_loop.code, 3, "stopped: {}", watched_loop.err);
    let kinds = (store.kinds)(b);
    assert!(kinds.len() > 40, "a chunk a checkpoint: {kinds:?}");
    assert!(kinds.iter().all(|k| k == "packed"), "packed: {kinds:?}");
    assert_eq!((store.format)(b), current);

    (store.back)(b);
    assert!((store.kinds)(b).iter().all(|k| k == "text"));
    assert_eq!((store.format)(b), store.old);
    // Read as the older format wrote them (the store migrated on open, its chunks kept).
    let shown_old = b.run(&["runs", "show", "loop", "--trace"]);
    assert_eq!(shown_old.code, 0, "{}", shown_old.err);
    assert_eq!(shown_old.out, shown.out, "runs show, byte for byte");
    assert_eq!((store.format)(b), current);
    assert!((store.kinds)(b).iter().all(|k| k == "text"));
    assert_eq!(b.run(&["runs", "watch", "loop"]).out, watched_loop.out);
    let before = b.history_until_pause("old", &streamed, "the history of the older format");

    // Resumed: its new chunks are packed, beside the text ones.
    b.resume_yes("old");
    let kinds = (store.kinds)(b);
    assert!(
        kinds.iter().any(|k| k == "packed") && kinds.iter().any(|k| k == "text"),
        "{kinds:?}"
    );
    let watched = b.run(&["runs", "watch", "old"]);
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
    let packed = |b: &Bench| (store.kinds)(b).iter().filter(|k| *k == "packed").count();
    let before_cancel = packed(b);
    let cancelled = b.run(&["runs", "cancel", "gone"]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.err);
    assert_eq!(packed(b), before_cancel + 1, "the cancel's chunk, packed");
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
