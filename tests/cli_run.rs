//! `pactgraph run` and `pactgraph resume`, driven through the built binary over every
//! shipped workflow, every exit code and the failure modes of `exec` programs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workflow(name: &str) -> String {
    root()
        .join("examples/workflows")
        .join(name)
        .display()
        .to_string()
}

fn fixture(name: &str) -> String {
    root()
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn pactgraph<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        // These tests predate the run store: nothing is kept (and nothing written to the
        // checkout); tests/cli_runs.rs tests the store.
        .env("PACTGRAPH_STORE", "none")
        .args(args)
        .output()
        .expect("the binary runs")
}

struct Ran {
    code: i32,
    out: Value,
    err: String,
}

fn ran(o: Output) -> Ran {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let out = if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"))
    };
    Ran {
        code: o.status.code().expect("exited normally"),
        out,
        err,
    }
}

fn run<I, S>(args: I) -> Ran
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    ran(pactgraph(args))
}

#[test]
fn the_hierarchical_workflow_completes_through_the_fashion_subgraph() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let r = run([
        "run".as_ref(),
        workflow("fashion.json").as_ref(),
        "--input".as_ref(),
        r#"{"request": {"topic": "fashion"}}"#.as_ref(),
        "--trace-out".as_ref(),
        trace.as_os_str(),
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out["workflow"], "fashion_advisor");
    assert_eq!(r.out["status"], "completed");
    assert_eq!(r.out["termination_reason"], "stop_global");
    assert_eq!(r.out["steps"], 2);
    assert_eq!(
        r.out["state"]["fashion"],
        json!({"trend": "wide-leg trousers"})
    );
    assert_eq!(
        r.out["state"]["answer"],
        json!({"fashion": {"trend": "wide-leg trousers"}})
    );
    assert!(r.out.get("question").is_none());
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap();
    let kinds: Vec<&str> = trace
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    for k in ["decision", "call", "dispatch", "return", "end"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    // Same input, same output (timing aside: the state's trace carries timestamps).
    let again = run([
        "run",
        &workflow("fashion.json"),
        "--input",
        r#"{"request": {"topic": "fashion"}}"#,
    ]);
    assert_eq!(again.out["state"]["answer"], r.out["state"]["answer"]);
}

#[test]
fn frozen_clock_runs_are_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for i in 0..2 {
        let trace = dir.path().join(format!("trace{i}.json"));
        let o = pactgraph([
            "run".as_ref(),
            workflow("fashion.json").as_ref(),
            "--input".as_ref(),
            r#"{"request": {"topic": "fashion"}}"#.as_ref(),
            "--frozen-clock".as_ref(),
            "--trace-out".as_ref(),
            trace.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(0));
        // Every run has its own id: the output is identical but for its `run_id` line.
        let stdout: String = String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("\"run_id\""))
            .map(|l| format!("{l}\n"))
            .collect();
        outputs.push((stdout.into_bytes(), std::fs::read(&trace).unwrap()));
    }
    assert_eq!(outputs[0], outputs[1]);
    assert!(String::from_utf8_lossy(&outputs[0].1).contains("\"at_ms\": 0"));
}

