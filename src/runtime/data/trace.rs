//! The decision trace: one item per decision and per transition of a run.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::call_items::{CallRecord, ModelCallItem, ToolCallItem};
use super::candidates::Candidates;
#[cfg(doc)]
use super::decision_trace::DecisionTrace;
use super::output::{Usage, WALL_MS};
use super::status::TerminationReason;

/// What a trace item records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TraceKind {
    /// A supervisor decided (`target` is what it chose; `reason` why).
    Decision,
    /// A node was dispatched by a supervisor (`source` supervisor, `target` node).
    Dispatch,
    /// A node handed off to the next (`source` node, `target` node).
    Handoff,
    /// A subgraph was entered (`source` caller supervisor, `target` subgraph id).
    Call,
    /// Control came back: a node to its supervisor (`source` node, `target` supervisor),
    /// or a subgraph to its caller (`source` subgraph id, `target` caller supervisor).
    Return,
    /// A decision was routed to the fallback (the original choice is in `reason`).
    Fallback,
    /// A guard stopped the run.
    GuardStop,
    /// The run paused for input.
    Pause,
    /// The run resumed with an answer.
    Resume,
    /// The run ended.
    End,
    /// An attempt of a node call failed and its `retry` policy tries it again (`target`
    /// the node, `reason` the attempt, what failed and the wait before the next one).
    Retry,
    /// A primary's advisors start (`target` the primary, `reason` the members).
    Fork,
    /// One advisor's report (`source` the primary, `target` the advisor, `reason` its
    /// status and error, `duration_us` its time).
    Advisor,
    /// Every advisor has reported (`target` the primary, `reason` the tally).
    Join,
    /// A finished `chat` subgraph kept at this level resumes to answer a follow-up
    /// (`source` the calling supervisor, `target` the subgraph, `reason` the question); it
    /// returns like a call.
    Clarify,
    /// A team's cycle starts: its active members take a turn each, at once (`target` the
    /// team node, `reason` the cycle number and the members taking a turn).
    TeamCycle,
    /// One turn of a team member or lead, a step (`source` the team node, `target` the
    /// member or lead, `reason` the turn and what it gave, `usage` its `$usage`).
    TeamTurn,
    /// One model call of an agent session, a step (`source` the agent node, `target` the
    /// model key, `model_call` its fields: node, model, turn, attempt, the failed HTTP
    /// attempts before it and the `finish_reason`; `usage` the tokens and cost, or
    /// `usage_unknown` when the server sent none; `duration_us` its time; `reason` the
    /// same in words).
    ModelCall,
    /// One tool call of an agent session, a step (`source` the calling agent node,
    /// `target` the tool, `tool_call` its fields: caller, tool, call id, index and status;
    /// `duration_us` its time; `reason` the call id and how it ended in words). A call
    /// `skipped` for want of steps counts none.
    ToolCall,
}

impl TraceKind {
    /// Its name, as in JSON (`decision`, `model_call`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Decision => "decision",
            Self::Dispatch => "dispatch",
            Self::Handoff => "handoff",
            Self::Call => "call",
            Self::Return => "return",
            Self::Fallback => "fallback",
            Self::GuardStop => "guard_stop",
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::End => "end",
            Self::Retry => "retry",
            Self::Fork => "fork",
            Self::Advisor => "advisor",
            Self::Join => "join",
            Self::Clarify => "clarify",
            Self::TeamCycle => "team_cycle",
            Self::TeamTurn => "team_turn",
            Self::ModelCall => "model_call",
            Self::ToolCall => "tool_call",
        }
    }
}

/// How a chain stage was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChainTrigger {
    /// The node before it named it in `handoff` (the first stage was dispatched).
    Handoff,
    /// The router before it named it in `$route` (on the router's own items: the stage
    /// after it is its destination).
    Router,
}

/// Where a node run stands in a chain: the chain's first node, the stage's 0-based index
/// and how the chain goes on. The first node of a chain (dispatched, with a `handoff`) is
/// stage 0; each handoff adds one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Chain {
    /// The chain's first node.
    pub root: Arc<str>,
    /// The stage's index (0 for the root).
    pub stage: u32,
    /// How the chain goes from stage to stage.
    pub trigger: ChainTrigger,
}

