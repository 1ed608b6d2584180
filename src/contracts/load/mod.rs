//! Loading workflow documents from JSON and YAML text.
//!
//! Both formats are parsed into a [`serde_json::Value`] plus a [`SourceMap`], rejecting
//! duplicate keys anywhere, and then deserialized into the contract types with unknown
//! fields rejected. Every error names the key and its line and column. YAML needs the
//! `yaml` feature; without it a YAML document is refused with
//! [`LoadError::FeatureDisabled`].
//!
//! Hostile text is refused early and cheaply (see `docs/adr/0010-hostile-documents.md`):
//! nesting deeper than [`MAX_DEPTH`] levels, YAML aliases that would copy more than
//! [`MAX_ALIAS_NODES`] nodes or [`MAX_ALIAS_BYTES`] bytes of text, NUL bytes, and (for
//! [`WorkflowDocument::load`](super::WorkflowDocument::load)) bytes that are not UTF-8.

mod json;
#[cfg(feature = "yaml")]
mod yaml;

use std::path::PathBuf;

use serde_json::Value;

use super::format::DocumentFormat;
use super::source_map::{LineIndex, SourceMap, Span};

/// The deepest nesting of arrays and objects a document may have (the root object is
/// level 1).
///
/// Real workflows nest well under 20 levels (a JSON Schema inside a slice is the deepest
/// part), so 100 never gets in a real document's way. It is under the ceilings of the
/// parsers we build on (serde_json's 127 levels, jsonc-parser's 512, the YAML scanner's
/// 255 flow levels), so the message a reader sees is this one; a document at the limit
/// still fits, one level down, in the saved run that `run --state-out` writes and serde_json
/// reads back; and everything recursive downstream (deserializing, cloning, dropping and
/// schema-compiling a `Value`) stays far from the end of a 2 MB thread stack.
pub const MAX_DEPTH: usize = 100;

/// The most nodes (scalars, sequences and mappings) YAML aliases may re-insert into one
/// document, counted over every alias: an alias to an anchored mapping of 10 nodes costs
/// 10, and an alias inside an anchored value costs again each time that value is copied.
///
/// Aliases let a few lines stand for exponentially many nodes (the "billion laughs"
/// document); without a bound a 30-line file exhausts memory. A real workflow reuses a
/// trigger or a schema a few hundred times at most; a million copied nodes is about a
/// hundred megabytes of `Value` and a fraction of a second, so the bound never gets in
/// the way of a real document and always stops a hostile one early.
#[cfg_attr(not(feature = "yaml"), allow(dead_code))] // YAML's limit
pub const MAX_ALIAS_NODES: usize = 1_000_000;

/// The most bytes of text (keys and string scalars) YAML aliases may copy into one
/// document, counted like [`MAX_ALIAS_NODES`]: without it one anchored 50 MB string
/// aliased a hundred times would cost 5 GB while copying only a hundred nodes.
#[cfg_attr(not(feature = "yaml"), allow(dead_code))] // YAML's limit
pub const MAX_ALIAS_BYTES: usize = 64 * 1024 * 1024;

/// Why a document could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not UTF-8 text (binary data, or text in another encoding).
    #[error("{path} is not UTF-8 text: byte 0x{byte:02x} at line {}, column {} cannot start or continue a character", span.line, span.column)]
    NotText {
        /// The file.
        path: PathBuf,
        /// The first byte that is not part of a UTF-8 character.
        byte: u8,
        /// Where it is (the column counts the characters before it).
        span: Span,
    },
    /// The document goes past one of the limits that keep hostile input cheap
    /// ([`MAX_DEPTH`], [`MAX_ALIAS_NODES`], [`MAX_ALIAS_BYTES`]).
    #[error("line {}, column {}: {message}", span.line, span.column)]
    Limit {
        /// Which limit, and by what.
        message: String,
        /// Where the document crossed it.
        span: Span,
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
            LoadError::Syntax { span, .. }
            | LoadError::DuplicateKey { span, .. }
            | LoadError::NotText { span, .. }
            | LoadError::Limit { span, .. } => Some(*span),
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
    if let Some(at) = text.find('\0') {
        return Err(LoadError::Syntax {
            message: "NUL byte: a workflow document is text, not binary data".into(),
            span: span_at(text, at),
        });
    }
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

/// Reads a file as UTF-8 text, stopping at the first NUL byte (the text then ends with it,
/// and parsing refuses it at its place): `/dev/zero` or a stream of random bytes given as
/// FILE ends at once instead of filling memory.
pub(crate) fn read_text(path: &std::path::Path) -> Result<String, LoadError> {
    use std::io::Read;
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        let read = &chunk[..n];
        match read.iter().position(|b| *b == 0) {
            Some(nul) => {
                bytes.extend_from_slice(&read[..=nul]);
                break;
            }
            None => bytes.extend_from_slice(read),
        }
    }
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let valid = std::str::from_utf8(&bytes[..at])
            .expect("valid_up_to is the length of the valid UTF-8 prefix");
        LoadError::NotText {
            path: path.to_path_buf(),
            byte: bytes[at],
            // Line and column just past the valid prefix: where the bad byte stands.
            span: span_at(valid, at),
        }
    })
}

/// The span of the character at byte `offset` of `text`.
pub(crate) fn span_at(text: &str, offset: usize) -> Span {
    LineIndex::new(text).span(offset, offset + 1)
}

/// The error for nesting deeper than [`MAX_DEPTH`] at `span`.
fn too_deep(span: Span) -> LoadError {
    LoadError::Limit {
        message: format!(
            "nested deeper than {MAX_DEPTH} levels (arrays and objects, the root counting as 1)"
        ),
        span,
    }
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
    use super::*;

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

    #[test]
    fn nul_bytes_are_refused_at_their_place_in_both_formats() {
        for format in [DocumentFormat::Json, DocumentFormat::Yaml] {
            match parse_value("{\"a\":\n  \"x\0\"}", format).unwrap_err() {
                LoadError::Syntax { message, span } => {
                    assert!(message.starts_with("NUL byte"), "{message}");
                    assert_eq!((span.line, span.column, span.offset), (2, 5, 10));
                }
                e => panic!("{format:?}: {e}"),
            }
        }
    }

    #[test]
    fn files_are_read_as_text_up_to_the_first_nul() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let latin1 = dir.path().join("latin1.yaml");
        std::fs::write(&latin1, b"a: 1\nb: caf\xe9\n").expect("written");
        match read_text(&latin1).unwrap_err() {
            LoadError::NotText { path, byte, span } => {
                assert_eq!((path, byte), (latin1.clone(), 0xe9));
                assert_eq!((span.line, span.column, span.offset), (2, 7, 11));
            }
            e => panic!("{e}"),
        }
        // Reading stops at a NUL: what follows it (here, a byte that is not UTF-8) is
        // never read into the text, whose NUL parsing then refuses.
        let nul = dir.path().join("nul.json");
        let mut bytes = b"{\"a\": \"\0".to_vec();
        bytes.extend(std::iter::repeat_n(0xffu8, 200_000));
        std::fs::write(&nul, bytes).expect("written");
        assert_eq!(read_text(&nul).expect("text up to the NUL"), "{\"a\": \"\0");
        let dir_error = read_text(dir.path()).unwrap_err();
        assert!(matches!(dir_error, LoadError::Io { .. }), "{dir_error}");
    }
}
