//! A transient fault is ridden out: PostgreSQL restarted (`pg_ctl restart -m fast`, every
//! connection terminated) in the middle of a `pactgraph run` does not stop the run; the
//! store reconnects with a backoff while the lease holds and the run goes on to its end,
//! every step run once.
//!
//! PostgreSQL only (`PG_URL`), and only on a server the test was told it may restart:
//! `PACTGRAPH_TEST_PG_RESTARTABLE=1`, which `.ci/test` sets for the throwaway server it
//! starts itself (a `PG_URL` given from outside may name a server others use: it is never
//! restarted unasked), as root, with Debian's `pg_ctl` (what `.ci/postgres` starts). With
//! `CI=true` the test fails rather than skip when it is told to restart and cannot. Its own
//! test binary: the restart cuts every connection to the server, so no other test may run
//! beside it.
#![cfg(all(target_os = "linux", feature = "cli"))]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::cli::{Bench, check_side, ticker_json};
use support::stores::{Backend, pg_url};

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// Steps of the run (0.1 s each at least).
const TICKS: u32 = 30;

/// The server's data folder (asked of the server).
fn data_directory(url: &str) -> String {
    let url = url.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(&url).await.expect("connects");
            sqlx::query_scalar::<_, String>("SHOW data_directory")
                .fetch_one(&mut c)
                .await
                .expect("the data directory")
        })
    })
    .join()
    .expect("asked")
}

/// Debian's `pg_ctl`, if installed.
fn pg_ctl() -> Option<PathBuf> {
    let dirs = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    dirs.filter_map(Result::ok)
        .map(|d| d.path().join("bin/pg_ctl"))
        .find(|p| p.exists())
}

/// The restarts of this binary's tests, one at a time (each cuts every connection).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What a restart test needs: this binary's turn (held until dropped), `pg_ctl` and the
/// server's data directory; `None` (said) when `PG_URL`'s server is not to be restarted
/// here. With `CI=true`, a server to restart that cannot be restarted fails the test.
fn restartable() -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf, String)> {
    let one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(url) = pg_url() else {
        eprintln!("PG_URL is not set: the restart test is skipped");
        return None;
    };
    if !std::env::var("PACTGRAPH_TEST_PG_RESTARTABLE").is_ok_and(|v| v == "1") {
        eprintln!(
            "PACTGRAPH_TEST_PG_RESTARTABLE is not 1: the server PG_URL names is not restarted, \
             the restart test is skipped"
        );
        return None;
    }
    let (Some(pg_ctl), true) = (pg_ctl(), nix_root()) else {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true and a restartable server, but no way to restart it (not root, or no pg_ctl)"
        );
        eprintln!("cannot restart the server here (not root, or no pg_ctl): skipped");
        return None;
    };
    Some((one, pg_ctl, data_directory(&url)))
}

/// Restarts the server of data directory `data` (`pg_ctl restart -m fast`, every
/// connection cut); whether it did.
fn restart(pg_ctl: &Path, data: &str) -> bool {
    let log = format!("{data}/../restart.log");
    Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(pg_ctl)
        .args([
            "-D", data, "-l", &log, "-m", "fast", "-w", "-t", "60", "restart",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// Proves a PostgreSQL restart mid-run is ridden out: the run started before it ends
/// `completed` with all its steps, exit 0, no step run twice.
#[test]
fn a_postgres_restart_mid_run_is_ridden_out() {
    let Some((_one, pg_ctl, data)) = restartable() else {
        return;
    };
    let b = Bench::on(BIN, Backend::Postgres);
    b.file("slow", "0.1");
    let wf = b.file("wf.json", &ticker_json(TICKS, TICKS + 10));
    let mut child = b.spawn(&["run", wf.to_str().expect("UTF-8"), "--quiet"], "run");
    assert!(
        b.wait_until(Duration::from_secs(60), || b.side().len() >= 5),
        "the run got going"
    );
    let started = Instant::now();
    assert!(restart(&pg_ctl, &data), "pg_ctl restart");
    eprintln!(
        "restarted in {} ms, at step {}",
        started.elapsed().as_millis(),
        b.side().len()
    );
    let status = child.wait().expect("waits");
    let (out, err) = b.outputs("run");
    assert!(status.success(), "the run went on: {status}\n{out}\n{err}");
    let outcome: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(outcome["steps"], TICKS, "{outcome}");
    assert_eq!(outcome["status"], "completed", "{outcome}");
    assert_eq!(
        b.status(outcome["run_id"].as_str().expect("an id")),
        "completed"
    );
    check_side(&b.side(), TICKS, 0);
}

/// Whether this process runs as root.
fn nix_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
            .unwrap_or(false)
    })
}

/// A loop of `set` steps (pure) that stops at its `max_steps`, `STEPS`.
const LOOP: &str = r#"{"workflow": "loop", "slices": {"task": {}, "result": {}},
  "budgets": {"max_steps": 6000}, "entry": "boss",
  "supervisors": {"boss": {"allow": ["work"]}},
  "nodes": {"work": {"supervisor": "boss", "reads": ["task"], "writes": ["result"],
    "triggers": [{"priority": 1, "when": true}], "run": {"set": {"result": {"ok": true}}}}}}"#;

/// The loop's steps.
const STEPS: u64 = 6000;

/// Proves that checkpoints sent two at a time (`--checkpoints steps`, pure steps: ADR
/// 0080, pipelined on a connection of their own) ride out a restart as the others do:
/// the server restarted while a run checkpoints every step, the run goes on to its end
/// (`stopped` by its `max_steps`), one checkpoint a step, none lost nor written twice
/// (`seq` is the steps plus the stop's), and it loads.
#[test]
fn a_postgres_restart_mid_run_is_ridden_out_by_pipelined_checkpoints() {
    let Some((_one, pg_ctl, data)) = restartable() else {
        return;
    };
    let b = Bench::on(BIN, Backend::Postgres);
    let wf = b.file("loop.json", LOOP);
    let mut child = b.spawn(
        &[
            "run",
            wf.to_str().expect("UTF-8"),
            "--quiet",
            "--checkpoints",
            "steps",
            "--name",
            "looping",
        ],
        "run",
    );
    // Going: a few hundred steps committed, one checkpoint each.
    let seq = || {
        b.run(&["runs", "list", "--format", "json"])
            .out
            .parse::<serde_json::Value>()
            .ok()
            .and_then(|v| v.as_array().and_then(|a| a.first().cloned()))
            .and_then(|r| r["steps"].as_u64())
            .unwrap_or(0)
    };
    assert!(
        b.wait_until(Duration::from_secs(60), || seq() >= 300),
        "the run got going"
    );
    assert!(restart(&pg_ctl, &data), "pg_ctl restart");
    let at = seq();
    eprintln!("restarted at step {at}");
    assert!(at < STEPS, "restarted before the run's end: {at}");
    let status = child.wait().expect("waits");
    let (out, err) = b.outputs("run");
    let outcome: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(outcome["status"], "stopped", "{outcome}\n{err}");
    assert_eq!(outcome["steps"], STEPS, "{outcome}");
    assert_eq!(status.code(), Some(3), "stopped by its budget: {status}");
    let shown = b.run(&["runs", "show", "looping", "--format", "json"]);
    assert_eq!(shown.code, 0, "{}", shown.err);
    let shown: serde_json::Value = serde_json::from_str(&shown.out).expect("JSON");
    let row = &shown["run"];
    assert_eq!(
        row["seq"],
        STEPS + 1,
        "one checkpoint a step and the stop's: {row}"
    );
    assert_eq!(row["steps"], STEPS, "{row}");
}
