//! Rule 10d: teams (`PG0830`-`PG0836`, brief §5.5). Members and the lead are existing
//! nodes; members are listed once and are neither the team node nor the lead; members
//! and the lead have no `terminal`, `handoff`, `router`, `team` or `advisors` of their
//! own (the team decides where control goes); the team node has no `run` (nor `router`
//! or `advisors`); the team slice is declared; the turn limits are not zero.
//!
//! Complexity: O(total members), with a hash lookup per member.

use std::collections::HashSet;

use crate::contracts::pointer::join;
use crate::contracts::{NodeContract, SYSTEM_SLICE};
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let Some(spec) = &n.team else {
            continue;
        };
        let id = n.id.as_str();
        let at = |rest: &[&str]| {
            let mut parts = vec!["nodes", id, "team"];
            parts.extend_from_slice(rest);
            join(parts)
        };
        let own: Vec<&str> = [
            ("run", n.run.is_some()),
            ("router", n.router.is_some()),
            ("advisors", n.advisors.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, set)| set.then_some(f))
        .collect();
        if let Some(first) = own.first() {
            out.push(
                Diagnostic::new(
                    Code::TEAM_NODE_WITH_RUN,
                    join(["nodes", id, first]),
                    format!(
                        "team node `{id}` has `{}`: running a team node runs its team, and \
                         its lead's final writes are its own",
                        own.join("`, `")
                    ),
                )
                .fix(format!("remove `{first}` from `{id}`")),
            );
        }
        if spec.members.is_empty() {
            out.push(
                Diagnostic::new(
                    Code::NO_TEAM_MEMBERS,
                    at(&["members"]),
                    format!("team node `{id}` has no members: its lead would decide alone"),
                )
                .fix("list the member nodes, or make the lead an ordinary node"),
            );
        }
        let not_a_node = |m: &str| match ctx.reg.kind_of(m) {
            Some(k) => format!(
                "`{m}` is a {}, not a node",
                k.section().trim_end_matches('s')
            ),
            None => format!("there is no node `{m}`"),
        };
        let mut seen = HashSet::new();
        let mut participants: Vec<(&NodeContract, String)> = Vec::new();
        for (i, m) in spec.members.iter().enumerate() {
            let bad = if m == id {
                Some(format!("team node `{id}` lists itself as a member"))
            } else if *m == spec.lead {
                Some(format!(
                    "team node `{id}` lists its lead `{m}` as a member too"
                ))
            } else if !seen.insert(m.as_str()) {
                Some(format!("team node `{id}` lists member `{m}` twice"))
            } else if ctx.reg.get_node(m).is_none() {
                Some(format!(
                    "team node `{id}` has member `{m}`, but {}",
                    not_a_node(m)
                ))
            } else {
                None
            };
            match bad {
                Some(msg) => out.push(
                    Diagnostic::new(Code::BAD_TEAM_MEMBER, at(&["members", &i.to_string()]), msg)
                        .fix("list each member node once, by its id, other than the team node and its lead"),
                ),
                None => {
                    if let Some(c) = ctx.reg.get_node(m) {
                        participants.push((c, "member".into()));
                    }
                }
            }
        }
        let lead = spec.lead.as_str();
        let bad_lead = if lead == id {
            Some(format!("team node `{id}` names itself as its lead"))
        } else if ctx.reg.get_node(lead).is_none() {
            Some(format!(
                "team node `{id}` has lead `{lead}`, but {}",
                not_a_node(lead)
            ))
        } else {
            None
        };
        match bad_lead {
            Some(msg) => out.push(
                Diagnostic::new(Code::BAD_TEAM_LEAD, at(&["lead"]), msg)
                    .fix("name an existing node, other than the team node, as the lead"),
            ),
            None => {
                if let Some(c) = ctx.reg.get_node(lead) {
                    participants.push((c, "lead".into()));
                }
            }
        }
        for (p, role) in participants {
            let fields: Vec<&str> = [
                ("terminal", p.terminal),
                ("handoff", p.handoff.is_some()),
                ("router", p.router.is_some()),
                ("team", p.team.is_some()),
                ("advisors", p.advisors.is_some()),
            ]
            .into_iter()
            .filter_map(|(f, set)| set.then_some(f))
            .collect();
            if let Some(first) = fields.first() {
                let pid = p.id.as_str();
                out.push(
                    Diagnostic::new(
                        Code::TEAM_PARTICIPANT_WITH_PATTERN,
                        join(["nodes", pid, first]),
                        format!(
                            "node `{pid}` is the {role} of team `{id}` but has `{}` of its own: \
                             the team decides what follows a turn, so it would be ignored",
                            fields.join("`, `")
                        ),
                    )
                    .fix(format!("remove `{first}` from `{pid}`")),
                );
            }
        }
        let slice = spec.slice.as_str();
        if slice == SYSTEM_SLICE || !ctx.graph.slices().contains_key(slice) {
            out.push(
                Diagnostic::new(
                    Code::BAD_TEAM_SLICE,
                    at(&["slice"]),
                    format!("the team slice `{slice}` of team node `{id}` is not a declared slice"),
                )
                .fix(format!(
                    "declare it: \"slices\": {{\"{slice}\": {{}}, ...}}"
                )),
            );
        }
        for (field, n) in [
            ("member_max_turns", spec.member_max_turns),
            ("lead_max_turns", spec.lead_max_turns),
        ] {
            if n == 0 {
                out.push(
                    Diagnostic::new(
                        Code::TEAM_NO_TURNS,
                        at(&[field]),
                        format!("team node `{id}` has `{field}: 0`: nobody could take a turn"),
                    )
                    .fix(format!("set `{field}` to 1 or more (or leave it out)")),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::{Value, json};

    /// `base()` plus team node `panel` (root) with members `m1`, `m2` and lead `chair`,
    /// its transcript in `team`.
    fn doc(team: Value) -> Value {
        let mut d = base();
        d["slices"]["team"] = json!({});
        d["nodes"]["panel"] = json!({"supervisor": "root", "writes": ["answer"], "team": team});
        for m in ["m1", "m2", "chair"] {
            d["nodes"][m] = json!({"supervisor": "root", "reads": ["request"]});
        }
        d
    }

    #[test]
    fn a_well_formed_team_passes() {
        let d = doc(
            json!({"members": ["m1", "m2"], "lead": "chair", "slice": "team",
                           "member_max_turns": 2}),
        );
        assert_eq!(run(check, d), vec![]);
    }

    #[test]
    fn bad_members_and_leads_are_errors_naming_their_place() {
        let d = doc(
            json!({"members": ["m1", "m1", "panel", "chair", "nope", "sub"],
                           "lead": "chair", "slice": "team"}),
        );
        assert_eq!(
            run(check, d),
            vec![
                (Code::BAD_TEAM_MEMBER, "/nodes/panel/team/members/1".into()),
                (Code::BAD_TEAM_MEMBER, "/nodes/panel/team/members/2".into()),
                (Code::BAD_TEAM_MEMBER, "/nodes/panel/team/members/3".into()),
                (Code::BAD_TEAM_MEMBER, "/nodes/panel/team/members/4".into()),
                (Code::BAD_TEAM_MEMBER, "/nodes/panel/team/members/5".into()),
            ]
        );
        for lead in ["root", "panel", "nope"] {
            let d = doc(json!({"members": ["m1"], "lead": lead, "slice": "team"}));
            assert_eq!(
                run(check, d),
                vec![(Code::BAD_TEAM_LEAD, "/nodes/panel/team/lead".into())],
                "{lead}"
            );
        }
    }

    #[test]
    fn participants_with_patterns_and_a_team_node_with_run_are_errors() {
        let mut d = doc(json!({"members": ["m1", "m2"], "lead": "chair", "slice": "team"}));
        d["nodes"]["m1"]["terminal"] = json!(true);
        d["nodes"]["m2"]["advisors"] = json!({"members": ["m1"], "slice": "team"});
        d["nodes"]["chair"]["handoff"] = json!("m1");
        d["nodes"]["panel"]["run"] = json!({"set": {}});
        assert_eq!(
            run(check, d),
            vec![
                (Code::TEAM_NODE_WITH_RUN, "/nodes/panel/run".into()),
                (
                    Code::TEAM_PARTICIPANT_WITH_PATTERN,
                    "/nodes/m1/terminal".into()
                ),
                (
                    Code::TEAM_PARTICIPANT_WITH_PATTERN,
                    "/nodes/m2/advisors".into()
                ),
                (
                    Code::TEAM_PARTICIPANT_WITH_PATTERN,
                    "/nodes/chair/handoff".into()
                ),
            ]
        );
    }

    #[test]
    fn the_slice_must_be_declared_members_present_and_turns_allowed() {
        let d = doc(json!({"members": [], "lead": "chair", "slice": "missing",
                           "lead_max_turns": 0}));
        assert_eq!(
            run(check, d),
            vec![
                (Code::NO_TEAM_MEMBERS, "/nodes/panel/team/members".into()),
                (Code::BAD_TEAM_SLICE, "/nodes/panel/team/slice".into()),
                (
                    Code::TEAM_NO_TURNS,
                    "/nodes/panel/team/lead_max_turns".into()
                ),
            ]
        );
    }
}
