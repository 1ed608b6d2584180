//! The `pactgraph` command line.
#![forbid(unsafe_code)]

mod schema;
mod validate;

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
        Command::Validate {
            file,
            strict,
            format,
        } => validate::run(&file, strict, format),
    }
}
