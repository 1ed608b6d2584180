//! Continuing a run to its end or a pause, in memory or through the run store, and
//! printing its outcome: the one path `run`, `resume STATE` and `runs resume` share.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use crate::runtime::{Clock, Executor, Pending, RunId, RunRecord, RunState};
use crate::store::{
    AnyStore, Checkpoints, Continue, DriveOptions, RunInfo, RunStore, StoreError, drive,
    local_owner,
};
use crate::validator::ValidGraph;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::cli::exit;
use crate::cli::outcome::{
    Outputs, finish, finish_stored, interrupted_json, write_json, write_line,
};
use crate::cli::store;

/// The run to continue: kept in the run store, or only in memory (`--store none`).
pub enum Target<'a> {
    /// Stored run `id` in `store`, its steps committed as the third field says.
    Stored(&'a AnyStore, RunId, Checkpoints),
    /// Run `id` this process just created in `store` claimed by the owner of the last
    /// field (so that no worker takes it before its drive), its steps committed as the
    /// third field says.
    Created(&'a AnyStore, RunId, Checkpoints, String),
    /// A saved run kept in memory; nothing is stored.
    Memory(Box<RunRecord>),
}

/// Continues `target` as `how` says (as stored, with an answer, or reopened) to its end
/// or a pause, writes the requested files and prints the outcome (see
/// [`crate::cli::outcome::outcome_json`]); the exit code follows the run's status.
/// `default_state_out` is where the saved run goes without `--state-out` (`resume STATE`
/// rewrites its own file, so one pause cannot be answered twice).
pub async fn continue_run(
    executor: &Executor,
    target: Target<'_>,
    how: Continue,
    outputs: &Outputs,
    default_state_out: Option<&Path>,
) -> ExitCode {
    match target {
        Target::Stored(store, id, checkpoints) => {
            let stored = Stored {
                store,
                id,
                checkpoints,
                owner: local_owner(),
            };
            drive_stored(executor, stored, how, outputs, default_state_out).await
        }
        Target::Created(store, id, checkpoints, owner) => {
            let stored = Stored {
                store,
                id,
                checkpoints,
                owner,
            };
            drive_stored(executor, stored, how, outputs, default_state_out).await
        }
        Target::Memory(record) => {
            let mut record = *record;
            match how {
                Continue::AsStored => {}
                Continue::Answer(answer) => {
                    // `resume` takes the run and gives it back: the record keeps the rest.
                    record.run = match executor.resume(record.run, &answer) {
                        Ok(r) => r,
                        Err(e) => {
                            let from = default_state_out.map_or_else(
                                || format!("run {}", record.run_id),
                                |p| p.display().to_string(),
                            );
                            return exit::failed(&format!("{from}: cannot resume: {e}"));
                        }
                    };
                }
                _ => {
                    return exit::failed(&format!(
                        "run {}: only a stored run can be reopened",
                        record.run_id
                    ));
                }
            }
            drive_plain(executor, record, outputs, default_state_out).await
        }
    }
}

/// A stored run to drive: where, which, when its steps are committed, and by whom.
struct Stored<'a> {
    store: &'a AnyStore,
    id: RunId,
    checkpoints: Checkpoints,
    owner: String,
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

/// Steps a run kept only in memory to the end or a pause (or a signal: exit 130), then
/// finishes like [`continue_run`].
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
    outputs.finish_stream().await;
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
/// then finishes like [`continue_run`]. SIGINT or SIGTERM drops the step in flight (its
/// program's process group is killed), commits the steps taken before it, records the
/// run `interrupted` and exits 130.
async fn drive_stored(
    executor: &Executor,
    stored: Stored<'_>,
    how: Continue,
    outputs: &Outputs,
    default_state_out: Option<&Path>,
) -> ExitCode {
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Stored {
        store,
        id,
        checkpoints,
        owner,
    } = stored;
    let mut options = DriveOptions::default().checkpoints(checkpoints);
    let progress = !outputs.quiet && std::io::stderr().is_terminal();
    if progress {
        options = options.before_step(show_progress).on_wait(show_waiting);
    }
    // A signal interrupts the drive: it drops the effect in flight (killing its
    // program's process group), commits the steps it took since its last checkpoint and
    // gives its lease up. A second signal drops the drive at once (those steps are lost;
    // a later resume recomputes them).
    let interrupt = CancellationToken::new();
    options = options.interrupt_on(interrupt.clone());
    let drive = drive(executor, store, id, &owner, &options, how);
    tokio::pin!(drive);
    let result = tokio::select! {
        r = &mut drive => Ok(r),
        name = signals.recv() => Err(name),
    };
    let result = match result {
        Err(name) => {
            interrupt.cancel();
            tokio::select! {
                r = &mut drive => match r {
                    Err(StoreError::Interrupted { .. }) => Err((name, true)),
                    r => Ok(r),
                },
                _ = signals.recv() => Err((name, false)),
            }
        }
        Ok(r) => Ok(r),
    };
    if progress {
        eprint!("\r\x1b[K");
    }
    outputs.finish_stream().await;
    match result {
        Err((name, let_go)) => {
            if !let_go {
                match store.interrupt(id, &owner).await {
                    // The signal came before the run was claimed: nothing of it ran.
                    Ok(()) | Err(StoreError::LeaseLost { holder: None, .. }) => {}
                    Err(e) => eprintln!("pactgraph: error: recording the interruption: {e}"),
                }
            }
            let steps = store.info(id).await.map_or(0, |i| i.steps);
            let printed = interrupted_json(executor.graph().workflow(), id, steps);
            let _ = if outputs.stream.is_some() {
                write_line(&printed)
            } else {
                write_json(Ok(std::io::stdout().lock()), &printed, "\n")
            };
            eprintln!(
                "pactgraph: run {id} interrupted by {name}; continue it with \
                 `pactgraph runs resume {id}`"
            );
            ExitCode::from(exit::INTERRUPTED)
        }
        // A store call failed (a commit refused for want of space, an I/O error, the
        // database gone for longer than the lease): the run stopped at once, its last
        // commit kept, and is continued by `runs resume`. Said on stderr even with
        // `--quiet`, and in the outcome's `message`.
        Ok(Err(e @ StoreError::Database { .. })) => {
            // A run whose create failed (a drive that was creating it) is not there: the
            // error is the create's, said as before a run starts.
            let steps = match store.info(id).await {
                Ok(info) => info.steps,
                Err(_) => return store::error(&e),
            };
            let mut printed = interrupted_json(executor.graph().workflow(), id, steps);
            printed["message"] = e.to_string().into();
            let _ = write_json(Ok(std::io::stdout().lock()), &printed, "\n");
            eprintln!(
                "pactgraph: error: {e}\npactgraph: run {id} interrupted (its last commit is \
                 kept); continue it with `pactgraph runs resume {id}`"
            );
            ExitCode::from(exit::INTERRUPTED)
        }
        Ok(Err(e)) => store::error(&e),
        // The drive returns the run as it last committed it, the stored run: it is
        // loaded again (its snapshot and deltas) only to write it whole.
        Ok(Ok(run)) if outputs.state_out.is_none() && default_state_out.is_none() => {
            finish_stored(&run, outputs)
        }
        Ok(Ok(_)) => match store.load(id).await {
            Ok(stored) => finish(&stored.record, outputs, default_state_out, true),
            Err(e) => store::error(&e),
        },
    }
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

/// The progress line of a run: its step, depth and what runs.
fn show_progress(run: &RunState) {
    let what = match run.pending() {
        Some(Pending::Decide { supervisor }) => format!("{supervisor} decides"),
        Some(Pending::Handoff { node, .. }) => format!("handoff to {node}"),
        Some(Pending::Advised { node, .. }) => format!("advised node {node}"),
        Some(Pending::Advising(a)) => format!("advisors of {}", a.node),
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
        run.steps(),
        run.depth()
    );
    let _ = err.flush();
}

/// The executor that continues a saved run: `graph` (its document validated again, or
/// given a new budget), the run's base folder for `exec` programs, and `clock`.
pub fn executor_of(
    record: &RunRecord,
    graph: ValidGraph,
    clock: Clock,
) -> Result<Executor, String> {
    Executor::builder(graph)
        .base_dir(record.base_dir.as_deref().unwrap_or("."))
        .clock(clock)
        .build()
        .map_err(|e| e.to_string())
}
