//! One test per decision kind: node, handoff, terminal/exitpoint, subgraph, stop_local
//! (with output and should_end), stop_global, ask_clarification, fallback, and legacy
//! strings alongside typed decisions.

mod support;

use pactgraph::RoutingDecision as D;
use pactgraph::contracts::{StopLocal, SupervisorOutput};
use pactgraph::runtime::{
    HandlerError, NodeInput, ResumeErrorKind, RunState, RunStatus, TerminationReason as R,
    TraceKind as K,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, graph_file, path, rt, run, script, user_state, writes};

fn flat() -> Value {
    json!({
        "workflow": "flat",
        "slices": {"a": {}, "b": {}, "c": {}, "clarification": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["n", "m", "safe"], "fallback": "safe", "policy": {"handler": "script"}}},
        "nodes": {
            "n": {"supervisor": "root", "reads": ["a"], "writes": ["b"], "run": {"handler": "n"}},
            "m": {"supervisor": "root", "reads": [], "writes": ["c"], "run": {"set": {"c": 1}}, "handoff": "m2"},
            "m2": {"supervisor": "root", "writes": ["c"], "run": {"set": {"c": 2}}},
            "safe": {"supervisor": "root", "writes": ["c"], "run": {"set": {"c": "safe"}}, "terminal": true},
            "forbidden": {"supervisor": "root", "writes": ["c"], "run": {"set": {"c": "bad"}}}
        }
    })
}

fn n_handler(
    out: Value,
) -> impl Fn(NodeInput) -> std::future::Ready<Result<pactgraph::runtime::Writes, HandlerError>>
+ Send
+ Sync
+ 'static {
    move |input: NodeInput| {
        assert_eq!(input.view.keys().collect::<Vec<_>>(), ["a"], "only `reads`");
        std::future::ready(Ok(writes(&[("b", out.clone())])))
    }
}

#[test]
fn node_runs_on_its_read_view_and_control_returns_to_the_supervisor() {
    let ex = builder(graph(flat()))
        .policy_handler(
            "script",
            script(vec!["n".into(), D::stop_global("done").into()]),
        )
        .node_handler("n", n_handler(json!(42)))
        .build()
        .unwrap();
    let o = run(&ex, json!({"a": 1, "c": 3}));
    assert_eq!(o.status, RunStatus::Completed);
    assert_eq!(user_state(&o), json!({"a": 1, "c": 3, "b": 42}));
    let kinds: Vec<K> = o.trace.to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [K::Decision, K::Dispatch, K::Return, K::Decision, K::End]
    );
    assert_eq!(o.trace.to_items()[2].source.as_deref(), Some("n"));
}

#[test]
fn handoff_chains_run_without_a_decision_then_return_to_the_dispatcher() {
    let ex = builder(graph(flat()))
        .policy_handler("script", script(vec![D::node("m").into()]))
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(o.steps, 2);
    assert_eq!(o.state["c"], 2);
    let p = path(&o);
    assert_eq!(p[1], (K::Dispatch, "root".into(), "m".into()));
    assert_eq!(p[2], (K::Handoff, "root".into(), "m2".into()));
    assert_eq!(o.trace.to_items()[2].source.as_deref(), Some("m"));
    assert_eq!(p[3], (K::Return, "root".into(), "root".into()));
}

#[test]
fn a_terminal_node_ends_the_root_level() {
    let mut doc = flat();
    doc["nodes"]["m2"]["terminal"] = json!(true);
    let ex = builder(graph(doc))
        .policy_handler("script", script(vec!["m".into()]))
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(o.status, RunStatus::Completed);
    assert_eq!(o.termination_reason, Some(R::Terminal));
    assert!(
        o.trace
            .to_items()
            .last()
            .unwrap()
            .reason
            .as_deref()
            .unwrap()
            .contains("`m2`")
    );
}

