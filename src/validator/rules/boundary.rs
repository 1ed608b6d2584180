//! Rule 4: subgraph boundaries (`PG0201`-`PG0205`).
//!
//! Member nodes read and write within the boundary; triggers that member supervisors
//! evaluate read only slices the subgraph can see; a nested subgraph's boundary lies
//! within its caller's; the `result_slice` is writable where the caller runs.

use foldhash::{HashSet, HashSetExt};

use crate::contracts::pointer::join;
use crate::contracts::{SYSTEM_SLICE, Trigger, slice_of_path};
use crate::graph::ContractKind;
use crate::validator::{Code, Context, Diagnostic};

/// True for a slice a boundary must list: declared (unknown ones are `PG0004`) and not
/// `system` (readable everywhere, written nowhere: `PG0101`).
fn counts(ctx: &Context<'_>, s: &str) -> bool {
    s != SYSTEM_SLICE && ctx.graph.slices().contains_key(s)
}

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    nodes(ctx, out);
    triggers(ctx, out);
    nested(ctx, out);
}

fn nodes(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let Ok(Some(g)) = ctx.level_of_node(&n.id) else {
            continue;
        };
        let Some(b) = ctx.boundaries.get(g) else {
            continue;
        };
        for (i, s) in n.reads.iter().enumerate() {
            if counts(ctx, s) && !b.visible.contains(s.as_str()) {
                out.push(
                    Diagnostic::new(
                        Code::BOUNDARY_READ,
                        join(["nodes", n.id.as_str(), "reads", &i.to_string()]),
                        format!(
                            "node `{}` reads slice `{s}`, outside the boundary of subgraph `{g}`",
                            n.id
                        ),
                    )
                    .fix(format!("add `{s}` to the `reads` of subgraph `{g}`")),
                );
            }
        }
        for (i, s) in n.writes.iter().enumerate() {
            if counts(ctx, s) && !b.writes.contains(s.as_str()) {
                out.push(
                    Diagnostic::new(
                        Code::BOUNDARY_WRITE,
                        join(["nodes", n.id.as_str(), "writes", &i.to_string()]),
                        format!(
                            "node `{}` writes slice `{s}`, outside the `writes` of subgraph `{g}`",
                            n.id
                        ),
                    )
                    .fix(format!("add `{s}` to the `writes` of subgraph `{g}`")),
                );
            }
        }
    }
}

fn triggers(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(ctx.reg.nodes().len());
    for sup in ctx.reg.supervisors() {
        let Some(g) = ctx.level_of_supervisor(&sup.id) else {
            continue;
        };
        let Some(b) = ctx.boundaries.get(g) else {
            continue;
        };
        for entry in &sup.allow {
            if !seen.insert((g, entry.as_str())) {
                continue;
            }
            let (list, section): (&[Trigger], &str) = match ctx.kind_of(entry) {
                Some(ContractKind::Node) => match ctx.node(entry) {
                    Some(n) => (&n.triggers, "nodes"),
                    None => continue,
                },
                Some(ContractKind::Subgraph) => match ctx.subgraph(entry) {
                    Some(s) => (&s.triggers, "subgraphs"),
                    None => continue,
                },
                _ => continue,
            };
            let mut outside = false;
            for t in list {
                t.when.visit_paths(&mut |p| {
                    outside |= slice_of_path(p)
                        .is_some_and(|s| counts(ctx, &s) && !b.visible.contains(&*s));
                });
            }
            if !outside {
                continue;
            }
            for (i, t) in list.iter().enumerate() {
                for (path, rel) in t.when.paths() {
                    let Some(s) = slice_of_path(path) else {
                        continue;
                    };
                    if counts(ctx, &s) && !b.visible.contains(&*s) {
                        let ptr = format!(
                            "{}/{i}/when{rel}",
                            join([section, entry.as_str(), "triggers"])
                        );
                        out.push(
                            Diagnostic::new(
                                Code::BOUNDARY_TRIGGER,
                                ptr,
                                format!(
                                    "trigger of `{entry}` reads slice `{s}`, which supervisor \
                                     `{}` of subgraph `{g}` cannot see: it can never fire there",
                                    sup.id
                                ),
                            )
                            .fix(format!("add `{s}` to the `reads` of subgraph `{g}`")),
                        );
                    }
                }
            }
        }
    }
}

