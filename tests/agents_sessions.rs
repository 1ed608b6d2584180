//! Agent sessions through the library, against the scripted Chat Completions server on
//! loopback (real HTTP): the exit tool and what each request offered, tool calls and
//! their results, mistakes told to the model, the text-reply rule, the forced last turn,
//! `agent_no_exit`, `model_error`, usage and cost, the usage budgets and cancellation.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use std::sync::Arc;
use std::time::Duration;

use chat_server::{ChatServer, Reply, completion};
use pactgraph::runtime::{
    Executor, NodeInput, RunState, RunStatus, TerminationReason as R, TraceKind as K,
};
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

/// Root dispatches agent `agent` (writes `answer`, schema `answer_schema`) once, then
/// stops; tools `lookup` (a handler) and `fixed` (a `set` node) are offered.
fn doc(base_url: &str, answer_schema: Value, agent: Value, price: Option<Value>) -> Value {
    let mut model = json!({"base_url": base_url, "model": "scripted-model",
                           "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 1});
    if let Some(p) = price {
        model["price"] = p;
    }
    json!({
        "workflow": "agents",
        "slices": {"question": {}, "answer": {"schema": answer_schema}},
        "models": {"default": model},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "reads": ["question"], "writes": ["answer"],
                      "run": {"agent": agent},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "lookup": {"supervisor": "root", "run": {"handler": "lookup"},
                       "tool": {"description": "Looks an order up.",
                                "parameters": {"type": "object",
                                               "properties": {"id": {"type": "integer"}},
                                               "required": ["id"],
                                               "additionalProperties": false}}},
            "fixed": {"supervisor": "root", "run": {"set": {"status": "shipped"}},
                      "tool": {"description": "Always the same.",
                               "parameters": {"type": "object", "properties": {}}}}
        }
    })
}

fn string_doc(base_url: &str, agent: Value) -> Value {
    doc(base_url, json!({"type": "string"}), agent, None)
}

/// The executor for `doc`, `lookup` answering `{"order": id, "seen": n}` after waiting
/// on `barrier` (when given: two concurrent calls pass it together).
fn executor(doc: Value, barrier: Option<Arc<tokio::sync::Barrier>>) -> Executor {
    builder(graph(doc))
        .node_handler("lookup", move |input: NodeInput| {
            let barrier = barrier.clone();
            async move {
                if let Some(b) = barrier {
                    b.wait().await;
                }
                Ok(writes(&[("order", input.view["id"].clone())]))
            }
        })
        .build()
        .expect("the executor builds")
}

fn run(rt: &tokio::runtime::Runtime, ex: &Executor, input: Value) -> RunState {
    let mut state = ex.start(input).expect("a valid input");
    rt.block_on(ex.run_in_place(&mut state));
    state
}

fn kinds(run: &RunState) -> Vec<K> {
    run.trace().to_items().iter().map(|i| i.kind).collect()
}

fn report(args: Value) -> Reply {
    Reply::tool_calls(&[("call_exit", "final_report", &args.to_string())])
}

#[test]
fn final_report_ends_the_session_with_the_writes_and_the_request_offers_the_tools() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([report(json!({"answer": "42"}))]));
    let agent = json!({"instructions": "Answer {{ question.text }}.", "prompt": "Q: {{ question.text }}",
                       "tools": ["lookup", "fixed"], "max_turns": 3});
    let ex = executor(string_doc(&server.base_url(), agent), None);
    let run = run(&rt, &ex, json!({"question": {"text": "six times seven"}}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], "42");
    assert_eq!(
        kinds(&run),
        [
            K::Decision,
            K::ModelCall,
            K::Dispatch,
            K::Return,
            K::Decision,
            K::End
        ]
    );
    let call = &run.trace().to_items()[1];
    assert_eq!(call.source.as_deref(), Some("agent"));
    assert_eq!(call.target.as_deref(), Some("default"));
    let reason = call.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("turn 1, attempt 1, finish_reason tool_calls"),
        "{reason}"
    );
    assert_eq!(run.steps(), 1, "one model call, one step");
    assert_eq!(run.visits()["agent"], 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(body["model"], "scripted-model");
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "Answer six times seven."},
               {"role": "user", "content": "Q: six times seven"}])
    );
    let names: Vec<&str> = body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["final_report", "lookup", "fixed"]);
    let exit = &body["tools"][0]["function"];
    assert_eq!(
        exit["strict"], true,
        "every property required, closed: strict"
    );
    assert_eq!(
        exit["parameters"],
        json!({"type": "object", "properties": {"answer": {"type": "string"}},
               "required": ["answer"], "additionalProperties": false})
    );
    assert_eq!(body["tools"][1]["function"]["strict"], true);
    assert_ne!(
        body["tools"][2]["function"]["strict"], true,
        "not closed: not strict"
    );
    assert!(body.get("tool_choice").is_none(), "not the last turn");
    // The session is run state: the wire conversation.
    let session = &run.sessions()[0];
    assert_eq!((&*session.node, session.visit), ("agent", 1));
    assert_eq!(session.messages.len(), 3);
    assert_eq!(
        serde_json::to_value(&session.messages[2]).expect("json")["tool_calls"][0]["id"],
        "call_exit"
    );
    // Saved and read back, the run is the same.
    let back = RunState::from_json(run.to_json()).expect("reads back");
    assert_eq!(back, run);
}

