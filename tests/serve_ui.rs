//! The web UI of `pactgraph serve` in a real headless Chromium (WebDriver through
//! chromedriver): what a user sees. A run started through the API is listed and
//! filtered; its page draws the graph as SVG with the path taken; a live run's steps
//! appear without a reload; the cancel button stops a running run; the answer box
//! resumes a paused one; with `--token-env` the page asks for the token once.
//!
//! Skipped with a message when chromium or chromedriver is missing, unless `CI` is set.
//! `PACTGRAPH_SCREENSHOTS=1` writes each page to `docs/images/serve-*.png` (the guide's
//! pictures); a failure saves a screenshot under `target/serve-ui-failures/`.
#![cfg(feature = "store")]

mod serve_support;
#[macro_use]
mod serve_ui_support;
mod support;

use serde_json::{Value, json};
use serve_support::{ASKER, Server};
use serve_ui_support::{Browser, Step};
use support::cli::{Bench, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// Starts a run through the API: its id.
fn start(s: &Server, body: &Value) -> String {
    let r = s.call("POST", "/api/runs", Some(body));
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["run_id"].as_str().expect("run_id").to_string()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A JavaScript string literal of `text`.
fn lit(text: &str) -> String {
    Value::String(text.into()).to_string()
}

/// Proves a completed run is listed (a link to its page), the filters narrow the list,
/// the run's page shows its summary, its graph drawn as SVG with the path taken painted
/// and numbered, a timeline bar per node run (the sequential run's bars one after
/// another on one lane, none overlapping another) and the trace, and the workflows page lists
/// the documents with their diagnostics and draws a graph.
#[test]
fn the_runs_list_links_a_run_whose_page_draws_the_path_taken() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(3, 20));
    b.file("asker.json", ASKER);
    b.file(
        "broken.json",
        r#"{"workflow": "broken", "entry": "nowhere"}"#,
    );
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let id = start(
        &s,
        &json!({"workflow": "ticker", "input": {"n": 0}, "name": "first"}),
    );
    let steps = s.wait_status(&id, "completed")["run"]["steps"].to_string();
    let paused = start(&s, &json!({"workflow": "asker", "input": {}}));
    s.wait_status(&paused, "awaiting_input");
    let base = format!("http://{}", s.addr);

    runtime().block_on(async {
        let Some(browser) = Browser::start("runs_list_and_run_page").await else {
            return;
        };
        let result: Step<()> = async {
            let br = &browser;
            br.open(&format!("{base}/")).await?;
            // Listed, as a link to the run's page, with its status.
            let row = format!("tr[data-run={}]", lit(&id));
            br.until("the run listed", &format!("return document.querySelector({})", lit(&row)))
                .await?;
            let href = br
                .js(&format!("return document.querySelector({}).querySelector('a').getAttribute('href')", lit(&row)))
                .await?;
            ensure!(href == format!("/runs/{id}"), "the link is {href}");
            let status = br
                .js(&format!("return document.querySelector({}).dataset.status", lit(&row)))
                .await?;
            ensure!(status == "completed", "listed as {status}");
            br.until("the paused run listed", &format!(
                "return document.querySelector('tr[data-run={}]')", lit(&paused))).await?;
            br.for_docs("runs").await?;

            // The status filter, chosen and submitted as a user does.
            br.find("#f-status")
                .await?
                .select_by_value("awaiting_input")
                .await
                .map_err(|e| e.to_string())?;
            br.find("form.filters button[type=submit]")
                .await?
                .click()
                .await
                .map_err(|e| e.to_string())?;
            br.until("the filtered list", &format!(
                "return location.search.includes('status=awaiting_input') && \
                 document.querySelector('tr[data-run={}]') && \
                 !document.querySelector('tr[data-run={}]')", lit(&paused), lit(&id))).await?;
            br.open(&format!("{base}/?workflow=ticker")).await?;
            br.until("the workflow filter", &format!(
                "return document.querySelector('tr[data-run={}]') && \
                 !document.querySelector('tr[data-run={}]')", lit(&id), lit(&paused))).await?;

            // The link leads to the run's page.
            br.find(&format!("{row} a"))
                .await?
                .click()
                .await
                .map_err(|e| e.to_string())?;
            let url = br.until("the run's page", "return location.pathname.startsWith('/runs/') && location.pathname").await?;
            ensure!(url == format!("/runs/{id}"), "went to {url}");
            // The graph, laid out by Graphviz in the page, the path in red with its steps.
            let edges = br
                .until("the graph with the path", "const s = document.querySelector('#graph svg.graph[data-run]'); return s && Number(s.dataset.pathEdges)")
                .await?;
            ensure!(edges.as_f64().is_some_and(|n| n >= 2.0), "{edges} path edges");
            let labels = br
                .js("return [...document.querySelectorAll('#graph svg g.edge.taken text')].map(t => t.textContent).join(' ')")
                .await?;
            let labels = labels.as_str().unwrap_or_default();
            ensure!(
                ["1", "2", "3"].iter().all(|n| labels.contains(n)),
                "the path's edges are numbered by step: {labels}"
            );
            let nodes = br
                .js("return [...document.querySelectorAll('#graph svg g.node title')].map(t => t.textContent)")
                .await?;
            ensure!(nodes.to_string().contains("tick") && nodes.to_string().contains("boss"), "nodes {nodes}");
            // The summary, the timeline and the trace.
            let status = br.js("return document.querySelector('#summary dd[data-key=status]').innerText").await?;
            ensure!(status.as_str().is_some_and(|t| t.contains("completed")), "status: {status}");
            let shown_steps = &steps;
            let steps = br.js("return document.querySelector('#summary dd[data-key=steps]').innerText").await?;
            ensure!(steps == shown_steps.as_str(), "steps: {steps}, the API says {shown_steps}");
            let bars = br.js("return document.querySelectorAll('#timeline li.bar').length").await?;
            ensure!(bars == 3, "{bars} timeline bars, one per node run");
            // A sequential run's steps follow each other: in time (the bars' data) and on
            // the screen (their boxes), each starts no earlier than the one before ended.
            let spans = br
                .js("return [...document.querySelectorAll('#timeline li.bar')].map(b => { \
                     const r = b.getBoundingClientRect(); \
                     return [Number(b.dataset.start), Number(b.dataset.end), r.left, r.right, b.dataset.lane]; })")
                .await?;
            let spans: Vec<(f64, f64, f64, f64, String)> =
                serde_json::from_value(spans.clone()).map_err(|e| format!("{spans}: {e}"))?;
            ensure!(
                spans.windows(2).all(|w| w[0].1 <= w[1].0 && w[0].3 <= w[1].2 + 0.5),
                "a sequential run's bars overlap: {spans:?}"
            );
            ensure!(
                spans.iter().all(|s| s.0 < s.1 && s.4 == "0"),
                "a sequential run's bars are not on one lane: {spans:?}"
            );
            let caption = br.js("return document.querySelector('#timeline figcaption').innerText").await?;
            ensure!(!caption.to_string().contains("at once"), "the caption: {caption}");
            let rows = br.js("return document.querySelectorAll('#trace tbody tr').length").await?;
            ensure!(rows.as_u64().is_some_and(|n| n >= 6), "{rows} trace rows");
            let writes = br.js("return document.querySelector('#trace tbody tr[data-kind=dispatch]').innerText").await?;
            ensure!(writes.as_str().is_some_and(|t| t.contains("n, done")), "the node's writes: {writes}");
            let owners = br.js("return document.querySelector('#accounting').innerText").await?;
            ensure!(owners.as_str().is_some_and(|t| t.contains("tick") && t.contains("wall_ms")), "accounting: {owners}");
            let state = br.js("return document.querySelector('#state').innerText").await?;
            ensure!(state.as_str().is_some_and(|t| t.contains("\"done\": true")), "state: {state}");
            br.for_docs("run").await?;

            // The workflows page: documents and their diagnostics, then one drawn.
            br.find("a[data-nav=workflows]").await?.click().await.map_err(|e| e.to_string())?;
            br.until("the workflows", "return document.querySelector('tr[data-workflow=broken]')").await?;
            let broken = br.js("return document.querySelector('tr[data-workflow=broken]').innerText").await?;
            ensure!(broken.as_str().is_some_and(|t| t.contains("no") && t.contains("error")), "broken: {broken}");
            br.for_docs("workflows").await?;
            br.find("tr[data-workflow=ticker] a").await?.click().await.map_err(|e| e.to_string())?;
            br.until("the workflow's graph", "return document.querySelector('#graph svg.graph g.node')").await?;
            br.for_docs("workflow").await?;
            Ok(())
        }
        .await;
        browser.finish(result).await;
    });
}

