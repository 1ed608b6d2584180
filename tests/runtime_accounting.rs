//! Accounting (spec 5.7): every node run's usage record (`$usage` plus `wall_ms`) summed
//! in all, per node, per subgraph and per owner (chains to their last stage, advisors to
//! their primary); the `max_tokens` and `max_cost_usd` budgets; the same accounting after
//! a save and resume.

mod support;

use pactgraph::runtime::{
    Accounting, Executor, HandlerError, NodeInput, RunState, RunStatus, TerminationReason as R,
    TraceKind as K,
};
use serde_json::{Value, json};
use support::runtime::{builder, graph, rt};

/// What each node writes and reports: `(node, writes, $usage)`. Costs are binary
/// fractions, so their sums are exact.
const SCRIPT: &[(&str, &str, &str)] = &[
    (
        "h1",
        r#"{"h": 1}"#,
        r#"{"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.5}"#,
    ),
    (
        "h2",
        r#"{"h2": 1}"#,
        r#"{"input_tokens": 20, "output_tokens": 2, "cost_usd": 0.25}"#,
    ),
    (
        "r",
        r#"{"routed": 1, "$route": "a"}"#,
        r#"{"input_tokens": 30, "output_tokens": 3, "cost_usd": 0.125}"#,
    ),
    (
        "a",
        r#"{"a": 1}"#,
        r#"{"input_tokens": 40, "output_tokens": 4, "cost_usd": 1.0}"#,
    ),
    (
        "adv1",
        "{}",
        r#"{"input_tokens": 50, "output_tokens": 5, "cost_usd": 0.0625, "calls": 1}"#,
    ),
    (
        "adv2",
        "{}",
        r#"{"input_tokens": 60, "output_tokens": 6, "cost_usd": 2.0}"#,
    ),
    (
        "p",
        r#"{"p": 1}"#,
        r#"{"input_tokens": 70, "output_tokens": 7, "cost_usd": 4.0}"#,
    ),
    (
        "w",
        r#"{"s": 1}"#,
        r#"{"input_tokens": 80, "output_tokens": 8, "cost_usd": 8.0}"#,
    ),
    (
        "m1",
        r#"{"$broadcast": "looks fine", "$exit": true}"#,
        r#"{"input_tokens": 100, "output_tokens": 10, "cost_usd": 16.0}"#,
    ),
    (
        "m2",
        r#"{"$broadcast": "ship it", "$exit": true}"#,
        r#"{"input_tokens": 200, "output_tokens": 20, "cost_usd": 32.0}"#,
    ),
    (
        "lead",
        r#"{"verdict": 1, "$final": true}"#,
        r#"{"input_tokens": 300, "output_tokens": 30, "cost_usd": 64.0}"#,
    ),
];

/// The root runs, in order: the handoff chain `h1 -> h2`, router `r` routing to `a`, the
/// primary `p` with advisors `adv1` and `adv2`, subgraph `sub` (whose node `w` is
/// terminal), and team `t` (members `m1` and `m2` broadcast and leave, then `lead`
/// answers for it); then it stops.
fn workflow(budgets: Value) -> Value {
    let node = |reads: Value, writes: Value, when: &str| {
        json!({"supervisor": "root", "reads": reads, "writes": writes,
               "triggers": [{"when": {"path": when, "exists": false}}],
               "run": {"handler": "pay"}})
    };
    let mut h1 = node(json!(["req"]), json!(["h"]), "/h");
    h1["handoff"] = json!("h2");
    let mut r = node(json!(["req"]), json!(["routed"]), "/routed");
    r["router"] = json!({"destinations": ["a"]});
    let mut p = node(json!(["req", "advice"]), json!(["p"]), "/p");
    p["advisors"] = json!({"members": ["adv1", "adv2"], "slice": "advice"});
    let plain = |reads: Value, writes: Value| json!({"supervisor": "root", "reads": reads, "writes": writes, "run": {"handler": "pay"}});
    json!({
        "workflow": "accounted",
        "slices": {"req": {}, "h": {}, "h2": {}, "routed": {}, "a": {}, "p": {}, "advice": {},
                   "s": {}, "team": {}, "verdict": {}},
        "budgets": budgets,
        "entry": "root",
        "supervisors": {
            "root": {"allow": ["h1", "r", "p", "sub", "t"],
                     "default": {"stop_global": {"reason": "done"}}},
            "sub_sup": {"allow": ["w"]}
        },
        "subgraphs": {
            "sub": {"entrypoint": "sub_sup", "supervisors": ["sub_sup"], "reads": ["req"],
                    "writes": ["s"], "triggers": [{"when": {"path": "/s", "exists": false}}]}
        },
        "nodes": {
            "h1": h1,
            "h2": plain(json!(["h"]), json!(["h2"])),
            "r": r,
            "a": plain(json!(["routed"]), json!(["a"])),
            "adv1": plain(json!(["req"]), json!([])),
            "adv2": plain(json!(["req"]), json!([])),
            "p": p,
            "w": {"supervisor": "sub_sup", "reads": ["req"], "writes": ["s"], "terminal": true,
                  "triggers": [{"when": {"path": "/s", "exists": false}}],
                  "run": {"handler": "pay"}},
            "t": {"supervisor": "root", "reads": ["req"], "writes": ["verdict"],
                  "triggers": [{"when": {"path": "/verdict", "exists": false}}],
                  "team": {"members": ["m1", "m2"], "lead": "lead", "slice": "team"}},
            "m1": plain(json!(["req"]), json!([])),
            "m2": plain(json!(["req"]), json!([])),
            "lead": plain(json!(["req"]), json!(["verdict"]))
        }
    })
}