#[test]
fn tool_calls_run_concurrently_and_answer_in_the_models_order() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::tool_calls(&[
            ("call_a", "lookup", r#"{"id": 1}"#),
            ("call_b", "lookup", r#"{"id": 2}"#),
            ("call_c", "fixed", "{}"),
        ]),
        report(json!({"answer": "both found"})),
    ]));
    let agent = json!({"tools": ["lookup", "fixed"]});
    // Both `lookup` calls wait on a barrier of two: they pass only if they run at once.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let ex = executor(string_doc(&server.base_url(), agent), Some(barrier));
    let run = rt.block_on(async {
        let state = ex.start(json!({"question": "where?"})).expect("valid");
        let mut state = state;
        tokio::time::timeout(Duration::from_secs(20), ex.run_in_place(&mut state))
            .await
            .expect("the two calls ran at once (else the barrier never opens)");
        state
    });
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], "both found");
    assert_eq!(
        kinds(&run)[..6],
        [
            K::Decision,
            K::ModelCall,
            K::ToolCall,
            K::ToolCall,
            K::ToolCall,
            K::ModelCall
        ]
    );
    assert_eq!(run.steps(), 5, "two model calls and three tool calls");
    let second = &server.requests()[1].body["messages"];
    let tail: Vec<Value> = second.as_array().expect("messages")[2..].to_vec();
    assert_eq!(
        tail[0],
        json!({"role": "tool", "content": r#"{"order":1}"#, "tool_call_id": "call_a"})
    );
    assert_eq!(
        tail[1],
        json!({"role": "tool", "content": r#"{"order":2}"#, "tool_call_id": "call_b"})
    );
    assert_eq!(
        tail[2],
        json!({"role": "tool", "content": r#"{"status":"shipped"}"#, "tool_call_id": "call_c"})
    );
    let tool_item = &run.trace().to_items()[2];
    assert_eq!(tool_item.source.as_deref(), Some("agent"));
    assert_eq!(tool_item.target.as_deref(), Some("lookup"));
    assert_eq!(tool_item.reason.as_deref(), Some("call call_a: ok"));
}

#[test]
fn mistakes_go_back_to_the_model_as_tool_results_and_count_a_turn() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::tool_calls(&[
            ("c1", "final_report", r#"{"answer": 7}"#),
            ("c2", "lookup", r#"{"id": "seven"}"#),
            ("c3", "nowhere", "{}"),
            ("c4", "lookup", "not json"),
        ]),
        report(json!({"answer": "7"})),
    ]));
    let ex = executor(
        string_doc(&server.base_url(), json!({"tools": ["lookup"]})),
        None,
    );
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    let messages = server.requests()[1].body["messages"].clone();
    let results: Vec<Value> = messages.as_array().expect("messages")[2..6]
        .iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default();
            serde_json::from_str::<Value>(text).expect("tool results are JSON")["error"].clone()
        })
        .collect();
    let said = |i: usize| results[i].as_str().unwrap_or_default().to_string();
    assert!(
        said(0).contains("`final_report`") && said(0).contains("at `/answer`"),
        "{}",
        said(0)
    );
    assert!(
        said(1).contains("`lookup`") && said(1).contains("at `/id`"),
        "{}",
        said(1)
    );
    assert!(said(2).contains("no tool `nowhere`"), "{}", said(2));
    assert!(said(3).contains("not valid JSON"), "{}", said(3));
    assert_eq!(run.sessions()[0].turns(), 2, "the mistake cost a turn");
}

#[test]
fn a_text_reply_is_the_value_of_a_lone_string_slice() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([Reply::text("forty-two")]));
    let ex = executor(string_doc(&server.base_url(), json!({})), None);
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], "forty-two");
}

