//! `pactgraph serve` over real HTTP on loopback, on both stores: every route of the API
//! (docs/spec/http-api.md) and every error status, runs started through the API and
//! finished by the server's own workers, resumed with an answer and cancelled.
#![cfg(feature = "store")]

mod serve_support;
mod support;

use std::time::Duration;

use serde_json::{Value, json};
use serve_support::{ASKER, Server, request};
use support::cli::{Bench, EMIT, FAIL, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// Starts a ticker run through the API: its id.
fn start(s: &Server, body: &Value) -> String {
    let r = s.call("POST", "/api/runs", Some(body));
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    // Queued; a worker of the server may have taken it before the answer was written.
    assert!(
        ["queued", "running", "completed"].contains(&v["status"].as_str().unwrap_or("")),
        "{v}"
    );
    v["run_id"].as_str().expect("run_id").to_string()
}

/// Proves a run started through the API is queued, taken by the embedded worker and
/// completed, and that the runs, workflows and graph routes show it as the CLI does.
#[test]
fn a_run_started_through_the_api_is_finished_by_the_embedded_worker() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("ticker.json", &ticker_json(3, 20));
        b.file("asker.json", ASKER);
        b.file(
            "broken.json",
            r#"{"workflow": "broken", "entry": "nowhere"}"#,
        );
        let s = Server::start(&b, "serve", &["--workers", "2", "--poll", "20ms"]);

        // Workflows: each document by its `workflow` name, valid or not.
        let list = s.get("/api/workflows");
        assert_eq!(list.status, 200);
        let list = list.json();
        let names: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["name"].as_str())
            .collect();
        assert_eq!(names, ["asker", "broken", "ticker"], "{list}");
        let broken = list
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == "broken")
            .unwrap();
        assert_eq!(broken["valid"], false);
        assert!(
            !broken["diagnostics"].as_array().unwrap().is_empty(),
            "{broken}"
        );
        let ticker = s.get("/api/workflows/ticker").json();
        assert_eq!(ticker["valid"], true);
        assert_eq!(ticker["file"], "ticker.json");
        assert_eq!(ticker["document"]["workflow"], "ticker");

        let id = start(
            &s,
            &json!({"workflow": "ticker", "input": {"n": 0}, "name": "first"}),
        );
        // Released too: the comparison with `runs show` below includes the owner.
        let shown = s.wait_released(&id, "completed");
        assert_eq!(shown["run"]["steps"], 3, "{shown}");
        assert_eq!(shown["run"]["name"], "first");
        // As `runs show --format json`, byte for byte but for the times.
        let cli = b.run(&["runs", "show", &id, "--format", "json"]).json();
        assert_eq!(shown, cli);

        // Trace, state, messages.
        let trace = s.get(&format!("/api/runs/{id}/trace")).json();
        assert!(trace.as_array().is_some_and(|t| t.len() >= 3), "{trace}");
        let state = s.get("/api/runs/first/state").json();
        assert_eq!(state["n"], 3, "{state}");
        assert_eq!(state["done"], true);
        let messages = s.get(&format!("/api/runs/{id}/messages")).json();
        // A run without agent nodes has no sessions.
        assert_eq!(messages["sessions"], json!([]));
        assert_eq!(messages["run_id"], json!(id));

        // The graph with the run's path, as DOT and SVG.
        let dot = s.get(&format!("/api/workflows/ticker/graph.dot?run={id}"));
        assert_eq!(dot.status, 200);
        assert!(
            dot.header("content-type")
                .unwrap()
                .starts_with("text/vnd.graphviz")
        );
        let plain = s.get("/api/workflows/ticker/graph.dot").text();
        assert!(plain.starts_with("digraph"), "{plain}");
        assert_ne!(dot.text(), plain, "the run's path is painted");
        let svg = s.get(&format!("/api/workflows/ticker/graph.svg?run={id}"));
        assert_eq!(svg.status, 200, "{}", svg.text());
        assert_eq!(svg.header("content-type"), Some("image/svg+xml"));
        assert!(svg.text().contains("<svg"), "{}", svg.text());

        // The list, filtered and paged, as `runs list --format json`.
        let second = start(&s, &json!({"workflow": "ticker", "input": {"n": 1}}));
        s.wait_status(&second, "completed");
        let all = s.get("/api/runs").json();
        let cli = b.run(&["runs", "list", "--format", "json"]).json();
        assert_eq!(all["runs"], cli);
        assert_eq!(all["next_before"], Value::Null);
        let page = s.get("/api/runs?limit=1").json();
        assert_eq!(page["runs"].as_array().unwrap().len(), 1);
        assert_eq!(page["runs"][0]["run_id"], second.as_str());
        assert_eq!(page["next_before"], second.as_str());
        let next = s.get(&format!("/api/runs?limit=1&before={second}")).json();
        assert_eq!(next["runs"][0]["run_id"], id.as_str());
        let done = s.get("/api/runs?status=completed&workflow=ticker").json();
        assert_eq!(done["runs"].as_array().unwrap().len(), 2);
        let none = s.get("/api/runs?workflow=asker").json();
        assert_eq!(none["runs"], json!([]));

        // Liveness and metrics.
        let health = s.get("/healthz");
        assert_eq!(health.status, 200);
        assert_eq!(health.json()["status"], "ok");
        let metrics = s.get("/metrics");
        assert_eq!(metrics.status, 200);
        let text = metrics.text();
        assert!(
            text.contains("pactgraph_runs{status=\"completed\"} 2"),
            "{text}"
        );
        assert!(text.contains("pactgraph_steps_total 5"), "{text}");
        assert!(
            text.contains("pactgraph_step_duration_seconds_count 5"),
            "{text}"
        );
        assert!(
            text.contains("pactgraph_model_tokens_total{direction=\"input\"} 0"),
            "{text}"
        );
        assert!(text.contains("pactgraph_model_cost_usd_total 0"), "{text}");
        // Every response carries a request id, and the log names it.
        let rid = health
            .header("x-request-id")
            .expect("a request id")
            .to_string();
        assert!(
            s.wait_until(Duration::from_secs(5), || s.log().contains(&rid)),
            "{}",
            s.log()
        );
    }
}

