//! An agent called as a tool (the seed's sub-agent tool), through the library against
//! the scripted Chat Completions server on loopback (real HTTP): a tool node whose `run`
//! is an agent answers its caller's call with a session of its own, its arguments as its
//! input and its `final_report` `result` (or its plain text) as the caller's `tool`
//! message, in the reply's order among the other calls; its failure is told to the
//! caller, whose session goes on.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;
mod support;

use chat_server::{ChatServer, Reply};
use pactgraph::runtime::{RunState, RunStatus, ToolCaller, TraceKind as K};
use serde_json::{Value, json};
use support::runtime::{builder, graph};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Root dispatches agent `agent` (writes `answer`), which may call `fixed` (a `set` tool)
/// and `researcher`, an agent tool taking `{"query"}` (`researcher` as given).
fn doc(base_url: &str, researcher: Value) -> Value {
    json!({
        "workflow": "agent-tools",
        "slices": {"question": {}, "answer": {"schema": {"type": "string"}}},
        "models": {"default": {"base_url": base_url, "model": "scripted-model",
                               "api_key_env": "PACTGRAPH_TEST_NO_KEY", "max_retries": 0}},
        "budgets": {"max_steps": 20},
        "entry": "root",
        "supervisors": {"root": {"allow": ["agent"],
                                 "default": {"stop_global": {"reason": "done"}}}},
        "nodes": {
            "agent": {"supervisor": "root", "reads": ["question"], "writes": ["answer"],
                      "run": {"agent": {"prompt": "{{ question }}",
                                        "tools": ["fixed", "researcher"]}},
                      "triggers": [{"priority": 1, "when": {"path": "/answer", "exists": false}}]},
            "fixed": {"supervisor": "root", "run": {"set": {"status": "shipped"}},
                      "tool": {"description": "Always the same.",
                               "parameters": {"type": "object", "properties": {}}}},
            "researcher": {"supervisor": "root", "run": {"agent": researcher},
                           "tool": {"description": "Researches a query.",
                                    "parameters": {"type": "object",
                                                   "properties": {"query": {"type": "string"}},
                                                   "required": ["query"],
                                                   "additionalProperties": false}}}
        }
    })
}

fn run(rt: &tokio::runtime::Runtime, doc: Value) -> RunState {
    let ex = builder(graph(doc)).build().expect("the executor builds");
    let mut state = ex
        .start(json!({"question": "tides?"}))
        .expect("a valid input");
    rt.block_on(ex.run_in_place(&mut state));
    state
}

fn kinds(run: &RunState) -> Vec<K> {
    run.trace().to_items().iter().map(|i| i.kind).collect()
}

