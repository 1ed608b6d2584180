//! Supervisor policies as agents (brief 10.2) and `clarify` continuing the entrypoint's
//! session (brief 10.3), through the library, against the scripted Chat Completions
//! server on loopback (real HTTP): each `route` decision (an allow id, `stop_local`,
//! `stop_global`, `ask_clarification`) and what each request offered (the enum, `strict`,
//! the forced last turn), mistakes told to the model and counted, `agent_no_exit`, a
//! policy agent's tool calls, and a clarification appended to the kept session.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chat_server::{ChatServer, Reply};
use pactgraph::contracts::RoutingDecision;
use pactgraph::runtime::{
    Accounting, Executor, HandlerError, PolicyInput, RunState, RunStatus, TerminationReason as R,
    TraceKind as K, sync_policy,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn model(base_url: &str) -> Value {
    json!({"base_url": base_url, "model": "scripted-model",
           "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0})
}

/// Root supervisor `desk` decides with a policy agent (`policy`) among `answer` (a `set`
/// node writing `answer`) and, when `clarification`, with a `clarification` slice
/// declared. Tool `fixed` (a `set` tool node) is offered when the policy lists it.
fn doc(base_url: &str, policy: Value, clarification: bool) -> Value {
    let mut slices = json!({"question": {}, "answer": {"schema": {"type": "string"}}});
    if clarification {
        slices["clarification"] = json!({});
    }
    json!({
        "workflow": "agent-policy",
        "slices": slices,
        "models": {"default": model(base_url)},
        "budgets": {"max_steps": 20},
        "entry": "desk",
        "supervisors": {"desk": {"allow": ["answer"], "policy": {"agent": policy}}},
        "nodes": {
            "answer": {"supervisor": "desk", "writes": ["answer"],
                       "run": {"set": {"answer": "forty-two"}}},
            "fixed": {"supervisor": "desk", "run": {"set": {"status": "shipped"}},
                      "tool": {"description": "Always the same.",
                               "parameters": {"type": "object", "properties": {}}}}
        }
    })
}

fn route(id: &str, args: Value) -> Reply {
    Reply::tool_calls(&[(id, "route", &args.to_string())])
}

fn run(rt: &tokio::runtime::Runtime, ex: &Executor, input: Value) -> RunState {
    let mut state = ex.start(input).expect("a valid input");
    rt.block_on(ex.run_in_place(&mut state));
    state
}

fn kinds(run: &RunState) -> Vec<K> {
    run.trace().to_items().iter().map(|i| i.kind).collect()
}

fn executor(doc: Value) -> Executor {
    builder(graph(doc)).build().expect("the executor builds")
}

/// Proves: `route` to an allow id dispatches it and `stop_global` ends the run; each
/// decision is one session whose model call is a step (`model_call`, source the
/// supervisor) before its `decision` item, which carries the model's reason; the
/// request offers `route` alone, `decision` an enum of the allow ids and the stops (no
/// `ask_clarification` without a `clarification` slice, so the schema is strict), no
/// forced tool before the last turn; the templates see the level's slices and `allow`.
#[test]
fn route_to_an_allow_id_dispatches_it_and_stop_global_ends_the_run() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        route(
            "c1",
            json!({"decision": "answer", "reason": "nothing answered yet"}),
        ),
        route(
            "c2",
            json!({"decision": "stop_global", "reason": "answered"}),
        ),
    ]));
    let policy = json!({"instructions": "Choose among {{ allow | join(', ') }}.",
                        "prompt": "Q: {{ question.text }} A: {{ answer | tojson }}",
                        "max_turns": 3});
    let ex = executor(doc(&server.base_url(), policy, false));
    let run = run(&rt, &ex, json!({"question": {"text": "six times seven"}}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], "forty-two");
    assert_eq!(
        kinds(&run),
        [
            K::ModelCall,
            K::Decision,
            K::Dispatch,
            K::Return,
            K::ModelCall,
            K::Decision,
            K::End
        ]
    );
    let items = &run.trace().to_items();
    assert_eq!(items[0].source.as_deref(), Some("desk"));
    assert_eq!(items[0].supervisor.as_deref(), Some("desk"));
    assert_eq!(items[0].target.as_deref(), Some("default"));
    assert_eq!(items[1].target.as_deref(), Some("answer"));
    assert_eq!(items[1].reason.as_deref(), Some("nothing answered yet"));
    assert_eq!(items[5].target.as_deref(), Some("stop_global"));
    assert_eq!(run.termination_reason(), Some(R::StopGlobal));
    assert_eq!(run.steps(), 3, "two model calls and the dispatch");
    let sessions = run.sessions();
    assert_eq!(sessions.len(), 2, "one session per decision");
    assert_eq!((&*sessions[0].node, sessions[0].visit), ("desk", 1));
    assert_eq!((&*sessions[1].node, sessions[1].visit), ("desk", 2));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let body = &requests[0].body;
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "Choose among answer."},
               {"role": "user", "content": "Q: six times seven A: null"}])
    );
    let tools = body["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1, "route alone: {tools:?}");
    let f = &tools[0]["function"];
    assert_eq!(f["name"], "route");
    assert_eq!(f["strict"], true);
    assert_eq!(
        f["parameters"]["properties"]["decision"]["enum"],
        json!(["answer", "stop_local", "stop_global"])
    );
    assert_eq!(f["parameters"]["required"], json!(["decision", "reason"]));
    assert!(body.get("tool_choice").is_none(), "not the last turn");
    assert_eq!(
        requests[1].body["messages"][1]["content"], "Q: six times seven A: \"forty-two\"",
        "the second decision's session sees the new state"
    );
}

