//! The shipped agent workflows run end to end with `pactgraph run`, pointed at the
//! scripted Chat Completions server through `OPENAI_BASE_URL` (as the guide points them
//! at a local or hosted server): `agent_advisors_review.json` (advisors that are agents)
//! and `agent_team_review.json` (a team of agents).
#![cfg(all(feature = "cli", feature = "agents"))]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use std::path::PathBuf;

use chat_server::{ChatServer, Reply};
use serde_json::json;
use support::cli::Bench;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pactgraph")
}

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows/agents")
        .join(name)
        .to_str()
        .expect("utf-8")
        .to_string()
}

fn server_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn call(name: &str, args: serde_json::Value) -> Reply {
    Reply::tool_calls(&[("c", name, &args.to_string())])
}

/// Proves: `agent_advisors_review.json` runs: the `style` and `risk` agents report
/// through `final_report` (`risk` with a plain text reply, which an advisor without
/// writes may give), their reports open the reviewer's prompt, and the reviewer's
/// `final_report` is the decision; the run completes.
#[test]
fn the_advisors_example_runs_against_a_chat_completions_server() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([]));
    server.route(
        "You review writing style.",
        call(
            "final_report",
            json!({"report": "The second sentence is long."}),
        ),
    );
    server.route(
        "You look for risky promises",
        Reply::text("It promises a date: Monday."),
    );
    server.push(call(
        "final_report",
        json!({"decision": {"verdict": "revise", "reason": "It promises a date."}}),
    ));
    let b = Bench::new(bin());
    let r = b
        .command(&[
            "run",
            &example("agent_advisors_review.json"),
            "--name",
            "ex",
            "--input",
            r#"{"draft": {"text": "We ship Monday. It is the best product ever made, by far."}}"#,
        ])
        .env("OPENAI_BASE_URL", server.base_url())
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs");
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{err}");
    let shown = b.show("ex");
    assert_eq!(shown["run"]["status"], "completed");
    assert_eq!(shown["state"]["decision"]["verdict"], "revise");
    let reports = &shown["state"]["advice"]["reports"];
    assert_eq!(
        reports[0]["output"],
        json!({"report": "The second sentence is long."})
    );
    assert_eq!(
        reports[1]["output"],
        json!({"report": "It promises a date: Monday."})
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let prompt = requests[2].body["messages"][1]["content"]
        .as_str()
        .expect("the reviewer's prompt");
    assert!(prompt.contains(r#"agent="risk">"#), "{prompt}");
}

/// Proves: `agent_team_review.json` runs: `critic` broadcasts and stays, `editor`
/// broadcasts and leaves (`exit: true`), the chair's `final_report` is the team's
/// decision; the run completes with the team's transcript in its slice.
#[test]
fn the_team_example_runs_against_a_chat_completions_server() {
    let rt = server_rt();
    let server = rt.block_on(ChatServer::start([]));
    server.route(
        "You are the critic",
        call(
            "team_broadcast",
            json!({"message": "`best product ever` is unproven.", "exit": false}),
        ),
    );
    server.route(
        "You are the editor",
        call(
            "team_broadcast",
            json!({"message": "Say `our best release yet`.", "exit": true}),
        ),
    );
    server.route(
        "You chair a review team",
        call(
            "final_report",
            json!({"decision": {"verdict": "revise", "notes": "Drop the superlative."}}),
        ),
    );
    let b = Bench::new(bin());
    let r = b
        .command(&[
            "run",
            &example("agent_team_review.json"),
            "--name",
            "ex",
            "--input",
            r#"{"draft": {"text": "The best product ever made."}}"#,
        ])
        .env("OPENAI_BASE_URL", server.base_url())
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs");
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{err}");
    let shown = b.show("ex");
    assert_eq!(shown["run"]["status"], "completed");
    assert_eq!(
        shown["state"]["decision"],
        json!({"verdict": "revise", "notes": "Drop the superlative."})
    );
    let team = &shown["state"]["team"];
    assert_eq!(team["members"]["editor"]["status"], "exited");
    assert_eq!(team["transcript"].as_array().map(Vec::len), Some(2));
    assert_eq!(server.requests().len(), 3);
}
