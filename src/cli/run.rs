//! `pactgraph run` and `pactgraph resume`, with or without a run store.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use pactgraph::runtime::{Clock, Executor, Pending, RunId, RunRecord, RunState, RunStatus};
use pactgraph::store::{
    AnyStore, Continue, CreateOptions, Dependencies, DriveOptions, OnDepFailure, RunInfo, RunStore,
    StoreError, StoredStatus, drive_with, local_owner,
};
use pactgraph::validator::{Severity, ValidGraph, Validator, check_file};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::exit;
use crate::store::{self, StoreArgs};

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

/// `run --name`, `--ttl` and the dependency options.
pub struct Naming {
    /// `--name`.
    pub name: Option<String>,
    /// `--ttl`.
    pub ttl: Option<String>,
    /// `--after` and the rest.
    pub deps: DepArgs,
}

/// `run --after RUN ...`: runs this one waits for, and `--detach`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DepArgs {
    /// Wait until this run is final before the first step (an id, a unique prefix of 6+
    /// characters, or a name); repeatable.
    #[arg(long = "after", visible_alias = "depends-on", value_name = "RUN")]
    pub after: Vec<String>,
    /// How long to wait for the dependencies (`30m`, `24h`, `7d`); past it the run fails
    /// with `dependency_timeout`.
    #[arg(long, value_name = "DUR", default_value = "24h")]
    pub dep_timeout: String,
    /// What a dependency that did not complete does: `abort` (the run fails with
    /// `dependency_failed` before any step) or `continue`.
    #[arg(long, value_name = "POLICY", default_value = "abort")]
    pub on_dep_failure: String,
    /// A declared slice that receives `{RUN_ID: {workflow, status, termination_reason,
    /// state}}` of each dependency when the run starts.
    #[arg(long, value_name = "SLICE")]
    pub dep_result: Option<String>,
    /// Store the run (`queued`, or `waiting` on its dependencies) and exit 0 printing
    /// `{"run_id", "status"}`: `pactgraph worker` runs it.
    #[arg(long)]
    pub detach: bool,
}

/// `pactgraph run FILE ...`.
pub fn run(
    file: &Path,
    input: Option<&str>,
    max_steps: Option<u32>,
    naming: &Naming,
    outputs: &Outputs,
    store_args: &StoreArgs,
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
        graph = match with_max_steps(graph, n) {
            Ok(g) => g,
            Err(code) => return code,
        };
    }
    let doc = graph.to_document();
    // `--ttl`, else the document's `retention`: checked before anything runs.
    let ttl = match (&naming.ttl, &doc.retention) {
        (Some(t), _) => Some(store::parse_duration("--ttl", t)),
        (None, Some(r)) => Some(store::parse_duration("the document's retention", r)),
        (None, None) => None,
    };
    let ttl = match ttl.transpose() {
        Ok(t) => t,
        Err(message) => return exit::usage(&message),
    };
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
    let rt = match store::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        let store = match store::open(store_args).await {
            Ok(s) => s,
            Err(code) => return code,
        };
        let Some(store) = store else {
            if !naming.deps.after.is_empty() || naming.deps.detach {
                return exit::usage(
                    "--after and --detach need a run store; --store none keeps nothing",
                );
            }
            return drive_plain(&executor, record, outputs, None).await;
        };
        let mut options = CreateOptions::default();
        if let Some(name) = &naming.name {
            options = options.name(name);
        }
        if let Some(ttl) = ttl {
            options = options.ttl(ttl);
        }
        match dependencies(&store, &naming.deps, &record).await {
            Ok(Some(deps)) => options = options.after(deps),
            Ok(None) => {}
            Err(code) => return code,
        }
        let info = match store.create(&record, &options).await {
            Ok(info) => info,
            Err(e) => return store::error(&e),
        };
        if naming.deps.detach {
            let printed = json!({"run_id": info.id, "status": info.status});
            let _ = write_json(Ok(std::io::stdout().lock()), &printed, "\n");
            return ExitCode::SUCCESS;
        }
        drive_stored(
            &executor,
            &store,
            record.run_id,
            Continue::AsStored,
            outputs,
            None,
        )
        .await
    })
}

