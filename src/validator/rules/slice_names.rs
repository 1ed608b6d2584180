//! Rule 3b (run after the clarification rule): slice names beginning with `$` are
//! reserved for the node output envelope (`PG0103`). A node's output object holds its
//! slice writes and the reserved keys (`$usage`, `$route`, ...) side by side, so a slice
//! named `$...` could not be told apart from them.

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for name in ctx.graph.slices().keys() {
        if name.starts_with('$') {
            out.push(
                Diagnostic::new(
                    Code::RESERVED_SLICE_NAME,
                    join(["slices", name.as_str()]),
                    format!(
                        "slice `{name}` begins with `$`, which is reserved for the keys of a \
                         node's output envelope (`$usage`, `$route`, ...)"
                    ),
                )
                .fix(format!(
                    "rename the slice (for example `{}`) here and wherever it is named",
                    name.trim_start_matches('$')
                )),
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
    fn ordinary_names_pass() {
        let mut doc = base();
        doc["slices"]["cost$"] = json!({});
        doc["slices"]["a$b"] = json!({});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn every_dollar_slice_is_reported_at_its_declaration() {
        let mut doc = base();
        doc["slices"]["$usage"] = json!({});
        doc["slices"]["$x/y"] = json!({});
        assert_eq!(
            run(check, doc.clone()),
            vec![
                (Code::RESERVED_SLICE_NAME, "/slices/$usage".into()),
                (Code::RESERVED_SLICE_NAME, "/slices/$x~1y".into()),
            ]
        );
        let g = crate::validator::rules::testing::graph(doc);
        let r = crate::validator::Validator::new().validate(&g);
        let d = r
            .with_code(Code::RESERVED_SLICE_NAME)
            .next()
            .expect("reported");
        assert!(
            d.message.contains("slice `$usage` begins with `$`"),
            "{}",
            d.message
        );
        assert!(
            d.fix.as_deref().is_some_and(|f| f.contains("`usage`")),
            "{:?}",
            d.fix
        );
    }
}
