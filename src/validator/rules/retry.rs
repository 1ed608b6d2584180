//! Rule 12b: node retry policies (`PG1005`, `PG1006`). A policy that allows no attempt is
//! an error (the node could never run); one that can never retry is a warning (it says
//! something the runtime will not do).

use crate::contracts::NodeBehaviour;
use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let Some(policy) = &n.retry else {
            continue;
        };
        let id = n.id.as_str();
        if policy.max_attempts == 0 {
            out.push(
                Diagnostic::new(
                    Code::ZERO_ATTEMPTS,
                    join(["nodes", id, "retry", "max_attempts"]),
                    format!("node `{id}` has `retry.max_attempts: 0`: it could never run"),
                )
                .fix("set `max_attempts` to the attempts in all, the first included (1: no retry)"),
            );
            continue;
        }
        let why = if policy.on.is_empty() {
            Some(("on", "`retry.on` is empty: no failure is retried"))
        } else if policy.max_attempts == 1 {
            Some((
                "max_attempts",
                "`retry.max_attempts` is 1: the first attempt is the only one",
            ))
        } else if matches!(n.run, None | Some(NodeBehaviour::Set(_))) {
            Some((
                "",
                "it runs no handler or program (no `run`, or `set`), so it cannot fail",
            ))
        } else {
            None
        };
        if let Some((field, why)) = why {
            let pointer = if field.is_empty() {
                join(["nodes", id, "retry"])
            } else {
                join(["nodes", id, "retry", field])
            };
            out.push(
                Diagnostic::new(
                    Code::RETRY_NEVER,
                    pointer,
                    format!("node `{id}` has a `retry` policy that never retries: {why}"),
                )
                .fix("remove `retry`, or give it `max_attempts` above 1 and the failures to retry"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::json;

    fn with_retry(retry: serde_json::Value, behaviour: serde_json::Value) -> serde_json::Value {
        let mut doc = base();
        doc["nodes"]["work"]["retry"] = retry;
        doc["nodes"]["work"]["run"] = behaviour;
        doc
    }

    fn exec() -> serde_json::Value {
        json!({"exec": {"argv": ["python3", "w.py"]}})
    }

    #[test]
    fn a_policy_that_retries_is_fine() {
        let doc = with_retry(json!({"max_attempts": 3, "backoff_ms": 10}), exec());
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn zero_attempts_is_an_error() {
        let doc = with_retry(json!({"max_attempts": 0}), exec());
        assert_eq!(
            run(check, doc),
            vec![(Code::ZERO_ATTEMPTS, "/nodes/work/retry/max_attempts".into())]
        );
    }

    #[test]
    fn policies_that_never_retry_are_warnings() {
        let cases = [
            (
                json!({"max_attempts": 3, "on": []}),
                exec(),
                "/nodes/work/retry/on",
            ),
            (
                json!({"max_attempts": 1}),
                exec(),
                "/nodes/work/retry/max_attempts",
            ),
            (
                json!({"max_attempts": 2}),
                json!({"set": {"out": 1}}),
                "/nodes/work/retry",
            ),
        ];
        for (retry, behaviour, pointer) in cases {
            assert_eq!(
                run(check, with_retry(retry, behaviour)),
                vec![(Code::RETRY_NEVER, pointer.to_string())]
            );
        }
    }
}
