//! Each step runs in a `tracing` span carrying the trace fields.

mod support;

use std::sync::{Arc, Mutex};

use serde_json::json;
use support::runtime::{builder, graph_file, rt};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

type Spans = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// Records every span's fields (at creation and when recorded later).
struct Recorder(Spans);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut spans = self.0.lock().unwrap();
        let mut fields = vec![("name".to_string(), span.metadata().name().to_string())];
        span.record(&mut Fields(&mut fields));
        spans.push(fields);
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.0.lock().unwrap();
        let fields = &mut spans[span.into_u64() as usize - 1];
        values.record(&mut Fields(fields));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn every_step_has_a_span_with_the_trace_fields() {
    let spans: Spans = Arc::default();
    let ex = builder(graph_file("examples/workflows/fashion.json"))
        .build()
        .unwrap();
    let rt = rt();
    tracing::subscriber::with_default(Recorder(Arc::clone(&spans)), || {
        rt.block_on(ex.run(ex.start(json!({"request": {"topic": "fashion"}})).unwrap()))
    });
    let spans = spans.lock().unwrap();
    let steps: Vec<_> = spans
        .iter()
        .filter(|f| f.iter().any(|(k, v)| k == "name" && v == "pactgraph.step"))
        .collect();
    assert_eq!(
        steps.len(),
        4,
        "call, trend, return, stop_global: {spans:?}"
    );
    let get = |f: &Vec<(String, String)>, key: &str| {
        f.iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        get(steps[0], "supervisor").as_deref(),
        Some("domain_supervisor")
    );
    assert_eq!(get(steps[0], "target").as_deref(), Some("fashion"));
    assert_eq!(get(steps[0], "kind").as_deref(), Some("Decision"));
    assert_eq!(get(steps[1], "subgraph").as_deref(), Some("fashion"));
    assert_eq!(get(steps[1], "depth").as_deref(), Some("1"));
    assert_eq!(
        get(steps[3], "termination_reason").as_deref(),
        Some("stop_global")
    );
}

#[test]
fn the_trace_copy_in_system_can_be_turned_off() {
    use pactgraph::graph::{GraphBuilder, synth};
    use pactgraph::runtime::{Executor, RunStatus};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let graph = GraphBuilder::from_document(synth::handoff_chain(5))
        .build()
        .unwrap();
    let outcome = |keep: bool| {
        let ex = Executor::builder(support::runtime::valid(graph.clone()))
            .trace_in_state(keep)
            .build()
            .unwrap();
        rt.block_on(ex.run(ex.start(serde_json::json!({})).unwrap()))
    };
    let kept = outcome(true);
    let lean = outcome(false);
    assert_eq!(
        (kept.status, lean.status),
        (RunStatus::Completed, RunStatus::Completed)
    );
    assert_eq!(kept.trace.without_timing(), lean.trace.without_timing());
    let copied: pactgraph::runtime::DecisionTrace =
        serde_json::from_value(kept.state_json()["system"]["decision_trace"].clone()).unwrap();
    assert_eq!(copied, kept.trace);
    assert!(lean.state_json()["system"].get("decision_trace").is_none());
    assert_eq!(lean.state["system"]["steps"], 5);
    assert_eq!(lean.state["data"], kept.state["data"]);
}
