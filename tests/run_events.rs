//! Run events (docs/spec/events.md): numbered 1..=N without gaps, the same live and in
//! the store's history (on both stores), a subscriber that never reads does not slow a
//! run, and a full buffer drops `model_delta`s first and says how many it dropped.
#![cfg(feature = "store")]

mod support;

use std::time::Duration;

use pactgraph::runtime::{
    EventKind, RunEvent, RunEvents, RunId, RunRecord, RunStatus, Subscription,
};
use pactgraph::store::{Continue, CreateOptions, DriveOptions, RunStore, StoredStatus, drive};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::random_workflow::{input, workflow};
use support::runtime::{builder, graph, rt, ticker};
use support::stores::{backends, open};

/// A workflow that asks once, then ends on the answer.
fn asker() -> Value {
    json!({
        "workflow": "asker",
        "slices": {"clarification": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["x"], "default": {"ask_clarification": {"question": "which?"}}}},
        "nodes": {"x": {"supervisor": "root", "writes": ["clarification"], "terminal": true,
            "triggers": [{"priority": 1, "when": {"path": "/clarification", "exists": true}}],
            "run": {"set": {"clarification": 1}}}}
    })
}

/// Everything buffered in `sub`, oldest first.
fn drain(sub: &mut Subscription) -> Vec<RunEvent> {
    std::iter::from_fn(|| sub.try_next()).collect()
}

/// Checks `events` are numbered `first..` by one, and returns the last seq.
fn check_numbered(events: &[RunEvent], first: u64) -> u64 {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, first + i as u64, "seq {i} of {events:#?}");
    }
    events.last().map_or(first - 1, |e| e.seq)
}

/// Proves the in-memory stream: run_started, one step per trace item (carrying it, at its
/// index), run_ended with the outcome, numbered 1..=N; and the JSON shape.
#[test]
fn a_run_without_a_store_publishes_every_trace_item_in_order() {
    let ex = builder(graph(ticker(5))).build().unwrap();
    let events = RunEvents::new();
    let mut sub = events.subscribe(1024);
    let ex = ex.with_events(events);
    let outcome = rt().block_on(ex.run(ex.start(json!({})).unwrap()));
    let got = drain(&mut sub);
    assert_eq!(check_numbered(&got, 1), got.len() as u64);
    assert!(matches!(&got[0].kind, EventKind::RunStarted { workflow, .. } if workflow == "ticker"));
    let items: Vec<_> = got
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Step { index, item, .. } => Some((*index, item.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(items.len(), outcome.trace.to_items().len());
    for (i, (index, item)) in items.iter().enumerate() {
        assert_eq!(*index, i);
        assert_eq!(item, &outcome.trace.to_items()[i]);
    }
    let last = got.last().unwrap();
    assert_eq!(
        last.kind,
        EventKind::RunEnded {
            status: RunStatus::Stopped,
            termination_reason: outcome.termination_reason,
            message: outcome.message.clone(),
            steps: outcome.steps,
        }
    );
    assert!(got.iter().all(|e| e.run_id == outcome_id(&got)));
    // No store: nothing is durable, so no checkpoint events.
    assert!(
        !got.iter()
            .any(|e| matches!(e.kind, EventKind::Checkpoint { .. }))
    );
    // The JSON: `seq, run_id, event, at_ms` first, then the kind's fields; it reads back.
    let text = serde_json::to_string(&got[1]).unwrap();
    assert!(
        text.starts_with(&format!(
            r#"{{"seq":2,"run_id":"{}","event":"step","at_ms":"#,
            got[1].run_id
        )),
        "{text}"
    );
    let back: RunEvent = serde_json::from_str(&text).unwrap();
    assert_eq!(back, got[1]);
}

/// Proves what a step's events carry when they are moved to the last subscriber and
/// cloned for the others (ADR 0058): two subscribers receive equal streams; every node
/// run's `step` event carries the `set` node's writes (`{"n": 1}`), and the events of
/// different steps share one value (the plan's constant, not a copy per step), while a
/// decision's event carries none.
#[test]
fn a_set_nodes_writes_ride_on_its_step_events_shared_and_every_subscriber_gets_them() {
    let ex = builder(graph(ticker(4))).build().unwrap();
    let events = RunEvents::new();
    let (mut first, mut second) = (events.subscribe(1024), events.subscribe(1024));
    let ex = ex.with_events(events);
    rt().block_on(ex.run(ex.start(json!({})).unwrap()));
    let (a, b) = (drain(&mut first), drain(&mut second));
    assert_eq!(a, b);
    let writes: Vec<_> = a
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Step { item, writes, .. } => Some((item.kind, writes.clone())),
            _ => None,
        })
        .collect();
    let ran: Vec<_> = writes
        .iter()
        .filter(|(kind, _)| *kind == pactgraph::runtime::TraceKind::Dispatch)
        .map(|(_, w)| w.clone().expect("a node run's event carries its writes"))
        .collect();
    assert_eq!(ran.len(), 4, "{writes:?}");
    for w in &ran {
        assert_eq!(**w, json!({"n": 1}));
        assert!(std::sync::Arc::ptr_eq(w, &ran[0]), "one shared value");
    }
    assert!(
        writes
            .iter()
            .filter(|(kind, _)| *kind == pactgraph::runtime::TraceKind::Decision)
            .all(|(_, w)| w.is_none())
    );
}

