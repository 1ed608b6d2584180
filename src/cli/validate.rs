//! `pactgraph validate FILE [--strict] [--format human|json]`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::ValueEnum;
use pactgraph::validator::check_file;

/// How `validate` prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Each diagnostic with the offending line underlined.
    Human,
    /// A JSON array of `{code, severity, message, pointer, line, column}`.
    Json,
}

/// Validates `file` and prints every diagnostic: exit 0 without errors, 1 otherwise.
pub fn run(file: &Path, strict: bool, format: Format) -> ExitCode {
    let checked = check_file(file, strict);
    // A closed pipe must not turn into a panic: write errors are ignored.
    let _ = match format {
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