/// Proves: `stop_local` at the root completes the run with reason `stop_local` and the
/// model's reason in the end item.
#[test]
fn stop_local_ends_the_level() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([route(
        "c1",
        json!({"decision": "stop_local", "reason": "nothing to do"}),
    )]));
    let ex = executor(doc(&server.base_url(), json!({"prompt": "go"}), false));
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.termination_reason(), Some(R::StopLocal));
    assert_eq!(kinds(&run), [K::ModelCall, K::Decision, K::End]);
    assert_eq!(
        run.trace().to_items()[2].reason.as_deref(),
        Some("nothing to do")
    );
}

/// Proves: with a `clarification` slice, `ask_clarification` is offered (and `question`,
/// so the schema is not strict) and pauses the run with the model's question; resumed
/// with an answer, the supervisor decides again in a new session whose templates see the
/// answer in `clarification`.
#[test]
fn ask_clarification_pauses_the_run_with_the_question() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        route(
            "c1",
            json!({"decision": "ask_clarification", "reason": "unclear",
                   "question": "Which order?"}),
        ),
        route(
            "c2",
            json!({"decision": "stop_global", "reason": "answered"}),
        ),
    ]));
    let policy =
        json!({"prompt": "go{% if clarification %}: {{ clarification.answer }}{% endif %}"});
    let ex = executor(doc(&server.base_url(), policy, true));
    let run = run(&rt, &ex, json!({}));
    assert_eq!(
        run.status(),
        RunStatus::AwaitingInput,
        "{:?}",
        run.message()
    );
    assert_eq!(run.question(), Some("Which order?"));
    assert_eq!(kinds(&run), [K::ModelCall, K::Decision, K::Pause]);
    let f = &server.requests()[0].body["tools"][0]["function"];
    assert_eq!(
        f["parameters"]["properties"]["decision"]["enum"],
        json!(["answer", "stop_local", "stop_global", "ask_clarification"])
    );
    assert_eq!(f["parameters"]["properties"]["question"]["type"], "string");
    assert!(f.get("strict").is_none(), "question is optional: {f}");
    let mut resumed = ex.resume(run, "order 12").expect("it awaits an answer");
    rt.block_on(ex.run_in_place(&mut resumed));
    assert_eq!(
        resumed.status(),
        RunStatus::Completed,
        "{:?}",
        resumed.message()
    );
    assert_eq!(
        resumed.sessions().len(),
        2,
        "a new session for the new decision"
    );
    assert_eq!(
        server.requests()[1].body["messages"],
        json!([{"role": "user", "content": "go: order 12"}])
    );
}

