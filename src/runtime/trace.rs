//! The decision trace: one item per decision and per transition of a run.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::output::Usage;
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

/// One entry of the trace. Ids are shared strings: every item naming the same node,
/// supervisor or subgraph points at one allocation, and a rule's reason is built once per
/// executor, so recording an item allocates nothing in the common case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TraceItem {
    /// Steps taken when the item was recorded.
    pub step: u32,
    /// Call depth (0 at the root).
    pub depth: u32,
    /// The supervisor deciding, or in whose level the transition happened.
    pub supervisor: Option<Arc<str>>,
    /// The subgraph of the current level (`None` at the root).
    pub subgraph: Option<Arc<str>>,
    /// What happened.
    pub kind: TraceKind,
    /// The vertex the transition leaves (see [`TraceKind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Arc<str>>,
    /// The node, subgraph or decision kind chosen.
    pub target: Option<Arc<str>>,
    /// Why: the winning rule, the original choice of a fallback, an error message.
    pub reason: Option<Arc<str>>,
    /// Set on items that end a level or the run.
    pub termination_reason: Option<TerminationReason>,
    /// Rule-based supervisors: the candidates whose triggers matched, best first.
    #[serde(default, skip_serializing_if = "no_candidates")]
    pub candidates: Arc<[Arc<str>]>,
    /// Milliseconds since the Unix epoch when recorded (0 when timing is stripped).
    #[serde(default)]
    pub at_ms: u64,
    /// How long the step took, in microseconds (0 for instantaneous items).
    #[serde(default)]
    pub duration_us: u64,
    /// Node runs: what the step cost, as the node reported it in `$usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// Items of a step that runs a chain stage: where the stage stands in its chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Box<Chain>>,
}

impl TraceItem {
    /// An item of `kind` at `step` and `depth`, everything else empty.
    pub fn new(kind: TraceKind, step: u32, depth: u32) -> Self {
        Self {
            step,
            depth,
            supervisor: None,
            subgraph: None,
            kind,
            source: None,
            target: None,
            reason: None,
            termination_reason: None,
            candidates: Arc::default(),
            at_ms: 0,
            duration_us: 0,
            usage: None,
            chain: None,
        }
    }
}

fn no_candidates(c: &Arc<[Arc<str>]>) -> bool {
    c.is_empty()
}

/// The ordered list of trace items of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct DecisionTrace {
    /// Items in the order they happened.
    pub items: Vec<TraceItem>,
}

impl DecisionTrace {
    /// Appends an item.
    pub fn push(&mut self, item: TraceItem) {
        self.items.push(item);
    }
    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// The trace with timestamps and durations zeroed: the part that is the same on every
    /// run of the same workflow and input.
    pub fn without_timing(&self) -> Self {
        Self {
            items: self
                .items
                .iter()
                .map(|i| TraceItem {
                    at_ms: 0,
                    duration_us: 0,
                    ..i.clone()
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
            .items
            .iter()
            .map(|i| {
                [
                    i.step.to_string(),
                    i.depth.to_string(),
                    serde_json::to_value(i.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    i.supervisor.as_deref().unwrap_or("-").to_string(),
                    i.subgraph.as_deref().unwrap_or("-").to_string(),
                    i.target.as_deref().unwrap_or("-").to_string(),
                    i.termination_reason
                        .map_or_else(|| "-".into(), |r| r.as_str().to_string()),
                    i.reason.as_deref().unwrap_or_default().to_string(),
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
