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
    use crate::contracts::DocumentFormat;
    use crate::contracts::document::tests::YAML;

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
}
