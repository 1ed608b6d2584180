//! What `run`, `resume` and `runs resume` print: the answer first (`state` without
//! `system`), `--trace` and `--full`, and `run_id` wherever a JSON object names a run.
#![cfg(all(unix, feature = "cli"))]

mod support;

use serde_json::{Value, json};
use support::cli::{Bench, Ran, untimed};

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

fn examples(name: &str) -> String {
    format!("{}/examples/workflows/{name}", env!("CARGO_MANIFEST_DIR"))
}

const FASHION_INPUT: &str = r#"{"request": {"topic": "fashion"}}"#;

/// `run fashion.json` with `extra` flags, in a fresh bench with a SQLite store.
fn fashion(b: &Bench, extra: &[&str]) -> Ran {
    let file = examples("fashion.json");
    let mut args = vec!["run", file.as_str(), "--input", FASHION_INPUT, "--quiet"];
    args.extend_from_slice(extra);
    let r = b.run(&args);
    assert_eq!(r.code, 0, "{}", r.err);
    r
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

/// The README's main command prints under 1 KB: the summary keys, then the slices the
/// run wrote, no `system`, no trace, no accounting.
#[test]
fn run_prints_the_answer_first_in_under_a_kilobyte() {
    let b = Bench::new(BIN);
    let r = fashion(&b, &[]);
    assert!(r.out.len() < 1024, "{} bytes: {}", r.out.len(), r.out);
    let out = r.json();
    assert_eq!(
        keys(&out),
        [
            "workflow",
            "run_id",
            "status",
            "termination_reason",
            "steps",
            "state"
        ]
    );
    assert_eq!(keys(&out["state"]), ["request", "fashion", "answer"]);
    assert_eq!(
        out["state"]["answer"],
        json!({"fashion": {"trend": "wide-leg trousers"}})
    );
    // The answer is in the first lines a person reads.
    let head: Vec<&str> = r.out.lines().take(20).collect();
    assert!(head.join("\n").contains("wide-leg trousers"), "{}", r.out);
}

/// `--trace` adds the decision trace (the array `--trace-out` writes) after `state`;
/// `--full` prints the whole summary with `state.system`; `--full --trace` moves the
/// trace out of `state.system` into `trace`, so it appears once.
#[test]
fn trace_and_full_add_the_trace_and_the_system_slice() {
    let b = Bench::new(BIN);
    let trace_file = b.dir.join("trace.json");
    let trace_out = trace_file.to_str().expect("a UTF-8 path");
    let traced = fashion(&b, &["--trace", "--frozen-clock", "--trace-out", trace_out]).json();
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&trace_file).expect("the trace file"))
            .expect("JSON");
    assert_eq!(keys(&traced).last(), Some(&"trace"));
    assert_eq!(traced["trace"], written);
    assert_eq!(traced["trace"].as_array().map(Vec::len), Some(9));
    assert!(traced["state"].get("system").is_none(), "{traced:#}");

    let full = fashion(&b, &["--full", "--frozen-clock"]).json();
    assert_eq!(
        keys(&full),
        [
            "workflow",
            "run_id",
            "status",
            "termination_reason",
            "steps",
            "state",
            "accounting"
        ]
    );
    assert_eq!(
        keys(&full["state"]["system"]),
        ["budgets", "call_stack", "steps", "decision_trace"]
    );
    assert_eq!(full["state"]["system"]["decision_trace"], written);
    // Without `system`, the full state is the default one.
    let mut slices = full["state"].clone();
    slices
        .as_object_mut()
        .expect("a state")
        .shift_remove("system");
    assert_eq!(slices, traced["state"]);

    let both = fashion(&b, &["--full", "--trace", "--frozen-clock"]).json();
    assert_eq!(
        keys(&both["state"]["system"]),
        ["budgets", "call_stack", "steps"]
    );
    assert_eq!(keys(&both).last(), Some(&"trace"));
    assert_eq!(both["trace"], written);
    assert_eq!(both["accounting"], full["accounting"]);
    assert_eq!(both.to_string().matches("\"decision_trace\"").count(), 0);
}

/// `--state-out` writes the whole saved run whatever the printed shape.
#[test]
fn state_out_keeps_the_whole_run() {
    let b = Bench::new(BIN);
    let state_file = b.dir.join("saved.json");
    let state_out = state_file.to_str().expect("a UTF-8 path");
    fashion(&b, &["--state-out", state_out]);
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).expect("the saved run"))
            .expect("JSON");
    assert_eq!(
        keys(&saved["run"]["state"]["system"]),
        ["budgets", "call_stack", "steps"]
    );
    assert_eq!(saved["run"]["trace"].as_array().map(Vec::len), Some(9));
}

