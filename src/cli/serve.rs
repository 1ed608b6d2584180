//! `pactgraph serve`: the HTTP API over a run store (see `docs/spec/http-api.md`), with
//! workers when asked; logs one line per request (with its request id) and per run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::serve::{ServeOptions, serve};
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

/// `pactgraph serve ...`: exit 0 after SIGINT or SIGTERM, 1 when the store cannot be
/// opened or the address taken, 2 for bad options. One Tokio runtime (a thread per core)
/// serves and runs; to keep watchers from taking the cores from runs, run it under `nice`
/// or a systemd unit's `Nice=`/`CPUWeight=` (docs/guides/deployment.md).
pub fn run(args: &ServeArgs) -> ExitCode {
    init_logging();
    let (addr, options) = match options(args) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .thread_name("pactgraph-serve")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return exit::failed(&format!("cannot start the async runtime: {e}")),
    };
    let connections = u32::try_from(options.workers.saturating_add(4))
        .unwrap_or(u32::MAX)
        .min(32);
    rt.block_on(serve_here(args, addr, options, connections))
}

/// Opens the store, listens on `addr` and serves until SIGINT or SIGTERM.
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
        "listening on http://{bound} (store {}, workers {}{})",
        store.backend(),
        options.workers,
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
