//! Agent observability and limits (ADR 0042), against the scripted Chat Completions server
//! on loopback (real HTTP): `model_call` and `tool_call` items carry their call's fields,
//! serialized deterministically, and a record written before them still loads; a
//! streaming model's text and tool-argument chunks are published live as `model_delta`
//! events (never kept); every tool call counts against `max_steps` before it starts, the
//! calls beyond it are skipped, and no run ever passes `max_steps` (a property).
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{
    EventKind, Executor, NodeInput, RunEvents, RunRecord, RunState, RunStatus,
    TerminationReason as R, ToolCallStatus, TraceKind as K,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::runtime::{builder, graph, writes};

/// A multi-threaded runtime: the scripted server and the run share it.
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Root dispatches agent `agent` (writes the string `answer`) once, then stops; tools
/// `lookup` (a handler) and `fixed` (a `set` node) are offered. `model` is merged into
/// the model's settings, `budgets` is the document's.
fn doc(base_url: &str, model: Value, budgets: Value) -> Value {
    let mut m = json!({"base_url": base_url, "model": "scripted-model",
                       "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 2});
    for (k, v) in model.as_object().expect("an object") {
        m[k] = v.clone();
    }
    json!({
        "workflow": "agents-obs",
        "slices": {"answer": {"schema": {"type": "string"}}},
        "models": {"default": m},
        "budgets": budgets,
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "writes": ["answer"],
                      "run": {"agent": {"prompt": "go", "tools": ["lookup", "fixed"],
                                        "max_turns": 6}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "lookup": {"supervisor": "root", "run": {"handler": "lookup"},
                       "tool": {"description": "Looks an order up.",
                                "parameters": {"type": "object",
                                               "properties": {"id": {"type": "integer"}},
                                               "required": ["id"],
                                               "additionalProperties": false}}},
            "fixed": {"supervisor": "root", "run": {"set": {"status": "shipped"}},
                      "tool": {"description": "Always the same.",
                               "parameters": {"type": "object", "properties": {}}}},
            "researcher": {"supervisor": "root",
                           "run": {"agent": {"prompt": "{{ input.query }}", "max_turns": 2}},
                           "tool": {"description": "Researches a query (an agent).",
                                    "parameters": {"type": "object",
                                                   "properties": {"query": {"type": "string"}},
                                                   "required": ["query"]}}}
        }
    })
}

/// The executor for `doc`; `lookup` answers `{"order": id}` and counts its calls.
fn executor(doc: Value, calls: Arc<AtomicU32>) -> Executor {
    builder(graph(doc))
        .node_handler("lookup", move |input: NodeInput| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(writes(&[("order", input.view["id"].clone())]))
            }
        })
        .build()
        .expect("the executor builds")
}

fn run(rt: &tokio::runtime::Runtime, ex: &Executor) -> RunState {
    let mut state = ex.start(json!({})).expect("a valid input");
    rt.block_on(ex.run_in_place(&mut state));
    state
}

fn report(answer: &str) -> Reply {
    Reply::tool_calls(&[(
        "call_exit",
        "final_report",
        &json!({ "answer": answer }).to_string(),
    )])
}

/// A report without usage: its tokens are unknown.
fn report_without_usage(answer: &str) -> Reply {
    Reply::json(
        200,
        chat_server::completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_exit", "type": "function",
                 "function": {"name": "final_report",
                              "arguments": json!({"answer": answer}).to_string()}}]}),
            "tool_calls",
            None,
        ),
    )
}

