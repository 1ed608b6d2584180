//! Rule 12a: every agent names a model of the document's `models` (`PG1201`).

use super::agent_sites::agents;
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let models = ctx.graph.models();
    for site in agents(ctx) {
        let model = site.spec.model.as_str();
        if models.contains_key(model) {
            continue;
        }
        let keys: Vec<String> = models.keys().map(|k| format!("`{k}`")).collect();
        let fix = if keys.is_empty() {
            format!(
                "declare it: \"models\": {{\"{model}\": {{\"base_url\": \
                 \"${{OPENAI_BASE_URL:-http://127.0.0.1:11434/v1}}\", \"model\": \"MODEL\"}}}}"
            )
        } else {
            format!(
                "use one of {} or declare `{model}` under `models`",
                keys.join(", ")
            )
        };
        out.push(
            Diagnostic::new(
                Code::UNKNOWN_MODEL,
                site.field("model"),
                format!(
                    "{} uses model `{model}`, which the document's `models` does not declare",
                    site.who()
                ),
            )
            .fix(fix),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validator::rules::testing::{agents, run};
    use serde_json::json;

    #[test]
    fn a_declared_model_is_fine() {
        assert!(run(check, agents()).is_empty());
    }

    #[test]
    fn an_unknown_model_is_refused_for_nodes_and_policies() {
        let mut doc = agents();
        doc["nodes"]["reply"]["run"]["agent"]["model"] = json!("big");
        doc["supervisors"]["root"]["policy"] = json!({"agent": {}});
        doc["models"] = json!({"small": doc["models"]["default"].clone()});
        assert_eq!(
            run(check, doc),
            vec![
                (Code::UNKNOWN_MODEL, "/nodes/reply/run/agent/model".into()),
                (
                    Code::UNKNOWN_MODEL,
                    "/supervisors/root/policy/agent/model".into()
                ),
            ]
        );
    }

    #[test]
    fn without_models_the_fix_shows_how_to_declare_one() {
        let mut doc = agents();
        doc.as_object_mut().expect("an object").remove("models");
        let g = crate::validator::rules::testing::graph(doc);
        let r = crate::validator::Validator::new().validate(&g);
        let d = r.with_code(Code::UNKNOWN_MODEL).next().expect("reported");
        assert!(
            d.fix.as_deref().is_some_and(|f| f.contains("\"models\"")),
            "{d:?}"
        );
        assert!(
            d.message.contains("node `reply` uses model `default`"),
            "{}",
            d.message
        );
    }
}
