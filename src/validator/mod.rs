//! The validator: every contract rule checked over a [`CompiledGraph`] before a run.
//!
//! [`Validator::validate`] runs every rule in a fixed order and returns a [`Report`] with
//! all diagnostics at once. Each [`Diagnostic`] carries a stable [`Code`] (`PG0001`...),
//! a [`Severity`], a message naming the ids involved, a JSON Pointer into the document
//! (plus line and column when the graph was loaded from a file) and, where one exists, a
//! suggested fix. `docs/spec/validation-rules.md` lists every code.
//!
//! ```
//! use pactgraph::{GraphBuilder, NodeContract, SliceDecl, SupervisorContract, Trigger};
//! use pactgraph::validator::Validator;
//! let graph = GraphBuilder::new("hello")
//!     .slice("answer", SliceDecl::new())
//!     .entry("root")
//!     .supervisor(SupervisorContract::new("root").allow(["reply"]))
//!     .node(NodeContract::new("reply").supervisor("root").writes(["answer"])
//!         .trigger(Trigger::default()).terminal(true))
//!     .build()
//!     .expect("all ids resolve");
//! let report = Validator::new().validate(&graph);
//! assert!(!report.has_errors(), "{report:?}");
//! ```

mod codes;
mod context;
#[cfg(feature = "render")]
mod human;
mod render;
mod rules;
mod valid;

use std::fmt;
use std::path::Path;

use serde::Serialize;

pub use codes::Code;
pub(crate) use context::Context;
pub use valid::{Rejected, ValidGraph};

use crate::contracts::{DocumentFormat, WorkflowDocument};
use crate::contracts::{LoadError, SourceMap};
use crate::graph::{CompiledGraph, GraphBuilder};

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; never fails validation.
    Info,
    /// Probably a mistake; an error in strict mode.
    Warning,
    /// The workflow cannot run as written.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One finding of the validator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Stable code (`PG0001`...).
    pub code: Code,
    /// Severity after strict mode was applied.
    pub severity: Severity,
    /// What is wrong, naming the ids involved.
    pub message: String,
    /// JSON Pointer of the offending place in the document.
    pub pointer: String,
    /// 1-based line, when the document was loaded from text.
    pub line: Option<usize>,
    /// 1-based column (characters), when the document was loaded from text.
    pub column: Option<usize>,
    /// A suggested fix, where one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with the code's default severity and no location resolved yet.
    pub fn new(code: Code, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            severity: code.severity(),
            message: message.into(),
            pointer: pointer.into(),
            line: None,
            column: None,
            fix: None,
        }
    }

    /// Adds a suggested fix.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    /// Overrides the severity.
    pub fn severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]: {}", self.severity, self.code, self.message)?;
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " (at {}, line {l}, column {c})", self.pointer),
            _ => write!(f, " (at {})", show_pointer(&self.pointer)),
        }
    }
}

pub(crate) fn show_pointer(p: &str) -> &str {
    if p.is_empty() { "/" } else { p }
}

/// Every diagnostic of one validation, in rule order then declaration order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The diagnostics.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// True when any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.count(Severity::Error) > 0
    }
    /// Number of diagnostics of a severity.
    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }
    /// Diagnostics with this code.
    pub fn with_code(&self, code: Code) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(move |d| d.code == code)
    }
    /// True when no diagnostic at all was found.
    pub fn is_empty(&self) -> bool {
        self.diagnostics.is_empty()
    }
}

/// Runs every rule over a compiled graph.
#[derive(Debug, Clone, Copy, Default)]
pub struct Validator {
    strict: bool,
}

impl Validator {
    /// A non-strict validator.
    pub fn new() -> Self {
        Self::default()
    }

    /// In strict mode warnings become errors (and recursion without an explicit
    /// `max_reentry` is an error).
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Runs every rule and returns all diagnostics, located in the graph's source when
    /// it has one.
    ///
    /// Complexity: O(V + E + S) in contracts, references and slice uses, plus the cost
    /// of compiling each declared JSON Schema.
    pub fn validate(&self, graph: &CompiledGraph) -> Report {
        let ctx = Context::new(graph);
        let mut diagnostics = Vec::new();
        for rule in rules::ALL {
            (rule.check)(&ctx, &mut diagnostics);
        }
        for d in &mut diagnostics {
            if self.strict && d.severity == Severity::Warning {
                d.severity = Severity::Error;
            }
            // A rule may have placed the diagnostic more precisely (inside a template).
            if d.line.is_none()
                && let Some(span) = graph.span_of(&d.pointer)
            {
                d.line = Some(span.line);
                d.column = Some(span.column);
            }
        }
        Report { diagnostics }
    }
}

