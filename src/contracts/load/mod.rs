//! Loading workflow documents from JSON and YAML text.
//!
//! Both formats are parsed into a [`serde_json::Value`] plus a [`SourceMap`], rejecting
//! duplicate keys anywhere, and then deserialized into the contract types with unknown
//! fields rejected. Every error names the key and its line and column. YAML needs the
//! `yaml` feature; without it a YAML document is refused with
//! [`LoadError::FeatureDisabled`].

mod json;
#[cfg(feature = "yaml")]
mod yaml;

use std::path::PathBuf;

use serde_json::Value;

use super::DocumentFormat;
use super::pointer::{SourceMap, Span};

/// Why a document could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The text is not well-formed JSON or YAML.
    #[error("line {}, column {}: {message}", span.line, span.column)]
    Syntax {
        /// What the parser said.
        message: String,
        /// Where.
        span: Span,
    },
    /// The same key appears twice in one object.
    #[error("line {}, column {}: duplicate key `{key}` in {} (first at line {}, column {})",
        span.line, span.column, describe(parent), first.line, first.column)]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// JSON Pointer of the object holding it.
        parent: String,
        /// The second occurrence.
        span: Span,
        /// The first occurrence.
        first: Span,
    },
    /// The document is well-formed but does not fit the workflow format (an unknown
    /// field, a wrong type, a missing field).
    #[error("{}{message} (at {})", span.map(|s| format!("line {}, column {}: ", s.line, s.column)).unwrap_or_default(), describe(pointer))]
    Invalid {
        /// What is wrong.
        message: String,
        /// JSON Pointer of the offending value or key.
        pointer: String,
        /// Where, when known.
        span: Option<Span>,
    },
    /// The document's format needs a Cargo feature this build of pactgraph was compiled
    /// without (YAML needs `yaml`).
    #[error(
        "{format} documents need pactgraph's `{feature}` feature, which this build was compiled without; write the workflow as JSON or build with `--features {feature}`"
    )]
    FeatureDisabled {
        /// The format (`YAML`).
        format: &'static str,
        /// The Cargo feature that reads it.
        feature: &'static str,
    },
}

impl LoadError {
    /// Line and column of the error, when known.
    pub fn span(&self) -> Option<Span> {
        match self {
            LoadError::Io { .. } | LoadError::FeatureDisabled { .. } => None,
            LoadError::Syntax { span, .. } | LoadError::DuplicateKey { span, .. } => Some(*span),
            LoadError::Invalid { span, .. } => *span,
        }
    }
}

fn describe(pointer: &str) -> String {
    if pointer.is_empty() {
        "the document root".to_string()
    } else {
        format!("`{pointer}`")
    }
}

/// Parses text into a JSON value and its source map, rejecting duplicate keys.
///
/// Complexity: O(n) in the length of the text.
pub fn parse_value(text: &str, format: DocumentFormat) -> Result<(Value, SourceMap), LoadError> {
    match format {
        DocumentFormat::Json => json::parse(text),
        #[cfg(feature = "yaml")]
        DocumentFormat::Yaml => yaml::parse(text),
        #[cfg(not(feature = "yaml"))]
        DocumentFormat::Yaml => Err(LoadError::FeatureDisabled {
            format: "YAML",
            feature: "yaml",
        }),
    }
}

/// The span table of JSON text that has already parsed (for a lazily built [`SourceMap`]).
pub(crate) fn json_spans(text: &str) -> std::collections::HashMap<String, Span> {
    json::spans(text)
}

/// The error for `key` appearing again in the object at `parent`; the first occurrence's
/// place comes from the source map built so far.
pub(crate) fn duplicate_key(map: &SourceMap, parent: &str, key: &str, span: Span) -> LoadError {
    let mut first_at = parent.to_string();
    super::pointer::push_key(&mut first_at, key);
    LoadError::DuplicateKey {
        key: key.to_string(),
        parent: parent.to_string(),
        span,
        first: map.get(&first_at).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::{DocumentFormat, LoadError, parse_value};

    /// YAML parses with the `yaml` feature and is refused, naming the feature, without it;
    /// JSON needs no feature.
    #[test]
    fn yaml_follows_its_feature_and_json_needs_none() {
        let (v, _) = parse_value("{\"a\": 1}", DocumentFormat::Json).expect("plain JSON");
        assert_eq!(v["a"], 1);
        let yaml = parse_value("a: 1\n", DocumentFormat::Yaml);
        if cfg!(feature = "yaml") {
            assert_eq!(yaml.expect("YAML with the feature").0["a"], 1);
        } else {
            let e = yaml.expect_err("YAML without the feature");
            assert!(matches!(
                e,
                LoadError::FeatureDisabled {
                    feature: "yaml",
                    ..
                }
            ));
            assert!(e.to_string().contains("`yaml` feature"), "{e}");
            assert_eq!(e.span(), None);
        }
    }
}
