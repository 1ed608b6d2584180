//! Rule 5: allowlists (`PG0301`-`PG0305`).

use foldhash::HashSet;

use crate::contracts::RoutingDecision;
use crate::contracts::pointer::join;
use crate::graph::ContractKind;
use crate::validator::{Code, Context, Diagnostic};

fn level_name(level: Option<&str>) -> String {
    match level {
        Some(g) => format!("subgraph `{g}`"),
        None => "the root level".to_string(),
    }
}

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for s in ctx.reg.supervisors() {
        let at = |field: &str| join(["supervisors", s.id.as_str(), field]);
        if s.allow.is_empty() {
            let kind = if s.is_rule_based() {
                "rule-based supervisor"
            } else {
                "supervisor with a policy"
            };
            out.push(
                Diagnostic::new(
                    Code::EMPTY_ALLOW,
                    at("allow"),
                    format!(
                        "{kind} `{}` has an empty `allow`: it can choose nothing",
                        s.id
                    ),
                )
                .fix("list the nodes and subgraphs it may choose under `allow`"),
            );
        }
        let level = ctx.level_of_supervisor(&s.id);
        let allowed: HashSet<&str> = s.allow.iter().map(String::as_str).collect();
        let default_target = s.default.as_ref().and_then(RoutingDecision::target);
        let default_fallback = matches!(s.default, Some(RoutingDecision::Fallback(_)));
        for (i, entry) in s.allow.iter().enumerate() {
            let ptr = || format!("{}/{i}", at("allow"));
            let triggers = match ctx.kind_of(entry) {
                Some(ContractKind::Node) => {
                    if let Ok(owner_level) = ctx.level_of_node(entry)
                        && owner_level != level
                    {
                        out.push(
                            Diagnostic::new(
                                Code::ALLOW_OTHER_LEVEL,
                                ptr(),
                                format!(
                                    "supervisor `{}` ({}) allows node `{entry}`, which is \
                                         owned in {}",
                                    s.id,
                                    level_name(level),
                                    level_name(owner_level)
                                ),
                            )
                            .fix(format!(
                                "allow the subgraph that owns `{entry}` instead, or move the node"
                            )),
                        );
                        continue;
                    }
                    ctx.node(entry).map(|n| n.triggers.is_empty())
                }
                Some(ContractKind::Subgraph) => ctx.subgraph(entry).map(|g| g.triggers.is_empty()),
                _ => None,
            };
            let chosen_otherwise = default_target == Some(entry.as_str())
                || (default_fallback && s.fallback.as_deref() == Some(entry.as_str()));
            if s.is_rule_based() && triggers == Some(true) && !chosen_otherwise {
                out.push(
                    Diagnostic::new(
                        Code::NEVER_CHOSEN,
                        ptr(),
                        format!(
                            "rule-based supervisor `{}` allows `{entry}`, which has no triggers: \
                             it can never be chosen",
                            s.id
                        ),
                    )
                    .fix(format!(
                        "give `{entry}` a trigger, or remove it from `allow`"
                    )),
                );
            }
        }
        if let Some(fb) = &s.fallback
            && ctx.kind_of(fb) == Some(ContractKind::Node)
            && !allowed.contains(fb.as_str())
        {
            out.push(
                Diagnostic::new(
                    Code::FALLBACK_NOT_ALLOWED,
                    at("fallback"),
                    format!(
                        "fallback `{fb}` of supervisor `{}` is not in its `allow`",
                        s.id
                    ),
                )
                .fix(format!("add `{fb}` to `allow`")),
            );
        }
        if let Some(t) = default_target
            && !allowed.contains(t)
        {
            out.push(
                Diagnostic::new(
                    Code::DEFAULT_NOT_ALLOWED,
                    at("default"),
                    format!(
                        "default decision of supervisor `{}` names `{t}`, which is not in \
                             its `allow`",
                        s.id
                    ),
                )
                .fix(format!("add `{t}` to `allow` or change the default")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::json;

    #[test]
    fn valid_base_has_no_findings() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn empty_allow_for_rule_based_and_policy_supervisors() {
        let mut doc = base();
        doc["supervisors"]["sub_sup"]["allow"] = json!([]);
        doc["supervisors"]["p"] = json!({"policy": {"handler": "h"}});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::EMPTY_ALLOW, "/supervisors/sub_sup/allow".into()),
                (Code::EMPTY_ALLOW, "/supervisors/p/allow".into()),
            ]
        );
    }

    #[test]
    fn entry_from_another_level_fallback_and_default_outside_allow() {
        let mut doc = base();
        doc["supervisors"]["root"]["allow"] = json!(["sub", "reply", "work"]);
        doc["supervisors"]["sub_sup"]["fallback"] = "extra".into();
        doc["supervisors"]["sub_sup"]["default"] = json!({"node": "extra"});
        doc["nodes"]["extra"] = json!({"supervisor": "sub_sup"});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::ALLOW_OTHER_LEVEL, "/supervisors/root/allow/2".into()),
                (
                    Code::FALLBACK_NOT_ALLOWED,
                    "/supervisors/sub_sup/fallback".into()
                ),
                (
                    Code::DEFAULT_NOT_ALLOWED,
                    "/supervisors/sub_sup/default".into()
                ),
            ]
        );
    }

    #[test]
    fn entries_without_triggers_are_never_chosen_unless_defaulted_or_policy() {
        let mut doc = base();
        doc["nodes"]["work"]["triggers"] = json!([]);
        assert_eq!(
            run(check, doc.clone()),
            vec![(Code::NEVER_CHOSEN, "/supervisors/sub_sup/allow/0".into())]
        );
        doc["supervisors"]["sub_sup"]["default"] = json!({"node": "work"});
        assert!(run(check, doc.clone()).is_empty());
        doc["supervisors"]["sub_sup"]["default"] = json!({"fallback": {}});
        doc["supervisors"]["sub_sup"]["fallback"] = "work".into();
        assert!(run(check, doc.clone()).is_empty());
        doc["supervisors"]["sub_sup"] = json!({"allow": ["work"], "policy": {"handler": "h"}});
        assert!(run(check, doc).is_empty());
    }
}
