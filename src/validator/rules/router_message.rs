//! Rule 10d: a router's `message_slice` (`PG0814`, `PG0815`). The slice `$message` is
//! written to is declared (and is not the reserved `system`); every destination reads it
//! (a node in its `reads`, a subgraph in its boundary's `reads`), else the message is
//! delivered to nobody there (warning).

use crate::contracts::SYSTEM_SLICE;
use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let Some(r) = &n.router else { continue };
        let Some(slice) = r.message_slice.as_deref() else {
            continue;
        };
        let id = n.id.as_str();
        if slice == SYSTEM_SLICE || !ctx.slice_known(slice) {
            let why = if slice == SYSTEM_SLICE {
                "the reserved slice `system`, which only the runtime writes"
            } else {
                "not a declared slice"
            };
            out.push(
                Diagnostic::new(
                    Code::ROUTER_MESSAGE_SLICE,
                    join(["nodes", id, "router", "message_slice"]),
                    format!("router `{id}` delivers `$message` to `{slice}`, {why}"),
                )
                .fix(format!(
                    "declare a slice for the message under `slices` (say `\"{}\": {{}}`) and \
                     name it in `router.message_slice`",
                    if slice == SYSTEM_SLICE {
                        "route_note"
                    } else {
                        slice
                    }
                )),
            );
            continue;
        }
        for (i, d) in r.destinations.iter().enumerate() {
            let reads = match (ctx.node(d), ctx.subgraph(d)) {
                (Some(node), _) => &node.reads,
                (None, Some(sg)) => &sg.reads,
                (None, None) => continue,
            };
            if reads.iter().any(|s| s == slice) {
                continue;
            }
            let what = if ctx.node(d).is_some() {
                "node"
            } else {
                "subgraph"
            };
            out.push(
                Diagnostic::new(
                    Code::ROUTER_MESSAGE_UNREAD,
                    format!("{}/{i}", join(["nodes", id, "router", "destinations"])),
                    format!(
                        "router `{id}` delivers its `$message` in `{slice}`, which destination \
                         {what} `{d}` does not read"
                    ),
                )
                .fix(format!("add `{slice}` to the `reads` of {what} `{d}`")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, graph, run};
    use serde_json::json;

    fn routed(slice: &str, a_reads: serde_json::Value) -> serde_json::Value {
        let mut doc = base();
        doc["slices"]["note"] = json!({});
        doc["supervisors"]["root"]["allow"] = json!(["sub", "reply", "r"]);
        doc["nodes"]["r"] = json!({"supervisor": "root", "triggers": [{"when": true}],
            "router": {"destinations": ["a", "sub"], "message_slice": slice}});
        doc["nodes"]["a"] = json!({"supervisor": "root", "reads": a_reads});
        doc["subgraphs"]["sub"]["reads"] = json!(["request", "note"]);
        doc
    }

    #[test]
    fn a_message_slice_read_by_every_destination_is_fine() {
        assert!(run(check, routed("note", json!(["note"]))).is_empty());
    }

    #[test]
    fn an_undeclared_or_reserved_message_slice_is_refused() {
        for slice in ["nope", "system"] {
            assert_eq!(
                run(check, routed(slice, json!([]))),
                vec![(
                    Code::ROUTER_MESSAGE_SLICE,
                    "/nodes/r/router/message_slice".into()
                )]
            );
        }
    }

    #[test]
    fn a_destination_not_reading_the_message_is_warned() {
        let doc = routed("note", json!([]));
        assert_eq!(
            run(check, doc.clone()),
            vec![(
                Code::ROUTER_MESSAGE_UNREAD,
                "/nodes/r/router/destinations/0".into()
            )]
        );
        let r = crate::validator::Validator::new().validate(&graph(doc));
        let d = r
            .with_code(Code::ROUTER_MESSAGE_UNREAD)
            .next()
            .expect("reported");
        assert_eq!(d.severity, crate::validator::Severity::Warning);
        assert!(
            d.fix
                .as_deref()
                .is_some_and(|f| f.contains("add `note` to the `reads` of node `a`"))
        );
    }
}