impl Chain {
    /// Stage 0 of a handoff chain starting at `root`.
    pub fn handoff_root(root: Arc<str>) -> Self {
        Self {
            root,
            stage: 0,
            trigger: ChainTrigger::Handoff,
        }
    }

    /// The stage after this one (same root and trigger).
    pub fn next(&self) -> Self {
        Self {
            root: Arc::clone(&self.root),
            stage: self.stage.saturating_add(1),
            trigger: self.trigger,
        }
    }
}

/// The largest call depth a trace item records (and so the deepest a run may call):
/// `max_depth` above it is capped here, and a call past it stops the run with
/// `max_depth_exceeded` like any other depth guard.
pub const MAX_TRACE_DEPTH: u32 = u16::MAX as u32;

/// One entry of the trace: what a [`DecisionTrace`] holds, what a run event carries and
/// what a store's delta holds. Ids are shared strings (a clone is a reference count, ADR
/// 0086), read as `&str` through [`TraceItem::supervisor`] and its siblings.
///
/// What only some items carry (a node run's `usage`, a chain stage, a call) sits in one
/// boxed [`ItemDetail`], and the depth is a `u16` (see [`MAX_TRACE_DEPTH`]). Its JSON form
/// is flat: `usage` and `chain` are keys of the item, present when set, and so is the call
/// a `model_call` or `tool_call` item records (`"model_call": {...}` or
/// `"tool_call": {...}`).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceItem {
    /// Steps taken when the item was recorded.
    pub step: u32,
    /// Call depth (0 at the root).
    pub depth: u16,
    /// What happened.
    pub kind: TraceKind,
    /// Set on items that end a level or the run.
    pub termination_reason: Option<TerminationReason>,
    /// The supervisor deciding, or in whose level the transition happened.
    pub supervisor: Option<Arc<str>>,
    /// The subgraph of the current level (`None` at the root).
    pub subgraph: Option<Arc<str>>,
    /// The vertex the transition leaves (see [`TraceKind`]).
    pub source: Option<Arc<str>>,
    /// The node, subgraph or decision kind chosen.
    pub target: Option<Arc<str>>,
    /// Why: the winning rule, the original choice of a fallback, an error message.
    pub reason: Option<Arc<str>>,
    /// Rule-based supervisors: the candidates whose triggers matched, best first.
    pub candidates: Candidates,
    /// Milliseconds since the Unix epoch when recorded (0 when timing is stripped).
    pub at_ms: u64,
    /// How long the step took, in microseconds (0 for instantaneous items).
    pub duration_us: u64,
    /// What only some items carry (`None` when neither part is set).
    pub detail: Option<Box<ItemDetail>>,
}

/// The parts of a [`TraceItem`] that only some items carry.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ItemDetail {
    /// Node runs: what the step cost, as the node reported it in `$usage`.
    pub usage: Option<Usage>,
    /// Items of a step that runs a chain stage: where the stage stands in its chain.
    pub chain: Option<Chain>,
    /// `model_call` and `tool_call` items: the call's fields.
    pub call: Option<CallRecord>,
}

impl TraceItem {
    /// An item of `kind` at `step` and `depth` (capped at [`MAX_TRACE_DEPTH`]), everything
    /// else empty.
    pub fn new(kind: TraceKind, step: u32, depth: u32) -> Self {
        Self {
            step,
            depth: trace_depth(depth),
            kind,
            termination_reason: None,
            supervisor: None,
            subgraph: None,
            source: None,
            target: None,
            reason: None,
            candidates: Candidates::none(),
            at_ms: 0,
            duration_us: 0,
            detail: None,
        }
    }
}

/// An id a trace item records: converted to the shared string the item keeps (`None`
/// for no id). For the `set_` methods of [`TraceItem`].
pub trait IntoId {
    /// The id as kept (`None`: no id).
    fn into_id(self) -> Option<Arc<str>>;
}

impl IntoId for &Arc<str> {
    fn into_id(self) -> Option<Arc<str>> {
        Some(Arc::clone(self))
    }
}

impl IntoId for Arc<str> {
    fn into_id(self) -> Option<Arc<str>> {
        Some(self)
    }
}

