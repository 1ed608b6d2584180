//! `pactgraph run` and `pactgraph resume`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use pactgraph::runtime::{Clock, Executor, Pending, RunRecord, RunState, RunStatus};
use pactgraph::validator::{Severity, Validator, check_file};
use serde::Serialize;
use serde_json::{Value, json};

use crate::exit;

/// Where `run` and `resume` write besides stdout.
pub struct Outputs {
    /// `--trace-out`.
    pub trace_out: Option<PathBuf>,
    /// `--state-out`.
    pub state_out: Option<PathBuf>,
    /// `--quiet`.
    pub quiet: bool,
    /// `--frozen-clock`: zero timestamps and durations in the trace.
    pub frozen_clock: bool,
}

impl Outputs {
    fn clock(&self) -> Clock {
        if self.frozen_clock {
            Clock::Frozen
        } else {
            Clock::System
        }
    }
}

/// `pactgraph run FILE ...`.
pub fn run(
    file: &Path,
    input: Option<&str>,
    max_steps: Option<u32>,
    outputs: &Outputs,
) -> ExitCode {
    let initial = match parse_input(input) {
        Ok(v) => v,
        Err(message) => return exit::usage(&message),
    };
    let checked = check_file(file, false);
    if !outputs.quiet && checked.is_runnable() && checked.report.count(Severity::Warning) > 0 {
        eprint!("{}", checked.report.render_human(checked.source()));
    }
    let mut graph = match checked.into_valid() {
        Ok(g) => g,
        Err(checked) => {
            eprint!("{}", checked.report.render_human(checked.source()));
            return exit::failed(&format!(
                "{} is not a valid workflow; nothing ran",
                file.display()
            ));
        }
    };
    if let Some(n) = max_steps {
        let mut g = graph.into_graph();
        let budgets = g.budgets().max_steps(n);
        g.set_budgets(budgets);
        graph = match Validator::new().accept(g) {
            Ok(g) => g,
            Err(rejected) => {
                return exit::usage(&format!("--max-steps {n}: {rejected}"));
            }
        };
    }
    let doc = graph.to_document();
    let base_dir = base_dir_of(file);
    let executor = match Executor::builder(graph)
        .base_dir(&base_dir)
        .clock(outputs.clock())
        .build()
    {
        Ok(e) => e,
        Err(e) => return exit::failed(&format!("{}: {e}", file.display())),
    };
    let state = match executor.start(initial) {
        Ok(s) => s,
        Err(e) => return exit::failed(&format!("{}: --input: {e}", file.display())),
    };
    let mut record = RunRecord::new(doc, state);
    record.workflow_file = Some(file.display().to_string());
    record.base_dir = Some(base_dir.display().to_string());
    drive(&executor, record, outputs, None)
}

/// `pactgraph resume STATE_FILE --answer TEXT`.
pub fn resume(state_file: &Path, answer: &str, outputs: &Outputs) -> ExitCode {
    let text = match std::fs::read_to_string(state_file) {
        Ok(t) => t,
        Err(e) => return exit::failed(&format!("cannot read {}: {e}", state_file.display())),
    };
    let record = match RunRecord::from_json(&text) {
        Ok(r) => r,
        Err(e) => return exit::failed(&format!("{}: {e}", state_file.display())),
    };
    // The saved document is validated again: the runtime runs valid graphs only.
    let graph = match record.graph() {
        Ok(g) => g,
        Err(e) => return exit::failed(&format!("{}: {e}", state_file.display())),
    };
    let executor = match Executor::builder(graph)
        .base_dir(record.base_dir.as_deref().unwrap_or("."))
        .clock(outputs.clock())
        .build()
    {
        Ok(e) => e,
        Err(e) => return exit::failed(&format!("{}: {e}", state_file.display())),
    };
    let RunRecord {
        format,
        run_id,
        seq,
        workflow_file,
        base_dir,
        document,
        digest,
        run,
    } = record;
    let run = match executor.resume(run, answer) {
        Ok(r) => r,
        Err(e) => return exit::failed(&format!("{}: cannot resume: {e}", state_file.display())),
    };
    let record = RunRecord {
        format,
        run_id,
        seq,
        workflow_file,
        base_dir,
        document,
        digest,
        run,
    };
    drive(&executor, record, outputs, Some(state_file))
}

