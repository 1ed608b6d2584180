//! `WorkflowDocument`: a whole workflow as one JSON or YAML document.

use std::path::Path;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::DocumentFormat;
use super::load::{LoadError, parse_value};
use super::pointer::escape;
use super::source_map::SourceMap;
use super::{Budgets, ModelSpec, NodeContract, SliceDecl, SubgraphContract, SupervisorContract};

/// A workflow: its slices, budgets, entry supervisor and contracts, keyed by id in
/// declaration order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDocument {
    /// Optional URL or path of this format's JSON Schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The workflow's name.
    pub workflow: String,
    /// Human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How long a stored run of this workflow is kept when `run --ttl` is not given: a
    /// duration such as `30m`, `24h` or `7d` (absent: kept until pruned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^\s*[0-9]+\s*[a-zA-Z]+(\s*[0-9]+\s*[a-zA-Z]+)*\s*$"))]
    pub retention: Option<String>,
    /// The slices of the state.
    #[serde(default)]
    pub slices: IndexMap<String, SliceDecl>,
    /// Run budgets (defaults: max_depth 2, max_steps 40, max_reentry 2).
    #[serde(default, skip_serializing_if = "Budgets::is_default")]
    pub budgets: Budgets,
    /// The model endpoints agents call, by key (`default` unless an agent names another).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub models: IndexMap<String, ModelSpec>,
    /// The supervisor a run starts at.
    pub entry: String,
    /// Supervisors by id.
    #[serde(default)]
    pub supervisors: IndexMap<String, SupervisorContract>,
    /// Subgraphs by id.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub subgraphs: IndexMap<String, SubgraphContract>,
    /// Nodes by id.
    #[serde(default)]
    pub nodes: IndexMap<String, NodeContract>,
}

impl WorkflowDocument {
    /// Parses a document from text, returning it with its source map.
    ///
    /// Duplicate keys anywhere and unknown fields are errors naming the key, its JSON
    /// Pointer, line and column.
    pub fn parse(text: &str, format: DocumentFormat) -> Result<(Self, SourceMap), LoadError> {
        let (value, map) = parse_value(text, format)?;
        let doc = Self::from_value_mapped(value, Some(&map))?;
        Ok((doc, map))
    }

    /// Reads and parses a file (`.yaml`/`.yml` as YAML, anything else as JSON). A file that
    /// is not UTF-8 text is a [`LoadError::NotText`] naming the first bad byte.
    pub fn load(path: impl AsRef<Path>) -> Result<(Self, SourceMap), LoadError> {
        let path = path.as_ref();
        let text = super::load::read_text(path)?;
        let (doc, mut map) = Self::parse(&text, DocumentFormat::from_path(path))?;
        map.name = Some(path.display().to_string());
        Ok((doc, map))
    }

    /// Builds a document from a JSON value (no line information in errors).
    pub fn from_value(value: Value) -> Result<Self, LoadError> {
        Self::from_value_mapped(value, None)
    }

    fn from_value_mapped(value: Value, map: Option<&SourceMap>) -> Result<Self, LoadError> {
        let mut doc: Self = serde_path_to_error::deserialize(value).map_err(|e| {
            let mut pointer = to_pointer(e.path());
            let message = e.inner().to_string();
            if let Some(field) = unknown_field(&message) {
                let token = format!("/{}", escape(field));
                if !pointer.ends_with(&token) {
                    pointer.push_str(&token);
                }
            }
            let span = map.and_then(|m| m.locate(&pointer));
            LoadError::Invalid {
                message,
                pointer,
                span,
            }
        })?;
        doc.fill_ids();
        Ok(doc)
    }

    /// Sets every contract's `id` from its key.
    pub fn fill_ids(&mut self) {
        for (id, n) in &mut self.nodes {
            n.id.clone_from(id);
        }
        for (id, s) in &mut self.supervisors {
            s.id.clone_from(id);
        }
        for (id, g) in &mut self.subgraphs {
            g.id.clone_from(id);
        }
    }

    /// The document as pretty JSON (keys in declaration order).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a document always serializes: string keys only")
    }
}

/// The field name in serde's "unknown field `x`, expected ..." message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

fn to_pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                out.push('/');
                out.push_str(&escape(key));
            }
            Segment::Enum { variant } => {
                out.push('/');
                out.push_str(&escape(variant));
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// A node's `router` field read from documents (the `RouterSpec` contract is in `router.rs`).
#[cfg(test)]
pub(super) mod tests {
    #[cfg(feature = "yaml")]
    use super::*;
    #[cfg(feature = "yaml")]
    use crate::contracts::RouterSpec;

    /// A document with a router node (also read by `schema.rs`'s tests).
    #[cfg(feature = "yaml")]
    pub(in crate::contracts) const YAML: &str = "workflow: w
slices: {note: {}}
entry: s
supervisors: {s: {allow: [r]}}
nodes:
  r: {supervisor: s, router: {destinations: [a, g], message_slice: note}}
  a: {supervisor: s}
";

    #[cfg(feature = "yaml")] // it reads a YAML document
    #[test]
    fn reads_from_json_and_yaml_with_defaults() {
        let (doc, _) = WorkflowDocument::parse(YAML, DocumentFormat::Yaml).expect("valid YAML");
        let r = doc.nodes["r"].router.clone().expect("a router");
        assert_eq!(r, RouterSpec::new(["a", "g"]).message_slice("note"));
        assert_eq!((r.may_answer, r.retries), (false, 1));
        let json = serde_json::to_value(&doc).expect("serializes");
        assert_eq!(
            json["nodes"]["r"]["router"],
            serde_json::json!({"destinations": ["a", "g"], "message_slice": "note", "retries": 1})
        );
        let back = WorkflowDocument::from_value(json).expect("reads back");
        assert_eq!(back.nodes["r"].router, Some(r));
    }
}