impl IntoId for &str {
    fn into_id(self) -> Option<Arc<str>> {
        Some(Arc::from(self))
    }
}

impl IntoId for &String {
    fn into_id(self) -> Option<Arc<str>> {
        Some(Arc::from(self.as_str()))
    }
}

impl IntoId for String {
    fn into_id(self) -> Option<Arc<str>> {
        Some(Arc::from(self))
    }
}

impl IntoId for std::borrow::Cow<'_, Arc<str>> {
    fn into_id(self) -> Option<Arc<str>> {
        Some(self.into_owned())
    }
}

impl<'a, T> IntoId for &'a Option<T>
where
    &'a T: IntoId,
{
    fn into_id(self) -> Option<Arc<str>> {
        self.as_ref().and_then(IntoId::into_id)
    }
}

impl<T: IntoId> IntoId for Option<T> {
    fn into_id(self) -> Option<Arc<str>> {
        self.and_then(IntoId::into_id)
    }
}

impl TraceItem {
    /// The supervisor deciding, or in whose level the transition happened.
    pub fn supervisor(&self) -> Option<&str> {
        self.supervisor.as_deref()
    }

    /// The subgraph of the current level (`None` at the root).
    pub fn subgraph(&self) -> Option<&str> {
        self.subgraph.as_deref()
    }

    /// The vertex the transition leaves.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The node, subgraph or decision kind chosen.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// Why: the winning rule, the original choice of a fallback, an error message.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// Sets the supervisor.
    pub fn set_supervisor(&mut self, id: impl IntoId) {
        self.supervisor = id.into_id();
    }

    /// Sets the subgraph.
    pub fn set_subgraph(&mut self, id: impl IntoId) {
        self.subgraph = id.into_id();
    }

    /// Sets the source.
    pub fn set_source(&mut self, id: impl IntoId) {
        self.source = id.into_id();
    }

    /// Sets the target.
    pub fn set_target(&mut self, id: impl IntoId) {
        self.target = id.into_id();
    }

    /// Sets the reason.
    pub fn set_reason(&mut self, text: impl IntoId) {
        self.reason = text.into_id();
    }

    /// Sets the candidates.
    pub fn set_candidates(&mut self, list: &Candidates) {
        self.candidates = list.clone();
    }

    /// What the node run cost, if it reported it.
    pub fn usage(&self) -> Option<&Usage> {
        self.detail.as_ref().and_then(|d| d.usage.as_ref())
    }

    /// The chain stage the item belongs to, if any.
    pub fn chain(&self) -> Option<&Chain> {
        self.detail.as_ref().and_then(|d| d.chain.as_ref())
    }

    /// A `model_call` item's fields (`None` on other items, and on items stored before
    /// they were recorded).
    pub fn model_call(&self) -> Option<&ModelCallItem> {
        match self.detail.as_ref()?.call.as_ref()? {
            CallRecord::Model(m) => Some(m),
            CallRecord::Tool(_) => None,
        }
    }

    /// A `tool_call` item's fields (`None` on other items, and on items stored before
    /// they were recorded).
    pub fn tool_call(&self) -> Option<&ToolCallItem> {
        match self.detail.as_ref()?.call.as_ref()? {
            CallRecord::Tool(t) => Some(t),
            CallRecord::Model(_) => None,
        }
    }

    /// The node this item records a run of: the `target` of a dispatch, handoff or
    /// advisor item, or the `source` of the end of a run that a node's refused output
    /// failed; or the supervisor whose policy agent made this model call or tool call
    /// (its `source` is the item's `supervisor`: a policy's session has no node item
    /// summing it). `None` for items that record no node run.
    pub fn ran_node(&self) -> Option<&str> {
        match self.kind {
            TraceKind::Dispatch | TraceKind::Handoff | TraceKind::Advisor | TraceKind::TeamTurn => {
                self.target()
            }
            TraceKind::End | TraceKind::GuardStop => self.source(),
            TraceKind::ModelCall | TraceKind::ToolCall
                if self.source.is_some() && self.source == self.supervisor =>
            {
                self.source()
            }
            _ => None,
        }
    }

