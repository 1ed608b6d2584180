//! Rule 10c: advisors (`PG0820`-`PG0823`, brief §5.4). Members are existing nodes, listed
//! once, other than the primary, with no `terminal`, `handoff`, `router`, `team` or
//! `advisors` of their own (an advisor only reports); the advice slice is declared and
//! the primary reads it.
//!
//! Complexity: O(total members), with a hash lookup per member.

use std::collections::HashSet;

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let Some(spec) = &n.advisors else {
            continue;
        };
        let id = n.id.as_str();
        if spec.members.is_empty() {
            out.push(
                Diagnostic::new(
                    Code::NO_ADVISORS,
                    join(["nodes", id, "advisors", "members"]),
                    format!("node `{id}` has `advisors` with no members: nothing advises it"),
                )
                .fix("list the advising nodes, or remove `advisors`"),
            );
        }
        let mut seen = HashSet::new();
        for (i, m) in spec.members.iter().enumerate() {
            let at = join(["nodes", id, "advisors", "members", &i.to_string()]);
            let bad = if m == id {
                Some(format!("node `{id}` lists itself as its own advisor"))
            } else if !seen.insert(m.as_str()) {
                Some(format!("node `{id}` lists advisor `{m}` twice"))
            } else if ctx.reg.get_node(m).is_none() {
                let what = match ctx.reg.kind_of(m) {
                    Some(k) => format!(
                        "`{m}` is a {}, not a node",
                        k.section().trim_end_matches('s')
                    ),
                    None => format!("there is no node `{m}`"),
                };
                Some(format!("node `{id}` has advisor `{m}`, but {what}"))
            } else {
                None
            };
            if let Some(msg) = bad {
                out.push(
                    Diagnostic::new(Code::BAD_ADVISOR, at, msg)
                        .fix("list each advising node once, by its id, other than the primary"),
                );
                continue;
            }
            let Some(member) = ctx.reg.get_node(m) else {
                continue;
            };
            let own: Vec<&str> = [
                ("terminal", member.terminal),
                ("handoff", member.handoff.is_some()),
                ("router", member.router.is_some()),
                ("team", member.team.is_some()),
                ("advisors", member.advisors.is_some()),
            ]
            .into_iter()
            .filter_map(|(f, set)| set.then_some(f))
            .collect();
            if !own.is_empty() {
                out.push(
                    Diagnostic::new(
                        Code::ADVISOR_WITH_PATTERN,
                        join(["nodes", m.as_str(), own[0]]),
                        format!(
                            "node `{m}` advises `{id}` but has `{}` of its own: an advisor's \
                             output is only a report, so it would be ignored",
                            own.join("`, `")
                        ),
                    )
                    .fix(format!(
                        "remove `{}` from `{m}`, or stop using it as an advisor",
                        own[0]
                    )),
                );
            }
        }
        let slice = spec.slice.as_str();
        let at = join(["nodes", id, "advisors", "slice"]);
        if !ctx.graph.slices().contains_key(slice) {
            out.push(
                Diagnostic::new(
                    Code::BAD_ADVICE_SLICE,
                    at,
                    format!("node `{id}`'s advice slice `{slice}` is not declared"),
                )
                .fix(format!(
                    "declare it: \"slices\": {{\"{slice}\": {{}}, ...}}"
                )),
            );
        } else if !n.reads.iter().any(|r| r == slice) {
            out.push(
                Diagnostic::new(
                    Code::BAD_ADVICE_SLICE,
                    at,
                    format!(
                        "node `{id}` does not read its advice slice `{slice}`: the advice would \
                         never reach it"
                    ),
                )
                .fix(format!("add `{slice}` to the `reads` of `{id}`")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::{Value, json};

    /// `base()` plus advisors `a1`, `a2` of primary `work` (in `sub`), reporting to
    /// `advice`.
    fn doc(advisors: Value) -> Value {
        let mut d = base();
        d["slices"]["advice"] = json!({});
        d["nodes"]["work"]["reads"] = json!(["request", "advice"]);
        d["nodes"]["work"]["advisors"] = advisors;
        for a in ["a1", "a2"] {
            d["nodes"][a] = json!({"supervisor": "sub_sup", "reads": ["request"]});
        }
        d
    }

    #[test]
    fn well_formed_advisors_pass() {
        let d = doc(json!({"members": ["a1", "a2"], "slice": "advice", "timeout_ms": 500}));
        assert_eq!(run(check, d), vec![]);
    }

    #[test]
    fn bad_members_are_errors_naming_their_place() {
        let d = doc(json!({"members": ["a1", "a1", "work", "nope", "sub"], "slice": "advice"}));
        assert_eq!(
            run(check, d),
            vec![
                (Code::BAD_ADVISOR, "/nodes/work/advisors/members/1".into()),
                (Code::BAD_ADVISOR, "/nodes/work/advisors/members/2".into()),
                (Code::BAD_ADVISOR, "/nodes/work/advisors/members/3".into()),
                (Code::BAD_ADVISOR, "/nodes/work/advisors/members/4".into()),
            ]
        );
    }

    #[test]
    fn an_advisor_with_a_pattern_of_its_own_is_an_error() {
        let mut d = doc(json!({"members": ["a1", "a2", "a3"], "slice": "advice"}));
        d["nodes"]["a1"]["terminal"] = json!(true);
        d["nodes"]["a2"]["handoff"] = json!("a1");
        d["nodes"]["a3"] = json!({"supervisor": "sub_sup", "router": {"destinations": ["a1"]}});
        assert_eq!(
            run(check, d),
            vec![
                (Code::ADVISOR_WITH_PATTERN, "/nodes/a1/terminal".into()),
                (Code::ADVISOR_WITH_PATTERN, "/nodes/a2/handoff".into()),
                (Code::ADVISOR_WITH_PATTERN, "/nodes/a3/router".into()),
            ]
        );
    }

    #[test]
    fn the_slice_must_be_declared_and_read() {
        let d = doc(json!({"members": ["a1"], "slice": "missing"}));
        assert_eq!(
            run(check, d),
            vec![(Code::BAD_ADVICE_SLICE, "/nodes/work/advisors/slice".into())]
        );
        let mut d = doc(json!({"members": ["a1"], "slice": "advice"}));
        d["nodes"]["work"]["reads"] = json!(["request"]);
        assert_eq!(
            run(check, d),
            vec![(Code::BAD_ADVICE_SLICE, "/nodes/work/advisors/slice".into())]
        );
        let d = doc(json!({"members": [], "slice": "advice"}));
        assert_eq!(
            run(check, d),
            vec![(Code::NO_ADVISORS, "/nodes/work/advisors/members".into())]
        );
    }
}
