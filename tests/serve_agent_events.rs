//! `GET /api/runs/{id}/events` carries a streaming model's `model_delta`s live, for a run
//! the server's own worker drives: `pactgraph serve` as a real process, the scripted
//! Chat Completions server on loopback streaming its reply in delayed SSE chunks.
#![cfg(feature = "serve")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod serve_support;
mod support;

use std::time::Duration;

use chat_server::{ChatServer, Reply};
use serde_json::json;
use serve_support::{Server, sse, sse_run};
use support::cli::Bench;

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// Proves the SSE route streams a run's model deltas live: the text split across three
/// chunks arrives as three `model_delta` events (no SSE `id`: they are never kept, so a
/// reconnect resumes after the last kept event) between the kept events, each carrying
/// the seq of the kept event sent before it; the kept events keep ids 1..=N without
/// gaps; and the history read afterwards has no delta.
#[test]
fn the_events_route_streams_model_deltas_live() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = rt.block_on(ChatServer::start([
        // Late enough for the stream below to be open when the chunks come.
        Reply::stream_text(&["Thinking ", "it ", "over"], true)
            .pause(Duration::from_millis(100))
            .delay(Duration::from_millis(800)),
        Reply::stream_tool_call("call_exit", "final_report", &["{\"answer\": 7}"], true),
    ]));
    let b = Bench::new(BIN);
    let doc = json!({
        "workflow": "streamer",
        "slices": {"answer": {"schema": {"type": "integer"}}},
        "models": {"default": {"base_url": server.base_url(), "model": "m", "stream": true,
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {"agent": {"supervisor": "root", "writes": ["answer"],
                            "run": {"agent": {"prompt": "go"}},
                            "triggers": [{"priority": 1,
                                          "when": {"path": "/answer", "exists": false}}]}}
    });
    b.file("streamer.json", &doc.to_string());
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let r = s.call("POST", "/api/runs", Some(&json!({"workflow": "streamer"})));
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["run_id"].as_str().expect("an id").to_string();
    let read = sse_run(&s.addr, &id);
    assert_eq!(read.status, 200);
    assert!(read.ended, "the stream ends with the run");
    let mut last_kept = 0;
    let mut text = String::new();
    for e in &read.events {
        if e.data["event"] == "model_delta" {
            assert_eq!(e.id, None, "a delta has no SSE id: {e:?}");
            assert_eq!(e.data["seq"], last_kept, "{e:?}");
            assert_eq!(e.data["node"], "agent");
            if e.data.get("tool_call").is_none() {
                text.push_str(e.data["text"].as_str().expect("text"));
            }
        } else {
            last_kept += 1;
            assert_eq!(e.data["seq"], last_kept, "kept events without gaps: {e:?}");
            assert_eq!(e.id.as_deref(), Some(last_kept.to_string().as_str()));
        }
    }
    assert_eq!(text, "Thinking it over", "{:#?}", read.events);
    assert!(read.events.iter().any(|e| e.data["event"] == "run_ended"));
    let history = sse(
        &s.addr,
        &format!("/api/runs/{id}/events"),
        &[],
        Duration::from_secs(30),
        |_| false,
    );
    assert!(
        history
            .events
            .iter()
            .all(|e| e.data["event"] != "model_delta")
    );
    assert_eq!(history.events.len() as u64, last_kept);
}