    /// The usage record of a node run: the `$usage` the node reported plus
    /// [`WALL_MS`], its call's wall time (from `duration_us`, so a trace
    /// [without timing](DecisionTrace::without_timing) records `wall_ms: 0`). `None` for
    /// items that record no node run (see [`TraceItem::ran_node`]).
    pub fn usage_record(&self) -> Option<Usage> {
        self.ran_node()?;
        let mut usage = self.usage().cloned().unwrap_or_default();
        usage.add(WALL_MS, wall_ms(self.duration_us));
        Some(usage)
    }

    /// Sets (or clears) the item's usage.
    pub fn set_usage(&mut self, usage: Option<Usage>) {
        self.detail_mut().usage = usage;
        self.tidy_detail();
    }

    /// Sets (or clears) the item's chain stage.
    pub fn set_chain(&mut self, chain: Option<Chain>) {
        self.detail_mut().chain = chain;
        self.tidy_detail();
    }

    /// Sets (or clears) the call the item records.
    pub fn set_call(&mut self, call: Option<CallRecord>) {
        self.detail_mut().call = call;
        self.tidy_detail();
    }

    fn detail_mut(&mut self) -> &mut ItemDetail {
        self.detail.get_or_insert_with(Box::default)
    }

    fn tidy_detail(&mut self) {
        if self
            .detail
            .as_ref()
            .is_some_and(|d| d.usage.is_none() && d.chain.is_none() && d.call.is_none())
        {
            self.detail = None;
        }
    }
}

/// Microseconds as milliseconds: a whole number when it is one, else with the
/// microseconds as a fraction.
pub(crate) fn wall_ms(duration_us: u64) -> serde_json::Number {
    if duration_us.is_multiple_of(1000) {
        serde_json::Number::from(duration_us / 1000)
    } else {
        serde_json::Number::from_f64(duration_us as f64 / 1000.0)
            .unwrap_or_else(|| serde_json::Number::from(duration_us / 1000))
    }
}

/// `depth` as a trace item records it: capped at [`MAX_TRACE_DEPTH`] (the depth guard
/// stops a run before it gets there).
pub(crate) fn trace_depth(depth: u32) -> u16 {
    u16::try_from(depth).unwrap_or(u16::MAX)
}

/// The JSON form of a trace item, borrowed for writing: the fields in their documented
/// order, `usage` and `chain` flat.
#[derive(Serialize)]
pub(super) struct ItemOut<'a> {
    pub(super) step: u32,
    pub(super) depth: u16,
    pub(super) supervisor: Option<&'a str>,
    pub(super) subgraph: Option<&'a str>,
    pub(super) kind: TraceKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) source: Option<&'a str>,
    pub(super) target: Option<&'a str>,
    pub(super) reason: Option<&'a str>,
    pub(super) termination_reason: Option<TerminationReason>,
    #[serde(skip_serializing_if = "no_candidates")]
    pub(super) candidates: &'a Candidates,
    pub(super) at_ms: u64,
    pub(super) duration_us: u64,
    #[serde(skip_serializing_if = "UsageOut::is_none")]
    pub(super) usage: UsageOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) chain: Option<&'a Chain>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) model_call: Option<&'a ModelCallItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_call: Option<&'a ToolCallItem>,
}

impl TraceItem {
    /// The JSON form of this item, borrowed.
    pub(super) fn out(&self) -> ItemOut<'_> {
        ItemOut {
            step: self.step,
            depth: self.depth,
            supervisor: self.supervisor(),
            subgraph: self.subgraph(),
            kind: self.kind,
            source: self.source(),
            target: self.target(),
            reason: self.reason(),
            termination_reason: self.termination_reason,
            candidates: &self.candidates,
            at_ms: self.at_ms,
            duration_us: self.duration_us,
            usage: UsageOut {
                reported: self.usage(),
                wall_us: self.ran_node().is_some().then_some(self.duration_us),
            },
            chain: self.chain(),
            model_call: self.model_call(),
            tool_call: self.tool_call(),
        }
    }
}

/// An item's `usage` as written, borrowed: a node run's record (what it reported plus
/// [`WALL_MS`], [`TraceItem::usage_record`]), or what another item reported, made only
/// when written.
#[derive(Clone, Copy)]
pub(super) struct UsageOut<'a> {
    /// What the node reported in `$usage`.
    pub(super) reported: Option<&'a Usage>,
    /// A node run's `duration_us` (`None` for items that record no node run).
    pub(super) wall_us: Option<u64>,
}