/// The dependencies `args` name, resolved in `store` (an unknown or ambiguous run, a bad
/// duration or policy, an undeclared result slice: usage errors, exit 2).
async fn dependencies(
    store: &AnyStore,
    args: &DepArgs,
    record: &RunRecord,
) -> Result<Option<Dependencies>, ExitCode> {
    if args.after.is_empty() {
        if args.dep_result.is_some() {
            return Err(exit::usage("--dep-result needs --after"));
        }
        return Ok(None);
    }
    let mut after = Vec::with_capacity(args.after.len());
    for key in &args.after {
        match store.find(key).await {
            Ok(id) => after.push(id),
            Err(e @ (StoreError::NotFound { .. } | StoreError::Ambiguous { .. })) => {
                return Err(exit::usage(&format!("--after {key}: {e}")));
            }
            Err(e) => return Err(store::error(&e)),
        }
    }
    let timeout =
        store::parse_duration("--dep-timeout", &args.dep_timeout).map_err(|m| exit::usage(&m))?;
    let on_failure = OnDepFailure::parse(&args.on_dep_failure).ok_or_else(|| {
        exit::usage(&format!(
            "--on-dep-failure {}: expected `abort` or `continue`",
            args.on_dep_failure
        ))
    })?;
    let mut deps = Dependencies::new(after)
        .timeout(timeout)
        .on_failure(on_failure);
    if let Some(slice) = &args.dep_result {
        if !record.document.slices.contains_key(slice.as_str()) {
            return Err(exit::usage(&format!(
                "--dep-result {slice}: the workflow declares no slice `{slice}`"
            )));
        }
        deps = deps.result_slice(slice);
    }
    Ok(Some(deps))
}

/// The graph with `budgets.max_steps` replaced (validated again).
pub fn with_max_steps(graph: ValidGraph, n: u32) -> Result<ValidGraph, ExitCode> {
    let mut g = graph.into_graph();
    let budgets = g.budgets().max_steps(n);
    g.set_budgets(budgets);
    Validator::new()
        .accept(g)
        .map_err(|rejected| exit::usage(&format!("--max-steps {n}: {rejected}")))
}

/// `pactgraph resume STATE_FILE --answer TEXT`: the saved run is continued; with a store,
/// through it (imported first when the store does not have it yet).
pub fn resume(
    state_file: &Path,
    answer: &str,
    outputs: &Outputs,
    store_args: &StoreArgs,
) -> ExitCode {
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
    let rt = match store::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        let store = match store::open(store_args).await {
            Ok(s) => s,
            Err(code) => return code,
        };
        let Some(store) = store else {
            return resume_plain(&executor, record, answer, outputs, state_file).await;
        };
        let id = record.run_id;
        match store.info(id).await {
            Ok(info) if info.seq == record.seq && info.status == StoredStatus::AwaitingInput => {}
            Ok(info) => {
                return exit::failed(&format!(
                    "{}: run {id} is in the store at step {} ({}), the file is at {}; \
                     continue it with `pactgraph runs resume {id}`",
                    state_file.display(),
                    info.seq,
                    info.status,
                    record.seq
                ));
            }
            Err(StoreError::NotFound { .. }) => {
                if let Err(e) = store.create(&record, &CreateOptions::default()).await {
                    return store::error(&e);
                }
            }
            Err(e) => return store::error(&e),
        }
        let how = Continue::Answer(answer.to_string());
        drive_stored(&executor, &store, id, how, outputs, Some(state_file)).await
    })
}

async fn resume_plain(
    executor: &Executor,
    record: RunRecord,
    answer: &str,
    outputs: &Outputs,
    state_file: &Path,
) -> ExitCode {
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
    drive_plain(executor, record, outputs, Some(state_file)).await
}

/// SIGINT and SIGTERM, registered before the run starts.
struct Signals {
    int: Signal,
    term: Signal,
}

