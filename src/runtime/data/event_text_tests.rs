//! The hand-written event texts against `serde_json`'s (ADR 0056): for all trace items,
//! events and transitions, the same bytes.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::write_transition_events;
use super::{Seen, Text};
use crate::runtime::data::events::{EventKind, EventStamp, RunEvent, transition_events};
use crate::runtime::{
    CallRecord, Candidates, Chain, ChainTrigger, DecisionTrace, RunId, SliceChange,
    TerminationReason, TraceItem, TraceKind, Usage, WALL_MS,
};

const KINDS: [TraceKind; 19] = [
    TraceKind::Decision,
    TraceKind::Dispatch,
    TraceKind::Handoff,
    TraceKind::Call,
    TraceKind::Return,
    TraceKind::Fallback,
    TraceKind::GuardStop,
    TraceKind::Pause,
    TraceKind::Resume,
    TraceKind::End,
    TraceKind::Retry,
    TraceKind::Fork,
    TraceKind::Advisor,
    TraceKind::Join,
    TraceKind::Clarify,
    TraceKind::TeamCycle,
    TraceKind::TeamTurn,
    TraceKind::ModelCall,
    TraceKind::ToolCall,
];

const REASONS: [TerminationReason; 6] = [
    TerminationReason::StopGlobal,
    TerminationReason::Terminal,
    TerminationReason::MaxStepsExceeded,
    TerminationReason::NodeFailed,
    TerminationReason::InvalidOutput,
    TerminationReason::Cancelled,
];

/// Proves `TraceKind::as_str` is the kind's JSON name, for every kind.
#[test]
fn kind_names_are_their_json() {
    for kind in KINDS {
        assert_eq!(
            serde_json::to_value(kind).expect("a kind"),
            Value::from(kind.as_str())
        );
    }
}

/// Text that needs escaping more often than random text does: quotes, backslashes,
/// control characters, U+007F, non-ASCII.
fn text() -> impl Strategy<Value = String> {
    "(\\PC|[\"\\\\\u{0}-\u{1f}\u{7f}é\u{2028}😀]){0,24}"
}

fn id() -> impl Strategy<Value = Option<Arc<str>>> {
    prop::option::of(text().prop_map(Arc::from))
}

fn usage() -> impl Strategy<Value = Option<Usage>> {
    let amount = prop_oneof![
        any::<u32>().prop_map(serde_json::Number::from),
        (0.0..1e6f64).prop_map(|f| serde_json::Number::from_f64(f).expect("finite")),
    ];
    let name = prop_oneof![
        Just("input_tokens".to_string()),
        Just("wall_ms".to_string()),
        text()
    ];
    prop::option::of(
        prop::collection::vec((name, amount), 1..3).prop_map(|entries| {
            let mut usage = Usage::new();
            for (name, amount) in entries {
                usage.add(name, amount);
            }
            usage
        }),
    )
}

fn call() -> impl Strategy<Value = Option<CallRecord>> {
    let model: CallRecord = CallRecord::Model(
        serde_json::from_value(
            json!({"node": "a\"gent", "model": "m", "turn": 2, "attempt": 1,
            "failed_attempts": [{"status": 503, "error": "busy\n", "duration_ms": 4,
            "waited_ms": 100}], "finish_reason": "stop", "usage_known": true}),
        )
        .expect("a model call"),
    );
    let tool: CallRecord = CallRecord::Tool(
        serde_json::from_value(json!({"caller": "a", "tool": "t\u{1}", "call_id": "c",
            "index": 0, "status": "ok"}))
        .expect("a tool call"),
    );
    prop_oneof![Just(None), Just(Some(model)), Just(Some(tool))]
}

