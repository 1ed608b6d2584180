//! Clarifying a finished child (spec 5.6): a `chat` subgraph's final state is kept at the
//! calling level; `clarify` resumes it with `{"question", "from"}` in its
//! `clarification` slice, and it returns like a call (commit, `result_slice`) without
//! counting as an entry. Unavailable clarifications fall back like allowlist violations
//! (`clarify_unavailable`); kept children end with their calling level and survive a save
//! and resume.

mod support;

use pactgraph::contracts::RoutingDecision;
use pactgraph::runtime::{
    Executor, HandlerError, NodeInput, PolicyInput, RunState, RunStatus, TerminationReason as R,
    TraceKind as K, sync_node, sync_policy,
};
#[cfg(feature = "store")]
use pactgraph::store::{Before, StepDelta};
use serde_json::{Value, json};
use support::runtime::{builder, graph, rt};

/// Root supervisor `boss` (a policy: see [`boss`]) calls the `research` subgraph, whose
/// supervisor runs `dig` on the first call and `answer` when a question is in
/// `clarification`. The subgraph returns its writes to `report` (its `result_slice`).
fn workflow(chat: bool) -> Value {
    json!({
        "workflow": "clarify",
        "slices": {"topic": {}, "findings": {}, "followup": {}, "report": {},
                   "clarification": {}, "note": {}},
        "budgets": {"max_steps": 30},
        "entry": "boss",
        "supervisors": {
            "boss": {"allow": ["research", "note_it"], "policy": {"handler": "boss"}},
            "research_sup": {"allow": ["dig", "answer"]}
        },
        "subgraphs": {
            "research": {"entrypoint": "research_sup", "supervisors": ["research_sup"],
                         "reads": ["topic", "clarification"], "writes": ["findings", "followup"],
                         "result_slice": "report", "chat": chat}
        },
        "nodes": {
            "dig": {"supervisor": "research_sup", "reads": ["topic"], "writes": ["findings"],
                    "triggers": [{"priority": 2, "when": {"path": "/findings", "exists": false}}],
                    "terminal": true, "run": {"set": {"findings": "three sources"}}},
            "answer": {"supervisor": "research_sup",
                       "reads": ["clarification", "followup", "findings"],
                       "writes": ["followup"],
                       "triggers": [{"when": {"path": "/clarification", "exists": true}}],
                       "terminal": true, "run": {"handler": "answer"}},
            "note_it": {"supervisor": "boss", "reads": ["report"], "writes": ["note"],
                        "run": {"set": {"note": "fell back"}}}
        }
    })
}

/// `boss` calls `research`, then asks each question of `questions` in turn (one per
/// follow-up answered), then stops.
fn boss(
    questions: &'static [&'static str],
) -> impl Fn(PolicyInput) -> Result<pactgraph::contracts::SupervisorOutput, HandlerError> {
    move |input: PolicyInput| {
        let asked = input
            .state
            .get("followup")
            .and_then(|f| f["n"].as_u64())
            .unwrap_or(0);
        let asked = usize::try_from(asked).expect("small");
        let d = if !input.state.contains_key("report") {
            RoutingDecision::subgraph("research")
        } else if let Some(q) = questions.get(asked) {
            RoutingDecision::clarify("research", *q)
        } else {
            RoutingDecision::stop_global("answered")
        };
        Ok(d.into())
    }
}

fn executor(chat: bool, questions: &'static [&'static str]) -> Executor {
    executor_for(workflow(chat), questions)
}

fn executor_for(doc: Value, questions: &'static [&'static str]) -> Executor {
    builder(graph(doc))
        .policy_handler("boss", sync_policy(boss(questions)))
        .node_handler(
            "answer",
            sync_node(|input: NodeInput| {
                let c = &input.view["clarification"];
                let n = input
                    .view
                    .get("followup")
                    .and_then(|f| f["n"].as_u64())
                    .unwrap_or(0);
                let mut w = serde_json::Map::new();
                w.insert(
                    "followup".into(),
                    json!({"question": c["question"], "from": c["from"], "n": n + 1,
                           "findings": input.view["findings"]}),
                );
                Ok::<_, HandlerError>(w)
            }),
        )
        .build()
        .expect("builds")
}

fn run_state(ex: &Executor) -> RunState {
    let mut state = ex
        .start(json!({"topic": "tides"}))
        .expect("the input is valid");
    rt().block_on(ex.run_in_place(&mut state));
    state
}

