//! Rule 10: handoff chains (`PG0801`-`PG0803`). No handoff cycle; a handoff stays at its
//! level; when both sides declare schemas, the upstream `output_schema` provides every
//! property the downstream `input_schema` requires, with a compatible type.

use serde_json::Value;

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    cycles(ctx, out);
    for n in ctx.reg.nodes() {
        let Some(t) = n.handoff.as_deref() else {
            continue;
        };
        let Some(target) = ctx.node(t) else {
            continue;
        };
        // Built only for a diagnostic: most handoffs are fine, and at a million nodes the
        // pointer strings were a tenth of this rule's cost.
        let ptr = || join(["nodes", n.id.as_str(), "handoff"]);
        if let (Ok(from), Ok(to)) = (ctx.level_of_node(&n.id), ctx.level_of_node(t))
            && from != to
        {
            let name =
                |l: Option<&str>| l.map_or("the root level".into(), |g| format!("subgraph `{g}`"));
            out.push(
                Diagnostic::new(
                    Code::HANDOFF_OTHER_LEVEL,
                    ptr(),
                    format!(
                        "node `{}` ({}) hands off to `{t}`, which is owned by {}",
                        n.id,
                        name(from),
                        name(to)
                    ),
                )
                .fix("hand off only to a node of the same level; call the other subgraph instead"),
            );
        }
        if let (Some(up), Some(down)) = (&n.output_schema, &target.input_schema) {
            let mut problems = Vec::new();
            compare(up, down, String::new(), &mut problems);
            for (path, why) in problems {
                out.push(
                    Diagnostic::new(
                        Code::HANDOFF_SCHEMA,
                        ptr(),
                        format!(
                            "node `{}` hands off to `{t}`, whose input requires `{path}`, but the \
                             output schema of `{}` {why}",
                            n.id, n.id
                        ),
                    )
                    .fix(format!(
                        "make `{path}` required (with a compatible type) in the `output_schema` of `{}`",
                        n.id
                    )),
                );
            }
        }
    }
}

/// Handoff cycles, each reported once at the node whose `handoff` closes it.
///
/// Complexity: O(n) over the nodes, each followed once. Nodes are tracked by their
/// registration position, so following a handoff costs one id look-up (the target's
/// position) and the rest is indexing.
fn cycles(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    const UNVISITED: u8 = 0;
    const ON_CHAIN: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNVISITED; ctx.reg.nodes().len()];
    let mut chain: Vec<usize> = Vec::new();
    for start in 0..state.len() {
        chain.clear();
        let mut at = start;
        loop {
            match state[at] {
                DONE => break,
                ON_CHAIN => {
                    let id = |i: usize| ctx.reg.node_at(i).map_or("?", |c| c.id.as_str());
                    let from = chain.iter().position(|c| *c == at).unwrap_or(0);
                    let mut path: Vec<&str> = chain[from..].iter().map(|&i| id(i)).collect();
                    path.push(id(at));
                    let closing = chain.last().map_or(id(at), |&i| id(i));
                    out.push(
                        Diagnostic::new(
                            Code::HANDOFF_CYCLE,
                            join(["nodes", closing, "handoff"]),
                            format!("handoff cycle: {}", path.join(" -> ")),
                        )
                        .fix(format!(
                            "remove the `handoff` of `{closing}` or end the chain elsewhere"
                        )),
                    );
                    break;
                }
                _ => {
                    state[at] = ON_CHAIN;
                    chain.push(at);
                    // An id names one thing, so a handoff to a node is one with a position.
                    let next = ctx
                        .reg
                        .node_at(at)
                        .and_then(|c| c.handoff.as_deref())
                        .and_then(|t| ctx.reg.node_index(t));
                    match next {
                        Some(i) => at = i,
                        None => break,
                    }
                }
            }
        }
        for &c in &chain {
            state[c] = DONE;
        }
    }
}

