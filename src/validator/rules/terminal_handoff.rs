//! Rule 10b (run after the handoff rule): a node is not both `terminal` and handing off
//! (`PG0804`). The runtime follows the handoff, so `terminal` would be silently ignored.

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let (true, Some(t)) = (n.terminal, n.handoff.as_deref()) else {
            continue;
        };
        out.push(
            Diagnostic::new(
                Code::TERMINAL_HANDOFF,
                join(["nodes", n.id.as_str(), "terminal"]),
                format!(
                    "node `{}` is `terminal` and hands off to `{t}`: a node either ends its \
                     level or hands off, not both",
                    n.id
                ),
            )
            .fix(format!(
                "remove `terminal` from `{}` (make the chain's last stage terminal instead) or \
                 remove its `handoff`",
                n.id
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::json;

    #[test]
    fn a_chain_ending_in_a_terminal_node_is_fine() {
        let mut doc = base();
        doc["nodes"]["a"] = json!({"supervisor": "root", "handoff": "b"});
        doc["nodes"]["b"] = json!({"supervisor": "root", "terminal": true});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn terminal_with_handoff_is_refused() {
        let mut doc = base();
        doc["nodes"]["a"] = json!({"supervisor": "root", "handoff": "b", "terminal": true});
        doc["nodes"]["b"] = json!({"supervisor": "root", "terminal": true});
        assert_eq!(
            run(check, doc.clone()),
            vec![(Code::TERMINAL_HANDOFF, "/nodes/a/terminal".into())]
        );
        let g = crate::validator::rules::testing::graph(doc);
        let r = crate::validator::Validator::new().validate(&g);
        let d = r
            .with_code(Code::TERMINAL_HANDOFF)
            .next()
            .expect("reported");
        assert!(
            d.message.contains("`a` is `terminal` and hands off to `b`"),
            "{}",
            d.message
        );
        assert_eq!(d.severity, crate::validator::Severity::Error);
        assert!(
            d.fix
                .as_deref()
                .is_some_and(|f| f.contains("remove `terminal` from `a`")),
            "{:?}",
            d.fix
        );
    }
}
