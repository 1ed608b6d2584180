//! The trace with each step's values over real HTTP (`GET /api/runs/{id}/trace?values=true`,
//! ADR 0043), on both stores: each node run's writes come from its kept `step` event,
//! its input is rebuilt from the run's input (`run_started`) and the writes before it,
//! through the node's `reads`; the same values are in `runs watch`'s events. After an
//! answer, inside a subgraph and after its return the input is known too (ADR 0048), and
//! the same on SQLite and PostgreSQL.
#![cfg(feature = "store")]

mod serve_support;
mod support;

use serde_json::{Value, json};
use serve_support::{ANSWERED, CHAIN, POLISH_PY, Server, run_answered};
use support::cli::Bench;

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

fn node_runs(trace: &Value) -> Vec<&Value> {
    trace
        .as_array()
        .expect("an array")
        .iter()
        .filter(|i| i.get("values").is_some())
        .collect()
}

/// Proves each node run's `values`: `draft` read `{task}` (not `secret`, not slices it
/// does not read) and wrote its constant; `polish` read the task and `draft`'s write
/// (rebuilt from the events, not stored per step) and wrote what its program printed;
/// items that are not node runs carry no `values`; without `?values=true` the trace is
/// unchanged; a bad `values` is a 400; `runs watch` prints the same writes and input.
#[test]
fn the_trace_holds_each_node_runs_input_and_writes() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("chain.json", CHAIN);
        b.file("polish.py", POLISH_PY);
        let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
        let input = json!({"task": "write a haiku", "secret": "do not show"});
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": "chain", "input": input, "name": "haiku"})),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        s.wait_status(&id, "completed");

        let plain = s.get(&format!("/api/runs/{id}/trace")).json();
        assert!(
            plain
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i.get("values").is_none()),
            "{plain}"
        );
        let trace = s.get(&format!("/api/runs/{id}/trace?values=true"));
        assert_eq!(trace.status, 200, "{}", trace.text());
        let trace = trace.json();
        assert_eq!(
            trace.as_array().unwrap().len(),
            plain.as_array().unwrap().len()
        );
        let runs = node_runs(&trace);
        assert_eq!(runs.len(), 2, "{trace}");
        let (draft, polish) = (runs[0], runs[1]);
        assert_eq!(draft["target"], "draft");
        assert_eq!(draft["kind"], "dispatch");
        assert_eq!(
            draft["values"],
            json!({"input": {"task": "write a haiku"},
                   "writes": {"draft": {"text": "first words"}}})
        );
        assert_eq!(polish["target"], "polish");
        assert_eq!(
            polish["values"],
            json!({"input": {"task": "write a haiku", "draft": {"text": "first words"}},
                   "writes": {"out": {"task": "write a haiku", "from": "first words", "n": 2}}})
        );
        // Everything but `values` is the plain trace, item by item.
        for (with, without) in trace
            .as_array()
            .unwrap()
            .iter()
            .zip(plain.as_array().unwrap())
        {
            let mut with = with.clone();
            with.as_object_mut().unwrap().remove("values");
            assert_eq!(&with, without);
        }
        assert!(!trace.to_string().contains("do not show"), "{trace}");
        let bad = s.get(&format!("/api/runs/{id}/trace?values=maybe"));
        assert_eq!(bad.status, 400, "{}", bad.text());
        assert_eq!(bad.error_code(), "bad_query");

        // The events carry the same values: the input on `run_started`, the writes on
        // the node runs' `step`s.
        let watched = b.run(&["runs", "watch", &id]);
        assert_eq!(watched.code, 0, "{}", watched.err);
        let events: Vec<Value> = watched
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(events[0]["event"], "run_started");
        assert_eq!(events[0]["input"], input);
        let written: Vec<&Value> = events.iter().filter_map(|e| e.get("writes")).collect();
        assert_eq!(
            written,
            [&draft["values"]["writes"], &polish["values"]["writes"]]
        );
    }
}

/// Proves the input is rebuilt past what is not a node's output, over HTTP on each store:
/// `note`, dispatched after the answer, read the `clarification` the resume wrote;
/// `brush`, inside subgraph `paint` (depth 1), read `colour` from its frame (the call's
/// mapped input); `finish`, after the return, read `out` (the return's mapped output) and
/// the answer. No node run says `input_unknown`, and the values are byte-identical on
/// SQLite and PostgreSQL.
#[test]
fn the_input_is_known_after_an_answer_inside_a_subgraph_and_after_its_return() {
    let mut seen: Vec<String> = Vec::new();
    for b in Bench::each(BIN.as_ref()) {
        b.file("answered.json", ANSWERED);
        let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
        let id = run_answered(&s);
        let trace = s.get(&format!("/api/runs/{id}/trace?values=true")).json();
        let runs = node_runs(&trace);
        let asked = json!({"question": "which colour?", "answer": "the blue one"});
        let got: Vec<(&Value, &Value, &Value)> = runs
            .iter()
            .map(|i| (&i["target"], &i["depth"], &i["values"]))
            .collect();
        assert_eq!(
            got,
            [
                (
                    &json!("note"),
                    &json!(0),
                    &json!({"input": {"clarification": asked}, "writes": {"colour": "blue"}})
                ),
                (
                    &json!("brush"),
                    &json!(1),
                    &json!({"input": {"colour": "blue"}, "writes": {"out": "a blue wall"}})
                ),
                (
                    &json!("finish"),
                    &json!(0),
                    &json!({"input": {"out": "a blue wall", "clarification": asked},
                            "writes": {"done": true}})
                ),
            ],
            "{trace}"
        );
        assert!(!trace.to_string().contains("input_unknown"), "{trace}");
        let values: Vec<&Value> = runs.iter().map(|i| &i["values"]).collect();
        seen.push(serde_json::to_string(&values).unwrap());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
}
