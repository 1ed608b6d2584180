//! Rule 12: budgets (`PG1001`-`PG1004`). Zero values that make a run impossible are
//! errors; absurdly large values, zero timeouts and `max_visits: 0` are warnings.

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

/// Beyond these a budget no longer bounds anything useful.
const MAX_STEPS: u32 = 1_000_000;
const MAX_DEPTH: u32 = 64;
const MAX_REENTRY: u32 = 10_000;

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let b = ctx.graph.budgets();
    let has_subgraphs = ctx.reg.subgraphs().len() > 0;
    if b.max_steps == 0 {
        out.push(
            Diagnostic::new(
                Code::ZERO_STEPS,
                "/budgets/max_steps",
                "`max_steps` is 0: no step can ever run",
            )
            .fix(format!(
                "remove it (default {}) or set a positive value",
                crate::Budgets::DEFAULT_MAX_STEPS
            )),
        );
    }
    if b.max_depth == 0 && has_subgraphs {
        out.push(
            Diagnostic::new(
                Code::ZERO_DEPTH,
                "/budgets/max_depth",
                "`max_depth` is 0 but the workflow has subgraphs: none can ever be entered",
            )
            .fix("set `max_depth` to the nesting the workflow needs"),
        );
    }
    if b.max_reentry == 0 && has_subgraphs {
        out.push(
            Diagnostic::new(
                Code::ZERO_REENTRY,
                "/budgets/max_reentry",
                "`max_reentry` is 0 but the workflow has subgraphs: entering any is a cycle",
            )
            .fix("set `max_reentry` to at least 1"),
        );
    }
    for g in ctx.reg.subgraphs() {
        if g.max_reentry == Some(0) {
            out.push(
                Diagnostic::new(
                    Code::ZERO_REENTRY,
                    join(["subgraphs", g.id.as_str(), "max_reentry"]),
                    format!(
                        "`max_reentry` of subgraph `{}` is 0: it can never be entered",
                        g.id
                    ),
                )
                .fix("set it to at least 1, or remove it to use the run's"),
            );
        }
    }
    let absurd = |field: &str, value: u64, limit: u64, out: &mut Vec<Diagnostic>| {
        if value > limit {
            out.push(
                Diagnostic::new(
                    Code::ABSURD_BUDGET,
                    format!("/budgets/{field}"),
                    format!("`{field}` is {value}, more than {limit}: it no longer bounds the run"),
                )
                .fix(format!("use a value of at most {limit}")),
            );
        }
    };
    absurd("max_steps", b.max_steps.into(), MAX_STEPS.into(), out);
    absurd("max_depth", b.max_depth.into(), MAX_DEPTH.into(), out);
    absurd("max_reentry", b.max_reentry.into(), MAX_REENTRY.into(), out);
    for (field, v) in [
        ("timeout_ms", b.timeout_ms),
        ("node_timeout_ms", b.node_timeout_ms),
    ] {
        if v == Some(0) {
            out.push(
                Diagnostic::new(
                    Code::ABSURD_BUDGET,
                    format!("/budgets/{field}"),
                    format!("`{field}` is 0: everything times out at once"),
                )
                .fix("set a positive value or remove it"),
            );
        }
    }
    usage_budgets(b, out);
    for n in ctx.reg.nodes() {
        if n.max_visits == Some(0) {
            out.push(
                Diagnostic::new(
                    Code::ABSURD_BUDGET,
                    join(["nodes", n.id.as_str(), "max_visits"]),
                    format!("`max_visits` of node `{}` is 0: it can never run", n.id),
                )
                .fix("set it to at least 1 or remove the node"),
            );
        }
    }
}

/// `max_tokens` and `max_cost_usd` must leave room for a step: no step starts once the
/// usage has reached the limit, so a limit of 0 (or less) stops the run before its first.
fn usage_budgets(b: &crate::Budgets, out: &mut Vec<Diagnostic>) {
    if b.max_tokens == Some(0) {
        out.push(
            Diagnostic::new(
                Code::ZERO_USAGE_BUDGET,
                "/budgets/max_tokens",
                "`max_tokens` is 0: no step can ever run",
            )
            .fix("set the most tokens (input plus output) the run may use, or remove it"),
        );
    }
    if let Some(usd) = b.max_cost_usd
        && usd <= 0.0
    {
        out.push(
            Diagnostic::new(
                Code::ZERO_USAGE_BUDGET,
                "/budgets/max_cost_usd",
                format!("`max_cost_usd` is {usd}: no step can ever run"),
            )
            .fix("set the most the run may spend, in US dollars, above 0, or remove it"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::json;

    #[test]
    fn defaults_pass() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn usage_budgets_must_be_positive() {
        let mut doc = base();
        doc["budgets"] = json!({"max_tokens": 0, "max_cost_usd": -0.5});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::ZERO_USAGE_BUDGET, "/budgets/max_tokens".into()),
                (Code::ZERO_USAGE_BUDGET, "/budgets/max_cost_usd".into()),
            ]
        );
        let mut doc = base();
        doc["budgets"] = json!({"max_tokens": 1000, "max_cost_usd": 0.25});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn zero_and_absurd_values() {
        let mut doc = base();
        doc["budgets"] = json!({"max_steps": 0, "max_depth": 0, "max_reentry": 0, "timeout_ms": 0});
        doc["subgraphs"]["sub"]["max_reentry"] = 0.into();
        doc["nodes"]["work"]["max_visits"] = 0.into();
        assert_eq!(
            run(check, doc),
            vec![
                (Code::ZERO_STEPS, "/budgets/max_steps".into()),
                (Code::ZERO_DEPTH, "/budgets/max_depth".into()),
                (Code::ZERO_REENTRY, "/budgets/max_reentry".into()),
                (Code::ZERO_REENTRY, "/subgraphs/sub/max_reentry".into()),
                (Code::ABSURD_BUDGET, "/budgets/timeout_ms".into()),
                (Code::ABSURD_BUDGET, "/nodes/work/max_visits".into()),
            ]
        );
        let mut doc = base();
        doc["budgets"] = json!({"max_steps": 5_000_000u32, "max_depth": 100});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::ABSURD_BUDGET, "/budgets/max_steps".into()),
                (Code::ABSURD_BUDGET, "/budgets/max_depth".into()),
            ]
        );
    }

    #[test]
    fn zero_depth_without_subgraphs_is_fine() {
        let mut doc = base();
        doc["subgraphs"] = json!({});
        doc["supervisors"]["root"]["allow"] = json!(["reply"]);
        doc["budgets"] = json!({"max_depth": 0});
        assert!(run(check, doc).is_empty());
    }
}