prop_compose! {
    fn item()(
        kind in prop::sample::select(&KINDS[..]),
        step: u32,
        depth: u16,
        ids in (id(), id(), id(), id(), id()),
        termination_reason in prop::option::of(prop::sample::select(&REASONS[..])),
        candidates in prop::collection::vec(text().prop_map(Arc::from), 0..3),
        at_ms: u64,
        duration_us in prop_oneof![any::<u64>(), (0..1000u64).prop_map(|ms| ms * 1000)],
        usage in usage(),
        chain in prop::option::of((text(), any::<u32>(), any::<bool>())),
        call in call(),
    ) -> TraceItem {
        let mut item = TraceItem::new(kind, step, u32::from(depth));
        (item.supervisor, item.subgraph, item.source, item.target, item.reason) = ids;
        item.termination_reason = termination_reason;
        item.candidates = Candidates::from(candidates);
        item.at_ms = at_ms;
        item.duration_us = duration_us;
        item.set_usage(usage);
        item.set_chain(chain.map(|(root, stage, router)| Chain {
            root: root.into(),
            stage,
            trigger: if router { ChainTrigger::Router } else { ChainTrigger::Handoff },
        }));
        item.set_call(call);
        item
    }
}

fn writes() -> impl Strategy<Value = Option<Arc<Value>>> {
    prop::option::of(
        (text(), text(), any::<i64>())
            .prop_map(|(slice, s, n)| Arc::new(json!({ slice: {"s": s, "n": n, "ok": true} }))),
    )
}

proptest! {
    /// For all trace items (every kind, ids with quotes, control characters and
    /// non-ASCII text, candidates, usage reported or not, chain stages, calls, any
    /// numbers), the hand-written text of the item and of its `step` event is exactly
    /// `serde_json`'s, whether the item is plain data or read through a trace's name
    /// table; and the event's text reads back as the event.
    #[test]
    fn item_and_step_texts_are_serde_jsons(
        items in prop::collection::vec(item(), 1..6),
        writes in writes(),
        change in prop::option::of((text(), text())),
        seq: u64,
        at_ms: u64,
        dropped in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let trace = DecisionTrace::from(items.clone());
        for (item, interned) in items.iter().zip(trace.iter()) {
            let expected = serde_json::to_vec(item).expect("an item");
            let mut out = Vec::new();
            item.out().write_json(&mut Text::new(&mut out), &mut Seen::once());
            prop_assert_eq!(&out, &expected);
            out.clear();
            interned.out().write_json(&mut Text::new(&mut out), &mut Seen::once());
            prop_assert_eq!(&out, &expected);
        }
        let changes: Vec<SliceChange> = change
            .into_iter()
            .map(|(slice, v)| SliceChange::Set { at: 1, level: 0, slice, value: json!(v) })
            .collect();
        let event = RunEvent {
            seq,
            run_id: RunId::new(),
            at_ms,
            kind: EventKind::Step { index: 3, item: items[0].clone(), writes, changes },
            dropped,
        };
        let mut out = b"before".to_vec();
        event.write_json(&mut out);
        let text = serde_json::to_string(&event).expect("an event");
        prop_assert_eq!(&out[6..], text.as_bytes());
        let back: RunEvent = serde_json::from_slice(&out[6..]).expect("reads back");
        // A node run's `wall_ms` is its `duration_us`: one it reported is not read back.
        let reported_wall = items[0].usage().is_some_and(|u| {
            serde_json::to_value(u).expect("usage").get(WALL_MS).is_some()
        });
        if !reported_wall {
            prop_assert_eq!(back, event);
        }
    }
}