fn outcome_id(events: &[RunEvent]) -> RunId {
    events[0].run_id
}

/// Proves a subscriber that never reads cannot hold a run back: a 2,000-step run with one
/// whose buffer (16) is full from the first steps on runs to its end (publishing never
/// waits for a reader: a blocking publish would hang here), the buffer holds the 16
/// newest events and the first one delivered says how many were dropped. What such a
/// subscriber costs in time is measured by `cargo bench --bench runtime -- run_events`,
/// not here (performance is checked by benchmarks, not timed tests).
#[test]
fn a_subscriber_that_never_reads_does_not_slow_a_run() {
    const STEPS: u32 = 2_000;
    let ex = builder(graph(ticker(STEPS))).build().unwrap();
    let rt = rt();
    let events = RunEvents::new();
    let mut sub = events.subscribe(16);
    let ex = ex.with_events(events);
    let run = ex.start(json!({})).unwrap();
    let outcome = rt.block_on(ex.run(run));
    assert_eq!(outcome.steps, STEPS);
    assert_eq!(sub.buffered(), 16);
    let got = drain(&mut sub);
    let last = got.last().unwrap();
    assert!(last.kind.is_end());
    let total = last.seq;
    assert_eq!(
        got[0].dropped,
        total - 16,
        "the first delivered says what was lost"
    );
    assert!(got[1..].iter().all(|e| e.dropped == 0));
    assert_eq!(check_numbered(&got, total - 15), total);
}

/// Proves that a bus with nobody subscribed counts a step's events without building them
/// and the numbering goes on without a gap: run A's steps taken with no subscriber are
/// numbered all the same, so a subscriber joining mid-run sees A's next events numbered
/// exactly as a run watched from its start (the same workflow, stepped beside it on a bus
/// with a subscriber throughout), up to `run_ended`.
#[test]
fn events_nobody_hears_are_counted_and_numbering_goes_on() {
    const STEPS: u32 = 12;
    let rt = rt();
    let ex = builder(graph(ticker(STEPS))).build().unwrap();
    let quiet = RunEvents::new();
    let ex_quiet = ex.with_events(quiet.clone());
    let watched = RunEvents::new();
    let mut all = watched.subscribe(1_000);
    let ex_watched = ex.with_events(watched);
    let mut a = ex_quiet.start(json!({})).unwrap();
    let mut b = ex_watched.start(json!({})).unwrap();
    for _ in 0..5 {
        rt.block_on(ex_quiet.step(&mut a));
        rt.block_on(ex_watched.step(&mut b));
    }
    let mut late = quiet.subscribe(1_000);
    let heard_before = drain(&mut all).last().unwrap().seq;
    assert_eq!(
        quiet.last_seq(a.run_id()),
        Some(heard_before),
        "counted while unheard"
    );
    while a.is_running() {
        rt.block_on(ex_quiet.step(&mut a));
        rt.block_on(ex_watched.step(&mut b));
    }
    let got = drain(&mut late);
    let want = drain(&mut all);
    assert!(!got.is_empty() && got.last().unwrap().kind.is_end());
    assert_eq!(got.first().unwrap().seq, heard_before + 1);
    let seqs = |v: &[RunEvent]| v.iter().map(|e| (e.seq, e.kind.name())).collect::<Vec<_>>();
    assert_eq!(seqs(&got), seqs(&want));
}

