//! The shipped pattern workflows validate with no diagnostics and run end to end with
//! their Python programs (from another working directory, as a user would).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn workflow(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows")
        .join(name)
        .display()
        .to_string()
}

/// `validate FILE --strict`: exit 0 and a summary containing `summary`.
fn validates_clean(file: &str, summary: &str) {
    let (code, out, err) = pactgraph(&["validate", file, "--strict"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(format!("{out}{err}").contains(summary), "{out}{err}");
}

/// `run FILE --input INPUT --quiet` (plus `extra`): exit 0; the printed result.
fn runs(file: &str, input: &str, extra: &[&str]) -> Value {
    let mut args = vec!["run", file];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--input", input, "--quiet"]);
    let (code, out, err) = pactgraph(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("JSON output")
}

/// Runs the binary in a fresh temporary directory; returns exit code, stdout and stderr.
fn pactgraph(args: &[&str]) -> (i32, String, String) {
    let cwd = tempfile::tempdir().expect("a temp dir");
    let o = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .current_dir(cwd.path())
        .args(args)
        .output()
        .expect("the binary runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn advisors_review_validates_clean_and_runs() {
    let file = workflow("advisors_review.json");
    let (code, out, err) = pactgraph(&["validate", &file]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("0 errors, 0 warnings, 0 infos"),
        "{out}{err}"
    );

    let (code, out, err) = pactgraph(&[
        "run",
        &file,
        "--input",
        r#"{"draft": {"text": "We are pleased to announce that the new release ships next week with many fixes."}}"#,
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON output");
    assert_eq!(v["status"], "completed");
    let decision = &v["state"]["decision"];
    assert_eq!(
        decision["advisors_heard"],
        serde_json::json!(["style", "compliance", "latency"])
    );
    assert_eq!(decision["usable"], serde_json::json!(["style"]));
    assert_eq!(
        decision["failed"],
        serde_json::json!({"compliance": "failed", "latency": "timeout"})
    );
    let reports = v["state"]["advice"]["reports"].as_array().expect("reports");
    assert!(
        reports[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("the style guide service is down")),
        "{reports:#?}"
    );
}

/// The advisors picture: one dashed `advice` edge from each advisor to its primary, in
/// DOT and Mermaid; with a run's trace laid over it, each advice edge is numbered in the
/// order the reports were recorded.
#[test]
fn advisors_are_drawn_as_advice_edges_and_painted_by_the_trace() {
    let file = workflow("advisors_review.json");
    let (code, dot, err) = pactgraph(&["dot", &file]);
    assert_eq!(code, 0, "{err}");
    for m in ["style", "compliance", "latency"] {
        let edge = format!("\"{m}\" -> \"reviewer\" [style=dashed, label=\"advice\"]");
        assert!(dot.contains(&edge), "{edge} missing in\n{dot}");
    }
    let (code, mermaid, err) = pactgraph(&["dot", &file, "--mermaid"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(mermaid.matches("-.->|\"advice\"|").count(), 3, "{mermaid}");

    let dir = tempfile::tempdir().expect("a temp dir");
    let trace = dir.path().join("trace.json");
    let (code, _, err) = pactgraph(&[
        "run",
        &file,
        "--input",
        r#"{"draft": {"text": "Short draft."}}"#,
        "--quiet",
        "--trace-out",
        &trace.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, painted, err) = pactgraph(&["dot", &file, "--trace", &trace.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    // The three reports are transitions 1, 2 and 3; the reviewer's dispatch is 4.
    for (m, n) in [("style", 1), ("compliance", 2), ("latency", 3)] {
        let line = painted
            .lines()
            .find(|l| l.contains(&format!("\"{m}\" -> \"reviewer\"")))
            .unwrap_or_default();
        assert!(line.contains(&format!("label=\"advice\\n{n}\"")), "{line}");
    }
    assert!(
        painted.contains("\"desk\" -> \"reviewer\" [style=solid, color=\"#d62728\", fontcolor=\"#d62728\", penwidth=2.5, label=\"4\"]"),
        "{painted}"
    );
}

#[test]
fn router_triage_validates_clean_and_runs() {
    let file = workflow("router_triage.json");
    validates_clean(&file, "0 errors, 0 warnings, 0 infos");
    for (text, route, answer) in [
        ("I was charged twice", "billing_reply", "billing_answer"),
        (
            "The app crashes on export",
            "investigation",
            "technical_answer",
        ),
    ] {
        let input = serde_json::json!({"ticket": {"text": text}}).to_string();
        let v = runs(&file, &input, &["--full"]);
        assert_eq!(v["status"], "completed");
        let state = &v["state"];
        assert!(state[answer]["text"].is_string(), "{state:#}");
        assert_eq!(state["route_note"]["router"], "triage");
        assert_eq!(state["closed"], true);
        let routed = state["system"]["decision_trace"]
            .as_array()
            .expect("a trace")
            .iter()
            .any(|i| i["reason"] == format!("$route: {route}"));
        assert!(routed, "{state:#}");
    }
}

/// The clarify example: the editor calls the research subgraph (`chat: true`), asks the
/// finished child a follow-up (its default), and a draft -> polish chain writes the
/// answer. Every Python node reports `$usage`: the accounting rolls `draft` up to `polish`
/// and sums the subgraph's two runs under `research`.
#[test]
fn clarify_child_validates_clean_runs_and_accounts() {
    let file = workflow("clarify_child.json");
    validates_clean(&file, "0 errors, 0 warnings");

    let v = runs(
        &file,
        r#"{"question": {"text": "When is high tide in the harbour tomorrow?"}}"#,
        &["--store", "none", "--full"],
    );
    assert_eq!(v["status"], "completed");
    assert_eq!(
        v["state"]["report"]["followup"]["answer"],
        "tide tables: high tide at 06:40"
    );
    assert_eq!(v["state"]["report"]["followup"]["asked_by"], "editor");
    let trace = v["state"]["system"]["decision_trace"]
        .as_array()
        .or_else(|| v["trace"].as_array())
        .expect("a trace");
    assert_eq!(trace.iter().filter(|i| i["kind"] == "clarify").count(), 1);
    let acct = &v["accounting"];
    assert_eq!(acct["total"]["input_tokens"], 308);
    assert_eq!(acct["total"]["output_tokens"], 155);
    assert_eq!(acct["by_subgraph"]["research"]["input_tokens"], 138);
    assert_eq!(acct["by_owner"]["polish"]["input_tokens"], 170);
    assert!(acct["by_owner"].get("draft").is_none(), "{acct:#}");
    assert!(acct["by_node"]["draft"]["wall_ms"].is_number());
}

/// The team example: clean under `--strict`, and a run (no store) reaches the lead's
/// decision in two cycles, `editor` leaving after its first turn, every turn reporting
/// its usage on a `team_turn` item that names the team node.
#[test]
fn team_review_validates_clean_and_runs() {
    let file = workflow("team_review.json");
    validates_clean(&file, "0 errors, 0 warnings, 0 infos");
    let v = runs(
        &file,
        r#"{"draft": {"text": "Ship it next week."}}"#,
        &["--store", "none", "--full"],
    );
    assert_eq!(v["status"], "completed");
    assert_eq!(v["steps"], 5);
    let state = &v["state"];
    assert_eq!(state["decision"]["verdict"], "approve with a date");
    assert_eq!(
        state["team"]["members"],
        serde_json::json!({"critic": {"status": "cancelled", "turns": 2},
                           "editor": {"status": "exited", "turns": 1}})
    );
    assert_eq!(state["team"]["lead_turns"], 2);
    let cycles: Vec<u64> = state["team"]["transcript"]
        .as_array()
        .expect("a transcript")
        .iter()
        .filter_map(|b| b["cycle"].as_u64())
        .collect();
    assert_eq!(cycles, [1, 1, 1, 2]);
    let turns: Vec<&Value> = state["system"]["decision_trace"]
        .as_array()
        .expect("a trace")
        .iter()
        .filter(|i| i["kind"] == "team_turn")
        .collect();
    assert_eq!(turns.len(), 5);
    assert!(
        turns
            .iter()
            .all(|i| i["source"] == "review" && i["usage"]["output_tokens"].is_u64()),
        "{turns:#?}"
    );
}
