//! Rule 10e: a router is not `terminal` (`PG0816`). A router names its successor in
//! `$route`; `terminal` would be ignored. A router that may end its level says so with
//! `router.may_answer`.

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        if !(n.terminal && n.router.is_some()) {
            continue;
        }
        out.push(
            Diagnostic::new(
                Code::ROUTER_TERMINAL,
                join(["nodes", n.id.as_str(), "terminal"]),
                format!(
                    "router `{}` is `terminal`: a router goes on to the destination it names \
                     in `$route`",
                    n.id
                ),
            )
            .fix(format!(
                "remove `terminal` from `{}`; set `router.may_answer: true` to let it end its \
                 level with `$route: null`",
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
    fn a_terminal_router_is_refused() {
        let mut doc = base();
        doc["nodes"]["a"] = json!({"supervisor": "root"});
        doc["nodes"]["r"] = json!({"supervisor": "root", "router": {"destinations": ["a"]}});
        assert!(run(check, doc.clone()).is_empty());
        doc["nodes"]["r"]["terminal"] = json!(true);
        assert_eq!(
            run(check, doc),
            vec![(Code::ROUTER_TERMINAL, "/nodes/r/terminal".into())]
        );
    }
}
