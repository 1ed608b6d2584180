//! `pactgraph serve`: the HTTP API over a run store (see `docs/spec/http-api.md`), with
//! workers when asked; logs one line per request (with its request id) and per run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::serve::priority::{DEFAULT_SERVE_NICE, serving_runtime, serving_thread};
use crate::serve::{RunSide, ServeOptions, serve};
use clap::Args;

use crate::cli::exit;
use crate::cli::store::{self, StoreArgs};

/// `pactgraph serve` options.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// The address to listen on. Anything but a loopback address needs --token-env.
    /// Port 0 picks a free port (the address is logged).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// The folder of workflow documents runs can be started from (by their `workflow`
    /// name).
    #[arg(long, value_name = "DIR")]
    pub workflows: Option<PathBuf>,
    /// Also run queued runs, this many at once (0: serve only).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub workers: usize,
    /// The environment variable holding the API token (16 characters or more): every
    /// /api request must then carry `Authorization: Bearer TOKEN` or a session cookie.
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
    /// Allow cross-origin requests from this origin (none by default).
    #[arg(long, value_name = "ORIGIN")]
    pub cors: Option<String>,
    /// The largest request body (`10MB`, `64KB`, or bytes); larger ones get 413.
    #[arg(long, value_name = "SIZE", default_value = "10MB")]
    pub max_body: String,
    /// The lease taken on each run driven here (`30s`).
    #[arg(long, value_name = "DUR", default_value = "30s")]
    pub lease: String,
    /// How often an idle event stream (`/api/runs/{id}/events`) sends a keep-alive
    /// comment.
    #[arg(long, value_name = "DUR", default_value = "15s")]
    pub keep_alive: String,
    /// Event streams followed at once (more get 503).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_streams: usize,
    /// How often the workers ask the store for runnable runs.
    #[arg(long, value_name = "DUR", default_value = "100ms")]
    pub poll: String,
    /// The niceness of the serving threads (HTTP, event streams, their store reads), 0 to
    /// 19: above the runs' (which keep the process's), so that watching runs never takes
    /// the cores from them (Linux; 0 serves at the runs' priority).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SERVE_NICE,
          value_parser = clap::value_parser!(i8).range(0..=19))]
    pub serve_nice: i8,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Logs to stderr, filtered by `RUST_LOG` (default: the server's lines at `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,pactgraph::serve=info,pactgraph::worker=info")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// `10MB`, `64KB`, `1GB` (powers of 1024) or a number of bytes.
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_uppercase();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t.as_str(), ""),
    };
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => {
            return Err(format!(
                "--max-body {text}: expected a size such as 10MB, 64KB or 4096"
            ));
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("--max-body {text}: expected a size such as 10MB, 64KB or 4096"))
}

/// The options, or the usage error (exit 2) saying why not.
fn options(args: &ServeArgs) -> Result<(SocketAddr, ServeOptions), ExitCode> {
    let addr: SocketAddr = args.listen.trim().parse().map_err(|_| {
        exit::usage(&format!(
            "--listen {}: expected an address and port such as 127.0.0.1:8080",
            args.listen
        ))
    })?;
    let mut options = ServeOptions::default().workers(args.workers);
    match &args.token_env {
        Some(var) => {
            let token = std::env::var(var).map_err(|_| {
                exit::usage(&format!(
                    "--token-env {var}: the environment variable {var} is not set (or not text)"
                ))
            })?;
            if token.trim().chars().count() < 16 {
                return Err(exit::usage(&format!(
                    "--token-env {var}: the token is shorter than 16 characters; use a long \
                     random one"
                )));
            }
            options = options.token(token.trim());
        }
        None if !addr.ip().is_loopback() => {
            return Err(exit::usage(&format!(
                "--listen {addr} is not a loopback address: anyone who can reach it could \
                 start, resume and cancel runs. Give --token-env VAR (an environment variable \
                 holding the API token) to listen there, or listen on 127.0.0.1"
            )));
        }
        None => {}
    }
    if let Some(origin) = &args.cors {
        options = options.cors(origin);
    }
    if let Some(dir) = &args.workflows {
        if !dir.is_dir() {
            return Err(exit::usage(&format!(
                "--workflows {}: not a folder",
                dir.display()
            )));
        }
        options = options.workflows(dir);
    }
    options = options.max_body(parse_size(&args.max_body).map_err(|m| exit::usage(&m))?);
    let parse = |what: &str, text: &str| -> Result<Duration, ExitCode> {
        store::parse_duration(what, text).map_err(|m| exit::usage(&m))
    };
    let lease = parse("--lease", &args.lease)?;
    if lease < Duration::from_millis(100) {
        return Err(exit::usage("--lease must be at least 100ms"));
    }
    options = options
        .lease(lease)
        .poll(parse("--poll", &args.poll)?)
        .keep_alive(parse("--keep-alive", &args.keep_alive)?.max(Duration::from_millis(100)))
        .max_streams(args.max_streams);
    Ok((addr, options))
}

