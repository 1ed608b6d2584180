//! The built-in rule-based supervisor: triggers, priorities, declaration-order ties and
//! `default`.

use serde_json::Value;

use crate::contracts::{RoutingDecision, SupervisorContract, Trigger};
use crate::graph::{Registry, Resolved};

/// What a rule-based supervisor decided, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    /// The decision.
    pub decision: RoutingDecision,
    /// `allow` entries whose triggers matched, best first (ties in `allow` order).
    pub candidates: Vec<String>,
    /// The rule that won, in words (recorded as the trace item's `reason`).
    pub reason: String,
    /// True when a trigger won (the decision names an `allow` entry of the right kind);
    /// false when the `default` was taken.
    pub matched: bool,
}

/// Decides for a rule-based supervisor: among `allow` entries whose triggers match the
/// state, the highest priority wins; ties go to the earlier entry; no match means the
/// supervisor's `default` (absent: `stop_local`).
///
/// Complexity: O(allow x triggers x condition size).
pub fn decide_by_rules(
    contract: &SupervisorContract,
    registry: &Registry,
    state: &Value,
) -> RuleOutcome {
    // (priority, allow index, trigger index, is a subgraph)
    let mut matched: Vec<(i64, usize, usize, bool)> = Vec::with_capacity(contract.allow.len());
    for (i, id) in contract.allow.iter().enumerate() {
        let (triggers, is_subgraph): (&[Trigger], bool) = match registry.resolve(id) {
            Some(Resolved::Node(n)) => (&n.triggers, false),
            Some(Resolved::Subgraph(s)) => (&s.triggers, true),
            _ => continue,
        };
        let best = triggers
            .iter()
            .enumerate()
            .filter(|(_, t)| t.when.eval(state))
            .fold(None::<(i64, usize)>, |best, (ti, t)| match best {
                Some((p, _)) if p >= t.priority => best,
                _ => Some((t.priority, ti)),
            });
        if let Some((p, ti)) = best {
            matched.push((p, i, ti, is_subgraph));
        }
    }
    // Stable sort keeps `allow` order among equal priorities.
    matched.sort_by_key(|m| std::cmp::Reverse(m.0));
    let candidates: Vec<String> = matched
        .iter()
        .map(|m| contract.allow[m.1].clone())
        .collect();
    match matched.first() {
        Some(&(priority, i, ti, is_subgraph)) => {
            let id = &contract.allow[i];
            let decision = if is_subgraph {
                RoutingDecision::Subgraph(id.clone())
            } else {
                RoutingDecision::Node(id.clone())
            };
            RuleOutcome {
                decision,
                candidates,
                reason: format!("rule: `{id}` trigger #{ti} (priority {priority}) matched"),
                matched: true,
            }
        }
        None => {
            let decision = contract
                .default
                .clone()
                .unwrap_or_else(RoutingDecision::stop_local);
            let reason = match &contract.default {
                Some(_) => "no trigger matched: default".to_string(),
                None => "no trigger matched: stop_local (no default)".to_string(),
            };
            RuleOutcome {
                decision,
                candidates,
                reason,
                matched: false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::{Condition, NodeContract, SubgraphContract};
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

    #[test]
    fn highest_priority_wins_and_ties_follow_allow_order() {
        let r = registry();
        let s = SupervisorContract::new("s").allow(["quiet", "b", "a", "g"]);
        let out = decide_by_rules(&s, &r, &json!({"x": 1}));
        assert_eq!(out.decision, RoutingDecision::node("b"));
        assert_eq!(out.candidates, ["b", "a"]);
        assert!(
            out.reason.contains("`b` trigger #0 (priority 7)"),
            "{}",
            out.reason
        );
        let s2 = SupervisorContract::new("s").allow(["a", "b"]);
        let out = decide_by_rules(&s2, &r, &json!({"x": 1}));
        assert_eq!(out.decision, RoutingDecision::node("a"));
        assert!(out.reason.contains("trigger #1"), "{}", out.reason);
        let out = decide_by_rules(&s, &r, &json!({"y": 1}));
        assert_eq!(out.decision, RoutingDecision::subgraph("g"));
        assert_eq!(out.candidates, ["g", "b", "a"]);
    }

    #[test]
    fn no_match_takes_the_default_or_stop_local() {
        let r = registry();
        let s = SupervisorContract::new("s").allow(["quiet", "g"]);
        let out = decide_by_rules(&s, &r, &json!({}));
        assert_eq!(out.decision, RoutingDecision::stop_local());
        assert!(out.candidates.is_empty());
        let s = s.default_decision(RoutingDecision::stop_global("idle"));
        let out = decide_by_rules(&s, &r, &json!({}));
        assert_eq!(out.decision, RoutingDecision::stop_global("idle"));
        assert_eq!(out.reason, "no trigger matched: default");
    }
}