#[test]
fn a_write_outside_writes_fails_the_step_and_applies_nothing() {
    for bad in [json!({"b": 1, "c": 2}), json!({"b": 1, "system": {}})] {
        let ex = builder(graph(flat()))
            .policy_handler("script", script(vec!["n".into()]))
            .node_handler("n", move |_: NodeInput| {
                let w = bad.as_object().unwrap().clone();
                async move { Ok(w) }
            })
            .build()
            .unwrap();
        let o = run(&ex, json!({"a": 0}));
        assert_eq!(o.status, RunStatus::Failed);
        assert_eq!(o.termination_reason, Some(R::WriteBoundaryViolation));
        assert_eq!(user_state(&o), json!({"a": 0}), "nothing applied");
        assert!(
            o.message
                .as_deref()
                .unwrap()
                .contains("outside its writes [b]")
        );
    }
}

/// The fashion workflow with a scripted domain supervisor.
fn fashion_doc() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/workflows/fashion.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_child_writes_are_invisible_to_the_parent_until_return() {
    let ex = builder(graph_file("examples/workflows/fashion.json"))
        .build()
        .unwrap();
    let rt = rt();
    let mut run = ex.start(json!({"request": {"topic": "fashion"}})).unwrap();
    rt.block_on(ex.step(&mut run)); // domain calls fashion
    assert_eq!(run.stack().len(), 1);
    // The child state starts as the boundary's `reads` (and `writes`) slices.
    assert_eq!(
        Value::Object(run.stack()[0].state.clone()),
        json!({"request": {"topic": "fashion"}})
    );
    rt.block_on(ex.step(&mut run)); // fashion_supervisor runs trend
    assert_eq!(
        run.stack()[0].state["fashion"],
        json!({"trend": "wide-leg trousers"})
    );
    assert!(
        run.state().get("fashion").is_none(),
        "not visible to the parent yet"
    );
    rt.block_on(ex.step(&mut run)); // stop_local: commit and return
    assert!(run.stack().is_empty());
    assert_eq!(
        run.state()["fashion"],
        json!({"trend": "wide-leg trousers"})
    );
}

#[test]
fn an_invalid_output_fails_and_discards_the_child_writes() {
    let mut doc = fashion_doc();
    doc["supervisors"]["fashion_supervisor"]["default"] =
        json!({"stop_local": {"output": {"nope": 1}}});
    let o = run(
        &builder(graph(doc)).build().unwrap(),
        json!({"request": {"topic": "fashion"}}),
    );
    assert_eq!(o.status, RunStatus::Failed);
    assert_eq!(o.termination_reason, Some(R::SubgraphOutputInvalid));
    assert_eq!(user_state(&o), json!({"request": {"topic": "fashion"}}));
    assert_eq!(o.uncommitted.len(), 1);
    assert_eq!(
        o.uncommitted[0].state["fashion"],
        json!({"trend": "wide-leg trousers"})
    );
}

#[test]
fn an_invalid_input_fails_before_the_child_starts() {
    let mut doc = fashion_doc();
    doc["supervisors"]["domain_supervisor"]["policy"] = json!({"handler": "go"});
    let ex = builder(graph(doc))
        .policy_handler("go", script(vec!["fashion".into()]))
        .build()
        .unwrap();
    let o = run(&ex, json!({"request": {}}));
    assert_eq!(o.status, RunStatus::Failed);
    assert_eq!(o.termination_reason, Some(R::SubgraphInputInvalid));
    assert!(
        o.message.as_deref().unwrap().contains("input_schema"),
        "{:?}",
        o.message
    );
}

#[test]
fn an_exitpoint_ends_its_subgraph() {
    let mut doc = fashion_doc();
    doc["subgraphs"]["fashion"]["exitpoints"] = json!(["trend"]);
    // Without the exitpoint the default would ask for more output; with it the level ends
    // right after `trend`.
    doc["supervisors"]["fashion_supervisor"]["default"] = json!({"stop_global": {}});
    let o = run(
        &builder(graph(doc)).build().unwrap(),
        json!({"request": {"topic": "fashion"}}),
    );
    assert_eq!(o.termination_reason, Some(R::StopGlobal));
    let ret = o
        .trace
        .iter()
        .find(|i| i.kind == K::Return && i.source() == Some("fashion"))
        .unwrap();
    assert_eq!(ret.termination_reason, Some(R::Terminal));
    assert_eq!(ret.reason(), Some("exitpoint `trend`"));
    assert_eq!(
        o.state["answer"],
        json!({"fashion": {"trend": "wide-leg trousers"}})
    );
}

