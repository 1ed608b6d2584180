//! The JSON Schema of workflow documents, generated from the Rust types.

use serde_json::Value;

use super::WorkflowDocument;

/// The JSON Schema (draft 2020-12) that every valid workflow document satisfies.
/// `pactgraph schema` prints it so editors can complete and check workflow files.
pub fn document_schema() -> Value {
    let schema = schemars::schema_for!(WorkflowDocument);
    serde_json::to_value(schema).expect("a generated schema is plain JSON")
}