/// A loaded and validated file: the graph when the document could be read, and the
/// report of every diagnostic (load failures included).
#[derive(Debug)]
pub struct Checked {
    /// The compiled graph (partial when some ids did not resolve), absent when the file
    /// could not be read or parsed.
    pub graph: Option<CompiledGraph>,
    /// Every diagnostic.
    pub report: Report,
    /// The text of a file that could be read but not loaded, located at its error.
    load_source: Option<SourceMap>,
}

impl Checked {
    /// The document's text and source map, for `Report::render_human` (feature `render`): the graph's when
    /// it compiled, else the file's text with the load error located.
    pub fn source(&self) -> Option<&SourceMap> {
        self.graph
            .as_ref()
            .and_then(CompiledGraph::source)
            .or(self.load_source.as_ref())
    }

    /// True when the workflow may run: it compiled fully and no diagnostic is an error.
    pub fn is_runnable(&self) -> bool {
        self.graph.as_ref().is_some_and(|g| g.problems().is_empty()) && !self.report.has_errors()
    }
}

/// Loads, compiles and validates a workflow file. Never fails: a file that cannot be
/// read or parsed yields a report with one `PG0000` diagnostic.
pub fn check_file(path: impl AsRef<Path>, strict: bool) -> Checked {
    let path = path.as_ref();
    // Read once: the report shows the text the error was found in (a pipe or a device
    // such as `/dev/urandom` would give other bytes, or none, when read again).
    let text = match crate::contracts::load::read_text(path) {
        Ok(text) => text,
        Err(e) => return load_failed(&e, None),
    };
    let name = path.display().to_string();
    match WorkflowDocument::parse(&text, DocumentFormat::from_path(path)) {
        Ok((doc, mut map)) => {
            map.name = Some(name);
            let graph = match GraphBuilder::from_document(doc).source_map(map).build() {
                Ok(g) => g,
                Err(failure) => failure.into_partial(),
            };
            let report = Validator::new().strict(strict).validate(&graph);
            Checked {
                graph: Some(graph),
                report,
                load_source: None,
            }
        }
        Err(e) => load_failed(&e, Some((text, name))),
    }
}

/// The report of a document that could not be loaded: its one diagnostic, and `text` (the
/// file's, with its name) located at the error to show the place.
fn load_failed(e: &LoadError, text: Option<(String, String)>) -> Checked {
    let d = load_diagnostic(e);
    let load_source = text.map(|(text, name)| {
        let mut map = SourceMap::new(text);
        map.name = Some(name);
        if let Some(span) = e.span() {
            map.insert(d.pointer.clone(), span);
        }
        map
    });
    Checked {
        graph: None,
        report: Report {
            diagnostics: vec![d],
        },
        load_source,
    }
}

/// The diagnostic (`PG0000`) for a document that could not be loaded.
pub fn load_diagnostic(e: &LoadError) -> Diagnostic {
    let pointer = match e {
        LoadError::DuplicateKey { parent, key, .. } => {
            format!("{parent}/{}", crate::contracts::pointer::escape(key))
        }
        LoadError::Invalid { pointer, .. } => pointer.clone(),
        LoadError::Io { .. }
        | LoadError::NotText { .. }
        | LoadError::Syntax { .. }
        | LoadError::Limit { .. }
        | LoadError::FeatureDisabled { .. } => String::new(),
    };
    let fix = match e {
        LoadError::Io { .. } => "check the path and the file's permissions",
        LoadError::NotText { .. } => "save the document as UTF-8 text",
        LoadError::Syntax { .. } => "fix the syntax at the place shown",
        LoadError::Limit { .. } => {
            "keep within the limits in docs/spec/workflow-document.md (section `Limits`)"
        }
        LoadError::DuplicateKey { .. } => "remove or rename one of the two keys",
        LoadError::Invalid { .. } => "check the field's name and type against `pactgraph schema`",
        LoadError::FeatureDisabled { .. } => {
            "convert the document to JSON, or build pactgraph with the feature named"
        }
    };
    let mut d = Diagnostic::new(Code::LOAD, pointer, e.to_string()).fix(fix);
    if let Some(span) = e.span() {
        d.line = Some(span.line);
        d.column = Some(span.column);
    }
    d
}

#[cfg(test)]
mod tests;
