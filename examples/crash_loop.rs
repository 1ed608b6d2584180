//! The crash loop: a 30-step workflow of Python `exec` steps, its `pactgraph` process
//! killed with SIGKILL at random moments (by default 100 kills: 20 runs, 5 kills each),
//! each run then finished with `pactgraph runs resume` and checked against an
//! uninterrupted run: the same final state and trace (timestamps aside), dispatch steps
//! unique and contiguous, and every step in the side file once, or again with a higher
//! attempt when it was in flight at a kill. The checks are those of
//! `tests/cli_runs_crash.rs`, which does 20 kills on every `cargo test`.
//!
//! ```text
//! cargo build && cargo run --example crash_loop -- [RUNS] [KILLS_PER_RUN] [BINARY]
//! ```
//!
//! BINARY defaults to `$CARGO_TARGET_DIR/debug/pactgraph` (or `target/debug/pactgraph`);
//! set `PACTGRAPH_CRASH_SEED` to replay a seed. Linux only (it reads `/proc`).

#[allow(dead_code)]
#[path = "../tests/support/cli.rs"]
mod cli;
// `cli` names the store helpers (`super::stores`) for its PostgreSQL benches (the file
// allows its own dead code).
#[path = "../tests/support/stores.rs"]
mod stores;

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(20);
    let per_run: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let bin = args.get(2).map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
        PathBuf::from(target).join("debug").join("pactgraph")
    });
    assert!(
        bin.is_file(),
        "no binary at {} (cargo build first)",
        bin.display()
    );
    const TICKS: u32 = 30;
    let start = Instant::now();
    let mut rng = cli::Rng::from_env();
    let expected = cli::reference(&bin, TICKS);
    let (mut kills, mut repeated) = (0, 0);
    for i in 0..runs {
        let bench = cli::Bench::new(&bin);
        let r = cli::crash_run(
            &bench,
            &mut rng,
            TICKS,
            per_run,
            &format!("loop{i}"),
            &expected,
        );
        kills += r.kills;
        repeated += r.repeated;
        println!(
            "run {i:>3}: {} kills, {} steps in flight run again; state and trace equal",
            r.kills, r.repeated
        );
    }
    println!(
        "{runs} runs of {TICKS} exec steps, {kills} SIGKILLs, {repeated} in-flight steps run \
         again with a higher attempt, every run equal to the uninterrupted one ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
}