/// Proves: the agent tool's call is answered by its own session (its first request's
/// prompt rendered from the arguments, `final_report` with `result` its only function);
/// the reply's other calls are answered in the same step as the agent tool's first model
/// call (ADR 0046: not held back behind it), so the agent tool's answer is stored after
/// them, yet the caller's next request holds the three results in the reply's order, the
/// agent tool's being its `final_report` arguments; its model call is a step (source the
/// tool) and its answer a `tool_call` item of the caller carrying its usage and its place
/// in the reply; its session records the call it answered.
#[test]
fn an_agent_tool_answers_its_callers_call_with_its_final_report() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::calls(&[
            ("c1", "fixed", json!({})),
            ("c2", "researcher", json!({"query": "tides"})),
            ("c3", "fixed", json!({})),
        ]),
        Reply::calls(&[(
            "r1",
            "final_report",
            json!({"result": {"facts": ["the moon"]}}),
        )]),
        Reply::calls(&[("c4", "final_report", json!({"answer": "the moon"}))]),
    ]));
    let researcher = json!({"instructions": "You research.",
                            "prompt": "Research {{ input.query }}.", "max_turns": 2});
    let run = run(&rt, doc(&server.base_url(), researcher));
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    assert_eq!(run.state()["answer"], "the moon");
    assert_eq!(
        kinds(&run),
        [
            K::Decision,
            K::ModelCall,
            K::ToolCall,
            K::ToolCall,
            K::ModelCall,
            K::ToolCall,
            K::ModelCall,
            K::Dispatch,
            K::Return,
            K::Decision,
            K::End
        ]
    );
    let items = &run.trace().to_items();
    assert_eq!(
        (items[2].step, items[3].step, items[4].step),
        (2, 3, 4),
        "the `set` calls and the agent tool's first call are the steps of one commit"
    );
    assert_eq!(items[4].source.as_deref(), Some("researcher"));
    let reason = items[4].reason.as_deref().unwrap_or_default();
    assert!(
        reason.ends_with(", for tool call c2 of session 0"),
        "the caller is recorded: {reason}"
    );
    assert_eq!(items[5].source.as_deref(), Some("agent"));
    assert_eq!(items[5].target.as_deref(), Some("researcher"));
    assert_eq!(items[5].reason.as_deref(), Some("call c2: ok"));
    assert!(
        items[5].usage().is_some(),
        "the agent tool's usage, for its caller"
    );
    assert_eq!(items[3].reason.as_deref(), Some("call c3: ok"));
    let place = |i: usize| {
        let t = items[i].tool_call().expect("the call's fields");
        (&*t.caller, &*t.tool, t.index, t.status.as_str())
    };
    assert_eq!(place(2), ("agent", "fixed", 0, "ok"));
    assert_eq!(
        place(5),
        ("agent", "researcher", 1, "ok"),
        "its place in the reply"
    );
    assert_eq!(
        place(3),
        ("agent", "fixed", 2, "ok"),
        "its place in the reply, though answered before the agent tool's"
    );
    let asked = items[4].model_call().expect("the call's fields");
    assert_eq!((&*asked.node, asked.turn), ("researcher", 1));
    assert_eq!(run.steps(), 5, "three model calls and two `set` tool calls");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let sub = &requests[1].body;
    assert_eq!(
        sub["messages"],
        json!([{"role": "system", "content": "You research."},
               {"role": "user", "content": "Research tides."}])
    );
    let tools = sub["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["function"]["name"], "final_report");
    assert_eq!(
        tools[0]["function"]["parameters"]["required"],
        json!(["result"])
    );
    let back = &requests[2].body["messages"];
    assert_eq!(
        back[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": r#"{"status":"shipped"}"#})
    );
    assert_eq!(
        back[3],
        json!({"role": "tool", "tool_call_id": "c2",
               "content": r#"{"result":{"facts":["the moon"]}}"#})
    );
    assert_eq!(back[4]["tool_call_id"], "c3");
    let sessions = run.sessions();
    assert_eq!(sessions.len(), 2);
    let stored: Vec<Option<&str>> = sessions[0].messages[2..5]
        .iter()
        .map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(
        stored,
        [Some("c1"), Some("c3"), Some("c2")],
        "stored as answered"
    );
    assert_eq!(&*sessions[1].node, "researcher");
    assert_eq!(
        sessions[1].caller,
        Some(ToolCaller {
            session: 0,
            turn: 1,
            call: "c2".into()
        })
    );
}

/// Proves: an agent tool's plain text reply is its result (`{"result": TEXT}`), and an
/// agent tool that ends without a valid exit (max_turns) is told to its caller as the
/// call's error result; the caller's session goes on and completes.
#[test]
fn an_agent_tools_text_is_its_result_and_its_failure_is_told_to_the_caller() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::calls(&[("c1", "researcher", json!({"query": "tides"}))]),
        Reply::text("It is the moon."),
        Reply::calls(&[("c2", "researcher", json!({"query": "waves"}))]),
        Reply::calls(&[("r1", "nonsense", json!({}))]),
        Reply::calls(&[("c3", "final_report", json!({"answer": "the moon"}))]),
    ]));
    let run = run(
        &rt,
        doc(
            &server.base_url(),
            json!({"prompt": "{{ input.query }}", "max_turns": 1}),
        ),
    );
    assert_eq!(run.status(), RunStatus::Completed, "{:?}", run.message());
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[2].body["messages"][2],
        json!({"role": "tool", "tool_call_id": "c1", "content": r#"{"result":"It is the moon."}"#})
    );
    assert_eq!(
        requests[3].body["tool_choice"],
        json!({"type": "function", "function": {"name": "final_report"}}),
        "the agent tool's last turn forces its exit"
    );
    let failed = requests[4].body["messages"][4].clone();
    assert_eq!(failed["tool_call_id"], "c2");
    let content = failed["content"].as_str().unwrap_or_default();
    assert!(
        content.contains(
            "agent tool `researcher` made 1 model call(s), its max_turns, without a valid \
             `final_report` call"
        ) && !content.contains("agent node"),
        "{content}"
    );
    let item = run
        .trace()
        .iter()
        .rfind(|i| i.kind == K::ToolCall)
        .expect("the failed call's item");
    assert!(
        item.reason()
            .unwrap_or_default()
            .starts_with("call c2: error"),
        "{:?}",
        item.reason
    );
}

