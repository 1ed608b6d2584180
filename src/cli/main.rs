//! The `pactgraph` command line.
#![forbid(unsafe_code)]

mod dot;
mod schema;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Schema => schema::run(),
        Command::Dot(args) => dot::run(&args),
    }
}
