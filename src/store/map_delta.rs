//! [`MapDelta`]: the change of one map of a run (a level's slices, or a counter map),
//! computed by comparing the map before and after a step, and applied to reproduce it
//! exactly (key order included). Part of a [`StepDelta`](super::StepDelta).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::runtime::State;

/// The change of one state map (a level's slices, or a counter map): keys removed, then
/// keys set in order (existing keys keep their place, new keys are appended). When the
/// keys were reordered in a way these two operations cannot reproduce, the whole map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapDelta<V> {
    /// Keys removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// Keys whose value changed or that are new, with their new value.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub set: IndexMap<String, V>,
    /// The whole map, replacing it (only when its key order changed otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole: Option<IndexMap<String, V>>,
}

impl<V: Clone + PartialEq> MapDelta<V> {
    /// The change from `before` to `after`.
    pub(super) fn between<'a, I, J>(
        before: I,
        after: J,
        before_len: usize,
        after_len: usize,
    ) -> Self
    where
        I: Iterator<Item = (&'a String, &'a V)> + Clone,
        J: Iterator<Item = (&'a String, &'a V)> + Clone,
        V: 'a,
    {
        let mut delta = Self::empty();
        let after_map: IndexMap<&String, &V> = after.clone().collect();
        let before_map: IndexMap<&String, &V> = before.clone().collect();
        for (k, _) in before.clone() {
            if !after_map.contains_key(k) {
                delta.removed.push(k.clone());
            }
        }
        // Replaying `removed` then `set` keeps the surviving keys in their old order and
        // appends the new ones in their new order: check that this is the order after.
        let kept = before_len - delta.removed.len();
        let mut order_ok = after_len >= kept;
        let mut survivors = before.filter(|(k, _)| after_map.contains_key(*k));
        for (i, (k, v)) in after.enumerate() {
            match before_map.get(k) {
                Some(old) => {
                    if order_ok && (i >= kept || survivors.next().map(|(s, _)| s) != Some(k)) {
                        order_ok = false;
                    }
                    if *old != v {
                        delta.set.insert(k.clone(), v.clone());
                    }
                }
                None => {
                    if i < kept {
                        order_ok = false;
                    }
                    delta.set.insert(k.clone(), v.clone());
                }
            }
        }
        if !order_ok {
            return Self {
                whole: Some(
                    after_map
                        .into_iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                ..Self::empty()
            };
        }
        delta
    }

    /// No change.
    pub fn empty() -> Self {
        Self {
            removed: Vec::new(),
            set: IndexMap::new(),
            whole: None,
        }
    }

    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.set.is_empty() && self.whole.is_none()
    }
}

impl MapDelta<Value> {
    pub(super) fn states(before: &State, after: &State) -> Self {
        Self::between(before.iter(), after.iter(), before.len(), after.len())
    }

    /// The change of a map whose only writes were inserts of `written` (in write order):
    /// each written key with its value now. A written key that is new was appended by its
    /// first insert, so setting the keys in first-write order gives the same key order.
    pub(super) fn written<'a>(after: &State, written: impl Iterator<Item = &'a str>) -> Self {
        let mut delta = Self::empty();
        for key in written {
            if delta.set.contains_key(key) {
                continue;
            }
            match after.get(key) {
                Some(v) => {
                    delta.set.insert(key.to_string(), v.clone());
                }
                None => delta.removed.push(key.to_string()),
            }
        }
        delta
    }

    pub(super) fn apply(&self, map: &mut State) {
        if let Some(whole) = &self.whole {
            *map = whole.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            return;
        }
        for k in &self.removed {
            map.shift_remove(k);
        }
        for (k, v) in &self.set {
            map.insert(k.clone(), v.clone());
        }
    }
}

impl MapDelta<u32> {
    pub(super) fn counters(before: &IndexMap<String, u32>, after: &IndexMap<String, u32>) -> Self {
        Self::between(before.iter(), after.iter(), before.len(), after.len())
    }

    pub(super) fn apply(&self, map: &mut IndexMap<String, u32>) {
        if let Some(whole) = &self.whole {
            map.clone_from(whole);
            return;
        }
        for k in &self.removed {
            map.shift_remove(k);
        }
        for (k, v) in &self.set {
            map.insert(k.clone(), *v);
        }
    }
}