/// The script of the structured-items test: a 429 retried, a reply with three tool
/// calls (one good, one with bad arguments, one `set` tool), then the exit without usage.
fn items_script() -> Vec<Reply> {
    vec![
        Reply::error(429, "slow down").header("retry-after-ms", "1"),
        Reply::tool_calls(&[
            ("c1", "lookup", r#"{"id": 7}"#),
            ("c2", "lookup", r#"{"id": "seven"}"#),
            ("c3", "fixed", "{}"),
        ]),
        report_without_usage("done"),
    ]
}

/// Proves brief 10.3's fields: a `model_call` item carries node, model, turn, attempt,
/// the failed HTTP attempt before it (429), finish_reason, usage (tokens, or unknown) and
/// duration as fields; a `tool_call` item caller, tool, call id, index and status (`ok`,
/// `invalid` for arguments that do not fit). Their JSON nests them under the kind's
/// name, reads back to the same item, and two runs give byte-identical traces once
/// timing is stripped.
#[test]
fn model_and_tool_call_items_carry_their_fields_deterministically() {
    let rt = rt();
    let mut traces = Vec::new();
    for _ in 0..2 {
        let server = rt.block_on(ChatServer::start(items_script()));
        let calls = Arc::new(AtomicU32::new(0));
        let ex = executor(
            doc(&server.base_url(), json!({}), json!({})),
            Arc::clone(&calls),
        );
        let run = run(&rt, &ex);
        assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
        let items = &run.trace().to_items();
        let model_calls: Vec<_> = items.iter().filter(|i| i.kind == K::ModelCall).collect();
        assert_eq!(model_calls.len(), 2);
        let first = model_calls[0]
            .model_call()
            .expect("a model_call item's fields");
        assert_eq!((&*first.node, &*first.model), ("agent", "default"));
        assert_eq!((first.turn, first.attempt), (1, 1));
        assert_eq!(first.failed_attempts.len(), 1, "the 429 before the answer");
        assert_eq!(first.failed_attempts[0].status, Some(429));
        assert!(
            first.failed_attempts[0].error.contains("slow down"),
            "{:?}",
            first.failed_attempts[0]
        );
        assert_eq!(first.finish_reason.as_deref(), Some("tool_calls"));
        assert!(first.usage_known);
        let usage = model_calls[0].usage().expect("the call's usage");
        assert_eq!(usage.get("input_tokens"), Some(&11.into()));
        assert_eq!(usage.get("output_tokens"), Some(&7.into()));
        let second = model_calls[1].model_call().expect("fields");
        assert_eq!((second.turn, second.failed_attempts.len()), (2, 0));
        assert!(!second.usage_known, "the server sent no usage");
        assert_eq!(
            model_calls[1].usage().and_then(|u| u.get("usage_unknown")),
            Some(&1.into())
        );
        let tools: Vec<_> = items.iter().filter_map(|i| i.tool_call()).collect();
        let got: Vec<_> = tools
            .iter()
            .map(|t| (&*t.caller, &*t.tool, t.call_id.as_str(), t.index, t.status))
            .collect();
        assert_eq!(
            got,
            [
                ("agent", "lookup", "c1", 0, ToolCallStatus::Ok),
                ("agent", "lookup", "c2", 1, ToolCallStatus::Invalid),
                ("agent", "fixed", "c3", 2, ToolCallStatus::Ok),
            ]
        );
        assert!(
            tools[1]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("at `/id`")),
            "{:?}",
            tools[1].error
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1, "only the good lookup ran");
        // The JSON form: the fields nested under the kind's name, read back whole.
        let v = serde_json::to_value(model_calls[0]).expect("plain data");
        assert_eq!(v["model_call"]["turn"], 1);
        assert_eq!(v["model_call"]["failed_attempts"][0]["status"], 429);
        assert!(v.get("tool_call").is_none());
        let back: pactgraph::runtime::TraceItem = serde_json::from_value(v).expect("reads");
        assert_eq!(&back, model_calls[0]);
        let t = items
            .iter()
            .find(|i| i.kind == K::ToolCall)
            .expect("a tool call");
        let v = serde_json::to_value(t).expect("plain data");
        assert_eq!(
            v["tool_call"],
            json!({"caller": "agent", "tool": "lookup", "call_id": "c1", "index": 0,
                   "status": "ok"})
        );
        traces.push(run.trace().without_timing().to_json_pretty());
    }
    assert_eq!(traces[0], traces[1], "byte-identical without timing");
}

/// Proves old records still load: a run saved (`run --state-out`) before the fields
/// existed reads back, its `model_call` and `tool_call` items without fields (their
/// words kept in `reason`), and writes back without inventing any.
#[test]
fn a_record_saved_before_the_fields_still_loads() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/agent_record_before_0042.json"
    ))
    .expect("the fixture");
    assert!(!text.contains("\"model_call\": {"), "written the old way");
    let record = RunRecord::from_json(&text).expect("an old record loads");
    let items = &record.run.trace().to_items();
    let calls: Vec<_> = items
        .iter()
        .filter(|i| matches!(i.kind, K::ModelCall | K::ToolCall))
        .collect();
    assert_eq!(calls.len(), 3);
    for c in &calls {
        assert!(c.model_call().is_none() && c.tool_call().is_none());
    }
    assert_eq!(
        calls[0].reason.as_deref(),
        Some("turn 1, attempt 1, finish_reason tool_calls")
    );
    assert_eq!(calls[1].reason.as_deref(), Some("call call_1: ok"));
    let again = RunRecord::from_json(&record.to_json_pretty()).expect("round trip");
    assert_eq!(again.run.trace(), record.run.trace());
    assert!(!record.to_json_pretty().contains("\"tool_call\": {"));
}

