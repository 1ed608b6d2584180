//! The figure of the brief: `GET /api/runs` over 100,000 stored runs (target: median
//! under 20 ms). Ignored by default (it seeds a large store); run with
//! `cargo test --release --test serve_bench -- --ignored --nocapture`.
#![cfg(feature = "store")]

mod serve_support;
mod support;

use std::process::Command;
use std::time::Instant;

use serve_support::Server;
use support::cli::{Bench, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");
const RUNS: u32 = 100_000;

/// Copies the one run in the SQLite store `db` to `n` more rows (ids of the same
/// millisecond, counting up), as many runs as `runs list` sees.
fn seed(db: &std::path::Path, n: u32) {
    let script = format!(
        r#"
import sqlite3
c = sqlite3.connect({db:?})
cols = [r[1] for r in c.execute("PRAGMA table_info(runs)")]
pick = ", ".join("substr(r.id, 1, 10) || printf('%016d', n.i)" if x == "id"
                 else "NULL" if x in ("name", "owner", "lease_expires_ms") else "r." + x
                 for x in cols)
c.execute(f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) "
          f"INSERT INTO runs ({{', '.join(cols)}}) SELECT {{pick}} FROM n, (SELECT * FROM runs LIMIT 1) r")
c.commit()
print(c.execute("SELECT count(*) FROM runs").fetchone()[0])
"#,
        db = db.to_str().expect("UTF-8")
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let count: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a count");
    assert_eq!(count, n + 1);
}

fn median_ms(s: &Server, path: &str, rounds: usize) -> (f64, f64) {
    let mut times: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let r = s.get(path);
            assert_eq!(r.status, 200, "{}", r.text());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[rounds / 2], times[rounds * 9 / 10])
}

/// Measures `GET /api/runs` (100 rows), a filtered page and the last page's cursor over
/// 100,000 runs on SQLite, and prints the medians.
#[test]
#[ignore = "seeds 100,000 runs; run by hand for the figure"]
fn list_runs_over_100k_stored_runs() {
    let b = Bench::new(BIN);
    let wf = b.file("ticker.json", &ticker_json(1, 5));
    let r = b.run(&["run", wf.to_str().unwrap(), "--quiet"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let started = Instant::now();
    seed(&b.dir.join("store.db"), RUNS);
    eprintln!("seeded {RUNS} runs in {:?}", started.elapsed());
    let s = Server::start(&b, "bench", &[]);
    // Warm the server and the page cache.
    let _ = median_ms(&s, "/api/runs", 5);
    let (default, p90) = median_ms(&s, "/api/runs", 51);
    let (filtered, fp90) = median_ms(
        &s,
        "/api/runs?status=completed&workflow=ticker&limit=100",
        51,
    );
    let page = s.get("/api/runs?limit=1000").json();
    let before = page["next_before"].as_str().expect("a cursor").to_string();
    let (paged, pp90) = median_ms(&s, &format!("/api/runs?before={before}"), 51);
    eprintln!(
        "GET /api/runs over {} runs: median {default:.2} ms (p90 {p90:.2}); filtered {filtered:.2} ms (p90 {fp90:.2}); \
         a later page {paged:.2} ms (p90 {pp90:.2})",
        RUNS + 1
    );
    assert!(default < 20.0 * 5.0, "far over the target: {default} ms");
}