fn kinds(s: &RunState) -> Vec<K> {
    s.trace().to_items().iter().map(|i| i.kind).collect()
}

#[test]
fn a_clarification_after_a_return_updates_the_result_slice_without_an_entry() {
    let s = run_state(&executor(true, &["which source is best?"]));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(
        s.state()["report"],
        json!({"findings": "three sources",
               "followup": {"question": "which source is best?", "from": "boss", "n": 1,
                            "findings": "three sources"}})
    );
    assert_eq!(
        s.state()["followup"]["n"],
        1,
        "the child's writes are committed"
    );
    assert_eq!(
        s.entries().get("research"),
        Some(&1),
        "a clarification is not an entry"
    );
    // call, dig, return; clarify, answer, return: 4 steps (2 node runs, call, clarify).
    assert_eq!(s.steps(), 4);
    let clarify = s
        .trace()
        .iter()
        .find(|i| i.kind == K::Clarify)
        .expect("a clarify item");
    assert_eq!(clarify.target(), Some("research"));
    assert_eq!(clarify.source(), Some("boss"));
    assert_eq!(clarify.reason(), Some("which source is best?"));
    assert_eq!(clarify.depth, 0);
    let after: Vec<K> = kinds(&s)
        .into_iter()
        .skip_while(|k| *k != K::Clarify)
        .collect();
    assert_eq!(
        after[..4],
        [K::Clarify, K::Decision, K::Dispatch, K::Return],
        "{after:?}"
    );
    assert!(s.kept().is_empty(), "the run's end drops every kept child");
    let v = serde_json::to_value(s.trace()).expect("plain data");
    assert!(
        v.as_array()
            .expect("items")
            .iter()
            .any(|i| i["kind"] == "clarify")
    );
}

#[test]
fn a_child_can_be_clarified_twice_from_its_latest_state() {
    let s = run_state(&executor(true, &["first?", "second?"]));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    assert_eq!(
        s.state()["report"]["followup"]["n"],
        2,
        "the second saw the first's answer"
    );
    assert_eq!(s.state()["report"]["followup"]["question"], "second?");
    assert_eq!(s.entries().get("research"), Some(&1));
    assert_eq!(kinds(&s).iter().filter(|k| **k == K::Clarify).count(), 2);
    assert_eq!(s.steps(), 6);
}

#[test]
fn clarifying_a_subgraph_that_is_not_chat_is_clarify_unavailable() {
    // No fallback node: a safe stop_local, which at the root ends the run.
    let s = run_state(&executor(false, &["more?"]));
    assert_eq!(s.status(), RunStatus::Completed);
    assert_eq!(s.termination_reason(), Some(R::ClarifyUnavailable));
    let fb = s
        .trace()
        .iter()
        .find(|i| i.kind == K::Fallback)
        .expect("a fallback item");
    assert_eq!(fb.termination_reason, Some(R::ClarifyUnavailable));
    let why = fb.reason().unwrap_or_default();
    assert!(why.contains("subgraph `research` is not `chat`"), "{why}");
    assert!(!kinds(&s).contains(&K::Clarify));
    // With a fallback node, the run goes on there, as for an allowlist violation.
    let mut doc = workflow(false);
    doc["supervisors"]["boss"]["fallback"] = json!("note_it");
    let ex = executor_for(doc, &["more?"]);
    let mut state = ex.start(json!({"topic": "t"})).expect("the input is valid");
    // The boss keeps asking after the fallback, so the run ends on its step budget.
    rt().block_on(ex.run_in_place(&mut state));
    assert_eq!(state.termination_reason(), Some(R::MaxStepsExceeded));
    assert_eq!(state.state()["note"], "fell back");
    assert!(
        state
            .trace()
            .iter()
            .filter(|i| i.kind == K::Fallback)
            .all(|i| i.termination_reason == Some(R::ClarifyUnavailable))
    );
}

