//! `pactgraph run FILE`: validate a workflow, run it (kept in the run store) and print
//! its outcome.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::runtime::{Clock, Executor, RunEvents, RunRecord, document_dir};
use crate::store::{
    AnyStore, Continue, CreateOptions, Dependencies, DriveOptions, OnDepFailure, RunStore,
    StoreError, local_owner,
};
use crate::validator::{Severity, ValidGraph, Validator, check_file};
use serde_json::{Value, json};

use crate::cli::drive::{Target, continue_run};
use crate::cli::exit;
use crate::cli::outcome::{Outputs, ShapeArgs, write_json};
use crate::cli::store::{self, CheckpointArgs, StoreArgs};
use crate::cli::stream::Streamer;

/// The arguments of `pactgraph run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The workflow document (JSON, or YAML for `.yaml`/`.yml`).
    pub file: PathBuf,
    /// The initial state: a JSON object, or `@path` to read one from a file.
    #[arg(long, value_name = "JSON|@FILE")]
    pub input: Option<String>,
    /// Write the decision trace (a JSON array) to this file.
    #[arg(long, value_name = "FILE")]
    pub trace_out: Option<PathBuf>,
    /// Write the saved run (everything `resume` needs) to this file.
    #[arg(long, value_name = "FILE")]
    pub state_out: Option<PathBuf>,
    /// Replace the document's `budgets.max_steps`.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// Use MODEL as model NAME's `model` for this run (NAME a key of the document's
    /// `models`); repeatable.
    #[arg(long = "model", value_name = "NAME=MODEL", value_parser = parse_model_override)]
    pub models: Vec<(String, String)>,
    /// No progress line, no warnings: only the result on stdout.
    #[arg(long)]
    pub quiet: bool,
    /// Record zero timestamps and durations, so the output (but its `run_id`) and the
    /// trace are byte-identical across runs of the same workflow and input.
    #[arg(long)]
    pub frozen_clock: bool,
    /// A name for the run, unique among unexpired runs; accepted wherever a run id is.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// When the stored record expires (`30m`, `24h`, `7d`); default: the document's
    /// `retention`, else never.
    #[arg(long, value_name = "DUR")]
    pub ttl: Option<String>,
    /// Print the run's events as they happen, one JSON object a line (JSON Lines:
    /// run_started, step, checkpoint, paused, run_ended; docs/spec/events.md), the
    /// outcome object last.
    #[arg(long)]
    pub stream: bool,
    #[command(flatten)]
    pub shape: ShapeArgs,
    #[command(flatten)]
    pub deps: DepArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub checkpoints: CheckpointArgs,
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
pub fn run(args: RunArgs) -> ExitCode {
    let outputs = Outputs {
        trace_out: args.trace_out.clone(),
        state_out: args.state_out.clone(),
        quiet: args.quiet,
        frozen_clock: args.frozen_clock,
        shape: args.shape,
        stream: None,
    };
    if args.stream && args.deps.detach {
        return exit::usage("--stream prints a run as it runs; --detach leaves it to a worker");
    }
    let rt = match store::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let ready = Ready {
        file: args.file.clone(),
        input: args.input.clone(),
        quiet: args.quiet,
        clock: outputs.clock(),
        max_steps: args.max_steps,
        models: args.models.clone(),
        ttl: args.ttl.clone(),
    };
    // The store is opened while the workflow loads (ADR 0068): the workflow and the
    // input are read, checked and made a run on a thread of the runtime's blocking pool
    // while this one waits on the store's server or file. A workflow or an input refused
    // is reported first, as when the store was opened after them; the store's own
    // failure only after both.
    let (ready, opened) = if store::opens_early(&args.store) {
        let loading = rt.spawn_blocking(move || ready.load());
        rt.block_on(async {
            let opened = store::try_open(&args.store).await;
            let ready = match loading.await {
                Ok(ready) => ready,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            };
            (ready, Some(opened))
        })
    } else {
        (ready.load(), None)
    };
    let Loaded {
        executor,
        record,
        ttl,
    } = match ready {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mut outputs = outputs;
    let executor = if args.stream {
        // Subscribed before the run starts; printed on a thread of its own.
        let events = RunEvents::new();
        outputs.stream = Some(rt.block_on(async { Streamer::start(&events) }));
        executor.with_events(events)
    } else {
        executor
    };
    let outputs = outputs;
    let code = rt.block_on(async {
        let opened = match opened {
            Some(opened) => opened,
            None => store::try_open(&args.store).await,
        };
        let store = match opened {
            Ok(s) => s,
            Err(unopened) => return unopened.report(),
        };
        let Some(store) = store else {
            if !args.deps.after.is_empty() || args.deps.detach {
                return exit::usage(
                    "--after and --detach need a run store; --store none keeps nothing",
                );
            }
            let target = Target::Memory(Box::new(record));
            return continue_run(&executor, target, Continue::AsStored, &outputs, None).await;
        };
        let mut options = CreateOptions::default();
        if let Some(name) = &args.name {
            options = options.name(name);
        }
        if let Some(ttl) = ttl {
            options = options.ttl(ttl);
        }
        match dependencies(&store, &args.deps, &record).await {
            Ok(Some(deps)) => options = options.after(deps),
            Ok(None) => {}
            Err(code) => return code,
        }
        // Created claimed by the drive that follows, so that no worker on the store takes
        // it in between; a run left to workers (`--detach`) is created unclaimed.
        let owner = local_owner();
        if !args.deps.detach {
            options = options.claimed_by(owner.clone(), DriveOptions::default().lease);
        }
        let info = match store.create(&record, &options).await {
            Ok(info) => info,
            Err(e) => return store::error(&e),
        };
        if args.deps.detach {
            let printed = json!({"run_id": info.id, "status": info.status});
            let _ = write_json(Ok(std::io::stdout().lock()), &printed, "\n");
            return ExitCode::SUCCESS;
        }
        let target = Target::Created(&store, info.id, args.checkpoints.get(), owner);
        continue_run(&executor, target, Continue::AsStored, &outputs, None).await
    });
    // Every return above: the printer (if any) ends before the runtime does.
    rt.block_on(outputs.finish_stream());
    // Every task is done (the run awaited its checkpoints, the printer its lines): the
    // idle threads of the blocking pool (the loading thread, the checkpoints' packing) are
    // left to the process's exit rather than woken and joined one by one (ADR 0068).
    rt.shutdown_background();
    code
}

/// What `run` reads before its first step: the workflow, the input, the overrides.
struct Ready {
    file: PathBuf,
    input: Option<String>,
    quiet: bool,
    clock: Clock,
    max_steps: Option<u32>,
    models: Vec<(String, String)>,
    ttl: Option<String>,
}

/// The run `run` is to start: its executor, its record and how long it is kept.
struct Loaded {
    executor: Executor,
    record: RunRecord,
    ttl: Option<std::time::Duration>,
}

impl Ready {
    /// Reads and checks the input and the workflow, and starts the run in memory; a
    /// refusal is printed (its exit code returned). Nothing here touches the store.
    fn load(self) -> Result<Loaded, ExitCode> {
        let file = self.file.as_path();
        let initial = parse_input(self.input.as_deref()).map_err(|m| exit::usage(&m))?;
        let checked = check_file(file, false);
        if !self.quiet && checked.is_runnable() && checked.report.count(Severity::Warning) > 0 {
            eprint!("{}", checked.report.render_human(checked.source()));
        }
        let mut graph = match checked.into_valid() {
            Ok(g) => g,
            Err(checked) => {
                eprint!("{}", checked.report.render_human(checked.source()));
                return Err(exit::failed(&format!(
                    "{} is not a valid workflow; nothing ran",
                    file.display()
                )));
            }
        };
        if let Some(n) = self.max_steps {
            graph = with_max_steps(graph, n)?;
        }
        if !self.models.is_empty() {
            graph = with_models(graph, &self.models)?;
        }
        let doc = graph.to_document();
        // `--ttl`, else the document's `retention`: checked before anything runs.
        let ttl = match (&self.ttl, &doc.retention) {
            (Some(t), _) => Some(store::parse_duration("--ttl", t)),
            (None, Some(r)) => Some(store::parse_duration("the document's retention", r)),
            (None, None) => None,
        };
        let ttl = ttl.transpose().map_err(|m| exit::usage(&m))?;
        let base_dir = document_dir(file);
        let executor = Executor::builder(graph)
            .base_dir(&base_dir)
            .clock(self.clock)
            .build()
            .map_err(|e| exit::failed(&format!("{}: {e}", file.display())))?;
        let state = executor
            .start(initial)
            .map_err(|e| exit::failed(&format!("{}: --input: {e}", file.display())))?;
        let mut record = RunRecord::new(doc, state);
        record.workflow_file = Some(file.display().to_string());
        record.base_dir = Some(base_dir.display().to_string());
        Ok(Loaded {
            executor,
            record,
            ttl,
        })
    }
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

/// `NAME=MODEL` of `--model`: both sides non-empty.
fn parse_model_override(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((name, model)) if !name.trim().is_empty() && !model.trim().is_empty() => {
            Ok((name.trim().to_string(), model.trim().to_string()))
        }
        _ => Err(format!(
            "`{raw}` is not NAME=MODEL (a key of the document's `models`, `=`, the model to \
             use), e.g. --model default=qwen2.5:7b-instruct"
        )),
    }
}

/// The graph with each `--model NAME=MODEL` applied to `models.NAME.model` (validated
/// again). A NAME the document does not declare, or one given twice, is a usage error.
pub fn with_models(
    graph: ValidGraph,
    overrides: &[(String, String)],
) -> Result<ValidGraph, ExitCode> {
    let mut g = graph.into_graph();
    let mut models = g.models().clone();
    let mut seen = Vec::with_capacity(overrides.len());
    for (name, model) in overrides {
        if seen.contains(&name) {
            return Err(exit::usage(&format!(
                "--model {name}={model}: model `{name}` is overridden twice"
            )));
        }
        seen.push(name);
        let Some(spec) = models.get_mut(name) else {
            let known: Vec<String> = models.keys().map(|k| format!("`{k}`")).collect();
            let known = if known.is_empty() {
                "it declares none".to_string()
            } else {
                format!("it declares {}", known.join(", "))
            };
            return Err(exit::usage(&format!(
                "--model {name}={model}: the workflow has no model `{name}` under `models` ({known})"
            )));
        };
        spec.model.clone_from(model);
    }
    g.set_models(models);
    Validator::new()
        .accept(g)
        .map_err(|rejected| exit::usage(&format!("--model: {rejected}")))
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
