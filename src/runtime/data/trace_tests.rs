//! The trace item's layout and JSON form.

use std::sync::Arc;

use serde_json::json;

use super::{Chain, TraceItem, TraceKind};
use crate::runtime::Usage;

/// The JSON form is flat (`usage` and `chain` are keys of the item, in the documented
/// order, absent when unset) and reads back to an equal item; an item whose detail is
/// empty reads back without one.
#[test]
fn an_item_with_detail_round_trips_through_flat_json() {
    let mut it = TraceItem::new(TraceKind::Dispatch, 3, 1);
    it.target = Some(Arc::from("n"));
    let usage: Usage = serde_json::from_value(json!({"input_tokens": 4})).expect("usage");
    it.set_usage(Some(usage));
    it.set_chain(Some(Chain::handoff_root(Arc::from("n"))));
    let v = serde_json::to_value(&it).expect("plain data");
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys[keys.len() - 2..], ["usage", "chain"]);
    assert_eq!(
        v["chain"],
        json!({"root": "n", "stage": 0, "trigger": "handoff"})
    );
    let back: TraceItem = serde_json::from_value(v).expect("reads back");
    assert_eq!(back, it);
    it.set_usage(None);
    it.set_chain(None);
    assert!(it.detail.is_none(), "an emptied detail is dropped");
    let v = serde_json::to_value(&it).expect("plain data");
    assert_eq!(v["usage"], json!({"wall_ms": 0}), "a node run has a record");
    assert!(v.get("chain").is_none());
    assert_eq!(serde_json::from_value::<TraceItem>(v).expect("reads"), it);
    it.kind = TraceKind::Decision;
    let v = serde_json::to_value(&it).expect("plain data");
    assert!(v.get("usage").is_none() && v.get("chain").is_none());
    assert_eq!(serde_json::from_value::<TraceItem>(v).expect("reads"), it);
}

/// A node run's record adds `wall_ms` (its `duration_us` in milliseconds) to what it
/// reported; `wall_ms` is written, and read back into `duration_us` only.
#[test]
fn a_node_run_records_its_wall_time() {
    let mut it = TraceItem::new(TraceKind::Handoff, 2, 0);
    it.target = Some(Arc::from("n"));
    it.duration_us = 1_500;
    it.set_usage(Some(Usage::new().with("input_tokens", 3)));
    let v = serde_json::to_value(&it).expect("plain data");
    assert_eq!(v["usage"], json!({"input_tokens": 3, "wall_ms": 1.5}));
    let back: TraceItem = serde_json::from_value(v).expect("reads back");
    assert_eq!(back, it);
    assert_eq!(back.usage(), Some(&Usage::new().with("input_tokens", 3)));
    it.duration_us = 7_000;
    let record = it.usage_record().expect("a node run");
    assert_eq!(record.get("wall_ms"), Some(&7.into()));
    assert!(
        TraceItem::new(TraceKind::Call, 1, 0)
            .usage_record()
            .is_none()
    );
}
