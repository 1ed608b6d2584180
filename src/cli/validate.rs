//! `pactgraph validate FILE [--strict] [--format human|json]`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::validator::check_file;
use clap::ValueEnum;

/// How `validate` prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Each diagnostic with the offending line underlined.
    Human,
    /// A JSON array of `{code, severity, message, pointer, line, column}`.
    Json,
}

/// The arguments of `pactgraph validate`.
#[derive(clap::Args, Debug, Clone)]
pub struct ValidateArgs {
    /// The workflow document (JSON, or YAML for `.yaml`/`.yml`).
    pub file: PathBuf,
    /// Treat warnings as errors.
    #[arg(long)]
    pub strict: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

/// Validates the file and prints every diagnostic: exit 0 without errors, 1 otherwise.
pub fn run(args: &ValidateArgs) -> ExitCode {
    let checked = check_file(&args.file, args.strict);
    // A closed pipe must not turn into a panic: write errors are ignored.
    let _ = match args.format {
        Format::Json => writeln!(std::io::stdout().lock(), "{}", checked.report.to_json()),
        Format::Human => {
            let text = checked.report.render_human(checked.source());
            if checked.report.has_errors() {
                write!(std::io::stderr().lock(), "{text}")
            } else {
                write!(std::io::stdout().lock(), "{text}")
            }
        }
    };
    if checked.report.has_errors() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