/// Proves: a decision outside the enum, and `ask_clarification` without its question,
/// are told to the model as the call's tool result with the JSON Pointer, each counting
/// a turn and a `tool_call` step; the last allowed turn forces `route`; the third,
/// valid, decision is taken.
#[test]
fn invalid_decisions_go_back_to_the_model_and_the_last_turn_forces_route() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        route("c1", json!({"decision": "nowhere", "reason": "r"})),
        route(
            "c2",
            json!({"decision": "ask_clarification", "reason": "r"}),
        ),
        route("c3", json!({"decision": "stop_global", "reason": "done"})),
    ]));
    let ex = executor(doc(
        &server.base_url(),
        json!({"prompt": "go", "max_turns": 3}),
        true,
    ));
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(
        kinds(&run),
        [
            K::ModelCall,
            K::ToolCall,
            K::ModelCall,
            K::ToolCall,
            K::ModelCall,
            K::Decision,
            K::End
        ]
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let told = |i: usize| requests[i].body["messages"].as_array().expect("messages")[2].clone();
    assert_eq!(told(1)["tool_call_id"], "c1");
    let first = told(1)["content"].as_str().unwrap_or_default().to_string();
    assert!(
        first.contains("`/decision`") && first.contains("nowhere"),
        "{first}"
    );
    let second = requests[2].body["messages"][4]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(second.contains("question"), "{second}");
    assert!(requests[1].body.get("tool_choice").is_none());
    assert_eq!(
        requests[2].body["tool_choice"],
        json!({"type": "function", "function": {"name": "route"}}),
        "the last allowed turn forces route"
    );
}

/// Proves: a policy agent that never routes fails the run `agent_no_exit` after
/// max_turns, naming the supervisor; its text replies are answered with a request for
/// `route`.
#[test]
fn a_policy_without_a_valid_route_fails_with_agent_no_exit() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::text("I think answer."),
        Reply::text("Still thinking."),
    ]));
    let ex = executor(doc(
        &server.base_url(),
        json!({"prompt": "go", "max_turns": 2}),
        false,
    ));
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Failed);
    assert_eq!(run.termination_reason(), Some(R::AgentNoExit));
    let msg = run.message().unwrap_or_default();
    assert!(
        msg.contains("the agent policy of supervisor `desk`") && msg.contains("route"),
        "{msg}"
    );
    let acct = Accounting::from_trace(run.trace());
    assert_eq!(
        acct.total.get("input_tokens"),
        Some(&22.into()),
        "the two calls, counted once (the failure's item is no record)"
    );
    let requests = server.requests();
    let asked = &requests[1].body["messages"][2];
    assert_eq!(
        requests[1].body["messages"][1]["content"],
        "I think answer."
    );
    assert_eq!(asked["role"], "user");
    assert!(
        asked["content"]
            .as_str()
            .unwrap_or_default()
            .contains("`route`"),
        "{asked}"
    );
}