/// Proves a running run's page follows it live: steps appear while the page stays the
/// same document (no reload), and the cancel button stops the run at its next step.
#[test]
fn a_live_run_updates_without_a_reload_and_cancel_stops_it() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(40, 100));
    b.file("slow", "0.4");
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let id = start(&s, &json!({"workflow": "ticker", "input": {"n": 0}}));
    s.wait_status(&id, "running");
    let base = format!("http://{}", s.addr);

    // Whether the browser part ran: skipped, it clicked no cancel to wait for.
    let ran = runtime().block_on(async {
        let Some(browser) = Browser::start("live_and_cancel").await else {
            return false;
        };
        let result: Step<()> = async {
            let br = &browser;
            br.open(&format!("{base}/runs/{id}")).await?;
            // A mark on this document: a reload would lose it.
            br.js("window.sameDocument = true; return true").await?;
            let steps = "return Number(document.querySelector('#summary dd[data-key=steps]').innerText)";
            let first = br.until("a first step", steps).await?;
            let first = first.as_f64().unwrap_or(0.0);
            br.until("the page following the events", "return document.querySelector('#live').innerText.startsWith('Live')").await?;
            let later = br
                .until("more steps without a reload", &format!("const n = Number(document.querySelector('#summary dd[data-key=steps]').innerText); return n >= {} && n", first + 2.0))
                .await?;
            let bars = br.js("return document.querySelectorAll('#timeline li.bar').length").await?;
            ensure!(bars.as_u64().is_some_and(|n| n >= 2), "{bars} bars after {later} steps");
            let same = br.js("return window.sameDocument === true").await?;
            ensure!(same == true, "the page was reloaded");
            br.for_docs("live").await?;

            // Cancel: the run stops at its next step, and the page shows it.
            br.find("#controls button.danger").await?.click().await.map_err(|e| e.to_string())?;
            br.until("the run shown stopped", "return document.querySelector('#summary dd[data-key=status]').innerText.includes('stopped')").await?;
            let same = br.js("return window.sameDocument === true").await?;
            ensure!(same == true, "the page was reloaded");
            Ok(())
        }
        .await;
        browser.finish(result).await;
        true
    });
    if !ran {
        return;
    }
    let shown = s.wait_status(&id, "stopped");
    assert_eq!(shown["run"]["termination_reason"], "cancelled", "{shown}");
    assert!(shown["run"]["steps"].as_u64().unwrap() < 40, "{shown}");
}

