//! Rule 10: handoff chains (`PG0801`-`PG0803`, `PG0805`). No handoff cycle; a handoff stays at its
//! level; when both sides declare schemas, every value the upstream's `output_schema`
//! allows for a slice it writes is accepted by the downstream's `input_schema` (the proof is
//! in [`super::schema_fit`]).

use serde_json::Value;

use super::schema_fit::{Misfit, fit};
use crate::contracts::NodeContract;
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
            hop_fit(n, target, up, down, "hands off to", &ptr, out);
        }
    }
}

/// The hop-fit proof of one handoff: for every slice the downstream's `input_schema`
/// constrains and the upstream writes, every value the upstream's `output_schema` allows
/// must be accepted downstream. A slice the upstream does not write is not its fault; what
/// cannot be decided is an info. `verb` says how the upstream reaches the downstream
/// (`hands off to`, `routes to`).
pub(super) fn hop_fit(
    up_node: &NodeContract,
    down_node: &NodeContract,
    up: &Value,
    down: &Value,
    verb: &str,
    ptr: &dyn Fn() -> String,
    out: &mut Vec<Diagnostic>,
) {
    let (a, b) = (up_node.id.as_str(), down_node.id.as_str());
    let props = |s: &Value| s.get("properties").and_then(Value::as_object).cloned();
    let required = |s: &Value| -> Vec<String> {
        s.get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (up_props, down_props) = (props(up), props(down));
    let (up_required, down_required) = (required(up), required(down));
    let up_closed = up.get("additionalProperties") == Some(&Value::Bool(false));
    let mut misfits = Vec::new();
    for slice in up_node
        .writes
        .iter()
        .filter(|s| down_node.reads.contains(s))
    {
        let at = format!("/{}", crate::contracts::pointer::escape(slice));
        if down_required.contains(slice) && !up_required.contains(slice) {
            misfits.push(Misfit::Undecided {
                at: at.clone(),
                keyword: "required (the upstream may leave the slice unwritten; then it comes from the state)".into(),
            });
        }
        let Some(d) = down_props.as_ref().and_then(|p| p.get(slice)) else {
            continue;
        };
        let u = match up_props.as_ref().and_then(|p| p.get(slice)) {
            Some(u) => u.clone(),
            None if up_closed => continue,
            None => up
                .get("additionalProperties")
                .cloned()
                .unwrap_or(Value::Bool(true)),
        };
        fit(&u, d, &at, &mut misfits);
    }
    for m in misfits {
        out.push(match m {
            Misfit::Counterexample {
                at,
                upstream,
                downstream,
            } => Diagnostic::new(
                Code::HANDOFF_SCHEMA,
                ptr(),
                format!(
                    "node `{a}` {verb} `{b}`: {at}: upstream may {upstream}, downstream requires {downstream}"
                ),
            )
            .fix(format!(
                "narrow the `output_schema` of `{a}` at {at}, or widen the `input_schema` of `{b}`"
            )),
            Misfit::Undecided { at, keyword } => Diagnostic::new(
                Code::HANDOFF_SCHEMA_UNDECIDED,
                ptr(),
                format!(
                    "node `{a}` {verb} `{b}`: cannot prove the hop fits at {at} (`{keyword}`)"
                ),
            ),
        });
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

    /// Runs the whole validator and returns the messages of `code`.
    fn messages(doc: serde_json::Value, code: Code) -> Vec<String> {
        let g = crate::validator::rules::testing::graph(doc);
        let r = crate::validator::Validator::new().validate(&g);
        r.with_code(code).map(|d| d.message.clone()).collect()
    }

    #[test]
    fn each_hop_is_proved_slice_by_slice_with_a_counterexample() {
        let mut doc = base();
        doc["slices"]["fashion"] = json!({});
        doc["slices"]["request"] = json!({});
        doc["nodes"]["a"] = json!({"supervisor": "root", "writes": ["fashion"], "handoff": "b",
            "output_schema": {"type": "object", "required": ["fashion"], "properties": {
                "fashion": {"type": "object", "required": ["trend"],
                            "properties": {"trend": {"type": ["string", "number"]}}}}}});
        doc["nodes"]["b"] = json!({"supervisor": "root", "reads": ["fashion", "request"],
            "input_schema": {"type": "object", "required": ["fashion", "request"], "properties": {
                "fashion": {"type": "object", "required": ["trend"],
                            "properties": {"trend": {"type": "string"}}},
                "request": {"type": "object", "required": ["topic"]}}}});
        let msgs = messages(doc.clone(), Code::HANDOFF_SCHEMA);
        // `request` is read downstream but not written upstream: not the upstream's fault.
        assert_eq!(
            msgs,
            [
                "node `a` hands off to `b`: /fashion/trend: upstream may write a number, downstream requires a string"
            ]
        );
        doc["nodes"]["a"]["output_schema"]["properties"]["fashion"]["properties"]["trend"]["type"] =
            "string".into();
        assert!(messages(doc.clone(), Code::HANDOFF_SCHEMA).is_empty());
        assert!(messages(doc, Code::HANDOFF_SCHEMA_UNDECIDED).is_empty());
    }

    #[test]
    fn what_cannot_be_decided_is_an_info_not_an_error() {
        let mut doc = base();
        doc["slices"]["s"] = json!({});
        doc["nodes"]["a"] = json!({"supervisor": "root", "writes": ["s"], "handoff": "b",
            "output_schema": {"type": "object", "properties": {"s": {"type": "string"}}}});
        doc["nodes"]["b"] = json!({"supervisor": "root", "reads": ["s"], "input_schema": {
            "type": "object", "required": ["s"],
            "properties": {"s": {"type": "string", "pattern": "^x"}}}});
        assert!(messages(doc.clone(), Code::HANDOFF_SCHEMA).is_empty());
        let infos = messages(doc, Code::HANDOFF_SCHEMA_UNDECIDED);
        assert_eq!(infos.len(), 2, "{infos:?}");
        assert!(infos.iter().any(|m| m.contains("`pattern`")), "{infos:?}");
        assert!(
            infos
                .iter()
                .any(|m| m.contains("leave the slice unwritten")),
            "{infos:?}"
        );
    }

    #[test]
    fn the_support_triage_shape_is_not_a_false_positive() {
        // The downstream reads a slice (`ticket`) from elsewhere and requires it: the old
        // PG0803 reported the upstream for not writing it.
        let mut doc = base();
        doc["slices"]["ticket"] = json!({});
        doc["slices"]["category"] = json!({});
        doc["nodes"]["a"] = json!({"supervisor": "root", "reads": ["ticket"], "writes": ["category"],
            "handoff": "b", "output_schema": {"type": "object", "required": ["category"],
                "properties": {"category": {"type": "object"}}}});
        doc["nodes"]["b"] = json!({"supervisor": "root", "reads": ["ticket", "category"],
            "input_schema": {"type": "object", "required": ["ticket", "category"],
                "properties": {"ticket": {"type": "object", "required": ["text"]},
                               "category": {"type": "object"}}}});
        assert!(messages(doc.clone(), Code::HANDOFF_SCHEMA).is_empty());
        assert!(messages(doc, Code::HANDOFF_SCHEMA_UNDECIDED).is_empty());
    }
}
