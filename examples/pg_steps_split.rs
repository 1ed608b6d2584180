//! Where the wall time of a `--checkpoints steps` checkpoint goes on PostgreSQL (ADR 0067):
//! `commit_postgres/steps`'s loop and `/floor`'s statement, each timed on the wall, on the
//! client's CPU (this process's threads, `/proc/self/task/*/schedstat`) and on the
//! server's CPU (every child of the postmaster whose data directory is `PG_DATA`, by kind:
//! the backends, the WAL writer, the rest), per step or per round trip.
//!
//! ```text
//! PG_URL=postgres://...:54341/postgres PG_DATA=/tmp/pgsteps-pg/data \
//!   cargo run --release --example pg_steps_split -- [ROUNDS]
//! ```
//!
//! Linux only (`/proc`); the server must run on this machine.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pactgraph::graph::{GraphBuilder, synth};
use pactgraph::runtime::{Executor, RunRecord};
use pactgraph::store::{
    Checkpoints, Continue, CreateOptions, DriveOptions, PgStore, RunStore, drive,
};
use pactgraph::validator::ValidGraph;
use serde_json::json;
use sqlx::Connection;

const STEPS: u32 = 1_000;

/// CPU time in ns of one task (`schedstat`'s first field).
fn task_ns(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// This process's CPU time in ns, all threads.
fn self_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.flatten()
                .map(|t| task_ns(&format!("{}/schedstat", t.path().display())))
                .sum()
        })
        .unwrap_or(0)
}

/// The server's processes (the postmaster's children) by kind, their CPU time in ns.
fn server_ns(postmaster: u32) -> HashMap<&'static str, u64> {
    let mut by = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent is the second field after the command's closing parenthesis.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid != Some(postmaster) {
            continue;
        }
        let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let kind = if cmd.contains("walwriter") {
            "walwriter"
        } else if cmd.contains("127.0.0.1") {
            "backends"
        } else {
            "other"
        };
        *by.entry(kind).or_insert(0) += task_ns(&format!("/proc/{pid}/schedstat"));
    }
    by.insert(
        "postmaster",
        task_ns(&format!("/proc/{postmaster}/schedstat")),
    );
    by
}

/// Wall, client and server CPU of `f`, divided by `n`, in µs.
async fn split<F: std::future::Future<Output = ()>>(postmaster: u32, n: u32, f: F) -> [f64; 5] {
    let (c0, s0) = (self_ns(), server_ns(postmaster));
    let t = Instant::now();
    f.await;
    let wall = t.elapsed();
    let (c1, s1) = (self_ns(), server_ns(postmaster));
    let d = |k: &str| {
        s1.get(k)
            .copied()
            .unwrap_or(0)
            .saturating_sub(s0.get(k).copied().unwrap_or(0))
    };
    let per = |ns: u64| ns as f64 / 1_000.0 / f64::from(n);
    [
        wall.as_secs_f64() * 1e6 / f64::from(n),
        per(c1 - c0),
        per(d("backends")),
        per(d("walwriter")),
        per(d("other") + d("postmaster")),
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let base = std::env::var("PG_URL").expect("PG_URL");
    let data = std::env::var("PG_DATA").expect("PG_DATA: the server's data directory");
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let postmaster: u32 = std::fs::read_to_string(format!("{data}/postmaster.pid"))
        .expect("postmaster.pid")
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("a pid");
    let schema = format!("split_{}", pactgraph::runtime::RunId::new()).to_lowercase();
    let mut admin = sqlx::PgConnection::connect(&base).await.expect("connects");
    sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .expect("a schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let store = PgStore::open(&url).await.expect("opens");
    let graph = GraphBuilder::from_document(synth::supervisor_loop(STEPS))
        .build()
        .expect("compiles");
    let graph = ValidGraph::new(graph).expect("valid");
    let doc = graph.to_document();
    let ex = Executor::builder(graph).build().expect("an executor");
    let mut floor = sqlx::PgConnection::connect(&url).await.expect("connects");
    sqlx::raw_sql(
        "SET synchronous_commit = off; CREATE TABLE floor (id TEXT PRIMARY KEY, seq BIGINT); \
         INSERT INTO floor VALUES ('r', 0);",
    )
    .execute(&mut floor)
    .await
    .expect("the floor's table");
    let names = ["wall", "client", "backends", "walwriter", "other"];
    let (mut steps, mut floors) = (vec![Vec::new(); 5], vec![Vec::new(); 5]);
    for round in 0..=rounds {
        let record = RunRecord::new(doc.clone(), ex.start(json!({})).expect("valid input"));
        let id = record.run_id;
        store
            .create(&record, &CreateOptions::default())
            .await
            .expect("creates");
        let options = DriveOptions::default().checkpoints(Checkpoints::Steps);
        let s = split(postmaster, STEPS, async {
            drive(&ex, &store, id, "split", &options, Continue::AsStored)
                .await
                .expect("drives");
        })
        .await;
        let f = split(postmaster, STEPS, async {
            for _ in 0..STEPS {
                sqlx::query("UPDATE floor SET seq = seq + 1 WHERE id = 'r'")
                    .execute(&mut floor)
                    .await
                    .expect("one round trip");
            }
        })
        .await;
        // Round 0 warms the connections and the plans.
        if round > 0 {
            for i in 0..5 {
                steps[i].push(s[i]);
                floors[i].push(f[i]);
            }
            println!("round {round}: steps {s:.1?} floor {f:.1?}");
        }
    }
    println!("medians of {rounds} rounds, µs per step / per round trip:");
    for (i, name) in names.iter().enumerate() {
        println!(
            "  {name:>10}: steps {:7.1}  floor {:7.1}",
            median(steps[i].clone()),
            median(floors[i].clone())
        );
    }
    drop(floor);
    store.close().await;
    sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut admin)
        .await
        .expect("drops");
    std::thread::sleep(Duration::from_millis(10));
}
