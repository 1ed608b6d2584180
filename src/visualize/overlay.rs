//! The drawn edges of a graph, and a decision trace laid over them: which edges a run
//! took and in what order, where it fell back or was stopped, and which vertices it never
//! visited. Shared by the DOT and Mermaid writers.

use std::collections::{HashMap, HashSet};

use crate::contracts::RoutingDecision;
use crate::graph::{CompiledGraph, EdgeKind};
use crate::runtime::{ChainTrigger, DecisionTrace, TraceItem, TraceKind};

/// How an edge is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Drawn {
    /// Supervisor to a node in its allowlist.
    Dispatch,
    /// Node back to its supervisor.
    Return,
    /// Supervisor to a subgraph's entrypoint.
    Call,
    /// Node to node.
    Handoff,
    /// Supervisor to its fallback node when the node is not also in its allowlist.
    Fallback,
    /// Router to a destination (a node, or a subgraph's entrypoint).
    Route,
    /// An advisor to its primary (the advice flowing in).
    Advice,
    /// A supervisor whose default can `clarify` a finished `chat` subgraph, to the
    /// subgraph's entrypoint.
    Clarify,
    /// A team node to one of its members or its lead.
    Team,
}

/// One edge as drawn: the compiled graph's edges in order, then one fallback edge per
/// supervisor whose fallback node is not in its allowlist, then one clarify edge per
/// supervisor whose `default` clarifies a subgraph, each in declaration order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EdgeView<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub kind: Drawn,
    /// The subgraph a call edge (or a router's route to a subgraph) enters.
    pub subgraph: Option<&'a str>,
    /// A dispatch edge that is also its supervisor's fallback.
    pub is_fallback: bool,
}

/// Every drawn edge, in a fixed order (no hash-map iteration anywhere).
pub(crate) fn drawn_edges(g: &CompiledGraph) -> impl Iterator<Item = EdgeView<'_>> {
    let reg = g.registry();
    let static_edges = g.edges().map(move |(from, to, kind)| {
        let (kind, subgraph) = match kind {
            EdgeKind::Dispatch => (Drawn::Dispatch, None),
            EdgeKind::Return => (Drawn::Return, None),
            EdgeKind::Handoff => (Drawn::Handoff, None),
            EdgeKind::Call { subgraph } => (Drawn::Call, Some(subgraph.as_str())),
            EdgeKind::Route { subgraph } => (Drawn::Route, subgraph.as_deref()),
            EdgeKind::Advice => (Drawn::Advice, None),
            EdgeKind::Team => (Drawn::Team, None),
        };
        // The graph's advice edge goes primary -> advisor; it is drawn advisor -> primary.
        let (from, to) = if kind == Drawn::Advice {
            (to, from)
        } else {
            (from, to)
        };
        let is_fallback = kind == Drawn::Dispatch
            && reg
                .get_supervisor(from)
                .and_then(|s| s.fallback.as_deref())
                .is_some_and(|f| f == to);
        EdgeView {
            from,
            to,
            kind,
            subgraph,
            is_fallback,
        }
    });
    let fallbacks = reg.supervisors().filter_map(move |s| {
        let fb = s.fallback.as_deref()?;
        reg.get_node(fb)?;
        if s.allow.iter().any(|a| a == fb) {
            return None;
        }
        Some(EdgeView {
            from: s.id.as_str(),
            to: fb,
            kind: Drawn::Fallback,
            subgraph: None,
            is_fallback: true,
        })
    });
    // A supervisor whose default clarifies a subgraph asks it follow-ups: drawn from the
    // supervisor to the subgraph's entrypoint, which decides again.
    let clarifies = reg.supervisors().filter_map(move |s| {
        let Some(RoutingDecision::Clarify(c)) = &s.default else {
            return None;
        };
        let sg = reg.get_subgraph(&c.subgraph)?;
        Some(EdgeView {
            from: s.id.as_str(),
            to: sg.entrypoint.as_str(),
            kind: Drawn::Clarify,
            subgraph: Some(sg.id.as_str()),
            is_fallback: false,
        })
    });
    static_edges.chain(fallbacks).chain(clarifies)
}