#[test]
fn the_hierarchical_workflow_falls_back_to_reply_for_other_topics() {
    let r = run([
        "run",
        &workflow("fashion.json"),
        "--input",
        r#"{"request": {"topic": "cars"}}"#,
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out["status"], "completed");
    assert_eq!(
        r.out["state"]["answer"]["text"],
        "I can only help with fashion."
    );
    assert!(r.out["state"].get("fashion").is_none_or(Value::is_null));
}

#[test]
fn the_flat_yaml_workflow_runs_its_handoff_chain() {
    let r = run([
        "run",
        &workflow("support_triage.yaml"),
        "--input",
        r#"{"ticket": {"text": "charged twice"}}"#,
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out["status"], "completed");
    assert_eq!(r.out["steps"], 3);
    assert_eq!(r.out["state"]["review"], json!({"approved": true}));
}

#[test]
fn recursion_stops_at_max_depth_with_exit_3() {
    let r = run([
        "run",
        &workflow("recursive_research.json"),
        "--input",
        r#"{"question": {"q": "why"}}"#,
    ]);
    assert_eq!(r.code, 3, "{}", r.err);
    assert_eq!(r.out["status"], "stopped");
    assert_eq!(r.out["termination_reason"], "max_depth_exceeded");
    // Nothing the unfinished frames wrote reaches the root.
    assert!(
        r.out["state"].get("notes").is_none_or(Value::is_null),
        "{}",
        r.out["state"]
    );
}

#[test]
fn a_reentry_loop_stops_with_cycle_detected() {
    let r = run([
        "run",
        &workflow("reentry_loop.json"),
        "--input",
        r#"{"draft": {"text": "hi"}}"#,
    ]);
    assert_eq!(r.code, 3, "{}", r.err);
    assert_eq!(r.out["status"], "stopped");
    assert_eq!(r.out["termination_reason"], "cycle_detected");
    assert_eq!(r.out["state"]["draft"]["polished"], true);
}

#[test]
fn max_steps_on_the_command_line_overrides_the_document() {
    let r = run([
        "run",
        &workflow("fashion.json"),
        "--input",
        r#"{"request": {"topic": "fashion"}}"#,
        "--max-steps",
        "1",
    ]);
    assert_eq!(r.code, 3, "{}", r.err);
    assert_eq!(r.out["termination_reason"], "max_steps_exceeded");
}

#[test]
fn the_printed_state_and_the_saved_run_carry_the_trace_in_system() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("run.json");
    let trace = dir.path().join("trace.json");
    let r = run([
        "run".as_ref(),
        workflow("fashion.json").as_ref(),
        "--input".as_ref(),
        r#"{"request": {"topic": "fashion"}}"#.as_ref(),
        "--frozen-clock".as_ref(),
        "--full".as_ref(),
        "--state-out".as_ref(),
        state.as_os_str(),
        "--trace-out".as_ref(),
        trace.as_os_str(),
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap();
    assert!(!trace.as_array().unwrap().is_empty());
    assert_eq!(r.out["state"]["system"]["decision_trace"], trace);
    let keys: Vec<&str> = r.out["state"]["system"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["budgets", "call_stack", "steps", "decision_trace"]);
    // The saved run holds the trace once, under `run.trace`, without a projection.
    let text = std::fs::read_to_string(&state).unwrap();
    assert_eq!(text.matches("\"decision_trace\"").count(), 0);
    let saved: Value = serde_json::from_str(&text).unwrap();
    assert!(
        saved["run"]["state"]["system"]
            .get("decision_trace")
            .is_none()
    );
    assert_eq!(saved["run"]["trace"], trace);
    assert_eq!(saved["pactgraph_saved_run"], 2);
    assert!(saved["digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(saved["run_id"].as_str().unwrap().len(), 26);
}

#[test]
fn clarification_pauses_with_exit_4_and_resumes_from_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("run.json");
    let r = run([
        "run".as_ref(),
        workflow("clarification.json").as_ref(),
        "--state-out".as_ref(),
        state.as_os_str(),
    ]);
    assert_eq!(r.code, 4, "{}", r.err);
    assert_eq!(r.out["status"], "awaiting_input");
    assert_eq!(r.out["question"], "Which size do you usually wear?");
    assert!(state.exists());

    let r = run([
        "resume".as_ref(),
        state.as_os_str(),
        "--answer".as_ref(),
        "M".as_ref(),
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out["status"], "completed");
    assert_eq!(
        r.out["state"]["clarification"],
        json!({"question": "Which size do you usually wear?", "answer": "M"})
    );
    assert_eq!(
        r.out["state"]["answer"]["text"],
        "Then take the regular fit in your usual size."
    );

    // A finished run cannot be resumed.
    let r = run([
        "resume".as_ref(),
        state.as_os_str(),
        "--answer".as_ref(),
        "L".as_ref(),
    ]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("awaiting"), "{}", r.err);
}

#[test]
fn python_exec_policy_and_node_run_from_any_working_directory() {
    let other = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        // These tests predate the run store: nothing is kept (and nothing written to the
        // checkout); tests/cli_runs.rs tests the store.
        .env("PACTGRAPH_STORE", "none")
        .current_dir(other.path())
        .args([
            "run",
            &workflow("python_agent.json"),
            "--input",
            r#"{"request": {"text": "Pact graphs are strict. They check early."}}"#,
        ])
        .output()
        .unwrap();
    let r = ran(o);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out["status"], "completed");
    assert_eq!(
        r.out["state"]["summary"],
        json!({"words": 7, "first_sentence": "Pact graphs are strict", "style": "short"})
    );
}

#[test]
fn a_failing_exec_program_fails_the_run_with_its_stderr() {
    let r = run(["run", &fixture("exec_fails.json")]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert_eq!(r.out["status"], "failed");
    assert_eq!(r.out["termination_reason"], "node_failed");
    let all = format!("{}{}", r.out, r.err);
    assert!(all.contains("upstream model returned 503"), "{all}");
}

#[test]
fn a_hanging_exec_program_is_killed_at_its_timeout_and_reaped() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let o = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        // These tests predate the run store: nothing is kept (and nothing written to the
        // checkout); tests/cli_runs.rs tests the store.
        .env("PACTGRAPH_STORE", "none")
        .env("PID_FILE", &pid_file)
        .args(["run", &fixture("exec_hangs.json")])
        .output()
        .unwrap();
    let r = ran(o);
    assert_eq!(r.code, 3, "{}", r.err);
    assert_eq!(r.out["status"], "stopped");
    assert_eq!(r.out["termination_reason"], "timeout");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} outlived the run"
    );
}

#[test]
fn an_exec_program_writing_outside_its_contract_applies_nothing() {
    let r = run(["run", &fixture("exec_oversteps.json")]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert_eq!(r.out["status"], "failed");
    assert_eq!(r.out["termination_reason"], "write_boundary_violation");
    assert!(
        r.out["state"].get("out").is_none_or(Value::is_null),
        "{}",
        r.out["state"]
    );
    assert!(r.out["state"].get("secret").is_none_or(Value::is_null));
}

#[test]
fn an_invalid_workflow_is_refused_with_its_diagnostics() {
    let r = run(["run", &fixture("invalid_workflow.json")]);
    assert_eq!(r.code, 1);
    assert!(r.err.contains("undeclared"), "{}", r.err);
    assert_eq!(r.out, Value::Null, "nothing runs");
}

#[test]
fn malformed_input_is_a_usage_error_and_undeclared_slices_are_refused() {
    for bad in ["{not json", "[1, 2]", "@/no/such/file.json"] {
        let r = run(["run", &workflow("fashion.json"), "--input", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.err);
        assert!(r.err.contains("--input"), "{}", r.err);
    }
    let r = run([
        "run",
        &workflow("fashion.json"),
        "--input",
        r#"{"mystery": 1}"#,
    ]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("mystery"), "{}", r.err);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    std::fs::write(&input, r#"{"request": {"topic": "fashion"}}"#).unwrap();
    let r = run([
        "run".to_string(),
        workflow("fashion.json"),
        "--input".into(),
        format!("@{}", input.display()),
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
}

#[test]
fn usage_errors_exit_2_and_missing_files_exit_1() {
    assert_eq!(run(["run"]).code, 2);
    assert_eq!(run(["frobnicate"]).code, 2);
    assert_eq!(run(["resume", "x.json"]).code, 2, "--answer is required");
    let r = run(["run", "/no/such/workflow.json"]);
    assert_eq!(r.code, 1);
    assert!(r.err.contains("/no/such/workflow.json"), "{}", r.err);
}

#[test]
fn quiet_runs_print_only_the_result() {
    let r = run(["run", &workflow("fashion.json"), "--quiet"]);
    assert_eq!(r.code, 0);
    assert!(r.err.is_empty(), "{}", r.err);
}

#[test]
fn dot_paints_the_trace_of_a_saved_run_or_of_runs_output() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("run.json");
    let trace = dir.path().join("trace.json");
    let printed = dir.path().join("out.json");
    let o = pactgraph([
        "run".as_ref(),
        workflow("fashion.json").as_ref(),
        "--input".as_ref(),
        r#"{"request": {"topic": "fashion"}}"#.as_ref(),
        "--trace".as_ref(),
        "--state-out".as_ref(),
        state.as_os_str(),
        "--trace-out".as_ref(),
        trace.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    std::fs::write(&printed, &o.stdout).unwrap();
    let draw = |t: Option<&Path>| {
        let mut args = vec![
            std::ffi::OsString::from("dot"),
            workflow("fashion.json").into(),
        ];
        if let Some(t) = t {
            args.push("--trace".into());
            args.push(t.into());
        }
        let o = pactgraph(args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let plain = draw(None);
    let from_trace = draw(Some(&trace));
    assert_ne!(plain, from_trace, "the trace paints something");
    // The same trace, whichever file it is read from.
    assert_eq!(draw(Some(&state)), from_trace);
    assert_eq!(draw(Some(&printed)), from_trace);

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"nothing": "here"}"#).unwrap();
    let o = pactgraph([
        "dot".as_ref(),
        workflow("fashion.json").as_ref(),
        "--trace".as_ref(),
        bad.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a decision trace"));
}

#[test]
fn progress_is_drawn_on_a_terminal_only() {
    // A pty from util-linux's `script`; without it there is no terminal to test with.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("`script` is not installed: the terminal case is not checked");
        return;
    }
    let wf = workflow("fashion.json");
    let cmd = format!(
        "{} run {wf} --input '{{\"request\": {{\"topic\": \"fashion\"}}}}' >/dev/null",
        env!("CARGO_BIN_EXE_pactgraph")
    );
    let o = Command::new("script")
        .env("PACTGRAPH_STORE", "none")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&o.stdout);
    assert!(
        screen.contains("step 0 · depth 0 (root) · domain_supervisor decides"),
        "{screen}"
    );
    assert!(screen.contains("depth 1 (fashion)"), "{screen}");
    // Not a terminal: nothing on stderr.
    let r = run([
        "run",
        &wf,
        "--input",
        r#"{"request": {"topic": "fashion"}}"#,
    ]);
    assert!(r.err.is_empty(), "{}", r.err);
}
