//! Rule 2: the reserved slice `system` is never written (`PG0101`).

use crate::contracts::pointer::join;
use crate::contracts::{NodeBehaviour, SYSTEM_SLICE};
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let diag = |ptr: String, what: String| {
        Diagnostic::new(
            Code::SYSTEM_WRITE,
            ptr,
            format!("{what} writes the reserved slice `system`"),
        )
        .fix("remove `system` here; it belongs to the runtime (nodes may read it)")
    };
    for n in ctx.reg.nodes() {
        for (i, s) in n.writes.iter().enumerate() {
            if s == SYSTEM_SLICE {
                let ptr = join(["nodes", n.id.as_str(), "writes", &i.to_string()]);
                out.push(diag(ptr, format!("node `{}`", n.id)));
            }
        }
        if let Some(NodeBehaviour::Set(map)) = &n.run
            && map.contains_key(SYSTEM_SLICE)
        {
            let ptr = join(["nodes", n.id.as_str(), "run", "set", SYSTEM_SLICE]);
            out.push(diag(ptr, format!("the `set` behaviour of node `{}`", n.id)));
        }
    }
    for g in ctx.reg.subgraphs() {
        for (i, s) in g.writes.iter().enumerate() {
            if s == SYSTEM_SLICE {
                let ptr = join(["subgraphs", g.id.as_str(), "writes", &i.to_string()]);
                out.push(diag(ptr, format!("subgraph `{}`", g.id)));
            }
        }
        if g.result_slice.as_deref() == Some(SYSTEM_SLICE) {
            let ptr = join(["subgraphs", g.id.as_str(), "result_slice"]);
            out.push(diag(ptr, format!("the result of subgraph `{}`", g.id)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};

    #[test]
    fn reads_of_system_are_fine() {
        let mut doc = base();
        doc["nodes"]["work"]["reads"] = serde_json::json!(["system"]);
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn every_write_of_system_is_reported() {
        let mut doc = base();
        doc["nodes"]["work"]["writes"] = serde_json::json!(["out", "system"]);
        doc["nodes"]["reply"]["run"] = serde_json::json!({"set": {"system": 1}});
        doc["subgraphs"]["sub"]["writes"] = serde_json::json!(["system"]);
        doc["subgraphs"]["sub"]["result_slice"] = "system".into();
        assert_eq!(
            run(check, doc),
            vec![
                (Code::SYSTEM_WRITE, "/nodes/work/writes/1".into()),
                (Code::SYSTEM_WRITE, "/nodes/reply/run/set/system".into()),
                (Code::SYSTEM_WRITE, "/subgraphs/sub/writes/0".into()),
                (Code::SYSTEM_WRITE, "/subgraphs/sub/result_slice".into()),
            ]
        );
    }
}
