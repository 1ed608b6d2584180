//! Rule 11: every `input_schema`, `output_schema` and slice schema compiles
//! (`PG0901`). Identical schemas are compiled once.

use foldhash::{HashMap, HashMapExt};

use serde_json::Value;

use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut cache: HashMap<String, Option<String>> = HashMap::new();
    let mut one = |schema: &Value, pointer: String, what: String, out: &mut Vec<Diagnostic>| {
        let key = schema.to_string();
        let error = cache
            .entry(key)
            .or_insert_with(|| {
                jsonschema::validator_for(schema)
                    .err()
                    .map(|e| e.to_string())
            })
            .clone();
        if let Some(e) = error {
            out.push(
                Diagnostic::new(
                    Code::BAD_SCHEMA,
                    pointer,
                    format!("{what} is not a valid JSON Schema: {e}"),
                )
                .fix("correct the schema (JSON Schema draft 2020-12 by default)"),
            );
        }
    };
    for (name, decl) in ctx.graph.slices() {
        if let Some(s) = &decl.schema {
            one(
                s,
                join(["slices", name.as_str(), "schema"]),
                format!("the schema of slice `{name}`"),
                out,
            );
        }
    }
    for g in ctx.reg.subgraphs() {
        for (field, s) in [
            ("input_schema", &g.input_schema),
            ("output_schema", &g.output_schema),
        ] {
            if let Some(s) = s {
                one(
                    s,
                    join(["subgraphs", g.id.as_str(), field]),
                    format!("`{field}` of subgraph `{}`", g.id),
                    out,
                );
            }
        }
    }
    for n in ctx.reg.nodes() {
        if let Some(t) = n.tool.as_ref().filter(|t| t.parameters.is_object()) {
            one(
                &t.parameters,
                join(["nodes", n.id.as_str(), "tool", "parameters"]),
                format!("the tool `parameters` of node `{}`", n.id),
                out,
            );
        }
        for (field, s) in [
            ("input_schema", &n.input_schema),
            ("output_schema", &n.output_schema),
        ] {
            if let Some(s) = s {
                one(
                    s,
                    join(["nodes", n.id.as_str(), field]),
                    format!("`{field}` of node `{}`", n.id),
                    out,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{base, run};
    use serde_json::json;

    #[test]
    fn valid_schemas_pass() {
        let mut doc = base();
        doc["slices"]["out"]["schema"] = json!({"type": "object"});
        doc["subgraphs"]["sub"]["input_schema"] = json!(true);
        doc["nodes"]["work"]["output_schema"] = json!({"type": "object", "required": ["out"]});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn every_broken_schema_is_reported_even_when_repeated() {
        let mut doc = base();
        doc["slices"]["out"]["schema"] = json!({"type": 12});
        doc["subgraphs"]["sub"]["output_schema"] = json!({"minLength": "three"});
        doc["nodes"]["work"]["input_schema"] = json!({"type": 12});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::BAD_SCHEMA, "/slices/out/schema".into()),
                (Code::BAD_SCHEMA, "/subgraphs/sub/output_schema".into()),
                (Code::BAD_SCHEMA, "/nodes/work/input_schema".into()),
            ]
        );
    }
}