/// Runs to the end or a pause, writes the requested files, prints the result.
/// `default_state_out` is where the saved run goes without `--state-out` (`resume` rewrites
/// its own file, so one pause cannot be answered twice).
fn drive(
    executor: &Executor,
    mut saved: RunRecord,
    outputs: &Outputs,
    default_state_out: Option<&Path>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return exit::failed(&format!("cannot start the async runtime: {e}")),
    };
    let progress = !outputs.quiet && std::io::stderr().is_terminal();
    runtime.block_on(async {
        while saved.run.is_running() {
            if progress {
                show_progress(&saved.run);
            }
            executor.step(&mut saved.run).await;
            saved.seq += 1;
        }
    });
    if progress {
        eprint!("\r\x1b[K");
    }
    let run = &saved.run;
    if let Some(path) = &outputs.trace_out
        && let Err(e) = std::fs::write(path, run.trace.to_json_pretty())
    {
        return exit::failed(&format!(
            "cannot write the trace to {}: {e}",
            path.display()
        ));
    }
    let state_out = outputs.state_out.as_deref().or(default_state_out);
    if let Some(path) = state_out {
        if let Err(e) = write_json(std::fs::File::create(path), &saved, "\n") {
            return exit::failed(&format!(
                "cannot write the run state to {}: {e}",
                path.display()
            ));
        }
    } else if run.status() == RunStatus::AwaitingInput && !outputs.quiet {
        eprintln!("pactgraph: the run awaits input; pass --state-out FILE to be able to resume it");
    }
    let printed = run.summary();
    if let Err(e) = write_json(Ok(std::io::stdout().lock()), &printed, "\n") {
        return exit::failed(&format!("cannot write the result: {e}"));
    }
    if let (Some(m), false) = (run.message(), outputs.quiet)
        && matches!(run.status(), RunStatus::Failed | RunStatus::Stopped)
    {
        let reason = run
            .termination_reason()
            .map(|r| r.as_str())
            .unwrap_or("unknown");
        eprintln!("pactgraph: run {} ({reason}): {m}", run.status());
    }
    ExitCode::from(match run.status() {
        RunStatus::Completed => exit::OK,
        RunStatus::Stopped => exit::STOPPED,
        RunStatus::AwaitingInput => exit::AWAITING,
        _ => exit::FAILED,
    })
}

/// Streams `value` as pretty JSON, then `end`, to `out` (opened by the caller).
fn write_json(
    out: std::io::Result<impl Write>,
    value: &impl Serialize,
    end: &str,
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out?);
    serde_json::to_writer_pretty(&mut out, value)?;
    out.write_all(end.as_bytes())?;
    out.flush()
}

fn show_progress(run: &RunState) {
    let what = match run.pending() {
        Some(Pending::Decide { supervisor }) => format!("{supervisor} decides"),
        Some(Pending::Handoff { node, .. }) => format!("handoff to {node}"),
        Some(Pending::Advised { node, .. }) => format!("advised node {node}"),
        _ => String::new(),
    };
    let level = run.current_subgraph().unwrap_or("root");
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[Kstep {} · depth {} ({level}) · {what}",
        run.steps,
        run.depth()
    );
    let _ = err.flush();
}

/// The folder `exec` programs run in: the workflow file's own.
fn base_dir_of(file: &Path) -> PathBuf {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// `--input JSON` or `--input @file`; absent means `{}`.
fn parse_input(input: Option<&str>) -> Result<Value, String> {
    let Some(raw) = input else {
        return Ok(json!({}));
    };
    let (text, origin) = match raw.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| format!("--input: cannot read {path}: {e}"))?,
            path.to_string(),
        ),
        None => (raw.to_string(), "the argument".to_string()),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("--input: {origin} is not valid JSON: {e}"))?;
    if !value.is_object() {
        return Err(format!("--input: {origin} must be a JSON object of slices"));
    }
    Ok(value)
}