/// Proves `model_delta` through the library's subscription: with `"stream": true` the
/// text split across SSE chunks arrives as `model_delta` events `{node, turn, text}` in
/// order (joined, the whole text), each carrying the seq of the kept event before it;
/// the exit's argument chunks arrive with their tool call's index; the kept events are
/// numbered without gaps as always; and what is committed is the assembled reply.
#[test]
fn a_streaming_model_publishes_its_text_and_argument_chunks_live() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::stream_text(&["The ans", "wer is ", "coming"], true),
        Reply::stream_tool_call(
            "call_exit",
            "final_report",
            &["{\"answer\"", ": 4", "2}"],
            true,
        ),
    ]));
    // An integer answer: the text reply is not an exit, so a second turn comes.
    let mut d = doc(&server.base_url(), json!({"stream": true}), json!({}));
    d["slices"]["answer"]["schema"] = json!({"type": "integer"});
    let ex = executor(d, Arc::default());
    let events = RunEvents::new();
    let mut sub = events.subscribe(1024);
    let ex = ex.with_events(events);
    let run = run(&rt, &ex);
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], 42);
    let got: Vec<_> = std::iter::from_fn(|| sub.try_next()).collect();
    let mut last_kept = 0;
    let (mut text, mut args) = (String::new(), String::new());
    for e in &got {
        match &e.kind {
            EventKind::ModelDelta {
                node,
                turn,
                text: t,
                tool_call,
            } => {
                assert_eq!(e.seq, last_kept, "a delta carries the seq before it");
                assert_eq!(node, "agent");
                match tool_call {
                    None => {
                        assert_eq!(*turn, 1);
                        text.push_str(t);
                    }
                    Some(i) => {
                        assert_eq!((*turn, *i), (2, 0));
                        args.push_str(t);
                    }
                }
                let v = e.to_json();
                assert_eq!(v["event"], "model_delta");
                assert_eq!(v["node"], "agent");
            }
            _ => {
                assert_eq!(e.seq, last_kept + 1, "kept events without gaps");
                last_kept = e.seq;
            }
        }
    }
    assert_eq!(text, "The answer is coming");
    assert_eq!(args, "{\"answer\": 42}");
    let deltas = got.iter().filter(|e| !e.kind.is_kept()).count();
    assert_eq!(deltas, 6, "one event per chunk");
    let assembled = run.sessions()[0]
        .messages
        .iter()
        .find(|m| m.role == pactgraph::model::Role::Assistant)
        .and_then(|m| m.content.as_deref());
    assert_eq!(
        assembled,
        Some("The answer is coming"),
        "the assembled reply is committed"
    );
}

/// Proves no delta is published for a model that does not stream, nor when nobody
/// listens (the request is the same either way: `stream` only with `"stream": true`).
#[test]
fn a_model_that_does_not_stream_publishes_no_delta() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([report("x")]));
    let ex = executor(
        doc(&server.base_url(), json!({}), json!({})),
        Arc::default(),
    );
    let events = RunEvents::new();
    let mut sub = events.subscribe(1024);
    let ex = ex.with_events(events);
    let run = run(&rt, &ex);
    assert_eq!(run.status(), RunStatus::Completed);
    let got: Vec<_> = std::iter::from_fn(|| sub.try_next()).collect();
    assert!(got.iter().all(|e| e.kind.is_kept()), "{got:#?}");
    assert!(server.requests()[0].body.get("stream").is_none());
}