/// `resume STATE --answer` and `runs resume RUN --answer` print the object `run` prints,
/// and take `--trace` too.
#[test]
fn both_resumes_print_like_run() {
    let b = Bench::new(BIN);
    let file = examples("clarification.json");
    let paused = b.run(&["run", &file, "--quiet", "--name", "ask"]);
    assert_eq!(paused.code, 4, "{}", paused.err);
    let paused = paused.json();
    assert_eq!(
        keys(&paused),
        [
            "workflow",
            "run_id",
            "status",
            "termination_reason",
            "steps",
            "state",
            "question"
        ]
    );
    assert!(paused["state"].get("system").is_none(), "{paused:#}");
    let stored = b.run(&[
        "runs", "resume", "ask", "--answer", "M", "--quiet", "--trace",
    ]);
    assert_eq!(stored.code, 0, "{}", stored.err);
    let stored = stored.json();

    let saved = b.dir.join("saved.json");
    let saved_str = saved.to_str().expect("a UTF-8 path");
    let r = b.run(&[
        "run",
        &file,
        "--quiet",
        "--store",
        "none",
        "--state-out",
        saved_str,
    ]);
    assert_eq!(r.code, 4, "{}", r.err);
    let from_file = b.run(&[
        "resume", saved_str, "--answer", "M", "--quiet", "--trace", "--store", "none",
    ]);
    assert_eq!(from_file.code, 0, "{}", from_file.err);
    let from_file = from_file.json();
    for out in [&stored, &from_file] {
        assert_eq!(
            keys(out),
            [
                "workflow",
                "run_id",
                "status",
                "termination_reason",
                "steps",
                "state",
                "trace"
            ]
        );
        assert!(out["state"].get("system").is_none(), "{out:#}");
        assert_eq!(out["state"]["clarification"]["answer"], "M");
    }
    assert_eq!(untimed(&stored["state"]), untimed(&from_file["state"]));
    assert_eq!(
        stored["trace"].as_array().map(Vec::len),
        from_file["trace"].as_array().map(Vec::len)
    );
}

/// Every JSON object that names a run calls its id `run_id`: `run`, `run --detach`,
/// `runs list --format json`, `runs show --format json`.
#[test]
fn run_id_is_one_name_across_commands() {
    let b = Bench::new(BIN);
    let printed = fashion(&b, &["--name", "first"]).json();
    let id = printed["run_id"].as_str().expect("a run id").to_string();
    let file = examples("fashion.json");
    let detached = b.run(&["run", &file, "--input", FASHION_INPUT, "--detach"]);
    assert_eq!(detached.code, 0, "{}", detached.err);
    let detached = detached.json();
    assert_eq!(keys(&detached), ["run_id", "status"]);

    let list = b.run(&["runs", "list", "--format", "json"]);
    assert_eq!(list.code, 0, "{}", list.err);
    let list = list.json();
    let ids: Vec<&str> = list
        .as_array()
        .expect("an array")
        .iter()
        .map(|row| {
            assert_eq!(keys(row)[0], "run_id", "{row:#}");
            assert!(row.get("id").is_none(), "{row:#}");
            row["run_id"].as_str().expect("a run id")
        })
        .collect();
    assert_eq!(ids, [detached["run_id"].as_str().expect("an id"), &id]);

    let shown = b.run(&["runs", "show", "first", "--format", "json"]);
    assert_eq!(shown.code, 0, "{}", shown.err);
    let shown = shown.json();
    assert_eq!(shown["run"]["run_id"], id.as_str());
    assert!(shown["run"].get("id").is_none(), "{shown:#}");
}

/// Proves `pactgraph --help` shows a newcomer the two commands to start with first (`run`,
/// then `validate`), says `run`'s answer may carry `usage`, and no longer claims a run is
/// checkpointed every step (it is committed at effects by default).
#[test]
fn the_help_lists_run_and_validate_first() {
    let b = Bench::new(BIN);
    let r = b.run(&["--help"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let commands: Vec<&str> = r
        .out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        commands,
        [
            "run", "validate", "resume", "runs", "worker", "serve", "dot", "schema", "help"
        ],
        "{}",
        r.out
    );
    assert!(!r.out.contains("checkpointed every step"), "{}", r.out);
    assert!(r.out.contains("committed at each effect"), "{}", r.out);
    assert!(r.out.contains("usage?"), "{}", r.out);
}
