//! The `pactgraph` command line. Each subcommand's arguments are an `Args` struct in the
//! subcommand's own file.

mod dot;
mod drive;
mod exit;
mod outcome;
mod resume;
mod run;
mod runs;
mod schema;
mod serve;
mod store;
mod stream;
mod validate;
mod worker;

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
    /// Validate a workflow, run it (kept in the run store, committed at each effect: a
    /// program, handler, model or tool call) and print `{workflow, run_id, status,
    /// termination_reason, steps, message?, usage?, state, question?}`, `state` without its
    /// `system` slice, `usage` the tokens and cost of its model calls (`--full`: the whole
    /// run; `--trace`: the decision trace too) (exit 0 completed, 1 invalid or failed, 3
    /// stopped by a guard, 4 awaiting input, 130 interrupted by SIGINT or SIGTERM).
    Run(run::RunArgs),
    /// Check every contract rule and print all diagnostics (exit 0 valid, 1 invalid).
    Validate(validate::ValidateArgs),
    /// Continue a run paused by `ask_clarification` with the user's answer; prints like
    /// `run`.
    Resume(resume::ResumeArgs),
    /// Runs kept in the run store: list, show, resume, cancel, prune, graph, export,
    /// watch.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Take queued runs, and waiting runs whose dependencies are settled, from the run
    /// store and run them (several at once with `--concurrency`), until SIGINT or
    /// SIGTERM (or, with `--once`, until nothing is runnable).
    Worker(worker::WorkerArgs),
    /// Serve the HTTP API and the web UI over the run store (workflows from --workflows;
    /// with --workers N it also runs queued runs) until SIGINT or SIGTERM.
    Serve(serve::ServeArgs),
    /// Draw a workflow as DOT (or Mermaid), optionally with a run's path; `.svg`/`.png`
    /// output goes through Graphviz's `dot`.
    Dot(dot::DotArgs),
    /// Print the JSON Schema of workflow documents.
    Schema,
}

/// Runs the `pactgraph` command line: parses the process arguments, runs the subcommand
/// and returns its exit code (what the binary `src/main.rs` does).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Validate(args) => validate::run(&args),
        Command::Resume(args) => resume::run(args),
        Command::Runs(command) => runs::run(command),
        Command::Worker(args) => worker::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Dot(args) => dot::run(&args),
        Command::Schema => schema::run(),
    }
}
