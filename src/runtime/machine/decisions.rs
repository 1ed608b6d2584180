//! Resolving what a supervisor returned into the action the executor carries out,
//! enforcing the allowlist.

use crate::contracts::{
    RoutingDecision, StopGlobal, StopLocal, SupervisorContract, SupervisorOutput,
};
use crate::graph::{ContractKind, Registry};
use crate::runtime::data::TerminationReason;

/// What the executor does with a decision.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Run this node (allowed, and a node).
    Node(String),
    /// Call this subgraph (allowed, and a subgraph).
    Subgraph(String),
    /// End the current level.
    StopLocal(StopLocal),
    /// End the run.
    StopGlobal(StopGlobal),
    /// Pause for an answer.
    Ask(String),
    /// Ask this allowed subgraph a follow-up (whether it can be asked is checked when
    /// planning: it must be `chat` and have returned at this level).
    Clarify {
        /// The subgraph.
        subgraph: String,
        /// The question.
        question: String,
    },
    /// Route to the fallback node (or a safe `stop_local`).
    Fallback {
        /// The violation's reason (`allowlist_violation`, `clarify_unavailable`); `None` for
        /// an explicit `fallback`.
        violation: Option<TerminationReason>,
        /// Why, in words.
        reason: String,
    },
}

/// The choice as recorded in the trace's decision item (`target`): the node or subgraph
/// id, or the decision kind.
pub(crate) fn choice_label(output: &SupervisorOutput) -> String {
    match output {
        SupervisorOutput::Legacy(s) => s.clone(),
        SupervisorOutput::Decision(RoutingDecision::Clarify(c)) => c.subgraph.clone(),
        SupervisorOutput::Decision(d) => match d.target() {
            Some(id) => id.to_string(),
            None => d.kind().to_string(),
        },
    }
}

/// The reason a typed decision carries, for the trace.
pub(crate) fn decision_reason(output: &SupervisorOutput) -> Option<String> {
    match output {
        SupervisorOutput::Legacy(_) => Some("legacy string decision".into()),
        SupervisorOutput::Decision(d) => match d {
            RoutingDecision::StopLocal(s) => s.reason.clone(),
            RoutingDecision::StopGlobal(s) | RoutingDecision::Fallback(s) => s.reason.clone(),
            RoutingDecision::AskClarification(c) => Some(c.question.clone()),
            RoutingDecision::Clarify(c) => Some(c.question.clone()),
            RoutingDecision::Node(_) | RoutingDecision::Subgraph(_) => None,
        },
    }
}

/// Checks a choice of `id` as a `kind` against the allowlist and the registry.
fn allowed(
    contract: &SupervisorContract,
    registry: &Registry,
    id: &str,
    kind: ContractKind,
) -> Result<(), String> {
    let found = registry.kind_of(id);
    if found.is_none() {
        return Err(format!(
            "allowlist_violation: `{id}` names no node or subgraph"
        ));
    }
    if found != Some(kind) {
        return Err(format!("allowlist_violation: `{id}` is not a {kind}"));
    }
    if !contract.allow.iter().any(|a| a == id) {
        return Err(format!(
            "allowlist_violation: `{id}` is not in the allowlist of `{}`",
            contract.id
        ));
    }
    Ok(())
}

fn violation(reason: String) -> Action {
    Action::Fallback {
        violation: Some(TerminationReason::AllowlistViolation),
        reason,
    }
}

/// Resolves a supervisor's output. Legacy strings: a node id means `node`, a subgraph id
/// `subgraph`, and `"done"` (when it names nothing) `stop_local`.
pub(crate) fn resolve(
    output: SupervisorOutput,
    contract: &SupervisorContract,
    registry: &Registry,
) -> Action {
    match output {
        SupervisorOutput::Legacy(s) => match registry.kind_of(&s) {
            Some(ContractKind::Node) => resolve(
                SupervisorOutput::Decision(RoutingDecision::Node(s)),
                contract,
                registry,
            ),
            Some(ContractKind::Subgraph) => resolve(
                SupervisorOutput::Decision(RoutingDecision::Subgraph(s)),
                contract,
                registry,
            ),
            None if s == SupervisorOutput::DONE => Action::StopLocal(StopLocal::default()),
            Some(ContractKind::Supervisor) => violation(format!(
                "allowlist_violation: `{s}` is a supervisor, not a node or subgraph"
            )),
            None => violation(format!(
                "allowlist_violation: `{s}` names no node or subgraph"
            )),
        },
        SupervisorOutput::Decision(d) => match d {
            RoutingDecision::Node(id) => match allowed(contract, registry, &id, ContractKind::Node)
            {
                Ok(()) => Action::Node(id),
                Err(reason) => violation(reason),
            },
            RoutingDecision::Subgraph(id) => {
                match allowed(contract, registry, &id, ContractKind::Subgraph) {
                    Ok(()) => Action::Subgraph(id),
                    Err(reason) => violation(reason),
                }
            }
            RoutingDecision::StopLocal(s) => Action::StopLocal(s),
            RoutingDecision::StopGlobal(s) => Action::StopGlobal(s),
            RoutingDecision::AskClarification(c) => Action::Ask(c.question),
            RoutingDecision::Clarify(c) => {
                match allowed(contract, registry, &c.subgraph, ContractKind::Subgraph) {
                    Ok(()) => Action::Clarify {
                        subgraph: c.subgraph,
                        question: c.question,
                    },
                    Err(reason) => violation(reason),
                }
            }
            RoutingDecision::Fallback(f) => Action::Fallback {
                violation: None,
                reason: f.reason.unwrap_or_else(|| "fallback".to_string()),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::{NodeContract, SubgraphContract};

    fn setup() -> (SupervisorContract, Registry) {
        let mut r = Registry::new();
        r.register_node(NodeContract::new("a")).unwrap();
        r.register_node(NodeContract::new("b")).unwrap();
        r.register_subgraph(SubgraphContract::new("g")).unwrap();
        r.register_supervisor(SupervisorContract::new("s")).unwrap();
        (SupervisorContract::new("s").allow(["a", "g"]), r)
    }

    #[test]
    fn legacy_strings_resolve_by_kind() {
        let (s, r) = setup();
        assert_eq!(resolve("a".into(), &s, &r), Action::Node("a".into()));
        assert_eq!(resolve("g".into(), &s, &r), Action::Subgraph("g".into()));
        assert_eq!(
            resolve("done".into(), &s, &r),
            Action::StopLocal(StopLocal::default())
        );
        for bad in ["b", "zzz", "s"] {
            assert!(
                matches!(
                    resolve(bad.into(), &s, &r),
                    Action::Fallback {
                        violation: Some(TerminationReason::AllowlistViolation),
                        ..
                    }
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn typed_decisions_check_kind_and_allowlist() {
        let (s, r) = setup();
        let d = |d: RoutingDecision| resolve(d.into(), &s, &r);
        assert_eq!(d(RoutingDecision::node("a")), Action::Node("a".into()));
        let Action::Fallback { reason, .. } = d(RoutingDecision::node("g")) else {
            panic!("a subgraph named as a node is a violation")
        };
        assert!(reason.contains("is not a node"), "{reason}");
        let Action::Fallback { reason, .. } = d(RoutingDecision::node("b")) else {
            panic!("b is not allowed")
        };
        assert!(reason.contains("not in the allowlist of `s`"), "{reason}");
        assert_eq!(
            d(RoutingDecision::fallback("unsure")),
            Action::Fallback {
                violation: None,
                reason: "unsure".into()
            }
        );
    }
}
