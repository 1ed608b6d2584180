//! Rule: clarifying finished children (`PG0840`-`PG0841`).
//!
//! A supervisor whose `default` is `clarify` asks a subgraph a follow-up whenever no
//! trigger matches. The subgraph must be one it may call (in its `allow`) and `chat`
//! (only a `chat` subgraph's final state is kept): anything else would fail every time
//! with `clarify_unavailable`, so it is an error. A `chat` subgraph whose boundary does not
//! read `clarification` keeps the question from its nodes (they may read only boundary
//! slices): a warning.

use crate::contracts::pointer::join;
use crate::contracts::{CLARIFICATION_SLICE, RoutingDecision};
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for s in ctx.reg.supervisors() {
        let Some(RoutingDecision::Clarify(c)) = &s.default else {
            continue;
        };
        let id = c.subgraph.as_str();
        let problem = match ctx.reg.get_subgraph(id) {
            None => Some(format!("`{id}` is not a subgraph")),
            Some(_) if !s.allow.iter().any(|a| a == id) => Some(format!(
                "subgraph `{id}` is not in the allowlist of `{}`",
                s.id
            )),
            Some(g) if !g.chat => Some(format!(
                "subgraph `{id}` is not `chat`, so nothing of it is kept to clarify"
            )),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            out.push(
                Diagnostic::new(
                    Code::CLARIFY_UNAVAILABLE,
                    join([
                        "supervisors",
                        s.id.as_str(),
                        "default",
                        "clarify",
                        "subgraph",
                    ]),
                    format!(
                        "supervisor `{}` clarifies by default, but {problem}: every such \
                         decision would end in `clarify_unavailable`",
                        s.id
                    ),
                )
                .fix(format!(
                    "name a subgraph in `allow` and set `\"chat\": true` on it (subgraph `{id}`)"
                )),
            );
        }
    }
    for g in ctx.reg.subgraphs() {
        if g.chat && !g.reads.iter().any(|r| r == CLARIFICATION_SLICE) {
            out.push(
                Diagnostic::new(
                    Code::CHAT_WITHOUT_CLARIFICATION,
                    join(["subgraphs", g.id.as_str(), "reads"]),
                    format!(
                        "subgraph `{}` is `chat`, but its boundary does not read \
                         `clarification`: its nodes cannot see a follow-up question",
                        g.id
                    ),
                )
                .fix("add \"clarification\" to the subgraph's `reads` (and declare the slice)"),
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
    fn workflows_without_chat_pass() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn a_clarify_default_must_name_an_allowed_chat_subgraph() {
        let ptr = "/supervisors/root/default/clarify/subgraph".to_string();
        let mut doc = base();
        doc["supervisors"]["root"]["default"] =
            json!({"clarify": {"subgraph": "sub", "question": "more?"}});
        assert_eq!(
            run(check, doc.clone()),
            vec![(Code::CLARIFY_UNAVAILABLE, ptr.clone())],
            "not chat"
        );
        doc["subgraphs"]["sub"]["chat"] = json!(true);
        doc["slices"]["clarification"] = json!({});
        doc["subgraphs"]["sub"]["reads"] = json!(["request", "clarification"]);
        assert!(run(check, doc.clone()).is_empty());
        doc["supervisors"]["root"]["allow"] = json!(["reply"]);
        assert_eq!(
            run(check, doc.clone()),
            vec![(Code::CLARIFY_UNAVAILABLE, ptr.clone())],
            "not allowed"
        );
        doc["supervisors"]["root"]["default"] =
            json!({"clarify": {"subgraph": "reply", "question": "more?"}});
        assert_eq!(
            run(check, doc),
            vec![(Code::CLARIFY_UNAVAILABLE, ptr)],
            "a node"
        );
    }

    #[test]
    fn a_chat_subgraph_should_read_clarification() {
        let mut doc = base();
        doc["subgraphs"]["sub"]["chat"] = json!(true);
        assert_eq!(
            run(check, doc),
            vec![(
                Code::CHAT_WITHOUT_CLARIFICATION,
                "/subgraphs/sub/reads".into()
            )]
        );
    }
}
