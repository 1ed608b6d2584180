//! `--store URL` and `--durability`: opening the run store that `run`, `resume` and
//! `runs ...` share, the async runtime they run on, and how store errors exit.

use std::process::ExitCode;
use std::time::Duration;

use crate::store::{AnyStore, Checkpoints, Durability, StoreError};
use clap::{Args, ValueEnum};

use crate::cli::exit;

/// The store used when neither `--store` nor `PACTGRAPH_STORE` is given.
pub const DEFAULT_STORE: &str = "sqlite:.pactgraph/store.db";

/// The store options every command that runs or reads runs takes.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Where runs are kept: `sqlite:PATH` (created on first use),
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (its schema made on first use; workers
    /// on many machines can share it) or `none` (nothing is kept). Default:
    /// `sqlite:.pactgraph/store.db` under the current directory.
    #[arg(long, value_name = "URL", env = "PACTGRAPH_STORE", default_value = DEFAULT_STORE)]
    pub store: String,
    /// `normal`: a commit survives the process dying (SQLite synchronous=NORMAL,
    /// PostgreSQL synchronous_commit=off); `full`: every commit reaches the disk before
    /// the run goes on, surviving a crash of the machine or the database server
    /// (synchronous=FULL, synchronous_commit=on).
    #[arg(long, value_enum, default_value = "normal")]
    pub durability: DurabilityArg,
}

/// `--checkpoints`: when `run`, `runs resume` and `worker` commit a run's steps.
#[derive(Args, Debug, Clone)]
pub struct CheckpointArgs {
    /// `effects`: a step that ran a program, a handler, a model or tool call is committed
    /// before the next such effect starts, with the steps without effects before it; those
    /// are also committed at a pause or the end, or after 100 ms or 256 steps (a crash may
    /// lose them: the resumed run recomputes them). `steps`: every step is committed.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "effects")]
    pub checkpoints: CheckpointsArg,
}

impl CheckpointArgs {
    /// The library's value.
    pub fn get(&self) -> Checkpoints {
        match self.checkpoints {
            CheckpointsArg::Effects => Checkpoints::Effects,
            CheckpointsArg::Steps => Checkpoints::Steps,
        }
    }
}

/// `--checkpoints`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckpointsArg {
    /// At effects (and every 100 ms or 256 steps).
    Effects,
    /// Every step.
    Steps,
}

/// `--durability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// synchronous=NORMAL.
    Normal,
    /// synchronous=FULL.
    Full,
}

/// A current-thread tokio runtime with I/O and time (programs, timers, signals).
pub fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| exit::failed(&format!("cannot start the async runtime: {e}")))
}

/// Opens the store `args` name: `None` for `--store none`. Any scheme but `sqlite:` and
/// `postgres://` is a usage error; a store that cannot be opened (its folder cannot be
/// made, the file is not a database, a newer format) fails with exit 1.
pub async fn open(args: &StoreArgs) -> Result<Option<AnyStore>, ExitCode> {
    try_open(args).await.map_err(Unopened::report)
}

/// As [`open`], keeping `connections` connections to a PostgreSQL server (a worker or a
/// server: SQLite's reads on a pool of their own).
pub async fn open_with(args: &StoreArgs, connections: u32) -> Result<Option<AnyStore>, ExitCode> {
    open_for(args, connections).await.map_err(Unopened::report)
}

/// As [`open`], the failure not yet printed: `run` opens its store while it loads the
/// workflow (ADR 0068), and a workflow that is not valid is reported first.
pub async fn try_open(args: &StoreArgs) -> Result<Option<AnyStore>, Unopened> {
    open_for(args, 2).await
}

/// Whether `run` opens the store `args` name while it loads the workflow (ADR 0068): a
/// PostgreSQL server, whose connection (a server process started, the password
/// exchanged, the schema's format read) takes milliseconds of waiting, or a SQLite file
/// that exists (its WAL read back at open). Not a SQLite file still to be made: a command
/// refused for its workflow or its input leaves no store behind, as before.
pub fn opens_early(args: &StoreArgs) -> bool {
    let url = args.store.trim();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return true;
    }
    url.strip_prefix("sqlite:")
        .filter(|rest| *rest != ":memory:")
        .and_then(|rest| crate::store::sqlite_file_path(rest).ok())
        .is_some_and(|path| path.is_file())
}

