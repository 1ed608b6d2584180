//! Rule 6: membership (`PG0401`-`PG0404`). A supervisor belongs to at most one
//! subgraph; the entrypoint is a member; `entry` is at the root level; exitpoints are
//! nodes of their subgraph.

use foldhash::{HashMap, HashMapExt};

use crate::contracts::pointer::join;
use crate::graph::ContractKind;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut owner: HashMap<&str, &str> = HashMap::new();
    for g in ctx.reg.subgraphs() {
        for (i, s) in g.supervisors.iter().enumerate() {
            if ctx.kind_of(s) != Some(ContractKind::Supervisor) {
                continue;
            }
            match owner.get(s.as_str()) {
                Some(first) if *first != g.id => out.push(
                    Diagnostic::new(
                        Code::MULTI_MEMBERSHIP,
                        join(["subgraphs", g.id.as_str(), "supervisors", &i.to_string()]),
                        format!(
                            "supervisor `{s}` is a member of subgraph `{first}` and of subgraph `{}`",
                            g.id
                        ),
                    )
                    .fix(format!("keep `{s}` in one subgraph; give the other its own supervisor")),
                ),
                Some(_) => {}
                None => {
                    owner.insert(s.as_str(), g.id.as_str());
                }
            }
        }
        if ctx.kind_of(&g.entrypoint) == Some(ContractKind::Supervisor)
            && !g.supervisors.contains(&g.entrypoint)
        {
            out.push(
                Diagnostic::new(
                    Code::ENTRYPOINT_NOT_MEMBER,
                    join(["subgraphs", g.id.as_str(), "entrypoint"]),
                    format!(
                        "entrypoint `{}` of subgraph `{}` is not among its `supervisors`",
                        g.entrypoint, g.id
                    ),
                )
                .fix(format!("add `{}` to `supervisors`", g.entrypoint)),
            );
        }
        for (i, n) in g.exitpoints.iter().enumerate() {
            if let Ok(level) = ctx.level_of_node(n)
                && level != Some(g.id.as_str())
            {
                out.push(
                        Diagnostic::new(
                            Code::EXITPOINT_NOT_MEMBER,
                            join(["subgraphs", g.id.as_str(), "exitpoints", &i.to_string()]),
                            format!(
                                "exitpoint `{n}` of subgraph `{}` is not owned by one of its supervisors",
                                g.id
                            ),
                        )
                        .fix("name a node owned by a member supervisor"),
                    );
            }
        }
    }
    let entry = ctx.graph.entry();
    if ctx.kind_of(entry) == Some(ContractKind::Supervisor)
        && let Some(g) = ctx.level_of_supervisor(entry)
    {
        out.push(
            Diagnostic::new(
                Code::ENTRY_IN_SUBGRAPH,
                "/entry",
                format!("entry supervisor `{entry}` is a member of subgraph `{g}`"),
            )
            .fix("start the run at a root-level supervisor that calls the subgraph"),
        );
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
    fn reports_each_membership_problem() {
        let mut doc = base();
        doc["supervisors"]["other_sup"] = json!({"allow": ["work"]});
        doc["subgraphs"]["other"] = json!({"entrypoint": "root",
            "supervisors": ["other_sup", "sub_sup"], "exitpoints": ["reply", "work"]});
        assert_eq!(
            run(check, doc),
            vec![
                (
                    Code::MULTI_MEMBERSHIP,
                    "/subgraphs/other/supervisors/1".into()
                ),
                (
                    Code::ENTRYPOINT_NOT_MEMBER,
                    "/subgraphs/other/entrypoint".into()
                ),
                (
                    Code::EXITPOINT_NOT_MEMBER,
                    "/subgraphs/other/exitpoints/0".into()
                ),
                (
                    Code::EXITPOINT_NOT_MEMBER,
                    "/subgraphs/other/exitpoints/1".into()
                ),
            ]
        );
    }

    #[test]
    fn entry_inside_a_subgraph() {
        let mut doc = base();
        doc["entry"] = "sub_sup".into();
        assert_eq!(
            run(check, doc),
            vec![(Code::ENTRY_IN_SUBGRAPH, "/entry".into())]
        );
    }
}