/// Proves: a policy agent's tool call is a `tool_call` step (source the supervisor)
/// whose result goes back to the model before it routes; the accounting counts the
/// policy's model calls under the supervisor, as `usage_total` does.
#[test]
fn a_policy_agent_calls_its_tools_before_routing() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::tool_calls(&[("t1", "fixed", "{}")]),
        route(
            "c2",
            json!({"decision": "stop_global", "reason": "shipped"}),
        ),
    ]));
    let ex = executor(doc(
        &server.base_url(),
        json!({"prompt": "go", "tools": ["fixed"]}),
        false,
    ));
    let run = run(&rt, &ex, json!({}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(
        kinds(&run),
        [K::ModelCall, K::ToolCall, K::ModelCall, K::Decision, K::End]
    );
    assert_eq!(run.trace().to_items()[1].source.as_deref(), Some("desk"));
    assert_eq!(run.trace().to_items()[1].target.as_deref(), Some("fixed"));
    let acct = Accounting::from_trace(run.trace());
    let tokens =
        |u: &pactgraph::runtime::Usage| u.get("input_tokens").and_then(serde_json::Number::as_u64);
    assert_eq!(
        tokens(&acct.total),
        Some(22),
        "two model calls of 11 input tokens"
    );
    assert_eq!(tokens(&acct.by_node["desk"]), Some(22));
    assert_eq!(tokens(&acct.by_owner["desk"]), Some(22));
    assert_eq!(tokens(run.usage_total()), Some(22));
    let saved = serde_json::to_value(run.trace()).expect("the trace serializes");
    let back: pactgraph::runtime::DecisionTrace =
        serde_json::from_value(saved).expect("and reads back");
    assert_eq!(&back, run.trace(), "the policy's records round-trip");
    let requests = server.requests();
    assert_eq!(
        requests[1].body["messages"][2],
        json!({"role": "tool", "tool_call_id": "t1", "content": r#"{"status":"shipped"}"#})
    );
}

/// Root `boss` (a handler) calls the `chat` subgraph `research` whose entrypoint `lead`
/// decides with a policy agent among `dig`; once it returns, `boss` clarifies it once,
/// then stops.
fn clarify_doc(base_url: &str) -> Value {
    json!({
        "workflow": "agent-clarify",
        "slices": {"topic": {}, "findings": {}, "report": {}, "clarification": {}},
        "models": {"default": model(base_url)},
        "budgets": {"max_steps": 30},
        "entry": "boss",
        "supervisors": {
            "boss": {"allow": ["research"], "policy": {"handler": "boss"}},
            "lead": {"allow": ["dig"],
                     "policy": {"agent": {"instructions": "You lead research.",
                                          "prompt": "Topic: {{ topic }}"}}}
        },
        "subgraphs": {
            "research": {"entrypoint": "lead", "supervisors": ["lead"],
                         "reads": ["topic", "clarification"], "writes": ["findings"],
                         "result_slice": "report", "chat": true}
        },
        "nodes": {
            "dig": {"supervisor": "lead", "writes": ["findings"],
                    "run": {"set": {"findings": "three sources"}}}
        }
    })
}

/// Proves: `clarify` continues the entrypoint's last session: the request after it holds
/// that session's earlier turns, `route` answered, then the user message
/// `Clarification from boss: QUESTION`; no new session is opened for it, and its
/// decision is taken as any.
#[test]
fn clarify_continues_the_entrypoints_session_with_the_question() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        route("d1", json!({"decision": "dig", "reason": "no findings"})),
        route("d2", json!({"decision": "stop_local", "reason": "found"})),
        route(
            "d3",
            json!({"decision": "stop_local", "reason": "three sources, as found"}),
        ),
    ]));
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let ex = builder(graph(clarify_doc(&server.base_url())))
        .policy_handler(
            "boss",
            sync_policy(move |_: PolicyInput| {
                let d = match seen.fetch_add(1, Ordering::SeqCst) {
                    0 => RoutingDecision::subgraph("research"),
                    1 => RoutingDecision::clarify("research", "How many sources?"),
                    _ => RoutingDecision::stop_global("answered"),
                };
                Ok::<_, HandlerError>(d.into())
            }),
        )
        .build()
        .expect("builds");
    let run = run(&rt, &ex, json!({"topic": "tides"}));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(
        run.sessions().len(),
        2,
        "the clarification opened no session"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let continued = &requests[2].body["messages"];
    let d2 = &requests[1].body["messages"];
    assert_eq!(continued[0], d2[0], "the same session: its system message");
    assert_eq!(continued[1], d2[1], "its prompt");
    assert_eq!(
        continued[2]["tool_calls"][0]["id"], "d2",
        "its earlier turn"
    );
    assert_eq!(
        continued[3],
        json!({"role": "tool", "tool_call_id": "d2", "content": r#"{"ok":true}"#})
    );
    assert_eq!(
        continued[4],
        json!({"role": "user", "content": "Clarification from boss: How many sources?"})
    );
    assert_eq!(continued.as_array().map(Vec::len), Some(5));
    assert!(
        requests[2].body.get("tool_choice").is_none(),
        "max_turns counts this decision's calls only"
    );
    let clarify = run
        .trace()
        .iter()
        .position(|i| i.kind == K::Clarify)
        .expect("a clarify item");
    let after: Vec<K> = run.trace().to_items()[clarify..]
        .iter()
        .map(|i| i.kind)
        .collect();
    assert_eq!(
        after,
        [
            K::Clarify,
            K::ModelCall,
            K::Decision,
            K::Return,
            K::Decision,
            K::End
        ]
    );
    assert_eq!(run.sessions()[1].messages.len(), 6, "the reply appended");
}