/// Proves a run started from its workflow's page is followed live from queued to paused
/// (the question appears without a reload), and the answer box resumes it with the
/// answer typed until the page shows it completed.
#[test]
fn the_answer_box_resumes_a_paused_run() {
    let b = Bench::new(BIN);
    b.file("asker.json", ASKER);
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let base = format!("http://{}", s.addr);

    let id = runtime().block_on(async {
        let browser = Browser::start("answer").await?;
        let mut id = String::new();
        let result: Step<()> = async {
            let br = &browser;
            br.open(&format!("{base}/workflows/asker")).await?;
            br.find("#run-name").await?.send_keys("from-the-page").await.map_err(|e| e.to_string())?;
            br.find("form.start button[type=submit]").await?.click().await.map_err(|e| e.to_string())?;
            let path = br
                .until("the new run's page", "return location.pathname.startsWith('/runs/') && document.body.dataset.ready && location.pathname")
                .await?;
            id = path.as_str().unwrap_or_default().trim_start_matches("/runs/").to_string();
            br.js("window.sameDocument = true; return true").await?;
            let question = br.until("the question", "const q = document.querySelector('#controls .question'); return q && q.innerText").await?;
            ensure!(question.as_str().is_some_and(|q| q.contains("which?")), "question: {question}");
            ensure!(br.js("return window.sameDocument === true").await? == true, "the page was reloaded");
            let answer = br.find("#answer").await?;
            answer.send_keys("the blue one").await.map_err(|e| e.to_string())?;
            br.for_docs("answer").await?;
            br.find("form.answer button[type=submit]").await?.click().await.map_err(|e| e.to_string())?;
            br.until("the run shown completed", "return document.querySelector('#summary dd[data-key=status]').innerText.includes('completed')").await?;
            let resumed = br.js("return document.querySelector('#trace tbody tr[data-kind=resume]').innerText").await?;
            ensure!(resumed.as_str().is_some_and(|t| t.contains("the blue one")), "the trace's resume: {resumed}");
            Ok(())
        }
        .await;
        browser.finish(result).await;
        Some(id)
    });
    let Some(id) = id else { return };
    let shown = s.wait_status(&id, "completed");
    assert_eq!(shown["run"]["name"], "from-the-page", "{shown}");
    let state = s.get(&format!("/api/runs/{id}/state")).json();
    assert_eq!(state["clarification"], 1, "{shown} {state}");
}

