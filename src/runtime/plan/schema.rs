//! Checking values against the workflow's compiled JSON Schemas.

use serde_json::Value;

use super::tables::Schema;

/// Like [`check`], also giving the JSON Pointer (into `value`) of the first offending
/// value.
pub(crate) fn check_at(schema: &Schema, value: &Value) -> Result<(), (String, String)> {
    if schema.is_valid(value) {
        return Ok(());
    }
    let at = schema
        .iter_errors(value)
        .next()
        .map(|e| e.instance_path().to_string())
        .unwrap_or_default();
    let at = if at.is_empty() { "/".to_string() } else { at };
    check(schema, value).map_err(|msg| (at, msg))
}

/// Checks `value` against a compiled schema; the error lists every problem.
pub(crate) fn check(schema: &Schema, value: &Value) -> Result<(), String> {
    if schema.is_valid(value) {
        return Ok(());
    }
    let problems: Vec<String> = schema
        .iter_errors(value)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{e} at {at}")
            }
        })
        .collect();
    Err(problems.join("; "))
}
