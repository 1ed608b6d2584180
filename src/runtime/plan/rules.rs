//! The built-in rule-based supervisor: triggers, priorities, declaration-order ties and
//! `default`, compiled once per supervisor into a [`RuleTable`].

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::contracts::compiled_condition::CompiledCondition;
use crate::contracts::{RoutingDecision, SYSTEM_SLICE, SupervisorContract};
use crate::graph::{Registry, Resolved};
use crate::runtime::data::decision_memo::{Taken, slice_bit};
use crate::runtime::data::{Candidates, State};

/// The ids of rule tables: unique in the process, so that a run's memo of a decision
/// (ADR 0072) is never taken for a table of another executor.
static TABLE_IDS: AtomicU64 = AtomicU64::new(1);

/// The reason recorded when the trigger `trigger` of `id` wins.
fn rule_reason(id: &str, trigger: usize, priority: i64) -> String {
    format!("rule: `{id}` trigger #{trigger} (priority {priority}) matched")
}

/// The reason recorded when no trigger matched.
fn default_reason(default: Option<&RoutingDecision>) -> &'static str {
    match default {
        Some(_) => "no trigger matched: default",
        None => "no trigger matched: stop_local (no default)",
    }
}

/// Orders matches `(priority, allow index, trigger index)` best first. The sort is stable,
/// so `allow` order breaks ties.
fn rank(matched: &mut [(i64, usize, usize)]) {
    matched.sort_by_key(|m| std::cmp::Reverse(m.0));
}

/// One `allow` entry of a rule table.
#[derive(Debug)]
pub(crate) struct RuleEntry {
    /// The node or subgraph id.
    pub(crate) id: Arc<str>,
    /// True for a subgraph.
    pub(crate) is_subgraph: bool,
    /// A node's position in the plan's nodes (`Plan::nodes`), once resolved
    /// ([`RuleTable::with_node_plans`]).
    pub(crate) node: Option<usize>,
    /// (priority, condition) of each trigger, in order.
    triggers: Vec<(i64, CompiledCondition)>,
    /// The reason recorded when trigger `k` wins, built once.
    reasons: Vec<Arc<str>>,
    /// The candidate list when this entry is the only match.
    alone: Candidates,
}

/// A rule-based supervisor compiled for the executor: among `allow` entries whose
/// triggers match the state, the highest priority wins; ties go to the earlier entry; no
/// match means the supervisor's `default` (absent: `stop_local`). The ids, reasons and
/// one-candidate lists are built once, so a decision allocates nothing when at most one
/// entry matches.
#[derive(Debug)]
pub(crate) struct RuleTable {
    entries: Vec<RuleEntry>,
    /// The `default` decision (`None`: `stop_local`).
    pub(crate) default: Option<RoutingDecision>,
    /// The trace target of the default (the decision kind or its id).
    pub(crate) default_label: Arc<str>,
    default_reason: Arc<str>,
    /// True when some trigger reads `/system/...` (the executor then decides on a state
    /// with `system` built fresh).
    pub(crate) reads_system: bool,
    /// This table's id (unique in the process).
    pub(crate) id: u64,
    /// The buckets ([`slice_bit`]) of the slices its triggers read.
    pub(crate) reads: u64,
}

impl RuleTable {
    /// The entries' ids (tests count their references).
    #[cfg(test)]
    pub(crate) fn entry_ids(&self) -> impl Iterator<Item = &Arc<str>> {
        self.entries.iter().map(|e| &e.id)
    }
}

impl RuleEntry {
    /// The best matching trigger on `state`: (priority, trigger index) of the highest
    /// matching priority, the earlier trigger on ties. A trigger that cannot win (its
    /// priority no higher than a match found before it) is not evaluated: conditions have
    /// no effects, and the answer is the same.
    fn best(&self, state: &State) -> Option<(i64, usize)> {
        let mut best: Option<(i64, usize)> = None;
        for (ti, (priority, condition)) in self.triggers.iter().enumerate() {
            if best.is_some_and(|(p, _)| p >= *priority) {
                continue;
            }
            if condition.eval(state) {
                best = Some((*priority, ti));
            }
        }
        best
    }
}

/// What a rule table decided: the winning entry (`None`: the default), the candidates
/// best first, and the reason.
#[derive(Debug)]
pub(crate) struct RuleVerdict<'a> {
    pub(crate) winner: Option<&'a RuleEntry>,
    pub(crate) candidates: Cow<'a, Candidates>,
    pub(crate) reason: &'a Arc<str>,
    /// The verdict as indices, to be taken again ([`RuleTable::again`]); `None` when
    /// several entries matched (their ranked list is not kept).
    pub(crate) taken: Option<Taken>,
}

