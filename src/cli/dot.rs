//! `pactgraph dot FILE [--trace F] [--output PATH] [--mermaid]`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::GraphBuilder;
use crate::contracts::WorkflowDocument;
use crate::runtime::DecisionTrace;
use crate::visualize::{self, DotOptions, ImageFormat};

/// The arguments of `pactgraph dot`.
#[derive(clap::Args)]
pub struct DotArgs {
    /// The workflow document (JSON, or YAML for `.yaml`/`.yml`).
    pub file: PathBuf,
    /// A decision trace to paint over the graph: a JSON array as written by
    /// `run --trace-out`, a saved run (`run --state-out`) or `run`'s output.
    #[arg(long, value_name = "F")]
    pub trace: Option<PathBuf>,
    /// Where to write: `.svg`, `.png` or `.pdf` run Graphviz's `dot`; any other path gets
    /// the text. Default: standard output.
    #[arg(long, short, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Write a Mermaid flowchart instead of DOT.
    #[arg(long)]
    pub mermaid: bool,
}

pub fn run(args: &DotArgs) -> ExitCode {
    match execute(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(lines) => {
            for line in lines {
                eprintln!("{line}");
            }
            ExitCode::from(1)
        }
    }
}

fn execute(args: &DotArgs) -> Result<(), Vec<String>> {
    let file = args.file.display();
    let format = args.output.as_deref().and_then(ImageFormat::from_path);
    if let (true, Some(f)) = (args.mermaid, format) {
        return Err(vec![format!(
            "--mermaid writes text and cannot make a .{} image; write e.g. `--output graph.mmd`",
            f.name()
        )]);
    }
    let (doc, map) = WorkflowDocument::load(&args.file).map_err(|e| match e {
        crate::contracts::LoadError::Io { .. } | crate::contracts::LoadError::NotText { .. } => {
            vec![e.to_string()]
        }
        e => vec![format!("{file}: {e}")],
    })?;
    let graph = GraphBuilder::from_document(doc)
        .source_map(map)
        .build()
        .map_err(|failure| {
            let partial = failure.partial.as_ref();
            failure
                .errors
                .iter()
                .map(|e| match partial.span_of(&e.pointer()) {
                    Some(s) => format!("{file}:{}:{}: {e}", s.line, s.column),
                    None => format!("{file}: {e}"),
                })
                .collect::<Vec<_>>()
        })?;
    let trace = match &args.trace {
        Some(path) => Some(load_trace(path)?),
        None => None,
    };
    let options = match &trace {
        Some(t) => DotOptions::with_trace(t),
        None => DotOptions::default(),
    };
    if let Some(t) = &trace {
        let unmatched = visualize::unmatched_trace_items(&graph, t);
        if unmatched > 0 {
            eprintln!(
                "warning: {unmatched} item(s) of trace {} name ids or moves that workflow `{}` does not have; they are not drawn",
                args.trace.as_deref().unwrap_or(Path::new("")).display(),
                graph.workflow()
            );
        }
    }
    let text = if args.mermaid {
        visualize::to_mermaid(&graph, &options)
    } else {
        visualize::to_dot(&graph, &options)
    };
    match (&args.output, format) {
        (None, _) => {
            print!("{text}");
            Ok(())
        }
        (Some(path), None) => std::fs::write(path, text)
            .map_err(|e| vec![format!("cannot write {}: {e}", path.display())]),
        (Some(path), Some(format)) => {
            visualize::render(&text, format, path).map_err(|e| vec![e.to_string()])
        }
    }
}

/// Reads a trace from a `run --trace-out` file (a JSON array), a saved run
/// (`run --state-out`: its `run.trace`) or `run`'s printed output with `--trace` (its
/// `trace`) or `--full` (its `state.system.decision_trace`).
fn load_trace(path: &Path) -> Result<DecisionTrace, Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![format!("cannot read trace {}: {e}", path.display())])?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        vec![format!(
            "{}:{}:{}: not JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )]
    })?;
    let items = ["", "/run/trace", "/trace", "/state/system/decision_trace"]
        .iter()
        .find_map(|p| value.pointer(p).filter(|v| v.is_array()))
        .cloned()
        .ok_or_else(|| {
            vec![format!(
                "{}: not a decision trace: expected a JSON array of trace items, a saved run \
                 (`run --state-out`) or the output of `run --trace` or `run --full`",
                path.display()
            )]
        })?;
    serde_json::from_value(items).map_err(|e| {
        vec![format!(
            "{}: not a decision trace (a JSON array of trace items): {e}",
            path.display()
        )]
    })
}