impl Signals {
    fn new() -> Result<Self, ExitCode> {
        let make = |kind| {
            signal(kind).map_err(|e| exit::failed(&format!("cannot watch for signals: {e}")))
        };
        Ok(Self {
            int: make(SignalKind::interrupt())?,
            term: make(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
        }
    }
}

/// Steps a run kept only in memory to the end or a pause (or a signal: exit 130), writes
/// the requested files, prints the result. `default_state_out` is where the saved run
/// goes without `--state-out` (`resume` rewrites its own file, so one pause cannot be
/// answered twice).
async fn drive_plain(
    executor: &Executor,
    mut saved: RunRecord,
    outputs: &Outputs,
    default_state_out: Option<&Path>,
) -> ExitCode {
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let progress = !outputs.quiet && std::io::stderr().is_terminal();
    let steps = async {
        while saved.run.is_running() {
            if progress {
                show_progress(&saved.run);
            }
            executor.step(&mut saved.run).await;
            saved.seq += 1;
        }
    };
    // A signal drops the step in flight: its program's process group is killed.
    let signalled = tokio::select! {
        () = steps => None,
        name = signals.recv() => Some(name),
    };
    if progress {
        eprint!("\r\x1b[K");
    }
    if let Some(name) = signalled {
        eprintln!(
            "pactgraph: run {} interrupted by {name} (--store none: nothing was kept)",
            saved.run_id
        );
        return ExitCode::from(exit::INTERRUPTED);
    }
    finish(&saved, outputs, default_state_out, false)
}

/// Drives stored run `id` (continued as `how`) through the store, one checkpoint a step,
/// then prints like [`drive_plain`]. SIGINT or SIGTERM drops the step in flight (its
/// program's process group is killed), records the run `interrupted` and exits 130.
pub async fn drive_stored(
    executor: &Executor,
    store: &AnyStore,
    id: RunId,
    how: Continue,
    outputs: &Outputs,
    default_state_out: Option<&Path>,
) -> ExitCode {
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let owner = local_owner();
    let mut options = DriveOptions::default();
    let progress = !outputs.quiet && std::io::stderr().is_terminal();
    if progress {
        options = options.before_step(show_progress).on_wait(show_waiting);
    }
    let result = tokio::select! {
        r = drive_with(executor, store, id, &owner, &options, how) => Ok(r),
        name = signals.recv() => Err(name),
    };
    if progress {
        eprint!("\r\x1b[K");
    }
    match result {
        Err(name) => {
            match store.interrupt(id, &owner).await {
                // The signal came before the run was claimed: nothing of it ran.
                Ok(()) | Err(StoreError::LeaseLost { holder: None, .. }) => {}
                Err(e) => eprintln!("pactgraph: error: recording the interruption: {e}"),
            }
            let steps = store.info(id).await.map_or(0, |i| i.steps);
            let printed = json!({
                "workflow": executor.graph().workflow(),
                "run_id": id,
                "status": "interrupted",
                "termination_reason": null,
                "steps": steps,
            });
            let _ = write_json(Ok(std::io::stdout().lock()), &printed, "\n");
            eprintln!(
                "pactgraph: run {id} interrupted by {name}; continue it with \
                 `pactgraph runs resume {id}`"
            );
            ExitCode::from(exit::INTERRUPTED)
        }
        Ok(Err(e)) => store::error(&e),
        Ok(Ok(_)) => match store.load(id).await {
            Ok(stored) => finish(&stored.record, outputs, default_state_out, true),
            Err(e) => store::error(&e),
        },
    }
}

/// Writes the requested files and prints the result object (with `run_id`); the exit
/// code follows the run's status.
fn finish(
    saved: &RunRecord,
    outputs: &Outputs,
    default_state_out: Option<&Path>,
    stored: bool,
) -> ExitCode {
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
        if let Err(e) = write_json(std::fs::File::create(path), saved, "\n") {
            return exit::failed(&format!(
                "cannot write the run state to {}: {e}",
                path.display()
            ));
        }
    } else if run.status() == RunStatus::AwaitingInput && !outputs.quiet {
        if stored {
            eprintln!(
                "pactgraph: the run awaits input; answer with `pactgraph runs resume {} \
                 --answer TEXT`",
                saved.run_id
            );
        } else {
            eprintln!(
                "pactgraph: the run awaits input; pass --state-out FILE to be able to resume it"
            );
        }
    }
    let printed = result_json(run);
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
    ExitCode::from(exit::of_status(run.status()))
}

/// The run's summary with `run_id` after `workflow` (every other key as before).
pub fn result_json(run: &RunState) -> Value {
    let summary = serde_json::to_value(run.summary()).unwrap_or(Value::Null);
    let Value::Object(map) = summary else {
        return summary;
    };
    let mut out = serde_json::Map::with_capacity(map.len() + 1);
    for (k, v) in map {
        let workflow = k == "workflow";
        out.insert(k, v);
        if workflow {
            out.insert("run_id".into(), json!(run.run_id));
        }
    }
    Value::Object(out)
}

/// Streams `value` as pretty JSON, then `end`, to `out` (opened by the caller).
pub fn write_json(
    out: std::io::Result<impl Write>,
    value: &impl Serialize,
    end: &str,
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out?);
    serde_json::to_writer_pretty(&mut out, value)?;
    out.write_all(end.as_bytes())?;
    out.flush()
}

/// The progress line of a run waiting on its dependencies.
fn show_waiting(on: &[RunInfo]) {
    let what: Vec<String> = on
        .iter()
        .map(|i| format!("{} ({}, {})", i.id, i.workflow, i.status))
        .collect();
    eprint!("\r\x1b[Kwaiting on {}", what.join(", "));
    let _ = std::io::stderr().flush();
}

fn show_progress(run: &RunState) {
    let what = match run.pending() {
        Some(Pending::Decide { supervisor }) => format!("{supervisor} decides"),
        Some(Pending::Handoff { node, .. }) => format!("handoff to {node}"),
        Some(Pending::Advised { node, .. }) => format!("advised node {node}"),
        Some(Pending::Retry { node, .. }) => format!("router {node} again"),
        Some(Pending::Call { subgraph, .. }) => format!("routed call of {subgraph}"),
        Some(Pending::Team(team)) => format!("team {} (cycle {})", team.node, team.cycle),
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