/// Proves a paused run is resumed with its answer (and refused without one, or when
/// completed), and that cancel stops a queued run at once and refuses an ended one.
#[test]
fn resume_and_cancel_as_the_commands() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("asker.json", ASKER);
        b.file("ticker.json", &ticker_json(2, 20));
        // No workers: runs stay queued until resumed through the API.
        let s = Server::start(&b, "serve", &[]);
        let r = b.run(&[
            "run",
            b.dir.join("asker.json").to_str().unwrap(),
            "--quiet",
            "--name",
            "ask",
        ]);
        assert_eq!(r.code, 4, "{}", r.err);
        let shown = s.get("/api/runs/ask").json();
        assert_eq!(shown["run"]["status"], "awaiting_input");
        assert_eq!(shown["question"], "which?");

        let no_answer = s.call("POST", "/api/runs/ask/resume", Some(&json!({})));
        assert_eq!(no_answer.status, 400, "{}", no_answer.text());
        assert!(no_answer.text().contains("answer"));
        let resumed = s.call(
            "POST",
            "/api/runs/ask/resume",
            Some(&json!({"answer": "blue"})),
        );
        assert_eq!(resumed.status, 202, "{}", resumed.text());
        let done = s.wait_status("ask", "completed");
        assert_eq!(done["run"]["status"], "completed");
        let state = s.get("/api/runs/ask/state").json();
        assert_eq!(state["clarification"], 1, "{state}");
        let again = s.call(
            "POST",
            "/api/runs/ask/resume",
            Some(&json!({"answer": "red"})),
        );
        assert_eq!(again.status, 409, "{}", again.text());
        assert_eq!(again.error_code(), "conflict");
        assert!(again.text().contains("completed"));

        // A queued run (no workers) is cancelled at once; then cancel is refused.
        let id = start(&s, &json!({"workflow": "ticker", "input": {}}));
        let cancelled = s.call("POST", &format!("/api/runs/{id}/cancel"), None);
        assert_eq!(cancelled.status, 200, "{}", cancelled.text());
        assert_eq!(cancelled.json()["status"], "stopped");
        let shown = s.get(&format!("/api/runs/{id}")).json();
        assert_eq!(shown["run"]["termination_reason"], "cancelled");
        let twice = s.call("POST", &format!("/api/runs/{id}/cancel"), None);
        assert_eq!(twice.status, 409, "{}", twice.text());
        let resume_cancelled = s.call("POST", &format!("/api/runs/{id}/resume"), Some(&json!({})));
        assert_eq!(resume_cancelled.status, 409);

        // A queued run resumed through the API is driven by the server.
        let queued = start(&s, &json!({"workflow": "ticker"}));
        let r = s.call("POST", &format!("/api/runs/{queued}/resume"), None);
        assert_eq!(r.status, 202, "{}", r.text());
        s.wait_status(&queued, "completed");
    }
}

