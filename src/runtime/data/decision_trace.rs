//! The decision trace of one run: its items, with ids interned in the trace's name table
//! (ADR 0055), read through [`ItemRef`] and serialized exactly as the items were before
//! interning (each id written as its text). Split from `trace.rs` (the item).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize};

use super::candidates::Candidates;
use super::names::{IntoName, Name, Names};
use super::trace::{InternedItem, ItemOut, TraceItem};
use super::trace_pool::BufferPool;

/// The items' buffers dropped traces left for the next ones (ADR 0078).
static BUFFERS: BufferPool<InternedItem> = BufferPool::new();

/// The ordered list of trace items of one run. Items name ids by [`Name`] in the trace's
/// own [`Names`]; read them with [`DecisionTrace::iter`] or [`DecisionTrace::get`] (an
/// [`ItemRef`] returns ids as `&str`), or as plain [`TraceItem`]s with
/// [`ItemRef::to_item`]. Its JSON form is the array of its items.
#[derive(Debug, Clone, Default)]
pub struct DecisionTrace {
    pub(crate) items: Vec<InternedItem>,
    pub(crate) names: Names,
}

/// One item of a [`DecisionTrace`], with the table that reads its ids: the item's plain
/// fields through `Deref` (`step`, `kind`, `duration_us`, `usage()`, `chain()`, ...), its
/// ids through the accessors below, as `&str`.
#[derive(Debug, Clone, Copy)]
pub struct ItemRef<'a> {
    item: &'a InternedItem,
    names: &'a Names,
}

impl<'a> ItemRef<'a> {
    fn id(&self, n: Option<Name>) -> Option<&'a str> {
        let names = self.names;
        n.map(|n| names.get(n))
    }

    /// The interned item itself, for as long as the trace is borrowed (`Deref` gives it
    /// only for as long as this `ItemRef`).
    pub fn item(&self) -> &'a InternedItem {
        self.item
    }

    /// The supervisor deciding, or in whose level the transition happened.
    pub fn supervisor(&self) -> Option<&'a str> {
        self.id(self.item.supervisor)
    }

    /// The subgraph of the current level (`None` at the root).
    pub fn subgraph(&self) -> Option<&'a str> {
        self.id(self.item.subgraph)
    }

    /// The vertex the transition leaves.
    pub fn source(&self) -> Option<&'a str> {
        self.id(self.item.source)
    }

    /// The node, subgraph or decision kind chosen.
    pub fn target(&self) -> Option<&'a str> {
        self.id(self.item.target)
    }

    /// Why: the winning rule, the original choice of a fallback, an error message.
    pub fn reason(&self) -> Option<&'a str> {
        self.id(self.item.reason)
    }

    /// Rule-based supervisors: the candidates whose triggers matched, best first.
    pub fn candidates(&self) -> &'a Candidates {
        static NONE: Candidates = Candidates::none();
        let names = self.names;
        self.item.candidates.map_or(&NONE, |l| names.list(l))
    }

    /// The node this item records a run of (see [`TraceItem::ran_node`]).
    pub fn ran_node(&self) -> Option<&'a str> {
        let names = self.names;
        self.item.ran_node().map(|n| names.get(*n))
    }

    /// The item as plain data (its ids as shared strings).
    pub fn to_item(&self) -> TraceItem {
        let arc = |n: Option<Name>| n.map(|n| Arc::clone(self.names.shared(n)));
        TraceItem {
            step: self.item.step,
            depth: self.item.depth,
            kind: self.item.kind,
            termination_reason: self.item.termination_reason,
            supervisor: arc(self.item.supervisor),
            subgraph: arc(self.item.subgraph),
            source: arc(self.item.source),
            target: arc(self.item.target),
            reason: arc(self.item.reason),
            candidates: self.candidates().clone(),
            at_ms: self.item.at_ms,
            duration_us: self.item.duration_us,
            detail: self.item.detail.clone(),
        }
    }
}

impl Deref for ItemRef<'_> {
    type Target = InternedItem;

    fn deref(&self) -> &InternedItem {
        self.item
    }
}

impl<'a> ItemRef<'a> {
    /// Its JSON form, borrowed from the trace (for serde and the event writer).
    #[inline]
    pub(super) fn out(&self) -> ItemOut<'a> {
        let names = self.names;
        self.item.out(|n| names.get(*n), self.candidates())
    }
}

impl Serialize for ItemRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.out().serialize(s)
    }
}

impl PartialEq for ItemRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.item, other.item);
        a.step == b.step
            && a.depth == b.depth
            && a.kind == b.kind
            && a.termination_reason == b.termination_reason
            && self.supervisor() == other.supervisor()
            && self.subgraph() == other.subgraph()
            && self.source() == other.source()
            && self.target() == other.target()
            && self.reason() == other.reason()
            && self.candidates() == other.candidates()
            && a.at_ms == b.at_ms
            && a.duration_us == b.duration_us
            && a.detail == b.detail
    }
}

/// An item being recorded in a trace: its plain fields through `DerefMut`, its ids set
/// with the `set_` methods (interned in the trace's table).
pub struct ItemMut<'a> {
    item: &'a mut InternedItem,
    names: &'a mut Names,
}

