//! The web UI shows an agent run's model calls and tool calls from their items' fields,
//! and a streaming model's reply growing as it arrives (ADR 0042): `pactgraph serve` as a
//! real process, the scripted Chat Completions server on loopback, a real headless
//! Chromium. Skipped with a message when chromium or
//! chromedriver is missing, unless `CI` is set.
#![cfg(feature = "store")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod serve_support;
#[macro_use]
mod serve_ui_support;
mod support;

use std::time::Duration;

use chat_server::{ChatServer, Reply};
use serde_json::{Value, json};
use serve_support::Server;
use serve_ui_support::{Browser, Step};
use support::cli::Bench;

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// Proves a user sees the calls' fields: the trace's `model_call` rows say the turn,
/// attempt, finish_reason and tokens, the `tool_call` row the call id, index, caller and
/// status; the timeline has a bar per model call (labelled with its turn) and one for
/// the tool call.
#[test]
fn the_run_page_shows_model_and_tool_calls_from_their_fields() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = rt.block_on(ChatServer::start([
        Reply::tool_calls(&[("call_7", "fixed", "{}")]),
        Reply::tool_calls(&[("call_exit", "final_report", r#"{"answer": "shipped"}"#)]),
    ]));
    let b = Bench::new(BIN);
    let doc = json!({
        "workflow": "ui-agent",
        "slices": {"answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": server.base_url(), "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "writes": ["answer"],
                      "run": {"agent": {"prompt": "go", "tools": ["fixed"]}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "fixed": {"supervisor": "root", "run": {"set": {"status": "shipped"}},
                      "tool": {"description": "Always the same.",
                               "parameters": {"type": "object", "properties": {}}}}
        }
    });
    b.file("ui-agent.json", &doc.to_string());
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let r = s.call("POST", "/api/runs", Some(&json!({"workflow": "ui-agent"})));
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["run_id"].as_str().expect("run_id").to_string();
    let ended = s.wait_until(Duration::from_secs(60), || {
        s.get(&format!("/api/runs/{id}")).json()["run"]["status"] == "completed"
    });
    assert!(ended, "the agent run did not complete: {}", s.log());
    let trace = s.get(&format!("/api/runs/{id}/trace")).json();
    let model_calls: Vec<&Value> = trace
        .as_array()
        .expect("the trace")
        .iter()
        .filter(|i| i["kind"] == "model_call")
        .collect();
    assert_eq!(
        model_calls[0]["model_call"]["turn"], 1,
        "the API carries the fields"
    );
    let base = format!("http://{}", s.addr);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            let Some(browser) = Browser::start("agent-calls").await else {
                return;
            };
            let result: Step<()> = async {
                let br = &browser;
                br.open(&format!("{base}/runs/{id}")).await?;
                br.until("the trace", "return document.querySelectorAll('#trace tbody tr[data-kind=model_call]').length === 2")
                    .await?;
                let rows = br
                    .js("return [...document.querySelectorAll('#trace tbody tr[data-kind=model_call]')].map(r => r.innerText)")
                    .await?;
                let text = rows.to_string();
                ensure!(text.contains("turn 1, attempt 1, finish_reason tool_calls, 11 in / 7 out tokens"), "{text}");
                ensure!(text.contains("turn 2, attempt 1"), "{text}");
                let tool = br
                    .js("return document.querySelector('#trace tbody tr[data-kind=tool_call]').innerText")
                    .await?;
                ensure!(tool.to_string().contains("call call_7 (#0) of agent: ok"), "{tool}");
                let bars = br
                    .js("return [...document.querySelectorAll('#timeline li.bar')].map(b => b.dataset.kind + ':' + b.innerText)")
                    .await?;
                let bars = bars.to_string();
                ensure!(bars.contains("model:agent → default #1"), "{bars}");
                ensure!(bars.contains("model:agent → default #2"), "{bars}");
                ensure!(bars.contains("tool:fixed"), "{bars}");
                Ok(())
            }
            .await;
            browser.finish(result).await;
        });
}

/// Proves the conversation view shows a streaming model's reply growing: while the
/// server streams it in slow chunks, the page (following the run's events) shows the
/// text received so far, more of it later, and hides it once the model call's step is
/// committed (the conversation then holds the assembled reply).
#[test]
fn a_streaming_reply_grows_on_the_run_page() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = rt.block_on(ChatServer::start([
        Reply::stream_text(&["Thinking ", "it ", "over ", "slowly"], true)
            // Late and slow enough for the page (its graph drawn first) to follow the
            // run's events before the first chunk, and to see it grow.
            .pause(Duration::from_secs(1))
            .delay(Duration::from_secs(12)),
        Reply::tool_calls(&[("call_exit", "final_report", r#"{"answer": 7}"#)]),
    ]));
    let b = Bench::new(BIN);
    let doc = json!({
        "workflow": "ui-stream",
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
    b.file("ui-stream.json", &doc.to_string());
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let base = format!("http://{}", s.addr);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            let Some(browser) = Browser::start("agent-stream").await else {
                return;
            };
            let result: Step<()> = async {
                let br = &browser;
                let r = s.call("POST", "/api/runs", Some(&json!({"workflow": "ui-stream"})));
                ensure!(r.status == 201, "{}", r.text());
                let id = r.json()["run_id"].as_str().unwrap_or_default().to_string();
                br.open(&format!("{base}/runs/{id}")).await?;
                br.until("following the events", "return document.querySelector('#live').innerText.startsWith('Live')")
                    .await?;
                let first = br
                    .until("the reply starts growing", "const g = document.querySelector('#growing'); return g && !g.hidden && g.innerText")
                    .await?;
                ensure!(first.to_string().contains("agent (turn 1) is answering: Thinking"), "{first}");
                let more = br
                    .until("more of the reply", "const g = document.querySelector('#growing'); return g && g.innerText.includes('Thinking it over') && g.innerText")
                    .await?;
                ensure!(!more.to_string().contains("slowly") || more.to_string().contains("over slowly"), "{more}");
                br.until("the step committed", "return document.querySelector('#growing').hidden").await?;
                let said = br
                    .until("the assembled reply in the conversation", "const t = document.querySelector('#conversations').innerText; return t.includes('Thinking it over slowly') && t")
                    .await?;
                ensure!(said.to_string().contains("Thinking it over slowly"), "{said}");
                Ok(())
            }
            .await;
            browser.finish(result).await;
        });
}