/// Proves the budget per tool call: with `max_steps` 3, a first reply asking for four
/// lookups runs the two that fit (steps 2 and 3), skips the other two (not run, told to
/// the model as not run, recorded `skipped`, counting no step), and the run stops at its
/// next step with `max_steps_exceeded`, never passing 3 steps.
#[test]
fn tool_calls_beyond_max_steps_are_skipped_and_the_run_stops() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([Reply::tool_calls(&[
        ("c1", "lookup", r#"{"id": 1}"#),
        ("c2", "lookup", r#"{"id": 2}"#),
        ("c3", "lookup", r#"{"id": 3}"#),
        ("c4", "fixed", "{}"),
    ])]));
    let calls = Arc::new(AtomicU32::new(0));
    let ex = executor(
        doc(&server.base_url(), json!({}), json!({"max_steps": 3})),
        Arc::clone(&calls),
    );
    let run = run(&rt, &ex);
    assert_eq!(run.status(), RunStatus::Stopped, "{:?}", run.message());
    assert_eq!(run.termination_reason(), Some(R::MaxStepsExceeded));
    assert_eq!(run.steps(), 3);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "only the calls that fit ran"
    );
    let statuses: Vec<_> = run
        .trace()
        .iter()
        .filter_map(|i| i.tool_call())
        .map(|t| t.status)
        .collect();
    assert_eq!(
        statuses,
        [
            ToolCallStatus::Ok,
            ToolCallStatus::Ok,
            ToolCallStatus::Skipped,
            ToolCallStatus::Skipped
        ]
    );
    let messages = &run.sessions()[0].messages;
    let last = messages.last().expect("the session's messages");
    assert_eq!(last.tool_call_id.as_deref(), Some("c4"));
    assert!(
        last.content
            .as_deref()
            .is_some_and(|c| c.contains("not run: the run's max_steps (3)")),
        "{last:?}"
    );
    assert_eq!(server.requests().len(), 1, "no model call past the budget");
    assert_eq!(
        run.trace().to_items().into_iter().last().map(|i| i.kind),
        Some(K::GuardStop),
        "the stop is a guard's"
    );
}

/// One scripted reply of the property below.
#[derive(Debug, Clone)]
enum Turn {
    /// This many lookups (and one `fixed` when odd).
    Tools(usize),
    /// A call of the agent tool `researcher` beside a lookup (its session's replies come
    /// from the same script).
    Research,
    Text,
    Exit,
}