#[test]
fn stop_local_with_an_output_and_should_end() {
    let mut doc = fashion_doc();
    doc["supervisors"]["fashion_supervisor"]["default"] =
        json!({"stop_local": {"output": {"fashion": "x"}, "should_end": true}});
    let o = run(
        &builder(graph(doc.clone())).build().unwrap(),
        json!({"request": {"topic": "fashion"}}),
    );
    assert_eq!(o.status, RunStatus::Completed);
    assert_eq!(o.termination_reason, Some(R::StopLocal));
    assert_eq!(o.state["answer"], json!({"fashion": "x"}));
    assert_eq!(
        o.trace
            .iter()
            .filter(|i| i.supervisor() == Some("domain_supervisor") && i.kind == K::Decision)
            .count(),
        1
    );
    // The parent may opt out.
    doc["supervisors"]["domain_supervisor"]["honor_should_end"] = json!(false);
    let o = run(
        &builder(graph(doc)).build().unwrap(),
        json!({"request": {"topic": "fashion"}}),
    );
    assert_eq!(o.termination_reason, Some(R::StopGlobal));
}

#[test]
fn stop_local_at_the_root_ends_the_run() {
    let ex = builder(graph(flat()))
        .policy_handler(
            "script",
            script(vec![
                D::StopLocal(StopLocal {
                    reason: Some("enough".into()),
                    ..Default::default()
                })
                .into(),
            ]),
        )
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Completed, Some(R::StopLocal))
    );
    assert_eq!(o.trace.to_items()[0].reason.as_deref(), Some("enough"));
}

fn nested() -> Value {
    json!({
        "workflow": "nested",
        "slices": {"x": {}, "y": {}},
        "entry": "root",
        "supervisors": {
            "root": {"allow": ["outer"], "policy": {"handler": "root"}},
            "outer_sup": {"allow": ["inner", "w"], "policy": {"handler": "outer"}},
            "inner_sup": {"allow": ["v"], "policy": {"handler": "inner"}}
        },
        "subgraphs": {
            "outer": {"entrypoint": "outer_sup", "supervisors": ["outer_sup"], "writes": ["x", "y"]},
            "inner": {"entrypoint": "inner_sup", "supervisors": ["inner_sup"], "writes": ["x"]}
        },
        "nodes": {
            "w": {"supervisor": "outer_sup", "writes": ["y"], "run": {"set": {"y": "outer"}}},
            "v": {"supervisor": "inner_sup", "writes": ["x"], "run": {"set": {"x": "inner"}}}
        }
    })
}

#[test]
fn stop_global_from_depth_two_commits_open_frames_in_order() {
    let ex = builder(graph(nested()))
        .policy_handler("root", script(vec!["outer".into()]))
        .policy_handler("outer", script(vec!["w".into(), "inner".into()]))
        .policy_handler(
            "inner",
            script(vec!["v".into(), D::stop_global("found it").into()]),
        )
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Completed, Some(R::StopGlobal))
    );
    assert_eq!(user_state(&o), json!({"y": "outer", "x": "inner"}));
    let returns: Vec<_> = o
        .trace
        .iter()
        .filter(|i| i.kind == K::Return && i.termination_reason == Some(R::StopGlobal))
        .map(|i| i.source().unwrap())
        .collect();
    assert_eq!(returns, ["inner", "outer"]);
    assert_eq!(o.trace.last().unwrap().reason(), Some("found it"));
}

