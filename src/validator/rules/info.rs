//! Rule 13: information (`PG1101`, `PG1102`). Slices written by several nodes, and
//! slices written but never read (by a node, a trigger or a subgraph boundary).

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::borrow::Cow;

use crate::contracts::pointer::join;
use crate::contracts::slice_of_path;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut writers: HashMap<&str, (usize, Vec<&str>)> = HashMap::new();
    let mut read: HashSet<Cow<'_, str>> = HashSet::new();
    for n in ctx.reg.nodes() {
        for s in &n.writes {
            let w = writers.entry(s.as_str()).or_default();
            w.0 += 1;
            if w.1.len() < 3 {
                w.1.push(n.id.as_str());
            }
        }
        read.extend(n.reads.iter().map(|s| Cow::Borrowed(s.as_str())));
        for t in &n.triggers {
            t.when.visit_paths(&mut |p| read.extend(slice_of_path(p)));
        }
    }
    for g in ctx.reg.subgraphs() {
        read.extend(g.reads.iter().map(|s| Cow::Borrowed(s.as_str())));
        for t in &g.triggers {
            t.when.visit_paths(&mut |p| read.extend(slice_of_path(p)));
        }
    }
    for name in ctx.graph.slices().keys() {
        let Some((count, first)) = writers.get(name.as_str()) else {
            continue;
        };
        let ptr = join(["slices", name.as_str()]);
        if *count > 1 {
            let more = if *count > first.len() { ", ..." } else { "" };
            out.push(Diagnostic::new(
                Code::SHARED_WRITE,
                ptr.clone(),
                format!(
                    "slice `{name}` is written by {count} nodes (`{}`{more}); the last write wins",
                    first.join("`, `")
                ),
            ));
        }
        if !read.contains(name.as_str()) {
            out.push(Diagnostic::new(
                Code::WRITE_ONLY,
                ptr,
                format!(
                    "slice `{name}` is written but never read (it is part of the final state only)"
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::json;

    #[test]
    fn base_only_has_its_write_only_answer() {
        assert_eq!(
            run(check, base()),
            vec![(Code::WRITE_ONLY, "/slices/answer".into())]
        );
    }

    #[test]
    fn shared_writes_are_counted() {
        let mut doc = base();
        doc["nodes"]["reply"]["writes"] = json!(["answer", "out"]);
        doc["nodes"]["more"] =
            json!({"supervisor": "root", "writes": ["answer"], "reads": ["answer"]});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::SHARED_WRITE, "/slices/out".into()),
                (Code::SHARED_WRITE, "/slices/answer".into()),
            ]
        );
    }
}