impl RuleTable {
    /// Resolves each node entry to its position in the plan's `nodes` (`position` of an
    /// id), so a dispatch reads the node's plan by position rather than hashing its id.
    pub(crate) fn with_node_plans(mut self, position: impl Fn(&str) -> Option<usize>) -> Self {
        for e in &mut self.entries {
            if !e.is_subgraph {
                e.node = position(&e.id);
            }
        }
        self
    }

    /// Compiles `contract`'s allowlist against the registry (entries naming neither a
    /// node nor a subgraph never match; a valid graph has none).
    pub(crate) fn new(contract: &SupervisorContract, registry: &Registry) -> Self {
        let entries: Vec<RuleEntry> = contract
            .allow
            .iter()
            .filter_map(|id| {
                let (triggers, is_subgraph) = match registry.resolve(id) {
                    Some(Resolved::Node(n)) => (&n.triggers, false),
                    Some(Resolved::Subgraph(s)) => (&s.triggers, true),
                    _ => return None,
                };
                let id: Arc<str> = Arc::from(id.as_str());
                Some(RuleEntry {
                    reasons: triggers
                        .iter()
                        .enumerate()
                        .map(|(k, t)| Arc::from(rule_reason(&id, k, t.priority)))
                        .collect(),
                    alone: vec![Arc::clone(&id)].into(),
                    triggers: triggers
                        .iter()
                        .map(|t| (t.priority, CompiledCondition::new(&t.when)))
                        .collect(),
                    is_subgraph,
                    node: None,
                    id,
                })
            })
            .collect();
        let default_label = match &contract.default {
            Some(d) => d.target().unwrap_or(d.kind()).into(),
            None => RoutingDecision::stop_local().kind().into(),
        };
        // The slices the triggers read, in one walk: their buckets, and whether `system`
        // is among them.
        let (mut reads, mut reads_system) = (0, false);
        for (_, c) in entries.iter().flat_map(|e| &e.triggers) {
            c.slices_read(&mut |slice| {
                reads |= slice_bit(slice);
                reads_system |= slice == SYSTEM_SLICE;
            });
        }
        Self {
            entries,
            reads_system,
            id: TABLE_IDS.fetch_add(1, Ordering::Relaxed),
            reads,
            default: contract.default.clone(),
            default_label,
            default_reason: default_reason(contract.default.as_ref()).into(),
        }
    }

    /// Decides on `state`.
    ///
    /// Complexity: O(allow x triggers x condition size); allocates only when two or more
    /// entries match (for the candidate list).
    pub(crate) fn decide(&self, state: &State) -> RuleVerdict<'_> {
        // One pass finds the winner and counts the matches; only a decision with several
        // matches evaluates again to list them.
        let mut best: Option<(i64, usize, usize)> = None;
        let mut count = 0usize;
        for (i, e) in self.entries.iter().enumerate() {
            if let Some((p, ti)) = e.best(state) {
                count += 1;
                if best.is_none_or(|b| p > b.0) {
                    best = Some((p, i, ti));
                }
            }
        }
        let Some((_, i, ti)) = best else {
            return self.again(None);
        };
        if count == 1
            && let (Ok(i), Ok(ti)) = (u32::try_from(i), u32::try_from(ti))
        {
            return self.again(Some((i, ti)));
        }
        let winner = &self.entries[i];
        let candidates = if count == 1 {
            Cow::Borrowed(&winner.alone)
        } else {
            let mut matched: Vec<(i64, usize, usize)> = self
                .entries
                .iter()
                .enumerate()
                .filter_map(|(i, e)| e.best(state).map(|(p, ti)| (p, i, ti)))
                .collect();
            rank(&mut matched);
            Cow::Owned(
                matched
                    .iter()
                    .map(|m| Arc::clone(&self.entries[m.1].id))
                    .collect(),
            )
        };
        RuleVerdict {
            winner: Some(winner),
            candidates,
            reason: &winner.reasons[ti],
            taken: None,
        }
    }

    /// The verdict `taken` names: the default (`None`), or entry `i` alone matching by
    /// its trigger `ti`. `taken` comes from this table's [`RuleTable::decide`].
    #[inline]
    pub(crate) fn again(&self, taken: Taken) -> RuleVerdict<'_> {
        match taken.and_then(|(i, ti)| {
            let e = self.entries.get(i as usize)?;
            Some((e, e.reasons.get(ti as usize)?))
        }) {
            Some((e, reason)) => RuleVerdict {
                winner: Some(e),
                candidates: Cow::Borrowed(&e.alone),
                reason,
                taken: Some(taken),
            },
            None => RuleVerdict {
                winner: None,
                candidates: Cow::Owned(Candidates::none()),
                reason: &self.default_reason,
                taken: Some(None),
            },
        }
    }
}