#[test]
fn ask_clarification_pauses_and_resume_lets_the_same_supervisor_decide_again() {
    let asker = |input: pactgraph::runtime::PolicyInput| async move {
        Ok::<SupervisorOutput, HandlerError>(match input.state.get("clarification") {
            Some(c) => D::stop_global(format!("size {}", c["answer"].as_str().unwrap())).into(),
            None => D::ask("which size?").into(),
        })
    };
    let ex = builder(graph(flat()))
        .policy_handler("script", asker)
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let rt = rt();
    let mut run = ex.start(json!({})).unwrap();
    assert_eq!(
        rt.block_on(ex.run_in_place(&mut run)),
        RunStatus::AwaitingInput
    );
    assert_eq!(run.question(), Some("which size?"));
    assert_eq!(run.termination_reason(), Some(R::AwaitingInput));
    // The paused run is plain data.
    let saved = serde_json::to_string(&run).unwrap();
    let run: RunState = serde_json::from_str(&saved).unwrap();
    let run = ex.resume(run, "M").unwrap();
    let o = rt.block_on(ex.run(run));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Completed, Some(R::StopGlobal))
    );
    assert_eq!(
        o.state["clarification"],
        json!({"question": "which size?", "answer": "M"})
    );
    let kinds: Vec<K> = o.trace.to_items().iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [K::Decision, K::Pause, K::Resume, K::Decision, K::End]
    );
    assert_eq!(o.trace.to_items()[3].supervisor.as_deref(), Some("root"));
    assert_eq!(o.trace.to_items()[3].reason.as_deref(), Some("size M"));
}

#[test]
fn resume_refuses_a_run_not_waiting_or_without_a_clarification_slice() {
    let ex = builder(graph(flat()))
        .policy_handler("script", script(vec![D::ask("why?").into()]))
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let fresh = ex.start(json!({})).unwrap();
    let err = ex.resume(fresh.clone(), "x").unwrap_err();
    assert_eq!(
        err.kind(),
        &ResumeErrorKind::NotAwaitingInput(RunStatus::Running)
    );
    // The refused run comes back unchanged.
    assert_eq!(err.into_run(), fresh);
    let mut doc = flat();
    doc["slices"]
        .as_object_mut()
        .unwrap()
        .shift_remove("clarification");
    let ex = builder(graph(doc))
        .policy_handler("script", script(vec![D::ask("why?").into()]))
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let rt = rt();
    let mut run = ex.start(json!({})).unwrap();
    rt.block_on(ex.run_in_place(&mut run));
    assert_eq!(run.status(), RunStatus::AwaitingInput);
    let paused = run.clone();
    let err = ex.resume(run, "x").unwrap_err();
    assert_eq!(err.kind(), &ResumeErrorKind::NoClarificationSlice);
    assert_eq!(err.into_run(), paused);
}

#[test]
fn an_explicit_fallback_runs_the_fallback_node() {
    let ex = builder(graph(flat()))
        .policy_handler("script", script(vec![D::fallback("unsure").into()]))
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(o.state["c"], "safe");
    let fb = &o.trace.to_items()[1];
    assert_eq!(fb.kind, K::Fallback);
    assert_eq!(fb.target.as_deref(), Some("safe"));
    assert_eq!(fb.reason.as_deref(), Some("unsure"));
    assert_eq!(fb.termination_reason, None);
    assert_eq!(o.termination_reason, Some(R::Terminal));
}

#[test]
fn an_allowlist_violation_goes_to_the_fallback_and_keeps_the_original_choice() {
    for choice in [
        SupervisorOutput::from(D::node("forbidden")),
        "forbidden".into(),
        D::subgraph("n").into(),
        "nowhere".into(),
    ] {
        let ex = builder(graph(flat()))
            .policy_handler("script", script(vec![choice.clone()]))
            .node_handler("n", n_handler(json!(0)))
            .build()
            .unwrap();
        let o = run(&ex, json!({}));
        assert_eq!(o.state["c"], "safe", "{choice:?}");
        assert_eq!(o.trace.to_items()[0].kind, K::Decision);
        let original = o.trace.to_items()[0].target.clone().unwrap();
        assert!(["forbidden", "n", "nowhere"].contains(&&*original));
        let fb = &o.trace.to_items()[1];
        assert_eq!((fb.kind, fb.target.as_deref()), (K::Fallback, Some("safe")));
        assert_eq!(fb.termination_reason, Some(R::AllowlistViolation));
        assert!(
            fb.reason
                .as_deref()
                .unwrap()
                .starts_with("allowlist_violation"),
            "{fb:?}"
        );
        assert!(
            fb.reason
                .as_deref()
                .unwrap()
                .contains(&format!("`{original}`")),
            "{fb:?}"
        );
    }
}