/// A transition the run took that has no drawn edge (a subgraph returning to its caller,
/// or a move the static graph does not have).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExtraEdge {
    /// Vertex drawn as the tail (for a subgraph return: the subgraph's entrypoint).
    pub from: String,
    /// Vertex drawn as the head.
    pub to: String,
    /// Set for a subgraph's return: the subgraph, whose cluster the edge leaves.
    pub from_cluster: Option<String>,
    /// The trace's kind name (`return`, `dispatch`, ...).
    pub kind: &'static str,
    /// Step numbers, in order.
    pub steps: Vec<u32>,
}

/// A guard stop, drawn as a marker vertex hanging off the vertex where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StopMark {
    /// The vertex the marker hangs off (`None` when the trace names none known).
    pub at: Option<String>,
    /// The termination reason (or the item's reason).
    pub reason: String,
    /// Its number in the path.
    pub step: u32,
}

/// A trace laid over the drawn edges.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overlay {
    /// Step numbers per drawn edge (indexed like [`drawn_edges`]); empty when not taken.
    pub steps: Vec<Vec<u32>>,
    /// Drawn edges a `fallback` item went through.
    pub fell_back: HashSet<usize>,
    /// Transitions without a drawn edge, in first-taken order.
    pub extra: Vec<ExtraEdge>,
    /// Guard stops in order.
    pub stops: Vec<StopMark>,
    /// Supervisors and nodes the run visited.
    pub visited: HashSet<String>,
    /// Trace items naming ids this graph does not have.
    pub unmatched: usize,
    /// Member cycles each team node ran (`team_cycle` items).
    pub team_cycles: HashMap<String, u32>,
}

impl Overlay {
    /// True when the vertex was visited.
    pub fn is_visited(&self, id: &str) -> bool {
        self.visited.contains(id)
    }
}

#[derive(Hash, PartialEq, Eq)]
enum Key<'a> {
    Edge(&'a str, &'a str, Drawn),
    Call(&'a str, &'a str),
}