/// Proves that with `--token-env` the page asks for the token, refuses a wrong one,
/// trades the right one for an HttpOnly cookie (no script can read it), and is not asked
/// again after a reload.
#[test]
fn with_a_token_the_page_asks_once_and_keeps_an_http_only_cookie() {
    let b = Bench::new(BIN);
    b.file("asker.json", ASKER);
    let token = "a-long-token-for-the-browser-test";
    let s = Server::start_with(
        &b,
        "serve",
        &["--token-env", "PACTGRAPH_UI_TOKEN"],
        &[("PACTGRAPH_UI_TOKEN", token)],
    );
    let base = format!("http://{}", s.addr);

    runtime().block_on(async {
        let Some(browser) = Browser::start("token").await else {
            return;
        };
        let result: Step<()> = async {
            let br = &browser;
            br.client
                .goto(&format!("{base}/workflows"))
                .await
                .map_err(|e| e.to_string())?;
            br.until(
                "the sign-in dialog",
                "return document.querySelector('#login').open",
            )
            .await?;
            br.for_docs("token").await?;
            let input = br.find("#login-token").await?;
            input
                .send_keys("wrong-token-wrong-token")
                .await
                .map_err(|e| e.to_string())?;
            br.find("#login-form button")
                .await?
                .click()
                .await
                .map_err(|e| e.to_string())?;
            br.until(
                "the refusal",
                "const e = document.querySelector('#login-error'); return !e.hidden && e.innerText",
            )
            .await?;
            input.clear().await.map_err(|e| e.to_string())?;
            input.send_keys(token).await.map_err(|e| e.to_string())?;
            br.find("#login-form button")
                .await?
                .click()
                .await
                .map_err(|e| e.to_string())?;
            br.until(
                "the workflows after signing in",
                "return document.querySelector('tr[data-workflow=asker]')",
            )
            .await?;
            let cookie = br.js("return document.cookie").await?;
            ensure!(cookie == "", "a script can read the cookie: {cookie}");
            let url = br.js("return location.href").await?;
            ensure!(
                !url.to_string().contains(token),
                "the token is in the URL {url}"
            );
            br.open(&format!("{base}/workflows")).await?;
            let asked = br
                .js("return document.querySelector('#login').open")
                .await?;
            ensure!(asked == false, "asked again after a reload");
            ensure!(
                br.js("return Boolean(document.querySelector('tr[data-workflow=asker]'))")
                    .await?
                    == true,
                "the workflows after a reload"
            );
            Ok(())
        }
        .await;
        browser.finish(result).await;
    });
}

