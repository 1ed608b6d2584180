//! Rule 12b: a model's `params` hold no key the engine sets itself (`PG1202`): `model`,
//! `messages`, `tools`, `tool_choice`, `stream`, `stream_options`, `response_format`.

use crate::contracts::ModelSpec;
use crate::contracts::pointer::join;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (name, spec) in ctx.graph.models() {
        for key in spec.params.keys() {
            if !ModelSpec::ENGINE_KEYS.contains(&key.as_str()) {
                continue;
            }
            let fix = match key.as_str() {
                "model" => format!("set `models.{name}.model` instead"),
                "stream" | "stream_options" => format!("set `models.{name}.stream` instead"),
                _ => format!("remove `{key}`: pactgraph sets it for every request"),
            };
            out.push(
                Diagnostic::new(
                    Code::ENGINE_PARAM,
                    join(["models", name.as_str(), "params", key.as_str()]),
                    format!(
                        "model `{name}` sets `{key}` in `params`, but the engine sets `{key}` \
                         itself in every request"
                    ),
                )
                .fix(fix),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{agents, run};
    use serde_json::json;

    #[test]
    fn pass_through_params_are_fine() {
        let mut doc = agents();
        doc["models"]["default"]["params"] = json!({"temperature": 0, "seed": 7});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn every_engine_key_is_refused_at_its_place() {
        let mut doc = agents();
        let params: serde_json::Map<String, serde_json::Value> = ModelSpec::ENGINE_KEYS
            .iter()
            .map(|k| (k.to_string(), json!(1)))
            .chain([("temperature".to_string(), json!(0))])
            .collect();
        doc["models"]["default"]["params"] = json!(params);
        let found = run(check, doc);
        let expected: Vec<(Code, String)> = ModelSpec::ENGINE_KEYS
            .iter()
            .map(|k| (Code::ENGINE_PARAM, format!("/models/default/params/{k}")))
            .collect();
        assert_eq!(found, expected);
    }
}