/// Lays `trace` over the drawn edges of `g`.
///
/// Numbering: every transition item (dispatch, handoff, call, return, guard stop) gets
/// the next number, starting at 1, in trace order; an edge taken several times carries
/// all its numbers. `fallback` items mark the fallback edge without a number (the
/// dispatch that follows them is numbered).
pub(crate) fn overlay(g: &CompiledGraph, trace: &DecisionTrace) -> Overlay {
    let mut keys: HashMap<Key<'_>, usize> = HashMap::new();
    let mut count = 0;
    for (i, e) in drawn_edges(g).enumerate() {
        let key = match (e.kind, e.subgraph) {
            (Drawn::Call | Drawn::Route, Some(sub)) => Key::Call(e.from, sub),
            (kind, _) => Key::Edge(e.from, e.to, kind),
        };
        keys.entry(key).or_insert(i);
        count = i + 1;
    }
    let mut o = Overlay {
        steps: vec![Vec::new(); count],
        ..Overlay::default()
    };
    let mut extra_index: HashMap<(String, String, Option<String>), usize> = HashMap::new();
    let mut next = 1u32;
    let known = |id: &str| g.index_of(id).is_some();

    for item in trace.iter() {
        let source = item.source().or(item.supervisor());
        let target = item.target();
        let mark = |o: &mut Overlay, id: Option<&str>| {
            if let Some(id) = id.filter(|id| known(id))
                && !o.visited.contains(id)
            {
                o.visited.insert(id.to_string());
            }
        };
        match item.kind {
            TraceKind::Decision | TraceKind::Pause | TraceKind::Resume | TraceKind::End => {
                mark(&mut o, item.supervisor());
            }
            // A failed attempt moves nothing: the node's own item draws the edge. A fork
            // and its join happen at the primary.
            TraceKind::Retry | TraceKind::Fork | TraceKind::Join => mark(&mut o, target),
            // An agent's model call happens at the agent node; a tool call also visits
            // its tool node (neither is a graph edge).
            TraceKind::ModelCall => mark(&mut o, item.source()),
            TraceKind::ToolCall => {
                mark(&mut o, item.source());
                mark(&mut o, target);
            }
            // A team's cycle happens at the team node: counted for its cluster's label.
            TraceKind::TeamCycle => {
                mark(&mut o, target);
                if let Some(t) = target.filter(|t| known(t)) {
                    *o.team_cycles.entry(t.to_string()).or_insert(0) += 1;
                }
            }
            // A turn: its participant's team edge, team node -> member or lead.
            TraceKind::TeamTurn => {
                let (Some(team), Some(who)) = (item.source(), target) else {
                    o.unmatched += 1;
                    continue;
                };
                mark(&mut o, Some(team));
                mark(&mut o, Some(who));
                let hit = keys.get(&Key::Edge(team, who, Drawn::Team)).copied();
                take(
                    &mut o,
                    &mut extra_index,
                    hit,
                    (team, who, None),
                    "team",
                    next,
                    &known,
                );
                next += 1;
            }
            // An advisor's report: its advice edge, advisor -> primary.
            TraceKind::Advisor => {
                let (Some(primary), Some(member)) = (item.source(), target) else {
                    o.unmatched += 1;
                    continue;
                };
                mark(&mut o, Some(member));
                let hit = keys
                    .get(&Key::Edge(member, primary, Drawn::Advice))
                    .copied();
                take(
                    &mut o,
                    &mut extra_index,
                    hit,
                    (member, primary, None),
                    "advice",
                    next,
                    &known,
                );
                next += 1;
            }
            TraceKind::Dispatch | TraceKind::Handoff => {
                let (Some(s), Some(t)) = (source, target) else {
                    o.unmatched += 1;
                    continue;
                };
                mark(&mut o, Some(s));
                mark(&mut o, Some(t));
                // A stage a router named is drawn on the router's route edge.
                let routed = item
                    .chain()
                    .is_some_and(|c| c.trigger == ChainTrigger::Router && c.stage > 0)
                    && item.kind == TraceKind::Handoff;
                let hit = if routed {
                    keys.get(&Key::Edge(s, t, Drawn::Route))
                } else if item.kind == TraceKind::Handoff {
                    keys.get(&Key::Edge(s, t, Drawn::Handoff))
                } else {
                    keys.get(&Key::Edge(s, t, Drawn::Dispatch))
                        .or_else(|| keys.get(&Key::Edge(s, t, Drawn::Fallback)))
                };
                let kind = if routed {
                    "route"
                } else if item.kind == TraceKind::Handoff {
                    "handoff"
                } else {
                    "dispatch"
                };
                take(
                    &mut o,
                    &mut extra_index,
                    hit.copied(),
                    (s, t, None),
                    kind,
                    next,
                    &known,
                );
                next += 1;
            }
            // A call, or a follow-up asked of a kept child: supervisor -> the subgraph's
            // entrypoint, on the call edge or the clarify edge.
            TraceKind::Call | TraceKind::Clarify => {
                let (Some(s), Some(sub)) = (source, target) else {
                    o.unmatched += 1;
                    continue;
                };
                let Some(entry) = g.cluster(sub).map(|c| c.entrypoint.as_str()) else {
                    o.unmatched += 1;
                    continue;
                };
                mark(&mut o, Some(s));
                mark(&mut o, Some(entry));
                let (hit, kind) = if item.kind == TraceKind::Call {
                    (keys.get(&Key::Call(s, sub)), "call")
                } else {
                    (keys.get(&Key::Edge(s, entry, Drawn::Clarify)), "clarify")
                };
                take(
                    &mut o,
                    &mut extra_index,
                    hit.copied(),
                    (s, entry, None),
                    kind,
                    next,
                    &known,
                );
                next += 1;
            }
            TraceKind::Return => {
                let (Some(s), Some(t)) = (source, target) else {
                    o.unmatched += 1;
                    continue;
                };
                mark(&mut o, Some(t));
                if let Some(c) = g.cluster(s) {
                    let from = (c.entrypoint.as_str(), t, Some(s));
                    take(&mut o, &mut extra_index, None, from, "return", next, &known);
                } else {
                    mark(&mut o, Some(s));
                    let hit = keys.get(&Key::Edge(s, t, Drawn::Return)).copied();
                    take(
                        &mut o,
                        &mut extra_index,
                        hit,
                        (s, t, None),
                        "return",
                        next,
                        &known,
                    );
                }
                next += 1;
            }
            TraceKind::Fallback => {
                let s = item.supervisor().or(item.source());
                mark(&mut o, s);
                let hit = s.zip(target).and_then(|(s, t)| {
                    keys.get(&Key::Edge(s, t, Drawn::Dispatch))
                        .or_else(|| keys.get(&Key::Edge(s, t, Drawn::Fallback)))
                });
                match hit {
                    Some(&i) => {
                        o.fell_back.insert(i);
                    }
                    // Without a fallback node the target is `stop_local`: nothing to paint.
                    None if s.is_some_and(|s| !known(s)) => o.unmatched += 1,
                    None => {}
                }
            }
            TraceKind::GuardStop => {
                // The target of a guard stop is the run's status, not a vertex.
                let at = [item.supervisor(), item.source()]
                    .into_iter()
                    .flatten()
                    .find(|id| known(id));
                mark(&mut o, at);
                o.stops.push(StopMark {
                    at: at.map(str::to_string),
                    reason: stop_reason(item),
                    step: next,
                });
                next += 1;
            }
        }
    }
    o
}