/// Proves the drop order: a full buffer drops `model_delta`s (the incoming one, else the
/// oldest buffered) before any kept event, and reports the count on the next delivered
/// event; a delta carries the seq of the run's last kept event.
#[test]
fn a_full_buffer_drops_model_deltas_first() {
    let events = RunEvents::new();
    let mut sub = events.subscribe(4);
    let id = RunId::new();
    let kept = |seq| RunEvent {
        seq,
        run_id: id,
        at_ms: 0,
        kind: EventKind::Paused { question: None },
        dropped: 0,
    };
    let deltas = events.publisher(id);
    events.publish(&[kept(1)]);
    deltas.model_delta("writer", 1, "a");
    deltas.model_delta("writer", 1, "b");
    events.publish(&[kept(2)]);
    // Full (1, a, b, 2): a third delta is dropped itself.
    deltas.model_delta("writer", 1, "c");
    // A kept event takes the oldest delta's place, then the next one's.
    events.publish(&[kept(3)]);
    events.publish(&[kept(4)]);
    // No delta left: the oldest event goes.
    events.publish(&[kept(5)]);
    let got = drain(&mut sub);
    let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [2, 3, 4, 5]);
    assert_eq!(got[0].dropped, 4, "c, a, b, then event 1");
    assert!(got[1..].iter().all(|e| e.dropped == 0));
    // Deltas carry the seq of the event before them, and are never numbered themselves.
    events.publish(&[kept(6)]);
    deltas.model_delta("writer", 2, "d");
    let got = drain(&mut sub);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].seq, 6);
    assert_eq!(got[1].kind.name(), "model_delta");
    assert_eq!(
        serde_json::to_value(&got[1]).unwrap(),
        json!({"seq": 6, "run_id": id, "event": "model_delta", "at_ms": got[1].at_ms,
               "node": "writer", "turn": 2, "text": "d"})
    );
    // Every RunEvents clone gone: the subscription ends once drained.
    drop(deltas);
    drop(events);
    assert_eq!(rt().block_on(sub.next()), None);
}