impl UsageOut<'_> {
    fn is_none(&self) -> bool {
        self.reported.is_none() && self.wall_us.is_none()
    }
}

impl Serialize for UsageOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.reported, self.wall_us) {
            (reported, Some(us)) => {
                let mut record = reported.cloned().unwrap_or_default();
                record.add(WALL_MS, wall_ms(us));
                record.serialize(s)
            }
            (Some(reported), None) => reported.serialize(s),
            (None, None) => s.serialize_none(),
        }
    }
}

/// The JSON form of a trace item, for reading (and for its schema).
#[derive(Deserialize, JsonSchema)]
#[serde(rename = "TraceItem")]
struct ItemIn {
    /// Steps taken when the item was recorded.
    step: u32,
    /// Call depth (0 at the root).
    depth: u16,
    /// The supervisor deciding, or in whose level the transition happened.
    supervisor: Option<Arc<str>>,
    /// The subgraph of the current level (`None` at the root).
    subgraph: Option<Arc<str>>,
    /// What happened.
    kind: TraceKind,
    /// The vertex the transition leaves.
    #[serde(default)]
    source: Option<Arc<str>>,
    /// The node, subgraph or decision kind chosen.
    target: Option<Arc<str>>,
    /// Why: the winning rule, the original choice of a fallback, an error message.
    reason: Option<Arc<str>>,
    /// Set on items that end a level or the run.
    termination_reason: Option<TerminationReason>,
    /// Rule-based supervisors: the candidates whose triggers matched, best first.
    #[serde(default)]
    candidates: Candidates,
    /// Milliseconds since the Unix epoch when recorded (0 when timing is stripped).
    #[serde(default)]
    at_ms: u64,
    /// How long the step took, in microseconds (0 for instantaneous items).
    #[serde(default)]
    duration_us: u64,
    /// Node runs: the usage record, what the node reported in `$usage` plus `wall_ms`,
    /// the node call's wall time in milliseconds (`duration_us` / 1000).
    #[serde(default)]
    usage: Option<Usage>,
    /// Items of a step that runs a chain stage: where the stage stands in its chain.
    #[serde(default)]
    chain: Option<Chain>,
    /// `model_call` items: the call's node, model, turn, attempt, failed HTTP attempts and
    /// `finish_reason` (absent on items stored before ADR 0042).
    #[serde(default)]
    model_call: Option<ModelCallItem>,
    /// `tool_call` items: the call's caller, tool, call id, index and status (absent on
    /// items stored before ADR 0042).
    #[serde(default)]
    tool_call: Option<ToolCallItem>,
}

impl Serialize for TraceItem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.out().serialize(s)
    }
}

impl<'de> Deserialize<'de> for TraceItem {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let i = ItemIn::deserialize(d)?;
        let mut item = Self {
            step: i.step,
            depth: i.depth,
            kind: i.kind,
            termination_reason: i.termination_reason,
            supervisor: i.supervisor,
            subgraph: i.subgraph,
            source: i.source,
            target: i.target,
            reason: i.reason,
            candidates: i.candidates,
            at_ms: i.at_ms,
            duration_us: i.duration_us,
            detail: None,
        };
        // A node run's `wall_ms` is its `duration_us`, written for readers: not kept.
        let usage = match i.usage {
            Some(u) if item.ran_node().is_some() => Some(u.without(WALL_MS)),
            other => other,
        };
        item.set_usage(usage.filter(|u| !u.is_empty()));
        item.set_chain(i.chain);
        let call = match (i.model_call, i.tool_call) {
            (Some(m), _) => Some(CallRecord::Model(m)),
            (None, Some(t)) => Some(CallRecord::Tool(t)),
            (None, None) => None,
        };
        item.set_call(call);
        Ok(item)
    }
}

impl JsonSchema for TraceItem {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        ItemIn::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        ItemIn::json_schema(generator)
    }
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod layout;

fn no_candidates(c: &Candidates) -> bool {
    c.is_empty()
}
