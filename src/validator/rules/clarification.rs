//! Rule 3: a supervisor that can decide `ask_clarification` needs a declared
//! `clarification` slice, where `resume` puts the answer (`PG0102`).
//!
//! A supervisor whose `default` is `ask_clarification` will ask whenever no trigger
//! matches: without the slice the run pauses and can never be resumed, so that is a
//! warning. A supervisor with a `policy` (an exec program or a handler) may ask but need
//! not, and most never do, so that is information only. An `agent` policy is offered
//! `ask_clarification` only when the slice is declared, so it needs none.

use crate::contracts::pointer::join;
use crate::contracts::{CLARIFICATION_SLICE, RoutingDecision, SupervisorPolicy};
use crate::validator::{Code, Context, Diagnostic, Severity};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    if ctx.graph.slices().contains_key(CLARIFICATION_SLICE) {
        return;
    }
    let fix = "declare it: \"slices\": {\"clarification\": {}, ...}";
    for s in ctx.reg.supervisors() {
        if let Some(RoutingDecision::AskClarification(_)) = &s.default {
            let ptr = join(["supervisors", s.id.as_str(), "default"]);
            let msg = format!(
                "supervisor `{}` asks for clarification by default, but no `clarification` \
                 slice is declared: the run would pause and could not be resumed",
                s.id
            );
            out.push(Diagnostic::new(Code::NO_CLARIFICATION_SLICE, ptr, msg).fix(fix));
        } else if s
            .policy
            .as_ref()
            .is_some_and(|p| !matches!(p, SupervisorPolicy::Agent(_)))
        {
            let ptr = join(["supervisors", s.id.as_str(), "policy"]);
            let msg = format!(
                "supervisor `{}` has a policy, which may decide `ask_clarification`, but no \
                 `clarification` slice is declared: such a run could not be resumed",
                s.id
            );
            out.push(
                Diagnostic::new(Code::NO_CLARIFICATION_SLICE, ptr, msg)
                    .fix(format!("if the policy can ask, {fix}"))
                    .severity(Severity::Info),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, graph, run};

    #[test]
    fn supervisors_that_cannot_ask_need_no_slice() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn an_asking_default_without_the_slice_is_a_warning() {
        let mut doc = base();
        doc["supervisors"]["sub_sup"]["default"] =
            serde_json::json!({"ask_clarification": {"question": "which size?"}});
        assert_eq!(
            run(check, doc.clone()),
            vec![(
                Code::NO_CLARIFICATION_SLICE,
                "/supervisors/sub_sup/default".into()
            )]
        );
        let g = graph(doc);
        let ctx = Context::new(&g);
        let mut found = Vec::new();
        check(&ctx, &mut found);
        assert_eq!(found[0].severity, Severity::Warning);
        assert!(
            found[0].message.contains("`sub_sup`"),
            "{}",
            found[0].message
        );
        assert!(
            found[0]
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("clarification"))
        );
    }

    #[test]
    fn a_policy_without_the_slice_is_information() {
        let mut doc = base();
        doc["supervisors"]["root"]["policy"] = serde_json::json!({"handler": "route"});
        // An asking default and a policy on one supervisor: the certain case wins.
        doc["supervisors"]["sub_sup"]["policy"] = serde_json::json!({"handler": "route"});
        doc["supervisors"]["sub_sup"]["default"] =
            serde_json::json!({"ask_clarification": {"question": "q"}});
        let g = graph(doc);
        let ctx = Context::new(&g);
        let mut found = Vec::new();
        check(&ctx, &mut found);
        let got: Vec<_> = found
            .iter()
            .map(|d| (d.pointer.as_str(), d.severity))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/supervisors/root/policy", Severity::Info),
                ("/supervisors/sub_sup/default", Severity::Warning),
            ]
        );
    }

    #[test]
    fn a_declared_clarification_slice_satisfies_both() {
        let mut doc = base();
        doc["slices"]["clarification"] = serde_json::json!({});
        doc["supervisors"]["root"]["policy"] = serde_json::json!({"handler": "route"});
        doc["supervisors"]["sub_sup"]["default"] =
            serde_json::json!({"ask_clarification": {"question": "q"}});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn an_agent_policy_is_never_offered_to_ask_without_the_slice() {
        let mut doc = base();
        doc["supervisors"]["sub_sup"]["policy"] = serde_json::json!({"agent": {}});
        assert!(run(check, doc).is_empty());
    }
}
