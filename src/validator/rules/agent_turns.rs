//! Rule 12e: an agent's `max_turns` is at least 1 (`PG1210`).

use super::agent_sites::agents;
use crate::contracts::AgentSpec;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for site in agents(ctx) {
        if site.spec.max_turns == Some(0) {
            out.push(
                Diagnostic::new(
                    Code::ZERO_TURNS,
                    site.field("max_turns"),
                    format!(
                        "{} has `max_turns: 0`: it could never call its model",
                        site.who()
                    ),
                )
                .fix(format!(
                    "set `max_turns` to 1 or more, or remove it (default {})",
                    AgentSpec::DEFAULT_MAX_TURNS
                )),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{agents, run};
    use serde_json::json;

    #[test]
    fn one_turn_is_enough_and_zero_is_refused() {
        let mut doc = agents();
        doc["nodes"]["reply"]["run"]["agent"]["max_turns"] = json!(1);
        assert!(run(check, doc.clone()).is_empty());
        doc["nodes"]["reply"]["run"]["agent"]["max_turns"] = json!(0);
        doc["supervisors"]["root"]["policy"] = json!({"agent": {"max_turns": 0}});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::ZERO_TURNS, "/nodes/reply/run/agent/max_turns".into()),
                (
                    Code::ZERO_TURNS,
                    "/supervisors/root/policy/agent/max_turns".into()
                ),
            ]
        );
    }
}