fn stop_reason(item: &TraceItem) -> String {
    match (&item.termination_reason, item.reason()) {
        (Some(r), _) => r.as_str().to_string(),
        (None, Some(r)) => r.to_string(),
        (None, None) => "guard stop".to_string(),
    }
}

/// Records step `n` on drawn edge `hit`, or on an extra edge when there is none.
fn take(
    o: &mut Overlay,
    extra_index: &mut HashMap<(String, String, Option<String>), usize>,
    hit: Option<usize>,
    (from, to, cluster): (&str, &str, Option<&str>),
    kind: &'static str,
    n: u32,
    known: &impl Fn(&str) -> bool,
) {
    if let Some(i) = hit {
        o.steps[i].push(n);
        return;
    }
    if !known(from) || !known(to) {
        o.unmatched += 1;
        return;
    }
    let key = (
        from.to_string(),
        to.to_string(),
        cluster.map(str::to_string),
    );
    let i = *extra_index.entry(key).or_insert_with(|| {
        o.extra.push(ExtraEdge {
            from: from.to_string(),
            to: to.to_string(),
            from_cluster: cluster.map(str::to_string),
            kind,
            steps: Vec::new(),
        });
        o.extra.len() - 1
    });
    o.extra[i].steps.push(n);
}

/// `1, 4, 7`; past six numbers, the first five, `…` and the last with the count.
pub(crate) fn step_list(steps: &[u32], out: &mut String) {
    use std::fmt::Write;
    let shown: &[u32] = if steps.len() > 6 { &steps[..5] } else { steps };
    for (i, s) in shown.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{s}");
    }
    if let (true, Some(last)) = (steps.len() > 6, steps.last()) {
        let _ = write!(out, ", …, {last} ({}×)", steps.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_lists_are_short() {
        let mut s = String::new();
        step_list(&[1, 4, 7], &mut s);
        assert_eq!(s, "1, 4, 7");
        s.clear();
        step_list(&[1, 2, 3, 4, 5, 6, 7, 8], &mut s);
        assert_eq!(s, "1, 2, 3, 4, 5, …, 8 (8×)");
    }
}