/// The threads of the runs' runtime (`ps -L`).
const RUNS_THREAD: &str = "pactgraph-runs";

/// `pactgraph serve ...`: exit 0 after SIGINT or SIGTERM, 1 when the store cannot be
/// opened or the address taken, 2 for bad options.
///
/// Two runtimes (ADR 0052): the runs' (the embedded workers, the runs resumed through the
/// API), built first, from this thread, at the process's priority, with its own store;
/// and the serving one, whose threads lower themselves to `--serve-nice` and serve
/// everything else (the store they open is theirs, its threads at their niceness).
pub fn run(args: &ServeArgs) -> ExitCode {
    init_logging();
    let (addr, options) = match options(args) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let runs_rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(RUNS_THREAD)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return exit::failed(&format!("cannot start the async runtime: {e}")),
    };
    let serving_rt = match serving_runtime(2, args.serve_nice) {
        Ok(rt) => rt,
        Err(e) => return exit::failed(&format!("cannot start the async runtime: {e}")),
    };
    let connections = u32::try_from(options.workers.saturating_add(4))
        .unwrap_or(u32::MAX)
        .min(32);
    // Opened from this thread (the process's priority), on the runs' runtime.
    let runs_store = match runs_rt.block_on(store::open_with(&args.store, connections)) {
        Ok(Some(s)) => s,
        Ok(None) => return exit::usage("serve needs a run store, not --store none"),
        Err(code) => return code,
    };
    let options = options.runs_on(RunSide {
        handle: runs_rt.handle().clone(),
        store: runs_store,
    });
    let args = args.clone();
    // Everything else from a serving thread (the one that polls the accept loop), so
    // what it starts is niced too.
    let served = serving_thread(args.serve_nice, move || {
        serving_rt.block_on(serve_here(&args, addr, options, connections))
    })
    .map(std::thread::JoinHandle::join);
    match served {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => exit::failed("the server stopped unexpectedly (its thread panicked)"),
        Err(e) => exit::failed(&format!("cannot start the serving thread: {e}")),
    }
}

/// Opens the serving side's store, listens on `addr` and serves until SIGINT or SIGTERM.
async fn serve_here(
    args: &ServeArgs,
    addr: SocketAddr,
    options: ServeOptions,
    connections: u32,
) -> ExitCode {
    let store = match store::open_with(&args.store, connections).await {
        Ok(Some(s)) => s,
        Ok(None) => return exit::usage("serve needs a run store, not --store none"),
        Err(code) => return code,
    };
    let signalled = match crate::cli::worker::stop_signal() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => return exit::failed(&format!("cannot listen on {addr}: {e}")),
    };
    let bound = listener.local_addr().map_or(addr, |a| a);
    tracing::info!(
        target: "pactgraph::serve",
        "listening on http://{bound} (store {}, workers {}, serving at niceness {}{})",
        store.backend(),
        options.workers,
        args.serve_nice,
        if options.token.is_some() { ", token required" } else { "" }
    );
    let stop = async move {
        let name = signalled.await;
        tracing::info!(target: "pactgraph::serve", "{name}: stopping (runs in flight are interrupted)");
    };
    let executor_for = Arc::new(crate::cli::worker::executor_for);
    match serve(listener, store, options, executor_for, stop).await {
        Ok(s) => {
            tracing::info!(
                target: "pactgraph::serve",
                "stopped: {} runs finished, {} interrupted",
                s.finished,
                s.interrupted
            );
            ExitCode::SUCCESS
        }
        Err(e) => exit::failed(&format!("{e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_read_in_powers_of_1024() {
        assert_eq!(parse_size("10MB"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_size("64kb"), Ok(64 * 1024));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
    }
}
