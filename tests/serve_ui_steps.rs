//! The run page's steps in a real headless Chromium (as `tests/serve_ui.rs`): the trace
//! shows each node run's input and writes (collapsed, pretty-printed, a large value cut
//! with a button to see it whole), also after an answer and inside a subgraph, and the
//! resume button continues an interrupted run from its page until it completes.
//!
//! Skipped with a message when chromium or chromedriver is missing, unless `CI` is set.
//! `PACTGRAPH_SCREENSHOTS=1` writes the pages to `docs/images/serve-*.png`.
#![cfg(feature = "store")]

mod serve_support;
#[macro_use]
mod serve_ui_support;
mod support;

use serde_json::{Value, json};
use serve_support::{ANSWERED, CHAIN, POLISH_PY, Server, run_answered};
use serve_ui_support::{Browser, Step};
use support::cli::{Bench, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn start(s: &Server, body: &Value) -> String {
    let r = s.call("POST", "/api/runs", Some(body));
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["run_id"].as_str().expect("run_id").to_string()
}

/// Proves the trace shows values a user can open: `draft`'s row names its input slice
/// (`task`) and its writes (`draft`), collapsed; opened, the writes are the pretty JSON
/// the node wrote; `polish`'s input, cut (the 30,000-character task first) until "Show all" shows
/// it whole, holds the task and `draft`'s write.
#[test]
fn the_trace_shows_each_steps_input_and_writes() {
    let b = Bench::new(BIN);
    b.file("chain.json", CHAIN);
    b.file("polish.py", POLISH_PY);
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let task = "x".repeat(30_000);
    let id = start(
        &s,
        &json!({"workflow": "chain", "input": {"task": task}, "name": "values"}),
    );
    s.wait_status(&id, "completed");
    let base = format!("http://{}", s.addr);

    runtime().block_on(async {
        let Some(browser) = Browser::start("trace_values").await else {
            return;
        };
        let result: Step<()> = async {
            let br = &browser;
            br.open(&format!("{base}/runs/{id}")).await?;
            let row = "document.querySelector('#trace tbody tr[data-kind=dispatch]')";
            br.until("the trace's node runs", &format!("return {row} !== null")).await?;
            let summaries = br
                .js(&format!("const r = {row}; return [r.querySelector('td.input summary').innerText, r.querySelector('td.writes summary').innerText, r.querySelector('td.writes details').open]"))
                .await?;
            ensure!(summaries == json!(["task", "draft", false]), "draft's row: {summaries}");
            // Opened by a click on its summary: the writes, pretty-printed.
            br.find("#trace tbody tr[data-kind=dispatch] td.writes summary").await?.click().await.map_err(|e| e.to_string())?;
            let shown = br
                .js(&format!("const d = {row}.querySelector('td.writes details'); return [d.open, d.querySelector('pre').innerText]"))
                .await?;
            let text = shown[1].as_str().unwrap_or_default();
            let parsed: Value = serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))?;
            ensure!(shown[0] == true && parsed == json!({"draft": {"text": "first words"}}), "draft's writes: {shown}");
            ensure!(text.contains('\n'), "not pretty-printed: {text}");
            // `polish` read what `draft` wrote.
            let polish = "[...document.querySelectorAll('#trace tbody tr[data-kind=dispatch]')].find((r) => r.innerText.includes('polish'))";
            let input = br
                .js(&format!("return {polish}.querySelector('td.input pre').textContent"))
                .await?;
            let input = input.as_str().unwrap_or_default().to_string();
            // The long task comes first: the value is cut, and shown whole on demand.
            ensure!(input.len() < 5_000 && input.ends_with('\u{2026}'), "not cut: {} characters", input.len());
            let button = format!("{polish}.querySelector('td.input button.show-all')");
            let label = br.js(&format!("return {button}.textContent")).await?;
            ensure!(label.as_str().is_some_and(|l| l.starts_with("Show all")), "button: {label}");
            br.js(&format!("{polish}.querySelector('td.input details').open = true; {button}.click(); return true")).await?;
            let whole = br
                .js(&format!("const t = {polish}.querySelector('td.input pre').textContent; const v = JSON.parse(t); return [v.task.length, v.draft, {button} === null]"))
                .await?;
            ensure!(whole == json!([30_000, {"text": "first words"}, true]), "shown whole: {whole}");
            br.js(&format!("{row}.querySelector('td.input details').open = true; return true")).await?;
            br.for_docs("trace-values").await?;
            Ok(())
        }
        .await;
        browser.finish(result).await;
    });
}