impl ItemMut<'_> {
    /// Sets the supervisor.
    #[inline(always)]
    pub fn set_supervisor(&mut self, id: impl IntoName) {
        self.item.supervisor = id.into_name(self.names);
    }

    /// Sets the subgraph.
    #[inline(always)]
    pub fn set_subgraph(&mut self, id: impl IntoName) {
        self.item.subgraph = id.into_name(self.names);
    }

    /// Sets the source.
    #[inline(always)]
    pub fn set_source(&mut self, id: impl IntoName) {
        self.item.source = id.into_name(self.names);
    }

    /// Sets the target.
    #[inline(always)]
    pub fn set_target(&mut self, id: impl IntoName) {
        self.item.target = id.into_name(self.names);
    }

    /// Sets the reason.
    #[inline(always)]
    pub fn set_reason(&mut self, text: impl IntoName) {
        self.item.reason = text.into_name(self.names);
    }

    /// Sets the candidates.
    #[inline(always)]
    pub fn set_candidates(&mut self, list: &Candidates) {
        self.item.candidates = self.names.intern_list(list);
    }

    /// The item as it reads so far.
    pub fn as_ref(&self) -> ItemRef<'_> {
        ItemRef {
            item: self.item,
            names: self.names,
        }
    }
}

impl Deref for ItemMut<'_> {
    type Target = InternedItem;

    fn deref(&self) -> &InternedItem {
        self.item
    }
}

impl DerefMut for ItemMut<'_> {
    fn deref_mut(&mut self) -> &mut InternedItem {
        self.item
    }
}

impl DecisionTrace {
    /// An empty trace with room for `items` items (a buffer a dropped trace left, when
    /// one is kept: ADR 0078).
    pub fn with_capacity(items: usize) -> Self {
        Self {
            items: BUFFERS.take(items),
            names: Names::default(),
        }
    }

    /// Appends an item, its ids interned.
    pub fn push(&mut self, item: TraceItem) {
        let names = &mut self.names;
        let mut id = |n: Option<Arc<str>>| n.map(|n| names.intern_owned(n));
        let interned = InternedItem {
            step: item.step,
            depth: item.depth,
            kind: item.kind,
            termination_reason: item.termination_reason,
            supervisor: id(item.supervisor),
            subgraph: id(item.subgraph),
            source: id(item.source),
            target: id(item.target),
            reason: id(item.reason),
            candidates: None,
            at_ms: item.at_ms,
            duration_us: item.duration_us,
            detail: item.detail,
        };
        let candidates = self.names.intern_list(&item.candidates);
        self.items.push(InternedItem {
            candidates,
            ..interned
        });
    }

    /// Appends an item built in place (its ids set through the returned [`ItemMut`]).
    #[inline(always)]
    pub(crate) fn push_interned(&mut self, item: InternedItem) -> ItemMut<'_> {
        self.items.push(item);
        ItemMut {
            item: self
                .items
                .last_mut()
                .expect("an item was pushed on the line above"),
            names: &mut self.names,
        }
    }

    /// The last item, to be amended.
    pub(crate) fn last_mut(&mut self) -> Option<ItemMut<'_>> {
        Some(ItemMut {
            item: self.items.last_mut()?,
            names: &mut self.names,
        })
    }

    /// The name of `id` in this trace's table (added when new).
    #[inline(always)]
    pub(crate) fn name(&mut self, id: impl IntoName) -> Option<Name> {
        id.into_name(&mut self.names)
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
    pub fn get(&self, index: usize) -> Option<ItemRef<'_>> {
        let item = self.items.get(index)?;
        Some(ItemRef {
            item,
            names: &self.names,
        })
    }

    /// The last item.
    pub fn last(&self) -> Option<ItemRef<'_>> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// The items in the order they happened.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = ItemRef<'_>> + ExactSizeIterator + Clone + '_ {
        self.iter_from(0)
    }

    /// The items from `index` on (none when `index` is past the end).
    pub fn iter_from(
        &self,
        index: usize,
    ) -> impl DoubleEndedIterator<Item = ItemRef<'_>> + ExactSizeIterator + Clone + '_ {
        let names = &self.names;
        self.items
            .get(index..)
            .unwrap_or_default()
            .iter()
            .map(move |item| ItemRef { item, names })
    }

    /// Every item, as plain data.
    pub fn to_items(&self) -> Vec<TraceItem> {
        self.items_from(0)
    }

    /// The items from `index` on, as plain data.
    pub fn items_from(&self, index: usize) -> Vec<TraceItem> {
        self.iter_from(index).map(|i| i.to_item()).collect()
    }

    /// Keeps the first `len` items (the name table keeps every text).
    pub fn truncate(&mut self, len: usize) {
        self.items.truncate(len);
    }

    /// The name table the items' ids are read with.
    pub fn names(&self) -> &Names {
        &self.names
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
                    let mut item = InternedItem {
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
            names: self.names.clone(),
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

impl Drop for DecisionTrace {
    /// Leaves the items' buffer, emptied, to the next trace made (ADR 0078).
    fn drop(&mut self) {
        BUFFERS.give(std::mem::take(&mut self.items));
    }
}

impl PartialEq for DecisionTrace {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Extend<TraceItem> for DecisionTrace {
    fn extend<I: IntoIterator<Item = TraceItem>>(&mut self, items: I) {
        for item in items {
            self.push(item);
        }
    }
}

impl FromIterator<TraceItem> for DecisionTrace {
    fn from_iter<I: IntoIterator<Item = TraceItem>>(items: I) -> Self {
        let mut trace = Self::default();
        trace.extend(items);
        trace
    }
}

impl From<Vec<TraceItem>> for DecisionTrace {
    fn from(items: Vec<TraceItem>) -> Self {
        items.into_iter().collect()
    }
}

impl Serialize for DecisionTrace {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for item in self.iter() {
            seq.serialize_element(&item)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for DecisionTrace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<TraceItem>::deserialize(d).map(Self::from)
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
