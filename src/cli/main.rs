//! The `pactgraph` command line.
#![forbid(unsafe_code)]

mod dot;
mod exit;
mod run;
mod runs;
mod schema;
mod store;
mod validate;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// pactgraph: declarative agent workflows with contracts checked before they run.
#[derive(Parser)]
#[command(name = "pactgraph", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the JSON Schema of workflow documents.
    Schema,
    /// Draw a workflow as DOT (or Mermaid), optionally with a run's path; `.svg`/`.png`
    /// output goes through Graphviz's `dot`.
    Dot(dot::DotArgs),
    /// Validate a workflow, run it (kept in the run store, checkpointed every step) and
    /// print `{workflow, run_id, status, termination_reason, steps, state, question?}`
    /// (exit 0 completed, 1 invalid or failed, 3 stopped by a guard, 4 awaiting input,
    /// 130 interrupted by SIGINT or SIGTERM).
    Run {
        /// The workflow document (JSON, or YAML for `.yaml`/`.yml`).
        file: PathBuf,
        /// The initial state: a JSON object, or `@path` to read one from a file.
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
        /// Write the decision trace (a JSON array) to this file.
        #[arg(long, value_name = "FILE")]
        trace_out: Option<PathBuf>,
        /// Write the saved run (everything `resume` needs) to this file.
        #[arg(long, value_name = "FILE")]
        state_out: Option<PathBuf>,
        /// Replace the document's `budgets.max_steps`.
        #[arg(long, value_name = "N")]
        max_steps: Option<u32>,
        /// No progress line, no warnings: only the result on stdout.
        #[arg(long)]
        quiet: bool,
        /// Record zero timestamps and durations, so the output (but its `run_id`) and the
        /// trace are byte-identical across runs of the same workflow and input.
        #[arg(long)]
        frozen_clock: bool,
        /// A name for the run, unique among unexpired runs; accepted wherever a run id is.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// When the stored record expires (`30m`, `24h`, `7d`); default: the document's
        /// `retention`, else never.
        #[arg(long, value_name = "DUR")]
        ttl: Option<String>,
        #[command(flatten)]
        deps: run::DepArgs,
        #[command(flatten)]
        store: store::StoreArgs,
    },
    /// Take queued runs, and waiting runs whose dependencies are settled, from the run
    /// store and run them (several at once with `--concurrency`), until SIGINT or
    /// SIGTERM (or, with `--once`, until nothing is runnable).
    Worker(worker::WorkerArgs),
    /// Continue a run paused by `ask_clarification` with the user's answer.
    Resume {
        /// The saved run written by `run --state-out` (rewritten if the run pauses again).
        state_file: PathBuf,
        /// The answer to the pending question.
        #[arg(long)]
        answer: String,
        /// Write the decision trace (a JSON array) to this file.
        #[arg(long, value_name = "FILE")]
        trace_out: Option<PathBuf>,
        /// Write the saved run here instead of over STATE_FILE.
        #[arg(long, value_name = "FILE")]
        state_out: Option<PathBuf>,
        /// No progress line: only the result on stdout.
        #[arg(long)]
        quiet: bool,
        /// Record zero timestamps and durations (see `run --frozen-clock`).
        #[arg(long)]
        frozen_clock: bool,
        #[command(flatten)]
        store: store::StoreArgs,
    },
    /// Runs kept in the run store: list, show, resume, cancel, prune, export.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Check every contract rule and print all diagnostics (exit 0 valid, 1 invalid).
    Validate {
        /// The workflow document (JSON, or YAML for `.yaml`/`.yml`).
        file: PathBuf,
        /// Treat warnings as errors.
        #[arg(long)]
        strict: bool,
        /// Output format.
        #[arg(long, value_enum, default_value = "human")]
        format: validate::Format,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Schema => schema::run(),
        Command::Run {
            file,
            input,
            trace_out,
            state_out,
            max_steps,
            quiet,
            frozen_clock,
            name,
            ttl,
            deps,
            store,
        } => run::run(
            &file,
            input.as_deref(),
            max_steps,
            &run::Naming { name, ttl, deps },
            &run::Outputs {
                trace_out,
                state_out,
                quiet,
                frozen_clock,
            },
            &store,
        ),
        Command::Resume {
            state_file,
            answer,
            trace_out,
            state_out,
            quiet,
            frozen_clock,
            store,
        } => run::resume(
            &state_file,
            &answer,
            &run::Outputs {
                trace_out,
                state_out,
                quiet,
                frozen_clock,
            },
            &store,
        ),
        Command::Runs(command) => runs::run(command),
        Command::Worker(args) => worker::run(&args),
        Command::Dot(args) => dot::run(&args),
        Command::Validate {
            file,
            strict,
            format,
        } => validate::run(&file, strict, format),
    }
}