#[test]
fn a_text_reply_is_answered_with_a_request_for_the_exit_and_the_last_turn_forces_it() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::text("I think it is 42"),
        report(json!({"answer": {"n": 42}})),
    ]));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}},
                        "required": ["n"], "additionalProperties": false});
    let ex = executor(
        doc(&server.base_url(), schema, json!({"max_turns": 2}), None),
        None,
    );
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], json!({"n": 42}));
    let requests = server.requests();
    assert!(requests[0].body.get("tool_choice").is_none());
    let last = requests[1].body["messages"]
        .as_array()
        .expect("messages")
        .clone();
    let asked = last.last().expect("a message");
    assert_eq!(asked["role"], "user");
    assert!(
        asked["content"]
            .as_str()
            .unwrap_or_default()
            .contains("final_report")
    );
    assert_eq!(
        requests[1].body["tool_choice"],
        json!({"type": "function", "function": {"name": "final_report"}})
    );
}

#[test]
fn a_session_without_a_valid_exit_fails_with_agent_no_exit() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::text("no"),
        Reply::tool_calls(&[("c", "final_report", r#"{"wrong": 1}"#)]),
    ]));
    let schema = json!({"type": "object"});
    let ex = executor(
        doc(&server.base_url(), schema, json!({"max_turns": 2}), None),
        None,
    );
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Failed);
    assert_eq!(run.termination_reason(), Some(R::AgentNoExit));
    let msg = run.message().unwrap_or_default();
    assert!(
        msg.contains("agent node `agent`") && msg.contains("2 model call"),
        "{msg}"
    );
    assert_eq!(server.requests().len(), 2, "no call past max_turns");
    // The end item stands for the node run: it carries the session's usage.
    let end = run.trace().iter().last().expect("an end item");
    assert_eq!(end.source(), Some("agent"));
    assert_eq!(
        end.usage().and_then(|u| u.get("input_tokens")),
        Some(&22.into())
    );
}

#[test]
fn a_refused_request_fails_with_model_error_naming_node_model_and_status() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([Reply::error(401, "bad key, friend")]));
    let ex = executor(string_doc(&server.base_url(), json!({})), None);
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Failed);
    assert_eq!(run.termination_reason(), Some(R::ModelError));
    let msg = run.message().unwrap_or_default();
    for part in [
        "agent node `agent`",
        "401",
        "bad key, friend",
        "scripted-model",
    ] {
        assert!(msg.contains(part), "{part} in {msg}");
    }
    assert_eq!(server.requests().len(), 1, "401 is not retried");
    assert_eq!(kinds(&run), [K::Decision, K::ModelCall, K::End]);
}

#[test]
fn usage_and_cost_are_accounted_and_unknown_usage_is_counted_as_unknown() {
    let rt = rt();
    let no_usage = Reply::json(
        200,
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "fixed", "arguments": "{}"}}]}),
            "tool_calls",
            None,
        ),
    );
    let server = rt.block_on(ChatServer::start([
        no_usage,
        report(json!({"answer": "x"})),
    ]));
    let price = json!({"input_per_mtok": 1000.0, "output_per_mtok": 2000.0});
    let ex = executor(
        doc(
            &server.base_url(),
            json!({"type": "string"}),
            json!({"tools": ["fixed"]}),
            Some(price),
        ),
        None,
    );
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    let acct = run.outcome().accounting;
    let by = &acct.by_node["agent"];
    assert_eq!(by.get("input_tokens"), Some(&11.into()));
    assert_eq!(by.get("output_tokens"), Some(&7.into()));
    assert_eq!(
        by.get("usage_unknown"),
        Some(&1.into()),
        "one call sent no usage"
    );
    let cost = by
        .get("cost_usd")
        .and_then(|n| n.as_f64())
        .unwrap_or_default();
    assert!(
        (cost - 0.025).abs() < 1e-9,
        "11 * 1000/1e6 + 7 * 2000/1e6 = {cost}"
    );
    assert_eq!(acct.total.get("input_tokens"), Some(&11.into()));
    let first = &run.trace().to_items()[1];
    assert!(
        first
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("usage unknown")
    );
    assert_eq!(run.usage_total().get("output_tokens"), Some(&7.into()));
}

#[test]
fn max_cost_usd_stops_the_run_before_the_next_model_call() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::tool_calls(&[("c", "fixed", "{}")]),
        report(json!({"answer": "x"})),
    ]));
    let price = json!({"input_per_mtok": 1000.0, "output_per_mtok": 2000.0});
    let mut d = doc(
        &server.base_url(),
        json!({"type": "string"}),
        json!({"tools": ["fixed"]}),
        Some(price),
    );
    d["budgets"] = json!({"max_cost_usd": 0.01});
    let ex = executor(d, None);
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Stopped);
    assert_eq!(run.termination_reason(), Some(R::BudgetExceeded));
    assert_eq!(server.requests().len(), 1, "the second call never went out");
}