fn executor(budgets: Value) -> Executor {
    builder(graph(workflow(budgets)))
        .node_handler("pay", |input: NodeInput| async move {
            let (_, writes, usage) = SCRIPT
                .iter()
                .find(|(id, _, _)| *id == input.node)
                .ok_or_else(|| HandlerError::new(format!("no script for {}", input.node)))?;
            let mut out: serde_json::Map<String, Value> =
                serde_json::from_str(writes).expect("scripted writes are JSON");
            out.insert("$usage".into(), serde_json::from_str(usage).expect("JSON"));
            Ok::<_, HandlerError>(out)
        })
        .build()
        .expect("builds")
}

fn run_state(ex: &Executor) -> RunState {
    let mut state = ex.start(json!({"req": {}})).expect("the input is valid");
    rt().block_on(ex.run_in_place(&mut state));
    state
}

/// The accounting of the run's trace with timing stripped (every `wall_ms` 0), as JSON.
fn untimed(s: &RunState) -> Value {
    serde_json::to_value(Accounting::from_trace(&s.trace().without_timing())).expect("plain data")
}

fn sums(input: u64, output: u64, cost: f64) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "cost_usd": cost, "wall_ms": 0})
}

#[test]
fn a_run_rolls_up_chains_routers_advisors_teams_and_subgraphs_number_by_number() {
    let s = run_state(&executor(json!({})));
    assert_eq!(s.status(), RunStatus::Completed, "{:?}", s.message());
    let acct = untimed(&s);
    let mut adv1 = sums(50, 5, 0.0625);
    adv1["calls"] = json!(1);
    assert_eq!(
        acct["by_node"],
        json!({
            "a": sums(40, 4, 1.0), "adv1": adv1, "adv2": sums(60, 6, 2.0),
            "h1": sums(10, 1, 0.5), "h2": sums(20, 2, 0.25), "p": sums(70, 7, 4.0),
            "r": sums(30, 3, 0.125), "w": sums(80, 8, 8.0),
            "m1": sums(100, 10, 16.0), "m2": sums(200, 20, 32.0), "lead": sums(300, 30, 64.0),
            "t": {"wall_ms": 0}
        })
    );
    // h1 hands off to h2 (the chain's last stage); r routes to a; the advisors serve p;
    // w stands alone in its subgraph; the team's members and lead roll up to t.
    let mut p = sums(180, 18, 6.0625);
    p["calls"] = json!(1);
    assert_eq!(
        acct["by_owner"],
        json!({"h2": sums(30, 3, 0.75), "a": sums(70, 7, 1.125), "p": p, "w": sums(80, 8, 8.0),
               "t": sums(600, 60, 112.0)})
    );
    assert_eq!(acct["by_subgraph"], json!({"sub": sums(80, 8, 8.0)}));
    let mut total = sums(960, 96, 127.9375);
    total["calls"] = json!(1);
    assert_eq!(acct["total"], total);
    // The outcome carries the same accounting, with real wall times that add up.
    let outcome = s.outcome();
    let real = &outcome.accounting;
    assert_eq!(real.by_owner.len(), 5);
    let wall = |u: &pactgraph::runtime::Usage| {
        u.get("wall_ms")
            .and_then(serde_json::Number::as_f64)
            .expect("every record has one")
    };
    let by_node: f64 = real.by_node.values().map(wall).sum();
    assert!((wall(&real.total) - by_node).abs() < 1e-6);
    let summary = serde_json::to_value(&outcome).expect("plain data");
    assert_eq!(summary["accounting"]["by_owner"]["p"]["input_tokens"], 180);
    assert_eq!(
        serde_json::to_value(s.summary()).expect("plain data")["accounting"],
        summary["accounting"]
    );
}