/// Why a store was not opened, reported by [`Unopened::report`].
#[derive(Debug)]
pub enum Unopened {
    /// A URL of no store pactgraph knows (exit 2).
    Usage(String),
    /// The store's own error (exit 1, or 2 for a bad URL).
    Store(StoreError),
}

impl Unopened {
    /// Prints why and gives the exit code.
    pub fn report(self) -> ExitCode {
        match self {
            Unopened::Usage(message) => exit::usage(&message),
            Unopened::Store(e) => error(&e),
        }
    }
}

/// Opens the store `args` name, keeping `connections` connections to a PostgreSQL server.
async fn open_for(args: &StoreArgs, connections: u32) -> Result<Option<AnyStore>, Unopened> {
    let url = args.store.trim();
    if url == "none" {
        return Ok(None);
    }
    if !(url.starts_with("sqlite:")
        || url.starts_with("postgres://")
        || url.starts_with("postgresql://"))
    {
        return Err(Unopened::Usage(format!(
            "--store {url}: expected `sqlite:PATH`, `postgres://USER:PASSWORD@HOST:PORT/DATABASE` \
             or `none`"
        )));
    }
    let durability = match args.durability {
        DurabilityArg::Normal => Durability::Normal,
        DurabilityArg::Full => Durability::Full,
    };
    let store = AnyStore::open_with(url, durability, connections)
        .await
        .map_err(Unopened::Store)?;
    if store.backend() == "sqlite" {
        // The SQLite connections stay open until the process exits (ADR 0059): the last
        // connection of a database to close copies the whole WAL into the database file
        // and syncs both (two or three fsyncs, each several milliseconds), which a
        // command's exit raced with. Left open, what the run committed stays in the WAL,
        // as after a crash, and SQLite's automatic checkpoint (`wal_autocheckpoint`)
        // copies it in its turn, every few hundred runs' pages instead of at every exit.
        // Leaked on purpose: the process ends with it.
        std::mem::forget(store.clone());
    }
    Ok(Some(store))
}

/// Opens the store for a `runs` command, which needs one.
pub async fn open_required(args: &StoreArgs) -> Result<AnyStore, ExitCode> {
    match open(args).await? {
        Some(store) => Ok(store),
        None => Err(exit::usage(
            "--store none keeps no runs: `runs` commands need a store",
        )),
    }
}

/// Prints a store error and exits: 2 for a bad URL, 1 for everything else (an unknown or
/// ambiguous run, a run held by another process, a store that cannot be opened).
pub fn error(e: &StoreError) -> ExitCode {
    match e {
        StoreError::BadUrl { .. } => exit::usage(&e.to_string()),
        _ => exit::failed(&e.to_string()),
    }
}

/// Reads `--ttl` or a document's `retention` (`30m`, `24h`, `7d`).
pub fn parse_duration(what: &str, text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{what} `{text}` is not a duration such as 30m, 24h or 7d: {e}"))
}

/// A moment as "3 min ago" or "in 2 h" relative to `now_ms` (both in milliseconds since
/// the Unix epoch): the largest whole unit, in English.
pub fn ago(at_ms: u64, now_ms: u64) -> String {
    let (diff, future) = if at_ms <= now_ms {
        (now_ms - at_ms, false)
    } else {
        (at_ms - now_ms, true)
    };
    let secs = diff / 1000;
    let text = match secs {
        0..=9 => {
            return if future {
                "now".into()
            } else {
                "just now".into()
            };
        }
        10..=59 => format!("{secs} s"),
        60..=3_599 => format!("{} min", secs / 60),
        3_600..=86_399 => format!("{} h", secs / 3_600),
        _ => format!("{} d", secs / 86_400),
    };
    if future {
        format!("in {text}")
    } else {
        format!("{text} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ago_uses_the_largest_whole_unit() {
        let now = 10_000_000_000;
        assert_eq!(ago(now, now), "just now");
        assert_eq!(ago(now - 42_000, now), "42 s ago");
        assert_eq!(ago(now - 3 * 60_000 - 5_000, now), "3 min ago");
        assert_eq!(ago(now - 5 * 3_600_000, now), "5 h ago");
        assert_eq!(ago(now + 7 * 86_400_000, now), "in 7 d");
    }

    #[test]
    fn durations_read_as_humantime_does() {
        assert_eq!(
            parse_duration("--ttl", "30m"),
            Ok(Duration::from_secs(1800))
        );
        assert_eq!(
            parse_duration("--ttl", "7d"),
            Ok(Duration::from_secs(604_800))
        );
        assert!(parse_duration("--ttl", "soon").is_err());
    }
}