/// Proves a step after an answer shows its input: the run asked, was answered through
/// the API, and completed; on its page the row of `note` (dispatched after the resume)
/// names `clarification` as its input and, opened, shows the answer given; the row of
/// `brush`, inside subgraph `paint`, shows the `colour` its frame was given. Neither row
/// falls back to the slice names alone (what a node run whose input is unknown shows).
#[test]
fn a_step_after_an_answer_shows_its_input() {
    let b = Bench::new(BIN);
    b.file("answered.json", ANSWERED);
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let id = run_answered(&s);
    let base = format!("http://{}", s.addr);

    runtime().block_on(async {
        let Some(browser) = Browser::start("answered_values").await else {
            return;
        };
        let result: Step<()> = async {
            let br = &browser;
            br.open(&format!("{base}/runs/{id}")).await?;
            let row = |node: &str| format!("[...document.querySelectorAll('#trace tbody tr[data-kind=dispatch]')].find((r) => r.children[4].innerText === '{node}')");
            br.until("the trace's node runs", &format!("return ({}) !== undefined", row("brush"))).await?;
            let note = row("note");
            let summary = br.js(&format!("return {note}.querySelector('td.input summary').innerText")).await?;
            ensure!(summary == json!("clarification"), "note's input: {summary}");
            br.find("#trace tbody tr[data-kind=dispatch] td.input summary").await?.click().await.map_err(|e| e.to_string())?;
            let text = br.js(&format!("return {note}.querySelector('td.input pre').textContent")).await?;
            let text = text.as_str().unwrap_or_default();
            let parsed: Value = serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))?;
            ensure!(
                parsed == json!({"clarification": {"question": "which colour?", "answer": "the blue one"}}),
                "note's input: {parsed}"
            );
            let brush = row("brush");
            let shown = br
                .js(&format!("const r = {brush}; return [r.querySelector('td.input summary')?.innerText, JSON.parse(r.querySelector('td.input pre').textContent), r.querySelector('td.input span.muted') === null]"))
                .await?;
            ensure!(shown == json!(["colour", {"colour": "blue"}, true]), "brush's input: {shown}");
            Ok(())
        }
        .await;
        browser.finish(result).await;
    });
}

/// Proves the resume button continues an interrupted run: a server stopped mid-run
/// leaves it `interrupted`; another server's run page offers "Resume", and clicking it
/// shows the run completed without a reload, and its controls then offer nothing.
#[test]
fn the_resume_button_continues_an_interrupted_run() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(3, 20));
    b.file("slow", "30");
    let first = Server::start(&b, "first", &["--workers", "1", "--poll", "20ms"]);
    let id = start(&first, &json!({"workflow": "ticker", "input": {"n": 0}}));
    first.wait_status(&id, "running");
    assert!(first.wait_until(std::time::Duration::from_secs(30), || !b.pids().is_empty()));
    assert_eq!(first.stop("TERM"), 0);
    assert_eq!(b.status(&id), "interrupted");
    b.remove("slow");
    b.file("slow", "0.3");
    let s = Server::start(&b, "second", &[]);
    let base = format!("http://{}", s.addr);

    // Whether the browser part ran: skipped, it pressed no resume button to wait for.
    let ran = runtime().block_on(async {
        let Some(browser) = Browser::start("resume_button").await else {
            return false;
        };
        let result: Step<()> = async {
            let br = &browser;
            br.open(&format!("{base}/runs/{id}")).await?;
            br.until("the run shown interrupted", "return document.querySelector('#summary dd[data-key=status]').innerText.includes('interrupted')").await?;
            br.js("window.sameDocument = true; return true").await?;
            let button = "[...document.querySelectorAll('#controls button')].find((b) => b.innerText === 'Resume')";
            br.until("the resume button", &format!("return {button} !== undefined")).await?;
            br.for_docs("resume").await?;
            br.js(&format!("{button}.click(); return true")).await?;
            br.until("the run shown completed", "return document.querySelector('#summary dd[data-key=status]').innerText.includes('completed')").await?;
            ensure!(br.js("return window.sameDocument === true").await? == true, "the page was reloaded");
            let buttons = br.js("return [...document.querySelectorAll('#controls button')].map((b) => b.innerText)").await?;
            ensure!(buttons == json!([]), "a completed run offers {buttons}");
            Ok(())
        }
        .await;
        browser.finish(result).await;
        true
    });
    if !ran {
        return;
    }
    let shown = s.wait_status(&id, "completed");
    assert_eq!(shown["run"]["steps"].as_u64(), Some(3), "{shown}");
}
