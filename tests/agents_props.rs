//! Property: any script of model replies (valid and invalid exits, tool calls good and
//! bad, text, HTTP errors, garbage bodies) ends an agent session in a defined status
//! within `max_turns` model calls, never a panic, against the scripted server on loopback;
//! and any script of replies to a supervisor's policy agent ends its run likewise.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{NodeInput, RunStatus, TerminationReason as R};
use proptest::prelude::*;
use serde_json::json;
use support::runtime::{builder, graph, writes};

/// One scripted reply, by kind.
#[derive(Debug, Clone)]
enum Step {
    Exit,
    ExitWrongType,
    ExitNotJson,
    Tool,
    ToolBadArgs,
    UnknownTool,
    TwoTools,
    Text,
    Error(u16),
    Garbage,
}

fn reply(step: &Step) -> Reply {
    match step {
        Step::Exit => Reply::tool_calls(&[("e", "final_report", r#"{"answer": {"n": 1}}"#)]),
        Step::ExitWrongType => Reply::tool_calls(&[("e", "final_report", r#"{"answer": 3}"#)]),
        Step::ExitNotJson => Reply::tool_calls(&[("e", "final_report", "{answer")]),
        Step::Tool => Reply::tool_calls(&[("t", "lookup", r#"{"id": 1}"#)]),
        Step::ToolBadArgs => Reply::tool_calls(&[("t", "lookup", r#"{"id": []}"#)]),
        Step::UnknownTool => Reply::tool_calls(&[("t", "nope", "{}")]),
        Step::TwoTools => Reply::tool_calls(&[
            ("a", "lookup", r#"{"id": 1}"#),
            ("b", "lookup", r#"{"id": 2}"#),
        ]),
        Step::Text => Reply::text("just words"),
        Step::Error(s) => Reply::error(*s, "scripted failure"),
        Step::Garbage => Reply::raw(200, "application/json", "{\"choices\": 7"),
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Exit),
        1 => Just(Step::ExitWrongType),
        1 => Just(Step::ExitNotJson),
        2 => Just(Step::Tool),
        1 => Just(Step::ToolBadArgs),
        1 => Just(Step::UnknownTool),
        1 => Just(Step::TwoTools),
        2 => Just(Step::Text),
        1 => prop_oneof![Just(400u16), Just(401), Just(500), Just(429)].prop_map(Step::Error),
        1 => Just(Step::Garbage),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_script_ends_in_a_defined_status_within_max_turns(
        script in prop::collection::vec(step(), 0..8),
        max_turns in 1u32..5,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let server = rt.block_on(ChatServer::start(script.iter().map(reply)));
        let doc = json!({
            "workflow": "agent-props",
            "slices": {"answer": {"schema": {"type": "object",
                                             "properties": {"n": {"type": "integer"}},
                                             "required": ["n"], "additionalProperties": false}}},
            "models": {"default": {"base_url": server.base_url(), "model": "m",
                                   "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
            "entry": "root",
            "supervisors": {"root": {"allow": ["agent"],
                                     "default": {"stop_global": {"reason": "done"}}}},
            "nodes": {
                "agent": {"supervisor": "root", "writes": ["answer"],
                          "run": {"agent": {"tools": ["lookup"], "max_turns": max_turns}},
                          "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
                "lookup": {"supervisor": "root", "run": {"handler": "lookup"},
                           "tool": {"description": "Looks up.",
                                    "parameters": {"type": "object",
                                                   "properties": {"id": {"type": "integer"}},
                                                   "required": ["id"]}}}
            }
        });
        let ex = builder(graph(doc))
            .node_handler("lookup", |_: NodeInput| async { Ok(writes(&[("found", json!(true))])) })
            .build()
            .expect("builds");
        let mut run = ex.start(json!({})).expect("valid");
        rt.block_on(ex.run_in_place(&mut run));
        let calls = server.requests().len();
        prop_assert!(calls as u32 <= max_turns, "{calls} model calls, max_turns {max_turns}");
        match (run.status(), run.termination_reason()) {
            (RunStatus::Completed, _) => prop_assert_eq!(&run.state()["answer"], &json!({"n": 1})),
            (RunStatus::Failed, Some(R::AgentNoExit | R::ModelError)) => {
                let msg = run.message().unwrap_or_default();
                prop_assert!(msg.contains("agent node `agent`"), "{}", msg);
            }
            (status, reason) => prop_assert!(false, "undefined end: {status} {reason:?}"),
        }
        if let Some(s) = run.sessions().first() {
            prop_assert!(s.turns() <= max_turns);
        }
        prop_assert!(!run.is_running());
    }
}

/// One scripted reply to a supervisor's policy agent, by kind.
#[derive(Debug, Clone)]
enum Decide {
    Work,
    Stop,
    OutsideEnum,
    AskWithoutClarification,
    Tool,
    Text,
    Error(u16),
    Garbage,
}

fn decide_reply(d: &Decide) -> Reply {
    let route = |args: &str| Reply::tool_calls(&[("r", "route", args)]);
    match d {
        Decide::Work => route(r#"{"decision": "work", "reason": "r"}"#),
        Decide::Stop => route(r#"{"decision": "stop_global", "reason": "r"}"#),
        Decide::OutsideEnum => route(r#"{"decision": "elsewhere", "reason": "r"}"#),
        Decide::AskWithoutClarification => {
            route(r#"{"decision": "ask_clarification", "reason": "r", "question": "q"}"#)
        }
        Decide::Tool => Reply::tool_calls(&[("t", "lookup", r#"{"id": 1}"#)]),
        Decide::Text => Reply::text("just words"),
        Decide::Error(s) => Reply::error(*s, "scripted failure"),
        Decide::Garbage => Reply::raw(200, "application/json", "{\"choices\": 7"),
    }
}

fn decide() -> impl Strategy<Value = Decide> {
    prop_oneof![
        3 => Just(Decide::Work),
        2 => Just(Decide::Stop),
        1 => Just(Decide::OutsideEnum),
        1 => Just(Decide::AskWithoutClarification),
        2 => Just(Decide::Tool),
        2 => Just(Decide::Text),
        1 => prop_oneof![Just(400u16), Just(500)].prop_map(Decide::Error),
        1 => Just(Decide::Garbage),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Property: any script of replies to a supervisor's policy agent (routes in and
    /// outside its enum, tool calls, text, HTTP errors, garbage) ends the run in a
    /// defined status, each decision's session within `max_turns` model calls, never a
    /// panic; a completed run ended by a `route` the model sent.
    #[test]
    fn any_script_of_a_policy_agent_ends_in_a_defined_status(
        script in prop::collection::vec(decide(), 0..10),
        max_turns in 1u32..4,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let server = rt.block_on(ChatServer::start(script.iter().map(decide_reply)));
        let doc = json!({
            "workflow": "policy-props",
            "slices": {"done": {}},
            "models": {"default": {"base_url": server.base_url(), "model": "m",
                                   "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
            "budgets": {"max_steps": 12},
            "entry": "root",
            "supervisors": {"root": {"allow": ["work"],
                                     "policy": {"agent": {"tools": ["lookup"],
                                                          "max_turns": max_turns}}}},
            "nodes": {
                "work": {"supervisor": "root", "writes": ["done"], "run": {"set": {"done": true}}},
                "lookup": {"supervisor": "root", "run": {"set": {"found": true}},
                           "tool": {"description": "Looks up.",
                                    "parameters": {"type": "object",
                                                   "properties": {"id": {"type": "integer"}},
                                                   "required": ["id"]}}}
            }
        });
        let ex = builder(graph(doc)).build().expect("builds");
        let mut run = ex.start(json!({})).expect("valid");
        rt.block_on(ex.run_in_place(&mut run));
        match (run.status(), run.termination_reason()) {
            (RunStatus::Completed, Some(R::StopGlobal)) => {}
            (RunStatus::Failed, Some(R::AgentNoExit | R::ModelError)) => {
                let msg = run.message().unwrap_or_default();
                prop_assert!(msg.contains("the agent policy of supervisor `root`"), "{}", msg);
            }
            (RunStatus::Stopped, Some(R::MaxStepsExceeded)) => {}
            (status, reason) => prop_assert!(false, "undefined end: {status} {reason:?}"),
        }
        for s in run.sessions() {
            prop_assert_eq!(&*s.node, "root");
            prop_assert!(s.turns() <= max_turns, "{} turns, max_turns {}", s.turns(), max_turns);
        }
        prop_assert!(!run.is_running());
    }
}

/// One scripted reply in a run whose agent may call the agent tool `helper`, by kind
/// (the same script serves the caller and the agent tool, in the order they call).
#[derive(Debug, Clone)]
enum Nested {
    Answer,
    Result,
    CallHelper,
    CallHelperBadArgs,
    CallBoth,
    /// Two agent tool calls and a tool node call in one reply (run at once, ADR 0046).
    CallTwoHelpers,
    Text,
    Error(u16),
}

fn nested_reply(n: &Nested) -> Reply {
    match n {
        Nested::Answer => Reply::tool_calls(&[("e", "final_report", r#"{"answer": {"n": 1}}"#)]),
        Nested::Result => Reply::tool_calls(&[("r", "final_report", r#"{"result": {"n": 2}}"#)]),
        Nested::CallHelper => Reply::tool_calls(&[("h", "helper", r#"{"q": "x"}"#)]),
        Nested::CallHelperBadArgs => Reply::tool_calls(&[("h", "helper", r#"{"q": 3}"#)]),
        Nested::CallBoth => Reply::tool_calls(&[
            ("a", "lookup", r#"{"id": 1}"#),
            ("h", "helper", r#"{"q": "y"}"#),
        ]),
        Nested::CallTwoHelpers => Reply::tool_calls(&[
            ("h1", "helper", r#"{"q": "a"}"#),
            ("a", "lookup", r#"{"id": 1}"#),
            ("h2", "helper", r#"{"q": "b"}"#),
        ]),
        Nested::Text => Reply::text("just words"),
        Nested::Error(s) => Reply::error(*s, "scripted failure"),
    }
}

fn nested() -> impl Strategy<Value = Nested> {
    prop_oneof![
        2 => Just(Nested::Answer),
        2 => Just(Nested::Result),
        2 => Just(Nested::CallHelper),
        1 => Just(Nested::CallHelperBadArgs),
        1 => Just(Nested::CallBoth),
        1 => Just(Nested::CallTwoHelpers),
        1 => Just(Nested::Text),
        1 => prop_oneof![Just(400u16), Just(500)].prop_map(Nested::Error),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Property: any script of replies to an agent that may call an agent tool (which
    /// may call it again: it lists itself) ends the run in a defined status, never a
    /// panic; every session stays within its `max_turns`; every agent tool session
    /// answers a call its caller made, and every call of a finished caller is answered,
    /// exactly once; a reply's agent tools run at once, in any order of arrival (the
    /// script is served in the order requests come); a model call that failed for good
    /// records its HTTP attempts.
    #[test]
    fn any_script_with_an_agent_tool_ends_in_a_defined_status(
        script in prop::collection::vec(nested(), 0..10),
        max_turns in 1u32..4,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let server = rt.block_on(ChatServer::start(script.iter().map(nested_reply)));
        let doc = json!({
            "workflow": "agent-tool-props",
            "slices": {"answer": {"schema": {"type": "object"}}},
            "models": {"default": {"base_url": server.base_url(), "model": "m",
                                   "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
            "budgets": {"max_steps": 16},
            "entry": "root",
            "supervisors": {"root": {"allow": ["agent"],
                                     "default": {"stop_global": {"reason": "done"}}}},
            "nodes": {
                "agent": {"supervisor": "root", "writes": ["answer"],
                          "run": {"agent": {"tools": ["lookup", "helper"],
                                            "max_turns": max_turns}},
                          "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
                "helper": {"supervisor": "root",
                           "run": {"agent": {"tools": ["helper"], "max_turns": max_turns}},
                           "tool": {"description": "Helps.",
                                    "parameters": {"type": "object",
                                                   "properties": {"q": {"type": "string"}},
                                                   "required": ["q"]}}},
                "lookup": {"supervisor": "root", "run": {"set": {"found": true}},
                           "tool": {"description": "Looks up.",
                                    "parameters": {"type": "object",
                                                   "properties": {"id": {"type": "integer"}},
                                                   "required": ["id"]}}}
            }
        });
        let ex = builder(graph(doc)).build().expect("builds");
        let mut run = ex.start(json!({})).expect("valid");
        rt.block_on(ex.run_in_place(&mut run));
        match (run.status(), run.termination_reason()) {
            (RunStatus::Completed, _) => prop_assert!(run.state()["answer"].is_object()),
            (RunStatus::Failed, Some(R::AgentNoExit | R::ModelError)) => {
                let msg = run.message().unwrap_or_default();
                prop_assert!(msg.contains("agent node `agent`"), "{}", msg);
            }
            (RunStatus::Stopped, Some(R::MaxStepsExceeded)) => {}
            (status, reason) => prop_assert!(false, "undefined end: {status} {reason:?}"),
        }
        let sessions = run.sessions();
        for (i, s) in sessions.iter().enumerate() {
            prop_assert!(s.turns() <= max_turns, "session {i}: {} turns", s.turns());
            if let Some(c) = &s.caller {
                let caller = &sessions[c.session as usize];
                prop_assert!(c.session < i as u32, "a caller begins first");
                let asked = caller
                    .messages
                    .iter()
                    .filter(|m| m.role == pactgraph::model::Role::Assistant)
                    .nth(c.turn as usize - 1)
                    .is_some_and(|m| m.tool_calls.iter().any(|t| t.id == c.call && t.name == "helper"));
                prop_assert!(asked, "session {i} answers a call its caller made: {c:?}");
            }
        }
        if run.status() == RunStatus::Completed {
            let root = &sessions[0].messages;
            for (at, m) in root.iter().enumerate() {
                for t in &m.tool_calls {
                    if t.name == "final_report" {
                        continue;
                    }
                    let answers = root[at + 1..]
                        .iter()
                        .take_while(|r| r.role != pactgraph::model::Role::Assistant)
                        .filter(|r| r.tool_call_id.as_deref() == Some(&t.id))
                        .count();
                    prop_assert_eq!(answers, 1, "call {} answered once", &t.id);
                }
            }
        }
        for it in &run.trace().to_items() {
            if let Some(call) = it.model_call().filter(|c| c.error.is_some()) {
                prop_assert!(!call.failed_attempts.is_empty(), "a failed call's attempts: {call:?}");
            }
        }
        prop_assert!(!run.is_running());
    }
}
