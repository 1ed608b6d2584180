//! Tests of the checkpoint delta: what a step changed, applied back exactly.

use super::*;
use serde_json::json;

fn state(v: Value) -> State {
    match v {
        Value::Object(m) => m,
        _ => State::new(),
    }
}

/// Applies the delta from `a` to `b` to `a` and checks it gives `b`, key order too.
fn round_trip(a: Value, b: Value) -> MapDelta<Value> {
    let (a, b) = (state(a), state(b));
    let d = MapDelta::states(&a, &b);
    let mut out = a.clone();
    d.apply(&mut out);
    assert_eq!(out, b);
    assert_eq!(
        out.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "key order"
    );
    d
}

#[test]
fn only_changed_keys_are_recorded() {
    let d = round_trip(
        json!({"big": [1, 2, 3], "n": 1, "gone": true}),
        json!({"big": [1, 2, 3], "n": 2, "new": "x"}),
    );
    assert_eq!(d.removed, vec!["gone".to_string()]);
    assert_eq!(d.set.keys().collect::<Vec<_>>(), ["n", "new"]);
    assert!(d.whole.is_none());
    assert!(round_trip(json!({"a": 1}), json!({"a": 1})).is_empty());
}

#[test]
fn a_logged_delta_sets_written_keys_in_first_write_order() {
    let before = state(json!({"big": [1, 2, 3], "n": 1}));
    let after = state(json!({"big": [1, 2, 3], "n": 2, "x": 1, "y": 2}));
    let d = MapDelta::written(&after, ["y", "n", "y", "x"].into_iter());
    // Not "big": no write named it. New keys come in the order they were appended.
    let mut out = before.clone();
    MapDelta::written(&after, ["n", "x", "y", "x"].into_iter()).apply(&mut out);
    assert_eq!(out.keys().collect::<Vec<_>>(), ["big", "n", "x", "y"]);
    assert_eq!(out, after);
    assert_eq!(d.set.keys().collect::<Vec<_>>(), ["y", "n", "x"]);
    assert!(d.removed.is_empty() && d.whole.is_none());
}

#[test]
fn a_reordering_removal_and_insert_cannot_express_is_stored_whole() {
    let d = round_trip(json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1}));
    assert!(d.whole.is_some());
    let d = round_trip(json!({"a": 1, "b": 2}), json!({"c": 0, "a": 1, "b": 2}));
    assert!(d.whole.is_some());
    // A changed key that moved is stored whole as well.
    let d = round_trip(json!({"a": 1, "b": 2}), json!({"b": 2, "a": 3}));
    assert!(d.whole.is_some());
}