/// Proves `write_transition_events` writes, straight from a run, exactly the texts of
/// the events `transition_events` makes (joined by line breaks), for the transitions of
/// real runs: the first (with `run_started` and its input, recorded as a value or as
/// text, with strings to escape), one in the middle, one that ends the run, with and
/// without a checkpoint; and nothing for a transition without events.
#[test]
fn a_transition_text_is_its_events_texts() {
    use crate::graph::{GraphBuilder, synth};
    use crate::runtime::Executor;
    use crate::validator::ValidGraph;

    let docs = [synth::supervisor_loop(5), synth::repeated_calls(3)];
    for (doc, as_text) in docs
        .iter()
        .flat_map(|d| [(d.clone(), false), (d.clone(), true)])
    {
        let graph = GraphBuilder::from_document(doc).build().expect("compiles");
        let ex = Executor::builder(ValidGraph::new(graph).expect("valid"))
            .build()
            .expect("builds");
        let mut run = ex
            .start(json!({"task": ["a\"b", "\u{1}", 1]}))
            .expect("starts");
        if as_text {
            run.record_values_as_text();
        } else {
            run.record_values();
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let mut from = 0;
        let mut seq = 1;
        while run.is_running() {
            if seq > 1 {
                // Nothing new since the last transition: no event.
                let stamp = EventStamp {
                    first_seq: seq,
                    at_ms: 0,
                };
                let mut out = Vec::new();
                assert_eq!(
                    write_transition_events(&run, from, None, stamp, &mut out),
                    None
                );
                assert!(out.is_empty());
            }
            rt.block_on(ex.step(&mut run));
            for checkpoint in [None, Some(7)] {
                let stamp = EventStamp {
                    first_seq: seq,
                    at_ms: 1_700_000_000_000,
                };
                let events = transition_events(&run, from, checkpoint, stamp);
                let expected: Vec<String> = events.iter().map(RunEvent::to_json_string).collect();
                for (e, text) in events.iter().zip(&expected) {
                    assert_eq!(text, &serde_json::to_string(e).expect("an event"));
                }
                let mut out = Vec::new();
                let seqs = write_transition_events(&run, from, checkpoint, stamp, &mut out);
                assert_eq!(String::from_utf8(out).expect("UTF-8"), expected.join("\n"));
                assert_eq!(
                    seqs,
                    events
                        .first()
                        .zip(events.last())
                        .map(|(f, l)| (f.seq, l.seq))
                );
            }
            seq += transition_events(
                &run,
                from,
                None,
                EventStamp {
                    first_seq: seq,
                    at_ms: 0,
                },
            )
            .len() as u64;
            from = run.trace.len();
            run.events_made();
        }
        assert!(seq > 10, "the run made its events");
    }
}

/// Proves an input recorded as text reads back as the value it was written from, and
/// that one nested past `serde_json`'s 128 levels (only code can make one) is left out
/// of a live `run_started` instead of panicking.
#[test]
fn an_input_recorded_as_text_reads_back() {
    use crate::runtime::data::changes::RecordedInput;
    use crate::runtime::data::json_text::write_value;

    let text = |v: &Value| {
        let mut out = Vec::new();
        write_value(&mut Text::new(&mut out), v);
        RecordedInput::Text(String::from_utf8(out).expect("UTF-8").into_boxed_str())
    };
    let input = json!({"task": ["a\"b", 1.5, -3, null, {"k\u{1}": true}]});
    assert_eq!(text(&input).to_value(), Some(input));
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    assert_eq!(text(&deep).to_value(), None);
}

proptest! {
    /// For all sequences of items drawn from a pool of up to seven distinct ones (more than
    /// the middles a chunk keeps: evictions, and a middle written again after its
    /// eviction), written one after the other with one chunk's `Seen` (each middle seen
    /// again copied), every item's text is exactly `serde_json`'s: read through the
    /// trace's name table (one id, one address) and as plain data (an id cloned from the
    /// pool shares its address; equal ids at other addresses are written, not copied).
    #[test]
    fn items_written_in_a_row_are_serde_jsons(
        pool in prop::collection::vec(item(), 1..8),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..40),
    ) {
        let items: Vec<TraceItem> = picks.iter().map(|i| pool[i.index(pool.len())].clone()).collect();
        let trace = DecisionTrace::from(items.clone());
        let mut interned_seen = Seen::chunk();
        let mut plain_seen = Seen::chunk();
        for (item, interned) in items.iter().zip(trace.iter()) {
            let expected = serde_json::to_vec(item).expect("an item");
            let mut out = Vec::new();
            interned.out().write_json(&mut Text::new(&mut out), &mut interned_seen);
            prop_assert_eq!(&out, &expected);
            out.clear();
            item.out().write_json(&mut Text::new(&mut out), &mut plain_seen);
            prop_assert_eq!(&out, &expected);
        }
    }
}
