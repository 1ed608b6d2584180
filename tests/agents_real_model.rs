//! The shipped agent examples run by `pactgraph run` against a real OpenAI-compatible
//! server: the one at `PACTGRAPH_MODEL_URL` (`.ci/model-server start DIR PORT` prints it:
//! llama-cpp-python's server with SmolLM2-135M-Instruct). A 135M model answers badly, so
//! this checks shape, not meaning: each run ends in a defined status (`completed`, or
//! `failed` with `agent_no_exit` when the model never gave a valid exit), never
//! `model_error` (the protocol worked) and never a crash; every model call is a
//! `model_call` step whose usage is recorded (tokens) or marked unknown; the node's exit, when
//! it made one, passed validation (the written slice fits its schema, checked here again).
//!
//! The examples are copied into a temporary folder with `max_tokens` added to the model's
//! `params` (the small model otherwise talks for minutes at 15-20 tokens a second).
//! Without `PACTGRAPH_MODEL_URL` each test is skipped with a line on stderr, unless `CI` is
//! `true`: then it fails (CI must talk to a real model).
#![cfg(feature = "agents")]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

fn model_url() -> Option<String> {
    match std::env::var("PACTGRAPH_MODEL_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "CI=true but PACTGRAPH_MODEL_URL is not set: start .ci/model-server"
            );
            eprintln!("PACTGRAPH_MODEL_URL is not set: the real-model examples are skipped");
            None
        }
    }
}

/// `examples/workflows/agents/NAME.json` and its programs, copied into `dir`, with
/// `max_tokens` in every model's params: the copy's path.
fn example(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows/agents");
    for entry in std::fs::read_dir(&src).expect("the agent examples folder") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "py") {
            std::fs::copy(&path, dir.join(path.file_name().expect("a file name")))
                .expect("copies a program");
        }
    }
    let text = std::fs::read_to_string(src.join(format!("{name}.json"))).expect("the example");
    let mut doc: Value = serde_json::from_str(&text).expect("the example is JSON");
    for model in doc["models"]
        .as_object_mut()
        .expect("the example has models")
        .values_mut()
    {
        model["params"]["max_tokens"] = json!(96);
    }
    let out = dir.join(format!("{name}.json"));
    std::fs::write(&out, serde_json::to_string_pretty(&doc).expect("JSON")).expect("writes");
    out
}

/// Runs `file` with `input` against the model at `url` (no store, the whole state and the
/// trace printed): the printed outcome.
fn run(url: &str, file: &Path, input: Value) -> Value {
    let out = Command::new(BIN)
        .args([
            "run",
            file.to_str().expect("a UTF-8 path"),
            "--store",
            "none",
        ])
        .args(["--input", &input.to_string(), "--full", "--trace"])
        .current_dir(file.parent().expect("a folder"))
        .env("OPENAI_BASE_URL", url)
        .env("PACTGRAPH_MODEL", "smollm2")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("pactgraph runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "exit {code:?} (0 completed, 1 failed)\nstdout: {stdout}\nstderr: {stderr}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\nstderr: {stderr}"))
}

/// The first value under `key` anywhere in `v`.
fn find<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|x| find(x, key))),
        Value::Array(items) => items.iter().find_map(|x| find(x, key)),
        _ => None,
    }
}

/// The checks every run gets: a defined end, and every model call a `model_call` step
/// with its usage recorded or marked unknown. Returns the model calls.
fn check_shape(outcome: &Value) -> Vec<Value> {
    let status = outcome["status"].as_str().unwrap_or_default();
    let reason = outcome["termination_reason"].as_str().unwrap_or_default();
    assert!(
        status == "completed" || (status == "failed" && reason == "agent_no_exit"),
        "a defined end (completed, or failed with agent_no_exit), not {status}/{reason}: {outcome:#}"
    );
    let trace = outcome["trace"]
        .as_array()
        .expect("--trace prints the trace");
    let calls: Vec<Value> = trace
        .iter()
        .filter(|i| i["kind"] == "model_call")
        .cloned()
        .collect();
    assert!(!calls.is_empty(), "the model was called: {outcome:#}");
    for call in &calls {
        let text = call.to_string();
        let counted = find(call, "input_tokens").is_some_and(|n| n.as_u64() > Some(0));
        assert!(
            counted || text.contains("usage unknown"),
            "a model call's usage is recorded or marked unknown: {call:#}"
        );
    }
    calls
}

