//! The decision trace of one run: its items in the order they happened (`trace.rs`: the
//! item). Its JSON form is the array of its items.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::trace::TraceItem;

/// The ordered list of trace items of one run: read them with [`DecisionTrace::iter`] or
/// [`DecisionTrace::get`]. Its JSON form is the array of its items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DecisionTrace {
    pub(crate) items: Vec<TraceItem>,
}

impl DecisionTrace {
    /// An empty trace with room for `items` items.
    pub fn with_capacity(items: usize) -> Self {
        Self {
            items: Vec::with_capacity(items),
        }
    }

    /// Appends an item.
    pub fn push(&mut self, item: TraceItem) {
        self.items.push(item);
    }

    /// Appends `item` and gives it back, to set its ids.
    pub(crate) fn push_item(&mut self, item: TraceItem) -> &mut TraceItem {
        self.items.push(item);
        self.items
            .last_mut()
            .expect("an item was pushed on the line above")
    }

    /// The last item, to be amended.
    pub(crate) fn last_mut(&mut self) -> Option<&mut TraceItem> {
        self.items.last_mut()
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The item at `index`.
    pub fn get(&self, index: usize) -> Option<&TraceItem> {
        self.items.get(index)
    }

    /// The last item.
    pub fn last(&self) -> Option<&TraceItem> {
        self.items.last()
    }

    /// The items in the order they happened.
    pub fn iter(&self) -> std::slice::Iter<'_, TraceItem> {
        self.items.iter()
    }

    /// The items from `index` on (none when `index` is past the end).
    pub fn iter_from(&self, index: usize) -> std::slice::Iter<'_, TraceItem> {
        self.items.get(index..).unwrap_or_default().iter()
    }

    /// The items, as a slice.
    pub fn as_slice(&self) -> &[TraceItem] {
        &self.items
    }

    /// Every item, cloned.
    pub fn to_items(&self) -> Vec<TraceItem> {
        self.items.clone()
    }

    /// The items from `index` on, cloned.
    pub fn items_from(&self, index: usize) -> Vec<TraceItem> {
        self.iter_from(index).cloned().collect()
    }

    /// Keeps the first `len` items.
    pub fn truncate(&mut self, len: usize) {
        self.items.truncate(len);
    }

    /// The trace with timestamps and durations zeroed (and so every node run's `wall_ms`,
    /// which is its `duration_us`): the part that is the same on every run of the same
    /// workflow and input.
    pub fn without_timing(&self) -> Self {
        Self {
            items: self
                .items
                .iter()
                .map(|i| {
                    let mut item = TraceItem {
                        at_ms: 0,
                        duration_us: 0,
                        ..i.clone()
                    };
                    if let Some(d) = item.detail.as_mut()
                        && let Some(c) = d.call.as_mut()
                    {
                        *c = c.without_timing();
                    }
                    item
                })
                .collect(),
        }
    }

    /// The trace as a plain-text table (one row per item: step, depth, kind, supervisor,
    /// subgraph, target, termination reason and reason), for terminals and logs.
    pub fn to_table(&self) -> String {
        const HEAD: [&str; 8] = [
            "step",
            "depth",
            "kind",
            "supervisor",
            "subgraph",
            "target",
            "ends",
            "reason",
        ];
        let rows: Vec<[String; 8]> = self
            .iter()
            .map(|i| {
                [
                    i.step.to_string(),
                    i.depth.to_string(),
                    serde_json::to_value(i.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    i.supervisor().unwrap_or("-").to_string(),
                    i.subgraph().unwrap_or("-").to_string(),
                    i.target().unwrap_or("-").to_string(),
                    i.termination_reason
                        .map_or_else(|| "-".into(), |r| r.as_str().to_string()),
                    i.reason().unwrap_or_default().to_string(),
                ]
            })
            .collect();
        let mut width = HEAD.map(str::len);
        for r in &rows {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (k, (c, w)) in cells.iter().zip(width).enumerate() {
                if k + 1 == cells.len() {
                    out.push_str(c);
                } else {
                    out.push_str(c);
                    out.push_str(&" ".repeat(w - c.chars().count() + 2));
                }
            }
            out.trim_end().to_string()
        };
        let mut out = line(&HEAD.map(String::from));
        out.push('\n');
        for r in &rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// The trace as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a trace is plain data")
    }
}

impl Extend<TraceItem> for DecisionTrace {
    fn extend<I: IntoIterator<Item = TraceItem>>(&mut self, items: I) {
        self.items.extend(items);
    }
}

impl FromIterator<TraceItem> for DecisionTrace {
    fn from_iter<I: IntoIterator<Item = TraceItem>>(items: I) -> Self {
        Self {
            items: items.into_iter().collect(),
        }
    }
}

impl From<Vec<TraceItem>> for DecisionTrace {
    fn from(items: Vec<TraceItem>) -> Self {
        Self { items }
    }
}

impl JsonSchema for DecisionTrace {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Vec<TraceItem>>::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Vec<TraceItem>>::json_schema(generator)
    }
}