fn turn_reply(t: &Turn) -> Reply {
    match t {
        Turn::Tools(n) => {
            let calls: Vec<(String, &str, String)> = (0..*n)
                .map(|i| {
                    let name = if i % 2 == 1 { "fixed" } else { "lookup" };
                    let args = if name == "fixed" {
                        "{}".to_string()
                    } else {
                        format!("{{\"id\": {i}}}")
                    };
                    (format!("c{i}"), name, args)
                })
                .collect();
            let refs: Vec<(&str, &str, &str)> = calls
                .iter()
                .map(|(id, n, a)| (id.as_str(), *n, a.as_str()))
                .collect();
            Reply::tool_calls(&refs)
        }
        Turn::Research => Reply::tool_calls(&[
            ("r0", "researcher", r#"{"query": "tides"}"#),
            ("r1", "lookup", r#"{"id": 9}"#),
        ]),
        Turn::Text => Reply::text("thinking"),
        Turn::Exit => report("done"),
    }
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        4 => (1usize..7).prop_map(Turn::Tools),
        1 => Just(Turn::Research),
        1 => Just(Turn::Text),
        1 => Just(Turn::Exit),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// For all scripts of replies (any number of tool calls each, an agent tool among
    /// them) and all `max_steps`: the run never takes more than `max_steps` steps, no
    /// trace item is recorded past it, every call was counted as a step (steps = model
    /// calls + tool calls not skipped; lookups run = `ok` lookup items), and a run that
    /// ends for want of steps says `max_steps_exceeded`.
    #[test]
    fn no_agent_run_ever_passes_max_steps(
        script in prop::collection::vec(turn(), 1..6),
        max_steps in 1u32..12,
    ) {
        let rt = rt();
        let server = rt.block_on(ChatServer::start(script.iter().map(turn_reply)));
        let calls = Arc::new(AtomicU32::new(0));
        let ex = executor(
            doc(&server.base_url(), json!({"max_retries": 0}), json!({"max_steps": max_steps})),
            Arc::clone(&calls),
        );
        let run = run(&rt, &ex);
        prop_assert!(run.steps() <= max_steps, "{} steps, max_steps {}", run.steps(), max_steps);
        prop_assert!(run.trace().to_items().iter().all(|i| i.step <= max_steps));
        let items = &run.trace().to_items();
        let model_calls = items.iter().filter(|i| i.kind == K::ModelCall).count() as u32;
        let counted_tools = items
            .iter()
            .filter_map(|i| i.tool_call())
            .filter(|t| t.status != ToolCallStatus::Skipped)
            .count() as u32;
        prop_assert_eq!(run.steps(), model_calls + counted_tools, "every call is a step");
        let lookups_ok = items
            .iter()
            .filter_map(|i| i.tool_call())
            .filter(|t| &*t.tool == "lookup" && t.status == ToolCallStatus::Ok)
            .count() as u32;
        prop_assert_eq!(calls.load(Ordering::SeqCst), lookups_ok);
        prop_assert!(!run.is_running());
        if run.termination_reason() == Some(R::MaxStepsExceeded) {
            prop_assert_eq!(run.steps(), max_steps);
        }
    }
}

/// Proves the command line: `run --stream` prints a streaming model's chunks as
/// `model_delta` lines (JSON Lines, between the kept events, each with the seq of the
/// line before it); the store's history (`runs watch`) has every kept event and no
/// delta; `runs show --trace` prints the call items' fields in words and `--format json`
/// carries them as fields.
#[cfg(feature = "store")]
#[test]
fn run_stream_prints_model_deltas_and_runs_show_prints_the_call_fields() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::stream_text(&["Thinking ", "it ", "over"], true),
        Reply::stream_tool_call("call_1", "lookup", &["{\"id\"", ": 5}"], true),
        Reply::stream_tool_call("call_exit", "final_report", &["{\"answer\": ", "7}"], false),
    ]));
    let b = support::cli::Bench::new(env!("CARGO_BIN_EXE_pactgraph"));
    let mut d = doc(&server.base_url(), json!({"stream": true}), json!({}));
    d["slices"]["answer"]["schema"] = json!({"type": "integer"});
    d["nodes"]["lookup"]["run"] = json!({"set": {"order": 5}});
    let wf = b.file("wf.json", &d.to_string());
    let wf = wf.to_str().expect("utf-8");
    let streamed = b.run(&["run", wf, "--quiet", "--stream", "--name", "s"]);
    assert_eq!(streamed.code, 0, "{}", streamed.err);
    let lines: Vec<Value> = streamed
        .out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let (outcome, events) = lines.split_last().expect("the outcome last");
    assert_eq!(outcome["status"], "completed");
    let mut last_seq = 0;
    let mut text = String::new();
    let mut kept = Vec::new();
    for e in events {
        if e["event"] == "model_delta" {
            assert_eq!(e["seq"], last_seq, "{e}");
            assert_eq!(e["node"], "agent");
            if e.get("tool_call").is_none() {
                assert_eq!(e["turn"], 1);
                text.push_str(e["text"].as_str().expect("text"));
            }
        } else {
            last_seq = e["seq"].as_u64().expect("a seq");
            kept.push(e.clone());
        }
    }
    assert_eq!(text, "Thinking it over");
    let deltas = events.len() - kept.len();
    assert_eq!(deltas, 3 + 2 + 2, "one line per chunk");
    let watched = b.run(&["runs", "watch", "s"]);
    assert_eq!(watched.code, 0, "{}", watched.err);
    let history: Vec<Value> = watched
        .out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .filter(|e: &Value| e.get("seq").is_some())
        .collect();
    assert!(history.iter().all(|e| e["event"] != "model_delta"));
    assert_eq!(history.len(), kept.len(), "the history is the kept events");
    let shown = b.run(&["runs", "show", "s", "--trace"]);
    assert_eq!(shown.code, 0, "{}", shown.err);
    assert!(
        shown
            .out
            .contains("turn 2, attempt 1, finish_reason tool_calls, 11 in / 7 out tokens"),
        "{}",
        shown.out
    );
    assert!(shown.out.contains("call call_1 (#0): ok"), "{}", shown.out);
    assert!(
        shown
            .out
            .contains("turn 3, attempt 1, finish_reason tool_calls, usage unknown"),
        "{}",
        shown.out
    );
    let json = b.show("s");
    let trace = json["trace"].as_array().expect("the trace");
    let calls: Vec<&Value> = trace.iter().filter(|i| i["kind"] == "model_call").collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[2]["model_call"]["usage_known"], false);
    let tool = trace
        .iter()
        .find(|i| i["kind"] == "tool_call")
        .expect("a tool call");
    assert_eq!(tool["tool_call"]["status"], "ok");
    assert_eq!(tool["tool_call"]["call_id"], "call_1");
}
