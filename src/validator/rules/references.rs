//! Rule 1: unknown references. Ids the builder could not resolve (`PG0001`-`PG0003`)
//! and slice names that are not declared (`PG0004`, `PG0005`).

use crate::contracts::pointer::join;
use crate::contracts::{Trigger, slice_of_path};
use crate::graph::BuildError;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for p in ctx.graph.problems() {
        out.push(match p {
            BuildError::Collision(e) => {
                Diagnostic::new(Code::ID_COLLISION, p.pointer(), e.to_string())
                    .fix(format!("rename one of the two contracts called `{}`", e.id))
            }
            BuildError::Unresolved {
                id,
                expected,
                found: None,
                pointer,
            } => Diagnostic::new(
                Code::UNKNOWN_ID,
                pointer.clone(),
                format!("unknown {expected} `{id}`"),
            )
            .fix(format!("declare a {expected} `{id}` or correct the id")),
            BuildError::Unresolved {
                id,
                expected,
                found: Some(kind),
                pointer,
            } => Diagnostic::new(
                Code::WRONG_KIND,
                pointer.clone(),
                format!("`{id}` is a {kind}, but a {expected} is expected here"),
            )
            .fix(format!("name a {expected} here")),
        });
    }

    // Pointers and messages are built only for a finding: this loop sees every slice use.
    let slice = |name: &str, pointer: &dyn Fn() -> String, what: &dyn Fn() -> String| {
        (!ctx.slice_known(name)).then(|| {
            Diagnostic::new(
                Code::UNKNOWN_SLICE,
                pointer(),
                format!("{} names slice `{name}`, which is not declared", what()),
            )
            .fix(format!(
                "declare `{name}` under `slices` or correct the name"
            ))
        })
    };

    for n in ctx.reg.nodes() {
        for (field, list) in [("reads", &n.reads), ("writes", &n.writes)] {
            for (i, s) in list.iter().enumerate() {
                let ptr = || join(["nodes", n.id.as_str(), field, &i.to_string()]);
                let what = || format!("`{field}` of node `{}`", n.id);
                out.extend(slice(s, &ptr, &what));
            }
        }
        if triggers_need_report(ctx, &n.triggers) {
            let base = join(["nodes", n.id.as_str(), "triggers"]);
            triggers(ctx, &n.triggers, &base, &format!("node `{}`", n.id), out);
        }
    }
    for g in ctx.reg.subgraphs() {
        for (field, list) in [("reads", &g.reads), ("writes", &g.writes)] {
            for (i, s) in list.iter().enumerate() {
                let ptr = || join(["subgraphs", g.id.as_str(), field, &i.to_string()]);
                let what = || format!("`{field}` of subgraph `{}`", g.id);
                out.extend(slice(s, &ptr, &what));
            }
        }
        let base = join(["subgraphs", g.id.as_str(), "triggers"]);
        triggers(
            ctx,
            &g.triggers,
            &base,
            &format!("subgraph `{}`", g.id),
            out,
        );
        if let Some(r) = &g.result_slice {
            let ptr = || join(["subgraphs", g.id.as_str(), "result_slice"]);
            let what = || format!("`result_slice` of subgraph `{}`", g.id);
            out.extend(slice(r, &ptr, &what));
        }
    }
}

/// True when some trigger path is malformed or names an undeclared slice (the fast
/// check before pointers are built).
fn triggers_need_report(ctx: &Context<'_>, triggers: &[Trigger]) -> bool {
    let mut bad = false;
    for t in triggers {
        t.when.visit_paths(&mut |p| {
            bad |= slice_of_path(p).is_none_or(|s| !ctx.slice_known(&s));
        });
    }
    bad
}

/// Every trigger path must be a pointer whose first segment is a declared slice.
fn triggers(
    ctx: &Context<'_>,
    triggers: &[Trigger],
    base: &str,
    what: &str,
    out: &mut Vec<Diagnostic>,
) {
    for (i, t) in triggers.iter().enumerate() {
        for (path, rel) in t.when.paths() {
            let ptr = format!("{base}/{i}/when{rel}");
            match slice_of_path(path) {
                None => out.push(
                    Diagnostic::new(
                        Code::BAD_PATH,
                        ptr,
                        format!(
                            "trigger of {what} reads `{path}`, which is not a JSON Pointer \
                             starting with a slice"
                        ),
                    )
                    .fix("write the path as `/slice/...`"),
                ),
                Some(s) if !ctx.slice_known(&s) => out.push(
                    Diagnostic::new(
                        Code::UNKNOWN_SLICE,
                        ptr,
                        format!("trigger of {what} reads slice `{s}`, which is not declared"),
                    )
                    .fix(format!("declare `{s}` under `slices` or correct the path")),
                ),
                Some(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};

    #[test]
    fn valid_base_has_no_findings() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn reports_unknown_and_wrong_kind_ids_from_the_builder() {
        let mut doc = base();
        doc["nodes"]["work"]["supervisor"] = "ghost".into();
        doc["supervisors"]["root"]["fallback"] = "sub".into();
        let found = run(check, doc);
        assert!(found.contains(&(Code::UNKNOWN_ID, "/nodes/work/supervisor".into())));
        assert!(found.contains(&(Code::WRONG_KIND, "/supervisors/root/fallback".into())));
    }

    #[test]
    fn reports_undeclared_slices_everywhere_they_are_named() {
        let mut doc = base();
        doc["nodes"]["work"]["writes"] = serde_json::json!(["out", "nope"]);
        doc["subgraphs"]["sub"]["reads"] = serde_json::json!(["missing"]);
        doc["subgraphs"]["sub"]["result_slice"] = "gone".into();
        doc["nodes"]["reply"]["triggers"] = serde_json::json!([{"when": {"not": {"path": "/x/y", "exists": true}}}, {"when": {"path": "/", "exists": true}}]);
        let found = run(check, doc);
        assert_eq!(
            found,
            vec![
                (Code::UNKNOWN_SLICE, "/nodes/work/writes/1".into()),
                (
                    Code::UNKNOWN_SLICE,
                    "/nodes/reply/triggers/0/when/not/path".into()
                ),
                (Code::BAD_PATH, "/nodes/reply/triggers/1/when/path".into()),
                (Code::UNKNOWN_SLICE, "/subgraphs/sub/reads/0".into()),
                (Code::UNKNOWN_SLICE, "/subgraphs/sub/result_slice".into()),
            ]
        );
    }

    #[test]
    fn system_is_always_known() {
        let mut doc = base();
        doc["nodes"]["work"]["reads"] = serde_json::json!(["request", "system"]);
        assert!(run(check, doc).is_empty());
    }
}