#[test]
fn a_subgraph_that_has_not_returned_here_is_clarify_unavailable() {
    // Ask before any call: nothing is kept yet.
    let ex = builder(graph(workflow(true)))
        .policy_handler(
            "boss",
            sync_policy(|_| Ok(RoutingDecision::clarify("research", "early?").into())),
        )
        .node_handler(
            "answer",
            sync_node(|_| Ok::<_, HandlerError>(serde_json::Map::new())),
        )
        .build()
        .expect("builds");
    let s = run_state(&ex);
    assert_eq!(s.termination_reason(), Some(R::ClarifyUnavailable));
    let msg = s
        .trace()
        .iter()
        .find(|i| i.kind == K::Fallback)
        .expect("fallback");
    assert!(
        msg.reason()
            .unwrap_or_default()
            .contains("has not returned at this level"),
        "{msg:?}"
    );
}

/// Root `top` calls `outer`, whose supervisor `mid` calls `research` (chat) and then
/// ends its level; back at the root, `top` asks `research` a follow-up.
fn nested() -> Value {
    let mut doc = workflow(true);
    doc["budgets"] = json!({"max_steps": 30, "max_depth": 3});
    doc["entry"] = json!("top");
    doc["supervisors"]["top"] =
        json!({"allow": ["outer", "research"], "policy": {"handler": "top"}});
    doc["supervisors"]["mid"] = json!({"allow": ["research"], "policy": {"handler": "mid"}});
    doc["supervisors"]
        .as_object_mut()
        .expect("map")
        .remove("boss");
    doc["nodes"].as_object_mut().expect("map").remove("note_it");
    doc["subgraphs"]["outer"] = json!({
        "entrypoint": "mid", "supervisors": ["mid"],
        "reads": ["topic", "clarification"], "writes": ["findings", "followup", "report"]
    });
    doc
}

#[test]
fn kept_children_are_dropped_when_their_calling_level_ends() {
    let ex = builder(graph(nested()))
        .policy_handler(
            "mid",
            sync_policy(|input: PolicyInput| {
                Ok(if input.state.contains_key("report") {
                    RoutingDecision::stop_local()
                } else {
                    RoutingDecision::subgraph("research")
                }
                .into())
            }),
        )
        .policy_handler(
            "top",
            sync_policy(|input: PolicyInput| {
                Ok(if input.state.contains_key("report") {
                    RoutingDecision::clarify("research", "still there?")
                } else {
                    RoutingDecision::subgraph("outer")
                }
                .into())
            }),
        )
        .node_handler(
            "answer",
            sync_node(|_| Ok::<_, HandlerError>(serde_json::Map::new())),
        )
        .build()
        .expect("builds");
    let mut s = ex
        .start(json!({"topic": "tides"}))
        .expect("the input is valid");
    let rt = rt();
    let mut seen_kept = false;
    while s.is_running() {
        rt.block_on(ex.step(&mut s));
        if let Some(k) = s.kept().first() {
            assert_eq!(
                (k.depth, &*k.subgraph_id),
                (1, "research"),
                "kept at `outer`'s level"
            );
            seen_kept = true;
        }
    }
    assert!(seen_kept, "research's state was kept while `outer` ran");
    assert_eq!(s.termination_reason(), Some(R::ClarifyUnavailable));
    let fb = s
        .trace()
        .iter()
        .find(|i| i.kind == K::Fallback)
        .expect("fallback");
    assert_eq!(fb.supervisor(), Some("top"));
    assert!(s.kept().is_empty());
}

/// Needs the store's step deltas (`store` feature).
#[cfg(feature = "store")]
#[test]
fn a_kept_child_survives_save_and_resume_and_step_deltas() {
    let ex = executor(true, &["first?", "second?"]);
    let whole = run_state(&ex);
    let mut s = ex
        .start(json!({"topic": "tides"}))
        .expect("the input is valid");
    let rt = rt();
    let mut kept_steps = 0;
    while s.is_running() {
        s = RunState::from_json(s.to_json()).expect("reads back");
        let before = Before::of(&s);
        let mut replay = s.clone();
        rt.block_on(ex.step(&mut s));
        let delta = StepDelta::between(&before, &s);
        let delta: StepDelta =
            serde_json::from_value(serde_json::to_value(&delta).expect("data")).expect("reads");
        delta.apply(&mut replay).expect("the delta fits");
        assert_eq!(replay, s, "the delta gives the run after the step");
        kept_steps += usize::from(!s.kept().is_empty());
    }
    assert!(kept_steps > 0, "some steps ran with a kept child");
    assert_eq!(s.state(), whole.state());
    assert_eq!(s.trace().without_timing(), whole.trace().without_timing());
}
