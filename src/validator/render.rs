//! Rendering a report as JSON, and its one-line summary. The human text is in `human.rs`.

use serde::Serialize;

use super::{Report, Severity};

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: String,
    severity: Severity,
    message: &'a str,
    pointer: &'a str,
    line: Option<usize>,
    column: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<&'a str>,
}

impl Report {
    /// The diagnostics as a JSON array of `{code, severity, message, pointer, line,
    /// column, fix?}` (pretty-printed).
    pub fn to_json(&self) -> String {
        let items: Vec<JsonDiagnostic<'_>> = self
            .diagnostics
            .iter()
            .map(|d| JsonDiagnostic {
                code: d.code.to_string(),
                severity: d.severity,
                message: &d.message,
                pointer: &d.pointer,
                line: d.line,
                column: d.column,
                fix: d.fix.as_deref(),
            })
            .collect();
        serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".to_string())
    }

    /// A one-line summary: `2 errors, 1 warning, 0 infos`.
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        format!(
            "{}, {}, {}",
            plural(self.count(Severity::Error), "error"),
            plural(self.count(Severity::Warning), "warning"),
            plural(self.count(Severity::Info), "info")
        )
    }
}
