//! The JSON Schema of workflow documents, generated from the Rust types.

use serde_json::Value;

use super::WorkflowDocument;

/// The JSON Schema (draft 2020-12) that every valid workflow document satisfies.
/// `pactgraph schema` prints it so editors can complete and check workflow files.
pub fn document_schema() -> Value {
    let schema = schemars::schema_for!(WorkflowDocument);
    serde_json::to_value(schema).expect("a generated schema is plain JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "yaml")]
    use crate::contracts::DocumentFormat;
    #[cfg(feature = "yaml")]
    use crate::contracts::document::tests::YAML;

    #[cfg(feature = "yaml")] // it reads a YAML document
    #[test]
    fn unknown_fields_are_refused_and_the_schema_shows_it() {
        let bad = YAML.replace("message_slice: note", "mesage_slice: note");
        let e = WorkflowDocument::parse(&bad, DocumentFormat::Yaml).expect_err("a typo");
        assert!(e.to_string().contains("mesage_slice"), "{e}");
        let schema = serde_json::to_value(document_schema()).expect("json");
        let defs = schema.get("$defs").expect("definitions");
        for field in ["destinations", "message_slice", "may_answer", "retries"] {
            assert!(
                defs["RouterSpec"]["properties"].get(field).is_some(),
                "{field} missing"
            );
        }
        assert!(defs["NodeContract"]["properties"].get("router").is_some());
    }

    /// `models`, the `agent` behaviour (nodes and policies) and `tool` are in the schema.
    #[test]
    fn the_schema_shows_models_agents_and_tools() {
        let schema = document_schema();
        let defs = &schema["$defs"];
        assert_eq!(
            schema["properties"]["models"]["additionalProperties"]["$ref"],
            "#/$defs/ModelSpec"
        );
        let model: Vec<&String> = defs["ModelSpec"]["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .collect();
        assert_eq!(
            model,
            [
                "base_url",
                "model",
                "api_key_env",
                "params",
                "price",
                "timeout_ms",
                "max_retries",
                "stream"
            ]
        );
        assert_eq!(
            defs["ModelSpec"]["required"],
            serde_json::json!(["base_url", "model"])
        );
        assert_eq!(
            defs["AgentSpec"]["properties"]["model"]["default"],
            "default"
        );
        for behaviour in ["NodeBehaviour", "SupervisorPolicy"] {
            let agent = defs[behaviour]["oneOf"]
                .as_array()
                .expect("variants")
                .iter()
                .find(|v| v["required"] == serde_json::json!(["agent"]));
            assert!(agent.is_some(), "{behaviour} has no agent variant");
        }
        assert_eq!(
            defs["NodeContract"]["properties"]["tool"]["anyOf"][0]["$ref"],
            "#/$defs/ToolSpec"
        );
        assert_eq!(
            defs["ToolSpec"]["required"],
            serde_json::json!(["description", "parameters"])
        );
        assert_eq!(
            defs["ToolSpec"]["properties"]["parameters"]["type"],
            "object"
        );
    }
}
