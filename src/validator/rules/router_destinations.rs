//! Rule 10c: a router's destinations (`PG0810`-`PG0813`). A router names at least one
//! destination, each once, never itself, and each destination node is owned at the
//! router's level (it runs there, as the next stage of the router's chain). Unknown ids
//! are `PG0002` (the graph builder resolves them). When the router declares an
//! `output_schema` and a destination node an `input_schema`, the hop is proved as a
//! handoff's is (`PG0803`, `PG0805`).

use foldhash::{HashSet, HashSetExt};

use super::handoff::hop_fit;
use crate::contracts::pointer::join;
use crate::graph::ContractKind;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for n in ctx.reg.nodes() {
        let Some(r) = &n.router else { continue };
        let id = n.id.as_str();
        if r.destinations.is_empty() {
            out.push(
                Diagnostic::new(
                    Code::ROUTER_NO_DESTINATIONS,
                    join(["nodes", id, "router", "destinations"]),
                    format!("router `{id}` has no destinations: it can never route"),
                )
                .fix(format!(
                    "list the nodes or subgraphs `{id}` may name in `$route` under \
                     `router.destinations`, or remove `router`"
                )),
            );
            continue;
        }
        let mut seen = HashSet::with_capacity(r.destinations.len());
        for (i, d) in r.destinations.iter().enumerate() {
            let ptr = || format!("{}/{i}", join(["nodes", id, "router", "destinations"]));
            if !seen.insert(d.as_str()) {
                out.push(
                    Diagnostic::new(
                        Code::ROUTER_DUPLICATE_DESTINATION,
                        ptr(),
                        format!("router `{id}` lists destination `{d}` more than once"),
                    )
                    .fix(format!("remove the repeated `{d}`")),
                );
                continue;
            }
            if d == id {
                out.push(
                    Diagnostic::new(
                        Code::ROUTER_SELF_DESTINATION,
                        ptr(),
                        format!("router `{id}` lists itself as a destination"),
                    )
                    .fix(format!(
                        "remove `{id}` from its destinations; an invalid route already runs \
                         the router again (`router.retries`)"
                    )),
                );
                continue;
            }
            if ctx.kind_of(d) != Some(ContractKind::Node) {
                continue;
            }
            if let (Ok(from), Ok(to)) = (ctx.level_of_node(id), ctx.level_of_node(d))
                && from != to
            {
                let name = |l: Option<&str>| {
                    l.map_or("the root level".into(), |g| format!("subgraph `{g}`"))
                };
                out.push(
                    Diagnostic::new(
                        Code::ROUTER_OTHER_LEVEL,
                        ptr(),
                        format!(
                            "router `{id}` ({}) routes to node `{d}`, which is owned by {}",
                            name(from),
                            name(to)
                        ),
                    )
                    .fix(
                        "route only to nodes of the router's level; name the other level's \
                         subgraph as the destination instead",
                    ),
                );
            }
            if let (Some(target), Some(up), Some(down)) = (
                ctx.node(d),
                n.output_schema.as_ref(),
                ctx.node(d).and_then(|t| t.input_schema.as_ref()),
            ) {
                hop_fit(n, target, up, down, "routes to", &ptr, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, graph, run};
    use serde_json::json;

    fn routed(router: serde_json::Value) -> serde_json::Value {
        let mut doc = base();
        doc["supervisors"]["root"]["allow"] = json!(["sub", "reply", "r"]);
        doc["nodes"]["r"] = json!({"supervisor": "root", "router": router,
            "triggers": [{"when": true}]});
        doc["nodes"]["a"] = json!({"supervisor": "root"});
        doc
    }

    #[test]
    fn a_router_to_a_node_and_a_subgraph_is_fine() {
        assert!(run(check, routed(json!({"destinations": ["a", "sub"]}))).is_empty());
    }

    #[test]
    fn empty_duplicate_and_self_destinations_are_refused() {
        assert_eq!(
            run(check, routed(json!({"destinations": []}))),
            vec![(
                Code::ROUTER_NO_DESTINATIONS,
                "/nodes/r/router/destinations".into()
            )]
        );
        assert_eq!(
            run(check, routed(json!({"destinations": ["a", "r", "a"]}))),
            vec![
                (
                    Code::ROUTER_SELF_DESTINATION,
                    "/nodes/r/router/destinations/1".into()
                ),
                (
                    Code::ROUTER_DUPLICATE_DESTINATION,
                    "/nodes/r/router/destinations/2".into()
                ),
            ]
        );
        let g = graph(routed(json!({"destinations": []})));
        let r = crate::validator::Validator::new().validate(&g);
        let d = r
            .with_code(Code::ROUTER_NO_DESTINATIONS)
            .next()
            .expect("reported");
        assert_eq!(d.severity, crate::validator::Severity::Error);
        assert!(d.fix.is_some());
    }

    #[test]
    fn unknown_destinations_are_unknown_ids() {
        let g = graph(routed(json!({"destinations": ["nowhere"]})));
        let r = crate::validator::Validator::new().validate(&g);
        let d = r.with_code(Code::UNKNOWN_ID).next().expect("reported");
        assert_eq!(d.pointer, "/nodes/r/router/destinations/0");
    }

    #[test]
    fn a_destination_node_of_another_level_is_refused() {
        assert_eq!(
            run(check, routed(json!({"destinations": ["work"]}))),
            vec![(
                Code::ROUTER_OTHER_LEVEL,
                "/nodes/r/router/destinations/0".into()
            )]
        );
    }

    #[test]
    fn the_hop_to_a_destination_is_proved() {
        let mut doc = routed(json!({"destinations": ["a"]}));
        doc["slices"]["s"] = json!({});
        doc["nodes"]["r"]["writes"] = json!(["s"]);
        doc["nodes"]["r"]["output_schema"] =
            json!({"type": "object", "properties": {"s": {"type": "number"}}});
        doc["nodes"]["a"]["reads"] = json!(["s"]);
        doc["nodes"]["a"]["input_schema"] =
            json!({"type": "object", "properties": {"s": {"type": "string"}}});
        let g = graph(doc);
        let r = crate::validator::Validator::new().validate(&g);
        let msgs: Vec<&str> = r
            .with_code(Code::HANDOFF_SCHEMA)
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(
            msgs,
            [
                "node `r` routes to `a`: /s: upstream may write a number, downstream requires a string"
            ]
        );
    }
}