/// The node with `final_report` and a tool: the tool program, when the model called it,
/// ran as a `tool_call` step; a completed run's `reply` fits its schema.
#[test]
fn the_tool_call_example_ends_in_a_defined_status_against_a_real_model() {
    let Some(url) = model_url() else { return };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = example(dir.path(), "agent_tool_call");
    let outcome = run(
        &url,
        &file,
        json!({"request": {"text": "Where is my order A-1042?", "customer": "Ada"}}),
    );
    let calls = check_shape(&outcome);
    eprintln!(
        "agent_tool_call: {} ({} model calls, {} tool calls)",
        outcome["status"],
        calls.len(),
        outcome["trace"]
            .as_array()
            .map_or(0, |t| t.iter().filter(|i| i["kind"] == "tool_call").count())
    );
    if outcome["status"] == "completed" {
        let reply = &outcome["state"]["reply"];
        assert!(
            reply["text"].is_string() && reply["order_status"].is_string(),
            "final_report's arguments were validated against the slice's schema: {reply}"
        );
    }
}

/// The router agent: it exits through `handoff_to` (one of the destinations, validated)
/// and the destination answers through `final_report`, or the run ends `agent_no_exit`.
#[test]
fn the_router_example_ends_in_a_defined_status_against_a_real_model() {
    let Some(url) = model_url() else { return };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = example(dir.path(), "agent_router_triage");
    let outcome = run(
        &url,
        &file,
        json!({"ticket": {"text": "I was charged twice for my subscription this month."}}),
    );
    let calls = check_shape(&outcome);
    eprintln!(
        "agent_router_triage: {} / {} ({} model calls)",
        outcome["status"],
        outcome["termination_reason"],
        calls.len()
    );
    if outcome["status"] == "completed" {
        assert!(
            outcome["state"]["answer"]["text"].is_string(),
            "a destination answered through final_report: {outcome:#}"
        );
        let routed: Vec<&str> = outcome["trace"]
            .as_array()
            .expect("a trace")
            .iter()
            .flat_map(|i| [i["source"].as_str(), i["target"].as_str()])
            .flatten()
            .filter(|n| *n == "billing" || *n == "technical")
            .collect();
        assert!(
            !routed.is_empty(),
            "handoff_to named a destination: {outcome:#}"
        );
    }
}

/// The supervisor's policy agent: each decision's model call is a `model_call` step of
/// the supervisor, and every `decision` it took is one of `route`'s enum (validated);
/// the run ends completed, `agent_no_exit`, or stopped by `max_steps` (a small model may
/// keep choosing `research`).
#[test]
fn the_supervisor_policy_example_ends_in_a_defined_status_against_a_real_model() {
    let Some(url) = model_url() else { return };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = example(dir.path(), "agent_supervisor_policy");
    let outcome = run(
        &url,
        &file,
        json!({"question": {"text": "Why is the sky blue?"}}),
    );
    let status = outcome["status"].as_str().unwrap_or_default();
    let reason = outcome["termination_reason"].as_str().unwrap_or_default();
    assert!(
        status == "completed"
            || (status == "failed" && reason == "agent_no_exit")
            || (status == "stopped" && reason == "max_steps_exceeded"),
        "a defined end, not {status}/{reason}: {outcome:#}"
    );
    let trace = outcome["trace"]
        .as_array()
        .expect("--trace prints the trace");
    let by_policy = trace
        .iter()
        .filter(|i| i["kind"] == "model_call" && i["source"] == "editor_in_chief")
        .count();
    assert!(by_policy > 0, "the policy agent was called: {outcome:#}");
    for d in trace.iter().filter(|i| i["kind"] == "decision") {
        let target = d["target"].as_str().unwrap_or_default();
        assert!(
            ["research", "write", "stop_local", "stop_global"].contains(&target),
            "a decision from route's enum: {d:#}"
        );
    }
    eprintln!("agent_supervisor_policy: {status}/{reason} ({by_policy} policy model calls)");
}

/// The agent tool: the writer's session, and the researcher's when the writer called it,
/// end in a defined status; a completed run's answer fits its schema.
#[test]
fn the_subagent_tool_example_ends_in_a_defined_status_against_a_real_model() {
    let Some(url) = model_url() else { return };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = example(dir.path(), "agent_subagent_tool");
    let outcome = run(
        &url,
        &file,
        json!({"question": {"text": "Why is the sky blue?"}}),
    );
    let calls = check_shape(&outcome);
    eprintln!(
        "agent_subagent_tool: {} ({} model calls)",
        outcome["status"],
        calls.len()
    );
    if outcome["status"] == "completed" {
        assert!(
            outcome["state"]["answer"]["text"].is_string(),
            "{outcome:#}"
        );
    }
}
