//! The workflow documents under `--workflows`: found by walking that folder, named by
//! their `workflow` field. A request names a workflow, never a file: no path from a
//! request reaches the file system.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::validator::{Checked, check_file};

/// How deep under `--workflows` documents are looked for.
const MAX_DEPTH: usize = 4;
/// At most this many documents are read (a folder with more is cut, with a warning).
const MAX_DOCUMENTS: usize = 1_000;

/// One document found: its file (relative to the folder) and what the validator said.
#[derive(Debug)]
pub struct Entry {
    /// The file, relative to `--workflows`, `/`-separated.
    pub file: String,
    /// The file's full path.
    pub path: PathBuf,
    /// The document's `workflow` field, when it could be read.
    pub name: Option<String>,
    /// The graph and the report.
    pub checked: Checked,
}

impl Entry {
    /// True when the document may run.
    pub fn valid(&self) -> bool {
        self.checked.is_runnable()
    }

    /// The validator's diagnostics as JSON (`{code, severity, message, pointer, line,
    /// column, fix?}`).
    pub fn diagnostics(&self) -> Value {
        serde_json::from_str(&self.checked.report.to_json()).unwrap_or_else(|_| json!([]))
    }

    /// `{name, file, valid, diagnostics}`.
    pub fn summary(&self) -> Value {
        json!({
            "name": self.name,
            "file": self.file,
            "valid": self.valid(),
            "diagnostics": self.diagnostics(),
        })
    }
}

/// The folder of documents (`None`: no `--workflows`, no documents).
#[derive(Debug, Clone)]
pub struct Catalog {
    dir: Option<PathBuf>,
}

impl Catalog {
    /// The documents under `dir`.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// Every document, read now, sorted by file (so the first of two with one name is
    /// always the same).
    pub fn scan(&self) -> Vec<Entry> {
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        let mut files = Vec::new();
        walk(dir, 0, &mut files);
        files.sort();
        if files.len() > MAX_DOCUMENTS {
            tracing::warn!(
                target: "pactgraph::serve",
                "{} documents under {}: only the first {MAX_DOCUMENTS} are served",
                files.len(),
                dir.display()
            );
            files.truncate(MAX_DOCUMENTS);
        }
        files
            .into_iter()
            .map(|path| {
                let checked = check_file(&path, false);
                let name = checked.graph.as_ref().map(|g| g.workflow().to_string());
                let file = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                Entry {
                    file,
                    path,
                    name,
                    checked,
                }
            })
            .collect()
    }

    /// The document named `name` (the first by file when two share it).
    pub fn find(&self, name: &str) -> Option<Entry> {
        self.scan()
            .into_iter()
            .find(|e| e.name.as_deref() == Some(name))
    }
}

/// Collects `.json`, `.yaml` and `.yml` files under `dir` (symbolic links not followed,
/// hidden entries skipped).
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH || out.len() > MAX_DOCUMENTS {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            walk(&path, depth + 1, out);
        } else if kind.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "json" | "yaml" | "yml"))
        {
            out.push(path);
        }
    }
}
