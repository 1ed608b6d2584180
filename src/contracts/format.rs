//! `DocumentFormat`: which text format a workflow document is written in.

use std::path::Path;

/// The text format of a workflow document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentFormat {
    /// Strict JSON.
    Json,
    /// YAML 1.2 (core schema).
    Yaml,
}

impl DocumentFormat {
    /// `.yaml`/`.yml` mean YAML; anything else is read as JSON.
    pub fn from_path(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => DocumentFormat::Yaml,
            _ => DocumentFormat::Json,
        }
    }
}
