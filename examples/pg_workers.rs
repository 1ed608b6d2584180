//! Issue 18's scale-out figures on PostgreSQL, with the release `pactgraph` binary as
//! users run it (build it first: `cargo build --release`):
//!
//! * **throughput**: RUNS detached runs of STEPS steps whose `exec` node waits on I/O (a
//!   shell that sleeps 20 ms), drained by 1, 2 and 4 `pactgraph worker --once` processes
//!   (concurrency 1 each) on one database: runs per second, and the speed-up over one;
//! * **failover**: two workers; one is stopped (SIGSTOP, what a dead machine looks like
//!   to the others: its process is not gone, its lease must lapse) while it holds runs;
//!   the time from the stop to the first step another worker commits on one of its runs,
//!   with `--lease LEASE --poll 20ms`. Then SIGKILL of a worker on the same host: its runs
//!   are taken at once (the owner's process is gone), no lease to wait for.
//!
//! * **pickup**: with one idle worker polling every 20 ms, from a run's creation to its
//!   first trace item (the first routing decision): what polling (not LISTEN/NOTIFY) costs; median
//!   and max over 10 runs.
//!
//! Each part in a schema of its own in `PG_URL`'s database, dropped afterwards.
//!
//! ```text
//! PG_URL=postgres://... cargo run --release --example pg_workers -- [RUNS] [STEPS] [LEASE_MS]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::Connection;

fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("this program's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/release/examples");
    let bin = dir.join("pactgraph");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release` first",
        bin.display()
    );
    bin
}

fn workflow(steps: u32) -> String {
    serde_json::json!({
        "workflow": "io_wait",
        "slices": {"n": {}},
        "budgets": {"max_steps": steps},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["wait"], "default": {"stop_global": {}}}},
        "nodes": {"wait": {"supervisor": "boss", "reads": ["n"], "writes": ["n"],
            "triggers": [{"priority": 1, "when": true}],
            "run": {"exec": {"argv": ["sh", "-c", "sleep 0.02; echo '{\"n\": 1}'"]}}}}
    })
    .to_string()
}

fn admin(rt: &tokio::runtime::Runtime, url: &str, sql: &str) {
    rt.block_on(async {
        let mut c = sqlx::PgConnection::connect(url).await.expect("connects");
        sqlx::raw_sql(sql).execute(&mut c).await.expect("runs");
    });
}

/// A schema of its own and the store URL that uses it.
struct Schema<'a> {
    rt: &'a tokio::runtime::Runtime,
    base: String,
    name: String,
    url: String,
}

impl<'a> Schema<'a> {
    fn new(rt: &'a tokio::runtime::Runtime, base: &str) -> Self {
        let name = format!("bench_{}", pactgraph::runtime::RunId::new()).to_lowercase();
        admin(rt, base, &format!("CREATE SCHEMA {name}"));
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{name}");
        Self {
            rt,
            base: base.to_string(),
            name,
            url,
        }
    }
}

impl Drop for Schema<'_> {
    fn drop(&mut self) {
        admin(
            self.rt,
            &self.base,
            &format!("DROP SCHEMA {} CASCADE", self.name),
        );
    }
}

fn pactgraph(bin: &Path, dir: &Path, url: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(dir)
        .env("PACTGRAPH_STORE", url)
        .env("RUST_LOG", "warn")
        .args(args)
        .stdin(Stdio::null());
    c
}

fn create(bin: &Path, dir: &Path, url: &str, file: &Path, runs: usize) -> Vec<String> {
    (0..runs)
        .map(|_| {
            let out = pactgraph(
                bin,
                dir,
                url,
                &["run", file.to_str().expect("utf-8"), "--detach"],
            )
            .output()
            .expect("runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            v["run_id"].as_str().expect("an id").to_string()
        })
        .collect()
}

fn list(bin: &Path, dir: &Path, url: &str) -> Vec<Value> {
    let out = pactgraph(
        bin,
        dir,
        url,
        &["runs", "list", "--format", "json", "--limit", "0"],
    )
    .output()
    .expect("lists");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v.as_array().cloned().unwrap_or_default()
}

fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill -{name}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(40);
    let steps: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let lease_ms: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2_000);
    let base = std::env::var("PG_URL").expect("PG_URL names a PostgreSQL server");
    let bin = binary();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("io_wait.json");
    std::fs::write(&file, workflow(steps)).expect("writes");

    // Throughput with 1, 2 and 4 workers.
    let mut one = 0.0;
    for workers in [1usize, 2, 4] {
        let schema = Schema::new(&rt, &base);
        create(&bin, dir.path(), &schema.url, &file, runs);
        let t = Instant::now();
        let children: Vec<Child> = (0..workers)
            .map(|_| {
                pactgraph(
                    &bin,
                    dir.path(),
                    &schema.url,
                    &["worker", "--once", "--concurrency", "1"],
                )
                .stderr(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("a worker")
            })
            .collect();
        for mut c in children {
            assert!(c.wait().expect("a worker ends").success());
        }
        let took = t.elapsed().as_secs_f64();
        let ended = list(&bin, dir.path(), &schema.url)
            .iter()
            .filter(|r| r["status"] == "stopped" && r["steps"] == steps)
            .count();
        assert_eq!(ended, runs, "every run ran its {steps} steps");
        let rate = runs as f64 / took;
        if workers == 1 {
            one = rate;
        }
        println!(
            "throughput: {workers} worker(s), {runs} runs of {steps} steps (exec sleeping 20 ms): \
             {took:.2} s, {rate:.2} runs/s, {:.0} steps/s, speed-up {:.2}x",
            (runs as f64 * f64::from(steps)) / took,
            rate / one
        );
    }

    // Pickup by an idle worker.
    {
        let schema = Schema::new(&rt, &base);
        let mut worker = pactgraph(
            &bin,
            dir.path(),
            &schema.url,
            &["worker", "--concurrency", "1", "--poll", "20ms"],
        )
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("a worker");
        std::thread::sleep(Duration::from_millis(500));
        let mut gaps = Vec::new();
        for _ in 0..10 {
            let id = create(&bin, dir.path(), &schema.url, &file, 1).remove(0);
            // Let it finish, then read when it was created and when its first step ran.
            while list(&bin, dir.path(), &schema.url)
                .iter()
                .any(|r| r["status"] != "stopped")
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            let out = pactgraph(
                &bin,
                dir.path(),
                &schema.url,
                &["runs", "show", &id, "--trace", "--format", "json"],
            )
            .output()
            .expect("shows");
            let show: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            let created = show["run"]["created_ms"].as_u64().expect("created_ms");
            let first = show["trace"][0]["at_ms"]
                .as_u64()
                .expect("a first trace item");
            gaps.push(first.saturating_sub(created));
        }
        gaps.sort_unstable();
        println!(
            "pickup: from a run's creation to its first trace item (the first routing decision), \
             idle worker polling every 20 ms, 10 runs: median {} ms, max {} ms",
            gaps[gaps.len() / 2],
            gaps[gaps.len() - 1]
        );
        let _ = worker.kill();
        let _ = worker.wait();
    }

    // Failover: the lease-lapse path (SIGSTOP) and the same-host path (SIGKILL).
    for how in ["STOP", "KILL"] {
        let schema = Schema::new(&rt, &base);
        let ids = create(&bin, dir.path(), &schema.url, &file, 4);
        let lease = format!("{lease_ms}ms");
        let spawn = || {
            pactgraph(
                &bin,
                dir.path(),
                &schema.url,
                &[
                    "worker",
                    "--concurrency",
                    "2",
                    "--lease",
                    &lease,
                    "--poll",
                    "20ms",
                ],
            )
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("a worker")
        };
        let mut victim = spawn();
        // Wait until it holds runs and has committed a step.
        let held = loop {
            let rows = list(&bin, dir.path(), &schema.url);
            let running: Vec<(String, u64)> = rows
                .iter()
                .filter(|r| r["status"] == "running" && r["steps"].as_u64() >= Some(1))
                .map(|r| {
                    (
                        r["id"].as_str().expect("an id").to_string(),
                        r["steps"].as_u64().expect("steps"),
                    )
                })
                .collect();
            if running.len() == 2 {
                break running;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut other = spawn();
        signal(&victim, how);
        let t = Instant::now();
        // The first checkpoint another worker commits on a run the victim held.
        let resumed = loop {
            let rows = list(&bin, dir.path(), &schema.url);
            let moved = held.iter().any(|(id, seq)| {
                rows.iter()
                    .any(|r| r["id"] == id.as_str() && r["steps"].as_u64() > Some(*seq + 1))
            });
            if moved {
                break t.elapsed();
            }
            assert!(t.elapsed() < Duration::from_secs(120), "never resumed");
            std::thread::sleep(Duration::from_millis(5));
        };
        println!(
            "failover ({}): from the {} to a step committed by another worker on one of its runs: \
             {} ms (lease {lease_ms} ms, poll 20 ms)",
            if how == "STOP" {
                "lease lapse"
            } else {
                "same host"
            },
            if how == "STOP" { "SIGSTOP" } else { "SIGKILL" },
            resumed.as_millis()
        );
        if how == "STOP" {
            signal(&victim, "CONT");
        }
        // Let the runs finish, then stop both.
        let t = Instant::now();
        while list(&bin, dir.path(), &schema.url)
            .iter()
            .any(|r| r["status"] != "stopped")
            && t.elapsed() < Duration::from_secs(120)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        for c in [&mut victim, &mut other] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert_eq!(ids.len(), 4);
    }
}
