//! Exit codes and the error lines that go with them.

use std::process::ExitCode;

/// Completed (or valid).
pub const OK: u8 = 0;
/// Invalid workflow or failed run.
pub const FAILED: u8 = 1;
/// Usage error.
pub const USAGE: u8 = 2;
/// Stopped by a guard.
pub const STOPPED: u8 = 3;
/// Awaiting input.
pub const AWAITING: u8 = 4;
/// Interrupted by SIGINT or SIGTERM (resumable).
pub const INTERRUPTED: u8 = 130;

/// The exit code of a run that returned with `status`.
pub fn of_status(status: crate::runtime::RunStatus) -> u8 {
    use crate::runtime::RunStatus;
    match status {
        RunStatus::Completed => OK,
        RunStatus::Stopped => STOPPED,
        RunStatus::AwaitingInput => AWAITING,
        _ => FAILED,
    }
}

/// Prints `pactgraph: error: MESSAGE` and exits 1.
pub fn failed(message: &str) -> ExitCode {
    eprintln!("pactgraph: error: {message}");
    ExitCode::from(FAILED)
}

/// Prints `pactgraph: usage error: MESSAGE` and exits 2.
pub fn usage(message: &str) -> ExitCode {
    eprintln!("pactgraph: usage error: {message}");
    ExitCode::from(USAGE)
}