/// What a rule table decided, as owned data (for tests).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq)]
struct RuleOutcome {
    decision: RoutingDecision,
    candidates: Vec<String>,
    reason: String,
}

#[cfg(test)]
impl RuleTable {
    fn outcome(&self, state: &serde_json::Value) -> RuleOutcome {
        let state = state.as_object().expect("a state object");
        let v = self.decide(state);
        let decision = match v.winner {
            Some(e) if e.is_subgraph => RoutingDecision::subgraph(&*e.id),
            Some(e) => RoutingDecision::node(&*e.id),
            None => self
                .default
                .clone()
                .unwrap_or_else(RoutingDecision::stop_local),
        };
        RuleOutcome {
            decision,
            candidates: v.candidates.iter().map(|c| c.to_string()).collect(),
            reason: v.reason.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::{Condition, NodeContract, SubgraphContract, Trigger};
    use serde_json::json;

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.register_node(
            NodeContract::new("a")
                .trigger(Trigger::new(1, Condition::Const(true)))
                .trigger(Trigger::new(7, Condition::exists("/x"))),
        )
        .unwrap();
        r.register_node(NodeContract::new("b").trigger(Trigger::new(7, Condition::Const(true))))
            .unwrap();
        r.register_subgraph(
            SubgraphContract::new("g").trigger(Trigger::new(9, Condition::exists("/y"))),
        )
        .unwrap();
        r.register_node(NodeContract::new("quiet")).unwrap();
        r
    }

    fn decide(s: &SupervisorContract, r: &Registry, state: serde_json::Value) -> RuleOutcome {
        RuleTable::new(s, r).outcome(&state)
    }

    #[test]
    fn highest_priority_wins_and_ties_follow_allow_order() {
        let r = registry();
        let s = SupervisorContract::new("s").allow(["quiet", "b", "a", "g"]);
        let out = decide(&s, &r, json!({"x": 1}));
        assert_eq!(out.decision, RoutingDecision::node("b"));
        assert_eq!(out.candidates, ["b", "a"]);
        assert!(
            out.reason.contains("`b` trigger #0 (priority 7)"),
            "{}",
            out.reason
        );
        let s2 = SupervisorContract::new("s").allow(["a", "b"]);
        let out = decide(&s2, &r, json!({"x": 1}));
        assert_eq!(out.decision, RoutingDecision::node("a"));
        assert!(out.reason.contains("trigger #1"), "{}", out.reason);
        let out = decide(&s, &r, json!({"y": 1}));
        assert_eq!(out.decision, RoutingDecision::subgraph("g"));
        assert_eq!(out.candidates, ["g", "b", "a"]);
    }

    #[test]
    fn candidates_are_listed_best_first_with_one_or_many_matches() {
        let r = registry();
        let s = SupervisorContract::new("s").allow(["quiet", "g", "ghost"]);
        let out = decide(&s, &r, json!({"y": 1}));
        assert_eq!(out.decision, RoutingDecision::subgraph("g"));
        assert_eq!(out.candidates, ["g"]);
        let out = decide(&s, &r, json!({}));
        assert!(out.candidates.is_empty());
        let label = RuleTable::new(
            &SupervisorContract::new("s")
                .allow(["g"])
                .default_decision(RoutingDecision::node("a")),
            &r,
        )
        .default_label;
        assert_eq!(&*label, "a");
    }

    #[test]
    fn no_match_takes_the_default_or_stop_local() {
        let r = registry();
        let s = SupervisorContract::new("s").allow(["quiet", "g"]);
        let out = decide(&s, &r, json!({}));
        assert_eq!(out.decision, RoutingDecision::stop_local());
        assert!(out.candidates.is_empty());
        let s = s.default_decision(RoutingDecision::stop_global("idle"));
        let out = decide(&s, &r, json!({}));
        assert_eq!(out.decision, RoutingDecision::stop_global("idle"));
        assert_eq!(out.reason, "no trigger matched: default");
    }
}