#[test]
fn without_a_fallback_a_violation_is_a_safe_stop_local() {
    let mut doc = flat();
    doc["supervisors"]["root"]
        .as_object_mut()
        .unwrap()
        .shift_remove("fallback");
    let ex = builder(graph(doc))
        .policy_handler("script", script(vec![D::node("forbidden").into()]))
        .node_handler("n", n_handler(json!(0)))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Completed, Some(R::AllowlistViolation))
    );
    assert_eq!(o.steps, 0);
    assert_eq!(o.trace.to_items()[1].target.as_deref(), Some("stop_local"));
    // In a subgraph the safe stop_local returns to the caller, which decides again.
    let ex = builder(graph(nested()))
        .policy_handler(
            "root",
            script(vec!["outer".into(), D::stop_global("after").into()]),
        )
        .policy_handler("outer", script(vec!["v".into()]))
        .policy_handler("inner", script(vec![]))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(o.termination_reason, Some(R::StopGlobal));
    let ret = o.trace.iter().find(|i| i.kind == K::Return).unwrap();
    assert_eq!(ret.termination_reason, Some(R::AllowlistViolation));
    assert_eq!(o.trace.last().unwrap().reason(), Some("after"));
}

#[test]
fn legacy_strings_work_alongside_typed_decisions() {
    let ex = builder(graph(nested()))
        .policy_handler(
            "root",
            script(vec![D::subgraph("outer").into(), "outer".into()]),
        )
        .policy_handler(
            "outer",
            script(vec![
                "w".into(),
                "done".into(),
                D::node("w").into(),
                D::stop_local().into(),
            ]),
        )
        .policy_handler("inner", script(vec![]))
        .build()
        .unwrap();
    let o = run(&ex, json!({}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Completed, Some(R::StopGlobal))
    );
    assert_eq!(o.steps, 4, "two entries, two node runs");
    let decisions: Vec<(String, Option<String>)> = o
        .trace
        .iter()
        .filter(|i| i.kind == K::Decision)
        .map(|i| {
            let target = i.target().unwrap().to_string();
            (target, i.reason().map(str::to_string))
        })
        .collect();
    assert_eq!(decisions[0], ("outer".into(), None));
    assert_eq!(
        decisions[1],
        ("w".into(), Some("legacy string decision".into()))
    );
    assert_eq!(
        decisions[2],
        ("done".into(), Some("legacy string decision".into()))
    );
    assert_eq!(decisions[3].0, "outer");
    assert_eq!(o.state["y"], "outer");
}

#[test]
fn a_child_stopped_by_a_guard_has_its_writes_discarded() {
    let mut doc = nested();
    doc["budgets"] = json!({"max_depth": 1});
    let ex = builder(graph(doc))
        .policy_handler("root", script(vec!["outer".into()]))
        .policy_handler("outer", script(vec!["w".into(), "inner".into()]))
        .policy_handler("inner", script(vec![]))
        .build()
        .unwrap();
    let o = run(&ex, json!({"x": 0}));
    assert_eq!(
        (o.status, o.termination_reason),
        (RunStatus::Stopped, Some(R::MaxDepthExceeded))
    );
    assert_eq!(
        user_state(&o),
        json!({"x": 0}),
        "the outer frame's `y` is not merged"
    );
    assert_eq!(o.uncommitted.len(), 1);
    assert_eq!(&*o.uncommitted[0].subgraph_id, "outer");
    assert_eq!(o.uncommitted[0].state["y"], "outer");
}