#[test]
fn cancelling_the_run_aborts_the_request_in_flight() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([Reply::hang()]));
    let ex = executor(string_doc(&server.base_url(), json!({})), None);
    let token = ex.cancellation_token();
    let run = rt.block_on(async {
        let mut state = ex.start(json!({})).expect("valid");
        let driving = ex.run_in_place(&mut state);
        let cancel = async {
            assert!(server.wait_requests(1, Duration::from_secs(10)).await);
            token.cancel();
            assert!(
                server.wait_closed(0, Duration::from_secs(5)).await,
                "the request in flight was dropped"
            );
        };
        tokio::join!(driving, cancel);
        state
    });
    assert_eq!(run.status(), RunStatus::Stopped);
    assert_eq!(run.termination_reason(), Some(R::Cancelled));
    assert!(
        run.sessions().is_empty(),
        "nothing of the call in flight is kept"
    );
}

#[test]
fn a_router_agent_hands_off_through_handoff_to_with_its_destinations_as_an_enum() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::tool_calls(&[("h1", "handoff_to", r#"{"agent": "nowhere"}"#)]),
        Reply::tool_calls(&[(
            "h2",
            "handoff_to",
            r#"{"agent": "billing", "message": "refund"}"#,
        )]),
    ]));
    let d = json!({
        "workflow": "agent-router",
        "slices": {"request": {}, "note": {}, "done": {}},
        "models": {"default": {"base_url": server.base_url(), "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY"}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["triage"],
                                 "default": {"stop_global": {"reason": "finished"}}}},
        "nodes": {
            "triage": {"supervisor": "root", "reads": ["request"],
                       "triggers": [{"when": {"path": "/done", "exists": false}}],
                       "router": {"destinations": ["billing", "support"], "message_slice": "note"},
                       "run": {"agent": {}}},
            "billing": {"supervisor": "root", "reads": ["note"], "writes": ["done"],
                        "run": {"set": {"done": "billing"}}},
            "support": {"supervisor": "root", "reads": ["note"], "writes": ["done"],
                        "run": {"set": {"done": "support"}}}
        }
    });
    let ex = executor(d, None);
    let run = run(&rt, &ex, json!({"request": "my money back"}));
    assert_eq!(
        run.status(),
        RunStatus::Completed,
        "{:?} {}",
        run.message(),
        run.trace().to_table()
    );
    assert_eq!(run.state()["done"], "billing");
    assert_eq!(
        run.state()["note"],
        json!({"router": "triage", "message": "refund"})
    );
    let first = &server.requests()[0].body;
    let handoff = &first["tools"][0]["function"];
    assert_eq!(handoff["name"], "handoff_to");
    assert_eq!(
        handoff["parameters"]["properties"]["agent"]["enum"],
        json!(["billing", "support"])
    );
    assert_eq!(
        first["tools"].as_array().map(Vec::len),
        Some(1),
        "no may_answer: no final_report"
    );
    // The destination outside the enum was a mistake told to the model.
    let told = &server.requests()[1].body["messages"][2];
    assert_eq!(told["tool_call_id"], "h1");
    assert!(
        told["content"]
            .as_str()
            .unwrap_or_default()
            .contains("at `/agent`")
    );
}

#[test]
fn an_advised_agents_default_prompt_starts_with_the_tagged_advice() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([report(json!({"answer": "ok"}))]));
    let d = json!({
        "workflow": "agent-advised",
        "slices": {"request": {}, "advice": {}, "answer": {}, "scratch": {}},
        "models": {"default": {"base_url": server.base_url(), "model": "m",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY"}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["primary"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "critic": {"supervisor": "root", "reads": ["request"], "writes": ["scratch"],
                       "run": {"set": {"scratch": "looks fine"}}},
            "primary": {"supervisor": "root", "reads": ["request", "advice"], "writes": ["answer"],
                        "run": {"agent": {}},
                        "advisors": {"members": ["critic"], "slice": "advice"},
                        "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]}
        }
    });
    let ex = executor(d, None);
    let run = run(&rt, &ex, json!({"request": "review this"}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    let prompt = server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(prompt.starts_with("<original_user_request__"), "{prompt}");
    assert!(
        prompt.contains("<advisory__") && prompt.contains("agent=\"critic\""),
        "{prompt}"
    );
    assert!(
        prompt.contains("\"request\": \"review this\""),
        "the view follows: {prompt}"
    );
}