#[test]
fn node_run_items_carry_their_usage_record() {
    let s = run_state(&executor(json!({})));
    let v = serde_json::to_value(s.trace().without_timing()).expect("plain data");
    let items = v.as_array().expect("an array");
    let adv = items
        .iter()
        .find(|i| i["kind"] == "advisor" && i["target"] == "adv2")
        .expect("adv2 reported");
    assert_eq!(adv["usage"], sums(60, 6, 2.0));
    for i in items {
        let runs = matches!(
            i["kind"].as_str(),
            Some("dispatch" | "handoff" | "advisor" | "team_turn")
        );
        assert_eq!(i.get("usage").is_some(), runs, "{i}");
    }
}

#[test]
fn max_cost_usd_stops_the_run_before_the_step_past_it() {
    // After h1 (0.5) and h2 (0.25) the run has spent 0.75: the router may not start.
    let s = run_state(&executor(json!({"max_cost_usd": 0.75})));
    assert_eq!(s.status(), RunStatus::Stopped);
    assert_eq!(s.termination_reason(), Some(R::BudgetExceeded));
    let msg = s.message().expect("a message");
    assert!(msg.contains("max_cost_usd is 0.75"), "{msg}");
    assert!(msg.contains("spent 0.75 USD"), "{msg}");
    assert!(msg.contains("node `r`"), "{msg}");
    let last = s.trace().to_items().into_iter().last().expect("items");
    assert_eq!(last.kind, K::GuardStop);
    assert_eq!(
        serde_json::to_value(last.termination_reason).expect("data"),
        "budget_exceeded"
    );
    assert_eq!(untimed(&s)["total"], sums(30, 3, 0.75));
}

#[test]
fn max_tokens_counts_input_and_output_tokens() {
    // h1 and h2 use 33 tokens, the router 33 more: 66 reaches the limit, `a` may not start.
    let s = run_state(&executor(json!({"max_tokens": 66})));
    assert_eq!(s.termination_reason(), Some(R::BudgetExceeded));
    let msg = s.message().expect("a message");
    assert!(msg.contains("used 66 tokens"), "{msg}");
    assert!(msg.contains("max_tokens is 66"), "{msg}");
    assert!(msg.contains("node `a`"), "{msg}");
    // One token more leaves room for `a` (the step that crosses the limit completes).
    let s = run_state(&executor(json!({"max_tokens": 67})));
    let msg = s.message().expect("a message");
    assert!(msg.contains("used 110 tokens"), "{msg}");
    assert_eq!(s.termination_reason(), Some(R::BudgetExceeded));
}

#[test]
fn accounting_is_the_same_after_save_and_resume_at_every_step() {
    let ex = executor(json!({}));
    let whole = run_state(&ex);
    let mut state = ex.start(json!({"req": {}})).expect("the input is valid");
    let rt = rt();
    while state.is_running() {
        state = RunState::from_json(state.to_json()).expect("reads back");
        rt.block_on(ex.step(&mut state));
    }
    assert_eq!(untimed(&state), untimed(&whole));
    // The summary read back sums the same accounting from its trace.
    let text = serde_json::to_string(&state.outcome()).expect("plain data");
    let back: pactgraph::runtime::RunOutcome = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back.accounting, state.outcome().accounting);
}