/// Proves: an agent tool's model calls are steps the budgets count: with `max_steps` 2,
/// the caller's call and the agent tool's first call are the two steps, and the run
/// stops before the agent tool's second call (`max_steps_exceeded`), its usage counted.
#[test]
fn an_agent_tools_calls_count_against_the_budgets() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::calls(&[("c1", "researcher", json!({"query": "tides"}))]),
        Reply::tool_calls(&[("x", "nonsense", "{}")]),
        Reply::calls(&[("r1", "final_report", json!({"result": "never asked"}))]),
    ]));
    let mut d = doc(
        &server.base_url(),
        json!({"prompt": "{{ input.query }}", "max_turns": 3}),
    );
    d["budgets"]["max_steps"] = json!(2);
    let run = run(&rt, d);
    assert_eq!(run.status(), RunStatus::Stopped, "{:?}", run.message());
    assert_eq!(
        run.termination_reason(),
        Some(pactgraph::runtime::TerminationReason::MaxStepsExceeded)
    );
    assert_eq!(run.steps(), 2);
    assert_eq!(server.requests().len(), 2, "the third call was never made");
    assert_eq!(
        run.usage_total()
            .get("input_tokens")
            .and_then(serde_json::Number::as_u64),
        Some(22),
        "both calls' usage is counted"
    );
}

/// Proves: an agent tool whose template fails counts the step planned for its first
/// call when planning too, as when committing: with `max_steps` 2, the caller's call is
/// step 1 and `broken`'s failed opening step 2, so `researcher` (called in the same
/// reply after it) is not asked at all and the run stops `max_steps_exceeded` at 2 steps
/// (when the planner counted no step for the failed opening, `researcher`'s model call
/// was made and the run committed a third step past `max_steps`). `broken`'s failure is
/// told to the caller naming the tool once.
#[test]
fn an_agent_tool_whose_template_fails_counts_its_step_when_planned() {
    let rt = rt();
    let server = rt.block_on(ChatServer::start([
        Reply::calls(&[
            ("c1", "broken", json!({"query": "tides"})),
            ("c2", "researcher", json!({"query": "moon"})),
        ]),
        Reply::calls(&[("r1", "final_report", json!({"result": "never asked"}))]),
    ]));
    let mut d = doc(
        &server.base_url(),
        json!({"prompt": "{{ input.query }}", "max_turns": 3}),
    );
    let mut broken = d["nodes"]["researcher"].clone();
    broken["run"]["agent"]["prompt"] = json!("{{ input.query | no_such_filter }}");
    d["nodes"]["broken"] = broken;
    d["nodes"]["agent"]["run"]["agent"]["tools"] = json!(["fixed", "broken", "researcher"]);
    d["budgets"]["max_steps"] = json!(2);
    let run = run(&rt, d);
    assert_eq!(
        run.termination_reason(),
        Some(pactgraph::runtime::TerminationReason::MaxStepsExceeded),
        "{:?}",
        run.message()
    );
    assert_eq!(run.steps(), 2, "{:?}", kinds(&run));
    assert_eq!(server.requests().len(), 1, "researcher was never asked");
    let steps: Vec<u32> = run.trace().iter().map(|i| i.step).collect();
    assert!(
        steps.iter().all(|s| *s <= 2),
        "no item past max_steps: {steps:?}"
    );
    let failed = run
        .trace()
        .iter()
        .find(|i| i.kind == K::ToolCall && i.target() == Some("broken"))
        .expect("broken's failure answers its call");
    let reason = failed.reason().unwrap_or_default();
    assert!(
        reason.contains("the `prompt` template of agent tool `broken` cannot be rendered")
            && reason.matches("broken").count() == 1,
        "{reason}"
    );
}
