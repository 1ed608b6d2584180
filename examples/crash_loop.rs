//! The crash loop: a 30-step workflow of Python `exec` steps, its `pactgraph` process
//! killed with SIGKILL at random moments (by default 100 kills: 20 runs, 5 kills each),
//! each run then finished with `pactgraph runs resume` and checked against an
//! uninterrupted run: the same final state and trace (timestamps aside), dispatch steps
//! unique and contiguous, and every step in the side file once, or again with a higher
//! attempt when it was in flight at a kill. The checks are those of
//! `tests/cli_runs_crash.rs`, which does 20 kills on every `cargo test`.
//!
//! ```text
//! cargo build && cargo run --example crash_loop -- [--mixed|--pure] [RUNS] [KILLS_PER_RUN] [BINARY]
//! ```
//!
//! `--mixed` runs a chain of 15 rounds of two pure `set` steps and one `exec` step, and
//! `--pure` a 3,000-step loop of `set` steps (each writing a 30 KB constant), both committed at effects (ADR 0035): the
//! kills land inside batches of pure steps, which the resumed run recomputes; the checks
//! are those of the batch tests in `tests/cli_runs_crash.rs`.
//!
//! BINARY defaults to `$CARGO_TARGET_DIR/debug/pactgraph` (or `target/debug/pactgraph`);
//! set `PACTGRAPH_CRASH_SEED` to replay a seed. Linux only (it reads `/proc`).

#[allow(dead_code)]
#[path = "../tests/support/cli.rs"]
mod cli;
// The crash machinery (`super::cli` is the module above).
#[allow(dead_code)]
#[path = "../tests/support/crash.rs"]
mod crash;
// `cli` names the store helpers (`super::stores`) for its PostgreSQL benches (the file
// allows its own dead code).
#[path = "../tests/support/stores.rs"]
mod stores;

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let chain = if all.iter().any(|a| a == "--mixed") {
        Some(crash::Chain::Mixed(15))
    } else if all.iter().any(|a| a == "--pure") {
        Some(crash::Chain::Pure(3_000))
    } else {
        None
    };
    let args: Vec<String> = all.into_iter().filter(|a| !a.starts_with("--")).collect();
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
    // The runs start in their own folders: a relative path would not be found there.
    let bin = std::fs::canonicalize(&bin).expect("the binary's path resolves");
    const TICKS: u32 = 30;
    let start = Instant::now();
    let mut rng = crash::Rng::from_env();
    if let Some(chain) = chain {
        let expected = crash::chain_reference(&bin, chain);
        let (mut kills, mut repeated) = (0, 0);
        for i in 0..runs {
            let bench = cli::Bench::new(&bin);
            let delays = match chain {
                crash::Chain::Mixed(_) => (20, 500),
                crash::Chain::Pure(_) => (50, 1000),
            };
            let r = crash::crash_chain(
                &bench,
                &mut rng,
                chain,
                per_run,
                delays,
                &format!("loop{i}"),
                &expected,
            );
            kills += r.kills;
            repeated += r.repeated;
            println!(
                "run {i:>3}: {} kills, {} effects run again; state and trace equal",
                r.kills, r.repeated
            );
        }
        println!(
            "{runs} runs of {chain:?}, {kills} SIGKILLs, {repeated} effects in flight run again \
             with a higher attempt, every run equal to the uninterrupted one ({:.1} s)",
            start.elapsed().as_secs_f64()
        );
        return;
    }
    let expected = crash::reference(&bin, TICKS);
    let (mut kills, mut repeated) = (0, 0);
    for i in 0..runs {
        let bench = cli::Bench::new(&bin);
        let r = crash::crash_run(
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