fn nested(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for g in ctx.reg.subgraphs() {
        let Some(cluster) = ctx.graph.cluster(&g.id) else {
            continue;
        };
        let mut seen: HashSet<&str> = HashSet::new();
        for caller in &cluster.callers {
            let Some(p) = ctx.level_of_supervisor(caller) else {
                continue;
            };
            if p == g.id || !seen.insert(p) {
                continue;
            }
            let Some(pb) = ctx.boundaries.get(p) else {
                continue;
            };
            within(ctx, g.id.as_str(), "reads", &g.reads, p, &pb.visible, out);
            within(ctx, g.id.as_str(), "writes", &g.writes, p, &pb.writes, out);
            if let Some(r) = &g.result_slice
                && counts(ctx, r)
                && !pb.writes.contains(r.as_str())
            {
                out.push(
                    Diagnostic::new(
                        Code::RESULT_SLICE,
                        join(["subgraphs", g.id.as_str(), "result_slice"]),
                        format!(
                            "subgraph `{}` returns into slice `{r}`, but its caller `{caller}` \
                                 runs in subgraph `{p}`, which may not write `{r}`",
                            g.id
                        ),
                    )
                    .fix(format!("add `{r}` to the `writes` of subgraph `{p}`")),
                );
            }
        }
    }
}

fn within(
    ctx: &Context<'_>,
    g: &str,
    field: &str,
    list: &[String],
    parent: &str,
    allowed: &HashSet<&str>,
    out: &mut Vec<Diagnostic>,
) {
    for (i, s) in list.iter().enumerate() {
        if counts(ctx, s) && !allowed.contains(s.as_str()) {
            out.push(
                Diagnostic::new(
                    Code::BOUNDARY_NESTED,
                    join(["subgraphs", g, field, &i.to_string()]),
                    format!(
                        "subgraph `{g}` {field} slice `{s}`, outside the boundary of subgraph \
                         `{parent}` that calls it"
                    ),
                )
                .fix(format!("add `{s}` to the `{field}` of subgraph `{parent}`")),
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
    fn valid_base_has_no_findings() {
        assert!(run(check, base()).is_empty());
    }

    #[test]
    fn member_reads_and_writes_outside_the_boundary() {
        let mut doc = base();
        doc["nodes"]["work"]["reads"] = json!(["request", "out", "answer", "system"]);
        doc["nodes"]["work"]["writes"] = json!(["out", "answer", "undeclared"]);
        assert_eq!(
            run(check, doc),
            vec![
                (Code::BOUNDARY_READ, "/nodes/work/reads/2".into()),
                (Code::BOUNDARY_WRITE, "/nodes/work/writes/1".into()),
            ]
        );
    }

    #[test]
    fn trigger_on_an_invisible_slice_is_reported_once() {
        let mut doc = base();
        doc["nodes"]["work"]["triggers"] =
            json!([{"when": {"all": [{"path": "/answer", "exists": false}]}}]);
        // Root-level evaluation of the same node would be fine; only the member counts.
        assert_eq!(
            run(check, doc),
            vec![(
                Code::BOUNDARY_TRIGGER,
                "/nodes/work/triggers/0/when/all/0/path".into()
            )]
        );
    }

    #[test]
    fn nested_boundary_and_result_slice_within_the_caller() {
        let mut doc = base();
        doc["slices"]["inner_out"] = json!({});
        doc["supervisors"]["sub_sup"]["allow"] = json!(["work", "inner"]);
        doc["supervisors"]["inner_sup"] = json!({"allow": ["deep"]});
        doc["subgraphs"]["inner"] = json!({"entrypoint": "inner_sup", "supervisors": ["inner_sup"],
            "reads": ["request", "answer"], "writes": ["inner_out"], "result_slice": "answer"});
        doc["nodes"]["deep"] = json!({"supervisor": "inner_sup", "writes": ["inner_out"]});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::BOUNDARY_NESTED, "/subgraphs/inner/reads/1".into()),
                (Code::BOUNDARY_NESTED, "/subgraphs/inner/writes/0".into()),
                (Code::RESULT_SLICE, "/subgraphs/inner/result_slice".into()),
            ]
        );
    }
}