/// Proves each error has its status and `{"error": {"code", "message"}}`: 400 for bad
/// JSON, unknown fields, bad queries and an invalid input (with diagnostics), 404 for
/// unknown runs, workflows and paths, 409 for a name taken, 413 for a body too large,
/// 501 for an SVG without Graphviz.
#[test]
fn every_error_status_with_a_json_body() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(2, 20));
    b.file(
        "broken.json",
        r#"{"workflow": "broken", "entry": "nowhere"}"#,
    );
    let s = Server::start(&b, "serve", &["--max-body", "1KB"]);
    let post = |path: &str, body: &str| {
        request(
            &s.addr,
            "POST",
            path,
            &[("Content-Type", "application/json")],
            Some(body.as_bytes()),
        )
    };
    let cases: Vec<(serve_support::Resp, u16, &str)> = vec![
        (post("/api/runs", "{\"workflow\": "), 400, "bad_json"),
        (
            post("/api/runs", "{\"workflow\": \"ticker\",  "),
            400,
            "bad_json",
        ),
        (post("/api/runs", "[1, 2]"), 400, "bad_request"),
        (
            post("/api/runs", r#"{"workflow": "ticker", "colour": "red"}"#),
            400,
            "bad_request",
        ),
        (post("/api/runs", r#"{"workflow": 7}"#), 400, "bad_request"),
        (
            post(
                "/api/runs",
                r#"{"workflow": "ticker", "input": {"nope": 1}}"#,
            ),
            400,
            "invalid_input",
        ),
        (
            post("/api/runs", r#"{"workflow": "ticker", "input": [1]}"#),
            400,
            "invalid_input",
        ),
        (
            post("/api/runs", r#"{"workflow": "ticker", "ttl": "soon"}"#),
            400,
            "bad_request",
        ),
        (
            post("/api/runs", r#"{"workflow": "broken"}"#),
            400,
            "invalid_workflow",
        ),
        (
            post("/api/runs", r#"{"workflow": "nowhere"}"#),
            404,
            "unknown_workflow",
        ),
        (
            post(
                "/api/runs",
                r#"{"workflow": "ticker", "after": ["01ZZZZZZZZZZZZZZZZZZZZZZZZ"]}"#,
            ),
            404,
            "unknown_run",
        ),
        (post("/api/runs/nosuchrun/resume", "{}"), 404, "unknown_run"),
        (post("/api/runs/nosuchrun/cancel", ""), 404, "unknown_run"),
        (s.get("/api/runs/nosuchrun"), 404, "unknown_run"),
        (s.get("/api/runs/nosuchrun/trace"), 404, "unknown_run"),
        (s.get("/api/runs/nosuchrun/events"), 404, "unknown_run"),
        (s.get("/api/workflows/nowhere"), 404, "unknown_workflow"),
        (
            s.get("/api/workflows/nowhere/graph.dot"),
            404,
            "unknown_workflow",
        ),
        (s.get("/api/nothing/here"), 404, "unknown_path"),
        (s.get("/nothing"), 404, "unknown_path"),
        (
            request(&s.addr, "DELETE", "/api/runs", &[], None),
            405,
            "method_not_allowed",
        ),
        (
            request(&s.addr, "POST", "/healthz", &[], None),
            405,
            "method_not_allowed",
        ),
        (s.get("/api/runs?status=sleeping"), 400, "bad_query"),
        (s.get("/api/runs?limit=0"), 400, "bad_query"),
        (s.get("/api/runs?limit=many"), 400, "bad_query"),
        (s.get("/api/runs?before=xyz"), 400, "bad_query"),
        (s.get("/api/runs?colour=red"), 400, "bad_query"),
        (
            post(
                "/api/runs",
                &format!("{{\"workflow\": \"{}\"}}", "x".repeat(2000)),
            ),
            413,
            "body_too_large",
        ),
    ];
    for (i, (resp, status, code)) in cases.iter().enumerate() {
        assert_eq!(resp.status, *status, "case {i}: {}", resp.text());
        assert_eq!(resp.error_code(), *code, "case {i}: {}", resp.text());
    }
    // The invalid input carries the diagnostics, naming where.
    let bad = post(
        "/api/runs",
        r#"{"workflow": "ticker", "input": {"nope": 1}}"#,
    )
    .json();
    assert_eq!(bad["error"]["diagnostics"][0]["pointer"], "/input");
    assert!(bad["error"]["message"].as_str().unwrap().contains("nope"));
    let broken = post("/api/runs", r#"{"workflow": "broken"}"#).json();
    assert!(
        !broken["error"]["diagnostics"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // The unknown field is named.
    let unknown = post("/api/runs", r#"{"workflow": "ticker", "colour": "red"}"#).json();
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("colour"),
        "{unknown}"
    );
    // A name taken: 409.
    start(&s, &json!({"workflow": "ticker", "name": "once"}));
    let taken = s.call(
        "POST",
        "/api/runs",
        Some(&json!({"workflow": "ticker", "name": "once"})),
    );
    assert_eq!(taken.status, 409, "{}", taken.text());
    // A run of another workflow over this graph: 400.
    let id = start(&s, &json!({"workflow": "ticker"}));
    b.file(
        "other.json",
        &ticker_json(2, 20).replace("\"ticker\"", "\"other\""),
    );
    let other = s.get(&format!("/api/workflows/other/graph.dot?run={id}"));
    assert_eq!(other.status, 400, "{}", other.text());
    drop(s);

    // Without Graphviz on PATH: 501 for SVG, DOT still served.
    let s = Server::start_with(&b, "nodot", &[], &[("PATH", "/nonexistent")]);
    let svg = s.get("/api/workflows/ticker/graph.svg");
    assert_eq!(svg.status, 501, "{}", svg.text());
    assert_eq!(svg.error_code(), "not_implemented");
    assert_eq!(s.get("/api/workflows/ticker/graph.dot").status, 200);
}

/// Proves `POST /api/runs` takes `run`'s dependency options: after a failed run A, a run
/// with `on_dep_failure: continue`, `dep_result` and `dep_timeout` runs and finds A's
/// failure in its result slice (its dependencies show the policy, slice and deadline),
/// one with the defaults fails with `dependency_failed` before any step; and that each
/// option is checked with a 400 naming it (a bad policy, duration or slice, an option
/// without `after`), nothing stored.
#[test]
fn post_runs_takes_the_dependency_options_of_run() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("emit.json", EMIT);
        b.file("fail.json", FAIL);
        let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
        let a = start(&s, &json!({"workflow": "fail"}));
        let before = s.get("/api/runs?all=true").json()["runs"]
            .as_array()
            .unwrap()
            .len();
        for (body, field) in [
            (
                json!({"workflow": "emit", "dep_result": "deps"}),
                "dep_result",
            ),
            (
                json!({"workflow": "emit", "dep_timeout": "1h"}),
                "dep_timeout",
            ),
            (
                json!({"workflow": "emit", "on_dep_failure": "continue"}),
                "on_dep_failure",
            ),
            (
                json!({"workflow": "emit", "after": [a], "on_dep_failure": "maybe"}),
                "on_dep_failure `maybe`",
            ),
            (
                json!({"workflow": "emit", "after": [a], "dep_timeout": "soon"}),
                "dep_timeout `soon`",
            ),
            (
                json!({"workflow": "emit", "after": [a], "dep_result": "nowhere"}),
                "dep_result `nowhere`",
            ),
        ] {
            let r = s.call("POST", "/api/runs", Some(&body));
            assert_eq!(r.status, 400, "{body}: {}", r.text());
            assert_eq!(r.error_code(), "bad_request", "{body}");
            let message = r.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(message.contains(field), "{body}: {message}");
        }
        let after = s.get("/api/runs?all=true").json()["runs"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(after, before, "a refused run is not stored");

        // Waiting on A, or already settled by the worker when A ended first.
        let dependent = |body: Value| {
            let r = s.call("POST", "/api/runs", Some(&body));
            assert_eq!(r.status, 201, "{}", r.text());
            r.json()["run_id"].as_str().expect("run_id").to_string()
        };
        let carry_on = dependent(
            json!({"workflow": "emit", "after": [a], "on_dep_failure": "continue",
                    "dep_result": "deps", "dep_timeout": "2h"}),
        );
        let abort = dependent(json!({"workflow": "emit", "after": [a]}));
        let shown = s.wait_status(&carry_on, "completed");
        let deps = &shown["dependencies"];
        assert_eq!(deps["on_failure"], "continue", "{deps}");
        assert_eq!(deps["result_slice"], "deps", "{deps}");
        assert_eq!(deps["after"][0]["run_id"], a.as_str(), "{deps}");
        assert_eq!(deps["after"][0]["status"], "failed", "{deps}");
        // `dep_timeout: 2h`: the deadline is two hours after the run was created (a
        // minute either side for a slow machine), not the default 24 h.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let deadline = deps["deadline_ms"].as_u64().unwrap();
        let two_hours = 2 * 3600 * 1000;
        assert!(
            deadline > now_ms + two_hours - 60_000 && deadline < now_ms + two_hours + 60_000,
            "{deps}"
        );
        let state = s.get(&format!("/api/runs/{carry_on}/state")).json();
        assert_eq!(state["deps"][a.as_str()]["status"], "failed", "{state}");
        assert_eq!(
            state["deps"][a.as_str()]["termination_reason"],
            "node_failed"
        );
        let shown = s.wait_status(&abort, "failed");
        assert_eq!(shown["run"]["termination_reason"], "dependency_failed");
        assert_eq!(shown["run"]["steps"], 0, "no step ran");
        assert_eq!(shown["dependencies"]["on_failure"], "abort");
    }
}