fn types(schema: &Value) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(s) => Some(vec![s.as_str()]),
        Value::Array(a) => Some(a.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Appends `(property path, what is wrong)` for each requirement of `down` that `up`
/// does not guarantee.
fn compare(up: &Value, down: &Value, at: String, out: &mut Vec<(String, String)>) {
    let up_required = required(up);
    for r in required(down) {
        let path = format!("{at}/{}", crate::contracts::pointer::escape(r));
        if !up_required.contains(&r) {
            out.push((path, "does not require it".into()));
            continue;
        }
        let (Some(u), Some(d)) = (
            up.get("properties").and_then(|p| p.get(r)),
            down.get("properties").and_then(|p| p.get(r)),
        ) else {
            continue;
        };
        if let (Some(ut), Some(dt)) = (types(u), types(d)) {
            let fits = |t: &str| dt.contains(&t) || (t == "integer" && dt.contains(&"number"));
            if !ut.iter().all(|t| fits(t)) {
                out.push((
                    path,
                    format!(
                        "gives it type {} where {} is expected",
                        ut.join("|"),
                        dt.join("|")
                    ),
                ));
                continue;
            }
        }
        compare(u, d, path, out);
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
    fn cycle_reported_once_at_the_closing_handoff() {
        let mut doc = base();
        doc["nodes"]["a"] = json!({"supervisor": "root", "handoff": "b"});
        doc["nodes"]["b"] = json!({"supervisor": "root", "handoff": "c"});
        doc["nodes"]["c"] = json!({"supervisor": "root", "handoff": "a"});
        doc["nodes"]["d"] = json!({"supervisor": "root", "handoff": "d"});
        let found = run(check, doc.clone());
        assert_eq!(
            found,
            vec![
                (Code::HANDOFF_CYCLE, "/nodes/c/handoff".into()),
                (Code::HANDOFF_CYCLE, "/nodes/d/handoff".into()),
            ]
        );
        let g = crate::validator::rules::testing::graph(doc);
        let r = crate::validator::Validator::new().validate(&g);
        let d = r.with_code(Code::HANDOFF_CYCLE).next().expect("reported");
        assert!(d.message.contains("a -> b -> c -> a"), "{}", d.message);
    }

    #[test]
    fn handoff_to_another_level() {
        let mut doc = base();
        doc["nodes"]["work"]["handoff"] = "reply".into();
        assert_eq!(
            run(check, doc),
            vec![(Code::HANDOFF_OTHER_LEVEL, "/nodes/work/handoff".into())]
        );
    }

    #[test]
    fn schemas_must_line_up() {
        let mut doc = base();
        doc["nodes"]["a"] = json!({"supervisor": "root", "handoff": "b", "output_schema": {
            "type": "object", "required": ["x", "n"],
            "properties": {"x": {"type": "object", "required": ["y"], "properties": {"y": {"type": "string"}}},
                           "n": {"type": "integer"}}}});
        doc["nodes"]["b"] = json!({"supervisor": "root", "input_schema": {
            "type": "object", "required": ["x", "n"],
            "properties": {"x": {"type": "object", "required": ["y"], "properties": {"y": {"type": "string"}}},
                           "n": {"type": "number"}}}});
        assert!(run(check, doc.clone()).is_empty());
        doc["nodes"]["b"]["input_schema"]["properties"]["x"]["required"] = json!(["y", "z"]);
        doc["nodes"]["b"]["input_schema"]["properties"]["n"]["type"] = "string".into();
        let g = crate::validator::rules::testing::graph(doc);
        let r = crate::validator::Validator::new().validate(&g);
        let msgs: Vec<_> = r
            .with_code(Code::HANDOFF_SCHEMA)
            .map(|d| d.message.clone())
            .collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs[0].contains("`/x/z`"), "{}", msgs[0]);
        assert!(
            msgs[1].contains("`/n`") && msgs[1].contains("integer"),
            "{}",
            msgs[1]
        );
    }
}