/// Proves the timeline puts concurrent steps side by side: the advisors of the shipped
/// advisors example run at once, so their bars start together, overlap in time and sit
/// on separate lanes.
#[test]
fn the_timeline_shows_concurrent_advisors_side_by_side() {
    let b = Bench::new(BIN);
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows");
    let doc = std::fs::read_to_string(examples.join("advisors_review.json")).expect("the example");
    b.file("advisors_review.json", &doc);
    std::fs::create_dir_all(b.dir.join("agents")).expect("agents/");
    for program in ["reviewer.py", "advisor.py"] {
        std::fs::copy(
            examples.join("agents").join(program),
            b.dir.join("agents").join(program),
        )
        .expect("the example's program");
    }
    let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
    let name = serde_json::from_str::<Value>(&doc).expect("JSON")["workflow"]
        .as_str()
        .expect("a name")
        .to_string();
    let id = start(
        &s,
        &json!({"workflow": name, "input": {"draft": {"text": "Ship it next week."}}}),
    );
    let ended = s.wait_until(std::time::Duration::from_secs(60), || {
        let v = s.get(&format!("/api/runs/{id}")).json();
        ["completed", "stopped", "failed"].contains(&v["run"]["status"].as_str().unwrap_or(""))
    });
    assert!(ended, "the advisors run did not end: {}", s.log());
    let base = format!("http://{}", s.addr);

    runtime().block_on(async {
        let Some(browser) = Browser::start("advisors").await else {
            return;
        };
        let result: Step<()> = async {
            let br = &browser;
            br.open(&format!("{base}/runs/{id}")).await?;
            let advisors = br
                .until("the advisors' bars", "return document.querySelectorAll('#timeline li.bar-advisor').length")
                .await?;
            ensure!(advisors.as_u64().is_some_and(|n| n >= 2), "{advisors} advisor bars");
            let lanes = br
                .js("return [...new Set([...document.querySelectorAll('#timeline li.bar-advisor')].map(b => b.dataset.lane))].length")
                .await?;
            ensure!(lanes.as_u64().is_some_and(|n| n >= 2), "the advisors on {lanes} lane(s)");
            // Side by side: bars on different lanes overlap horizontally.
            let overlap = br
                .js("const r = [...document.querySelectorAll('#timeline li.bar-advisor')].map(b => b.getBoundingClientRect()); \
                     return r.some((a, i) => r.some((b, j) => i !== j && a.top !== b.top && a.left < b.right && b.left < a.right))")
                .await?;
            ensure!(overlap == true, "no two advisor bars overlap in time");
            // In the bars' data too: the members of one fork start together.
            let starts = br
                .js("return [...new Set([...document.querySelectorAll('#timeline li.bar-advisor')].map(b => b.dataset.start))]")
                .await?;
            ensure!(starts.as_array().is_some_and(|s| s.len() == 1), "the advisors start at {starts}");
            br.for_docs("advisors").await?;
            Ok(())
        }
        .await;
        browser.finish(result).await;
    });
}

/// Proves the UI's pages and files come from the binary (no browser needed): every page
/// route answers the same HTML with a restrictive Content-Security-Policy, each script is
/// JavaScript, Viz.js comes with its licences, and an unknown or crafted file name is the
/// API's JSON 404 (no path reaches the file system).
#[test]
fn the_pages_and_files_are_served_from_the_binary() {
    let b = Bench::new(BIN);
    b.file("asker.json", ASKER);
    let s = Server::start(&b, "serve", &[]);
    let index = s.get("/");
    assert_eq!(index.status, 200);
    assert_eq!(
        index.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let policy = index
        .header("content-security-policy")
        .expect("a policy")
        .to_string();
    assert!(
        policy.contains("default-src 'self'") && policy.contains("frame-ancestors 'none'"),
        "{policy}"
    );
    assert!(
        index
            .text()
            .contains(r#"<script type="module" src="/ui/app.js">"#),
        "{}",
        index.text()
    );
    for page in [
        "/runs",
        "/runs/01ANYTHING",
        "/workflows",
        "/workflows/asker",
    ] {
        let r = s.get(page);
        assert_eq!(r.status, 200, "{page}");
        assert_eq!(r.text(), index.text(), "{page}");
    }
    for (file, kind) in [
        ("app.js", "text/javascript"),
        ("run.js", "text/javascript"),
        ("style.css", "text/css"),
        ("viz-global.js", "text/javascript"),
        ("LICENSES", "text/plain"),
    ] {
        let r = s.get(&format!("/ui/{file}"));
        assert_eq!(r.status, 200, "{file}");
        assert!(
            r.header("content-type")
                .is_some_and(|t| t.starts_with(kind)),
            "{file}: {:?}",
            r.header("content-type")
        );
    }
    assert!(s.get("/ui/viz-global.js").text().contains("Viz.js 3.31.0"));
    let licences = s.get("/ui/LICENSES").text();
    assert!(
        licences.contains("Eclipse Public License") && licences.contains("MIT"),
        "{licences}"
    );
    for bad in [
        "/ui/nope.js",
        "/ui/..%2FCargo.toml",
        "/ui/%2e%2e%2fsrc%2flib.rs",
        "/ui/",
    ] {
        let r = s.get(bad);
        assert_eq!(r.status, 404, "{bad}: {}", r.text());
        assert_eq!(r.error_code(), "unknown_path", "{bad}");
    }
}