/// Proves, on each store, that a driven run's live events are its history: the same
/// events, numbered 1..=N without gaps, a checkpoint event closing each transition, the
/// same for two subscribers; a pause and its answer (another driver) continue the
/// numbering.
#[test]
fn history_equals_the_live_stream_across_a_pause_on_both_stores() {
    let rt = rt();
    for backend in backends() {
        rt.block_on(async {
            let store = open(backend).await;
            let g = graph(asker());
            let document = g.to_document();
            let ex = builder(g).build().unwrap();
            let record = RunRecord::new(document, ex.start(json!({})).unwrap());
            let id = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            assert!(store.events(id, 0, 100).await.unwrap().is_empty());

            let events = RunEvents::new();
            let mut sub = events.subscribe(1024);
            // A second subscriber: the checkpoint's events are copied for the first and
            // moved to the last (`publish_owned`); both get the store's history.
            let mut other = events.subscribe(1024);
            let paused = drive(
                &ex.with_events(events),
                &*store,
                id,
                "a",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            assert_eq!(paused.status(), RunStatus::AwaitingInput);
            let first = drain(&mut sub);
            let names: Vec<&str> = first.iter().map(|e| e.kind.name()).collect();
            assert_eq!(names.first(), Some(&"run_started"));
            assert_eq!(&names[names.len() - 2..], ["paused", "checkpoint"]);
            let mid = check_numbered(&first, 1);
            assert_eq!(store.events(id, 0, 1000).await.unwrap(), first);
            assert_eq!(
                drain(&mut other),
                first,
                "both subscribers get the same events"
            );

            let events = RunEvents::new();
            let mut sub = events.subscribe(1024);
            let done = drive(
                &ex.with_events(events),
                &*store,
                id,
                "b",
                &DriveOptions::default(),
                Continue::Answer("this one".into()),
            )
            .await
            .unwrap();
            assert_eq!(done.status(), RunStatus::Completed);
            let second = drain(&mut sub);
            let last = check_numbered(&second, mid + 1);
            assert_eq!(second[0].kind.name(), "step", "the resume item first");
            let ended = second
                .iter()
                .find(|e| e.kind.is_end())
                .expect("a run_ended");
            assert!(matches!(
                ended.kind,
                EventKind::RunEnded {
                    status: RunStatus::Completed,
                    ..
                }
            ));
            assert_eq!(second.last().unwrap().kind.name(), "checkpoint");
            let history = store.events(id, 0, 1000).await.unwrap();
            assert_eq!(history, [first, second.clone()].concat());
            assert_eq!(store.last_event_seq(id).await.unwrap(), last);
            // Read from a seq: what an SSE client resuming after `mid` gets.
            assert_eq!(store.events(id, mid, 1000).await.unwrap(), second);
            assert_eq!(store.events(id, mid, 2).await.unwrap(), second[..2]);
            // Every step item of the trace is in the history once, at its index.
            let trace = store.load(id).await.unwrap().record.run.trace().to_items();
            let stepped: Vec<_> = history
                .iter()
                .filter_map(|e| match &e.kind {
                    EventKind::Step { index, item, .. } => Some((*index, item.clone())),
                    _ => None,
                })
                .collect();
            assert_eq!(stepped.len(), trace.len());
            assert!(stepped.iter().all(|(i, item)| &trace[*i] == item));
        });
    }
}

/// Proves a cancel written by the store itself (a paused run) keeps numbering on.
#[test]
fn a_cancel_by_the_store_ends_the_history() {
    let rt = rt();
    for backend in backends() {
        rt.block_on(async {
            let store = open(backend).await;
            let g = graph(asker());
            let document = g.to_document();
            let ex = builder(g).build().unwrap();
            let record = RunRecord::new(document, ex.start(json!({})).unwrap());
            let id = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            drive(
                &ex,
                &*store,
                id,
                "a",
                &DriveOptions::default(),
                Continue::AsStored,
            )
            .await
            .unwrap();
            let before = store.last_event_seq(id).await.unwrap();
            assert!(before > 0, "events are kept without any subscriber");
            let info = store.cancel(id).await.unwrap();
            assert_eq!(info.status, StoredStatus::Stopped);
            let history = store.events(id, 0, 1000).await.unwrap();
            check_numbered(&history, 1);
            let tail: Vec<&str> = history[before as usize..]
                .iter()
                .map(|e| e.kind.name())
                .collect();
            assert_eq!(tail, ["step", "run_ended", "checkpoint"]);
        });
    }
}

proptest! {
    // Each case opens a fresh store on each backend.
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// For any run, stopped after any `k` checkpoints and finished by another driver: the
    /// events are numbered 1..=N without gaps, history equals the two live streams one
    /// after the other, and the step events are the trace (as the in-memory stream's are).
    #[test]
    fn for_any_run_seqs_have_no_gaps_and_history_is_live(seed in any::<u64>(), k in 0u64..30) {
        let (doc, _) = workflow(seed);
        let g = graph(doc);
        let document = g.to_document();
        let ex = builder(g).build().unwrap();
        let rt = rt();
        let initial = input(seed);

        // In memory.
        let events = RunEvents::new();
        let mut sub = events.subscribe(100_000);
        let mem = rt.block_on(ex.with_events(events).run(ex.start(initial.clone()).unwrap()));
        let live = drain(&mut sub);
        prop_assert_eq!(check_numbered(&live, 1), live.len() as u64);
        prop_assert!(live.last().unwrap().kind.is_end());
        let mem_steps: Vec<_> = live.iter().filter(|e| e.kind.name() == "step").cloned()
            .map(|e| e.kind).collect();
        prop_assert_eq!(mem_steps.len(), mem.trace.to_items().len());

        for backend in backends() {
            let (document, initial) = (document.clone(), initial.clone());
            rt.block_on(async {
                let store = open(backend).await;
                let record = RunRecord::new(document, ex.start(initial).unwrap());
                let id = record.run_id;
                store.create(&record, &CreateOptions::default()).await.unwrap();
                let mut live = Vec::new();
                for (owner, options) in [
                    ("a", DriveOptions::default().max_checkpoints(k)),
                    ("b", DriveOptions::default()),
                ] {
                    let events = RunEvents::new();
                    let mut sub = events.subscribe(100_000);
                    drive(&ex.with_events(events), &*store, id, owner, &options, Continue::AsStored).await.unwrap();
                    live.extend(drain(&mut sub));
                }
                let n = check_numbered(&live, 1);
                prop_assert_eq!(n, live.len() as u64);
                let history = store.events(id, 0, 100_000).await.unwrap();
                prop_assert_eq!(&history, &live);
                prop_assert!(history.iter().any(|e| e.kind.is_end()));
                // The frozen clock: the same trace items as the in-memory run's.
                let steps: Vec<_> = history.iter().filter(|e| e.kind.name() == "step")
                    .map(|e| e.kind.clone()).collect();
                prop_assert_eq!(&steps, &mem_steps);
                Ok::<(), TestCaseError>(())
            })?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// For any run's events (every kind: run_started, step with any trace item, paused,
    /// run_ended with or without a message, checkpoint, model_delta), with or without a
    /// `dropped` count: `RunEvent::to_json_string` (what the store keeps) is byte for byte
    /// `serde_json::to_string`, and reads back as the event.
    #[test]
    fn an_events_text_is_its_serialization(seed in any::<u64>(), dropped in 0u64..3) {
        let (doc, _) = workflow(seed);
        let ex = builder(graph(doc)).build().unwrap();
        let events = RunEvents::new();
        let mut sub = events.subscribe(100_000);
        rt().block_on(ex.with_events(events).run(ex.start(input(seed)).unwrap()));
        let mut got = drain(&mut sub);
        let run_id = got[0].run_id;
        got.push(RunEvent { seq: 0, run_id, at_ms: 0, dropped: 0, kind: EventKind::Checkpoint {
            checkpoint: seed % 7, steps: 3, trace_len: 9 } });
        got.push(RunEvent { seq: 1, run_id, at_ms: 1, dropped: 0, kind: EventKind::Paused {
            question: (seed % 2 == 0).then(|| "which \"one\"?\n".to_string()) } });
        got.push(RunEvent { seq: 2, run_id, at_ms: 2, dropped: 0, kind: EventKind::ModelDelta {
            node: "n\u{e9}".into(), turn: 2, text: "{\"a\": [1]}".into(),
            tool_call: (seed % 2 == 1).then_some(1) } });
        for mut e in got {
            e.dropped = dropped;
            let text = e.to_json_string();
            prop_assert_eq!(&text, &serde_json::to_string(&e).unwrap());
            let back: RunEvent = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(back, e);
        }
    }
}

/// Proves `store::Follower` (what `runs watch` and an SSE route use) gives the history
/// and then the live events of a run driven at the same time, in order, exactly the
/// store's history, ending when the run ends; started after the end from a `seq`, the
/// rest of it; and that `next_ready` gives the rest of a read without another.
#[test]
fn a_follower_reads_history_then_live_events_until_the_end() {
    use pactgraph::store::Follower;
    let rt = rt();
    for backend in backends() {
        rt.block_on(async {
            let store = open(backend).await;
            let g = graph(ticker(40));
            let document = g.to_document();
            let ex = builder(g).build().unwrap();
            let record = RunRecord::new(document, ex.start(json!({})).unwrap());
            let id = record.run_id;
            store
                .create(&record, &CreateOptions::default())
                .await
                .unwrap();
            let events = RunEvents::new();
            let live = events.subscribe(1024);
            let driven = ex.with_events(events);
            let mut follower = Follower::new(&*store, id, 0)
                .poll_every(Duration::from_millis(5))
                .live(live);
            let follow = async {
                let mut got = Vec::new();
                while let Some(e) = follower.next().await.unwrap() {
                    got.push(e);
                }
                got
            };
            let options = DriveOptions::default();
            let (run, got) = tokio::join!(
                drive(&driven, &*store, id, "a", &options, Continue::AsStored),
                follow
            );
            assert_eq!(run.unwrap().status(), RunStatus::Stopped);
            let history = store.events(id, 0, 100_000).await.unwrap();
            assert_eq!(got, history);
            assert_eq!(follower.final_status(), Some(StoredStatus::Stopped));
            let mut late = Follower::new(&*store, id, 10);
            let mut rest = Vec::new();
            while let Some(e) = late.next().await.unwrap() {
                rest.push(e);
            }
            assert_eq!(rest, history[10..]);
            // `next_ready` hands over what the last read gave, without reading again.
            let mut batch = Follower::new(&*store, id, 0);
            let mut read = vec![batch.next().await.unwrap().expect("a first event")];
            while let Some(e) = batch.next_ready() {
                read.push(e);
            }
            assert_eq!(read, history, "one read gave the whole (short) history");
            assert_eq!(batch.last_seq(), history.last().unwrap().seq);
            assert!(batch.next_ready().is_none());
            assert!(batch.next().await.unwrap().is_none());
        });
    }
}
