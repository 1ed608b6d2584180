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

#[test]
fn router_triage_validates_clean_and_runs() {
    let file = workflow("router_triage.json");
    let (code, out, err) = pactgraph(&["validate", &file, "--strict"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("0 errors, 0 warnings, 0 infos"),
        "{out}{err}"
    );
    for (text, route, answer) in [
        ("I was charged twice", "billing_reply", "billing_answer"),
        (
            "The app crashes on export",
            "investigation",
            "technical_answer",
        ),
    ] {
        let input = serde_json::json!({"ticket": {"text": text}}).to_string();
        let (code, out, err) = pactgraph(&["run", &file, "--input", &input, "--quiet"]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).expect("JSON output");
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
