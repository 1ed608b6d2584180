//! Crashes, signals and concurrency against the `pactgraph` binary and a real store
//! (each test on SQLite and on PostgreSQL at `PG_URL`): SIGKILL at random moments, SIGTERM, two resumers at once, a cancel of a
//! running run. Each test says what it proves.
#![cfg(all(target_os = "linux", feature = "cli"))]

mod support;

use std::time::Duration;

use support::cli::{Bench, process_gone, signal, untimed};
use support::crash::{Chain, Rng, chain_reference, crash_chain, crash_run, reference};
use support::stores::backends;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pactgraph")
}

/// Proves: a `pactgraph` process killed with SIGKILL at any moment loses nothing
/// committed. Runs of a 30-step exec workflow are killed up to 5 times each until 20 kills
/// have hit a live process; after each kill the run shows `interrupted` at once (its owner is
/// a dead process on this host: no waiting for the 30 s lease); `runs resume` ends each
/// with exactly the state and trace of an uninterrupted run (timestamps aside), dispatch
/// steps unique and contiguous, and the side file shows each step once, or for a step in
/// flight at a kill, again with the same step number and a higher attempt.
#[test]
fn sigkill_at_random_points_then_resume_equals_an_uninterrupted_run() {
    const TICKS: u32 = 30;
    let mut rng = Rng::from_env();
    let expected = reference(bin().as_ref(), TICKS);
    for backend in backends() {
        let mut kills = 0;
        let mut repeated = 0;
        // Runs of up to 5 kills each until 20 kills have landed (a run that finishes
        // before its fifth kill gives fewer; more runs make up for it).
        let mut i = 0;
        while kills < 20 && i < 12 {
            let b = Bench::on(bin(), backend);
            let report = crash_run(&b, &mut rng, TICKS, 5, &format!("crash{i}"), &expected);
            kills += report.kills;
            repeated += report.repeated;
            i += 1;
        }
        eprintln!("{backend}: {kills} kills, {repeated} steps run again");
        assert!(kills >= 20, "{backend}: {kills} kills");
    }
}

/// Proves: SIGTERM to `pactgraph run` kills the running program's process group,
/// records the run `interrupted` and exits 130, leaving no process behind; the step in
/// flight then runs again with attempt 2 on `runs resume`.
#[test]
fn sigterm_kills_the_program_records_interrupted_and_exits_130() {
    for b in Bench::each(bin().as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(2, 10));
        b.file("slow", "60");
        let mut child = b.spawn(&["run", wf.to_str().unwrap(), "--name", "t"], "run");
        assert!(b.wait_until(Duration::from_secs(20), || !b.pids().is_empty()));
        let pid = b.pids()[0];
        assert!(!process_gone(pid), "the program runs");
        signal(&child, "TERM");
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130));
        let (out, err) = b.outputs("run");
        let printed: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
        assert_eq!(printed["status"], "interrupted");
        assert!(err.contains("interrupted by SIGTERM"), "{err}");
        assert!(
            b.wait_until(Duration::from_secs(5), || process_gone(pid)),
            "program {pid} left running"
        );
        assert_eq!(b.status("t"), "interrupted");
        b.remove("slow");
        let r = b.run(&["runs", "resume", "t", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        assert_eq!(b.side(), vec![(0, 1), (0, 2), (1, 1)]);
    }
}

/// Proves: SIGINT or SIGTERM to `pactgraph run` at effects commits the pure steps taken
/// since the last commit before it exits (they were lost before): a mixed chain whose
/// first `exec` step hangs shows its two pure steps stored (`steps` 2) once the process
/// exited 130; the `exec` step in flight runs again with attempt 2 on `runs resume`, and
/// the run ends as the uninterrupted reference (state and trace, timestamps aside).
#[test]
fn a_signal_commits_the_pure_steps_before_the_effect_in_flight() {
    let chain = Chain::Mixed(2);
    let (state, trace, _) = chain_reference(bin().as_ref(), chain);
    for (b, sig) in Bench::each(bin().as_ref())
        .into_iter()
        .zip(["INT", "TERM", "INT"])
    {
        let wf = chain.write(&b);
        b.file("slow", "60");
        let mut child = b.spawn(
            &["run", &wf, "--input", chain.input(), "--name", "sig"],
            "run",
        );
        assert!(b.wait_until(Duration::from_secs(20), || !b.side().is_empty()));
        signal(&child, sig);
        assert_eq!(child.wait().unwrap().code(), Some(130));
        let shown = b.show("sig");
        assert_eq!(shown["run"]["status"], "interrupted");
        assert_eq!(
            shown["run"]["steps"], 2,
            "the pure steps before the exec are kept"
        );
        b.remove("slow");
        let r = b.run(&["runs", "resume", "sig", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
        let done = b.show("sig");
        assert_eq!(untimed(&done["state"]), state);
        assert_eq!(untimed(&done["trace"]), trace);
        assert_eq!(b.side()[..2], [(2, 1), (2, 2)], "{:?}", b.side());
    }
}

/// Proves: two processes resuming the same interrupted run at once do not both run it:
/// the claim is one conditional UPDATE, so exactly one takes the lease and runs the run
/// to the end, and the other exits 1 naming the owner that holds it.
#[test]
fn two_resumers_of_one_interrupted_run_exactly_one_runs_it() {
    for b in Bench::each(bin().as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(3, 10));
        b.file("slow", "60");
        let mut child = b.spawn(&["run", wf.to_str().unwrap(), "--name", "two"], "run");
        assert!(b.wait_until(Duration::from_secs(20), || !b.pids().is_empty()));
        signal(&child, "KILL");
        child.wait().unwrap();
        for pid in b.pids() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        assert_eq!(b.status("two"), "interrupted");
        // Each step now takes two seconds: the winner holds the run while the other tries.
        b.file("slow", "2");
        let mut a = b.spawn(&["runs", "resume", "two", "--quiet"], "a");
        let mut z = b.spawn(&["runs", "resume", "two", "--quiet"], "z");
        let codes = [a.wait().unwrap().code(), z.wait().unwrap().code()];
        let (ea, ez) = (b.outputs("a").1, b.outputs("z").1);
        let mut sorted = codes;
        sorted.sort();
        assert_eq!(sorted, [Some(0), Some(1)], "{ea}\n{ez}");
        let loser = if codes[0] == Some(1) { &ea } else { &ez };
        assert!(loser.contains("held by"), "{loser}");
        assert_eq!(b.status("two"), "completed");
        // Step 0 was in flight at the kill: attempt 1, then 2; no step ran under both.
        support::cli::check_side(&b.side(), 3, 1);
    }
}

/// Proves: `runs cancel` of a running run stops it at its next step, killing its
/// program (the driver sees the cancel while the effect runs), and `runs prune` never
/// deletes a run under a current lease.
#[test]
fn cancel_of_a_running_run_kills_its_program_and_prune_skips_it() {
    for b in Bench::each(bin().as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(3, 10));
        b.file("slow", "60");
        let mut child = b.spawn(&["run", wf.to_str().unwrap(), "--name", "c"], "run");
        assert!(b.wait_until(Duration::from_secs(20), || !b.pids().is_empty()));
        let pid = b.pids()[0];
        assert_eq!(b.status("c"), "running");
        let pruned = b.run(&["runs", "prune", "--older-than", "0s"]);
        assert_eq!(pruned.out.trim(), "pruned 0 runs", "{}", pruned.err);
        let c = b.run(&["runs", "cancel", "c"]);
        assert_eq!(c.code, 0, "{}", c.err);
        assert!(c.out.contains("cancelled (it was running"), "{}", c.out);
        assert_eq!(child.wait().unwrap().code(), Some(3), "stopped");
        assert!(b.wait_until(Duration::from_secs(5), || process_gone(pid)));
        let shown = b.show("c");
        assert_eq!(shown["run"]["status"], "stopped");
        assert_eq!(shown["run"]["termination_reason"], "cancelled");
    }
}

/// Proves (ADR 0035): with `--checkpoints effects` (the default), a `pactgraph` process
/// killed with SIGKILL at random moments of a mixed chain (two pure `set` steps, then an
/// `exec` step, 15 times) loses only pure steps, which `runs resume` recomputes: the run
/// ends with exactly the uninterrupted run's state and trace (timestamps aside), no step
/// twice, and no program run again but the one in flight at a kill (again with a higher
/// attempt). Up to 12 kills on each store.
#[test]
fn sigkill_inside_mixed_batches_then_resume_equals_an_uninterrupted_run() {
    let chain = Chain::Mixed(15);
    let mut rng = Rng::from_env();
    let expected = chain_reference(bin().as_ref(), chain);
    assert_eq!(expected.2.len(), 15, "one effect a tick: {:?}", expected.2);
    for backend in backends() {
        let (mut kills, mut repeated, mut i) = (0, 0, 0);
        while kills < 12 && i < 10 {
            let b = Bench::on(bin(), backend);
            let r = crash_chain(
                &b,
                &mut rng,
                chain,
                4,
                (20, 500),
                &format!("mix{i}"),
                &expected,
            );
            kills += r.kills;
            repeated += r.repeated;
            i += 1;
        }
        eprintln!("{backend}: {kills} kills in mixed chains, {repeated} effects run again");
        assert!(kills >= 12, "{backend}: {kills} kills");
    }
}

/// Proves (ADR 0035): a `pactgraph` process killed with SIGKILL inside batches of pure
/// steps (a 3,000-step loop of `set` steps, each writing a 30 KB constant, committed
/// every 256 steps or 100 ms) loses at most the batch in progress: each kill leaves the run `interrupted` at its last
/// commit, and `runs resume` ends it with exactly the uninterrupted run's state and trace
/// (timestamps aside), every step once.
#[test]
fn sigkill_inside_pure_batches_then_resume_equals_an_uninterrupted_run() {
    let chain = Chain::Pure(3_000);
    let mut rng = Rng::from_env();
    let expected = chain_reference(bin().as_ref(), chain);
    for backend in backends() {
        let (mut kills, mut i) = (0, 0);
        while kills < 8 && i < 12 {
            let b = Bench::on(bin(), backend);
            let r = crash_chain(
                &b,
                &mut rng,
                chain,
                4,
                (50, 1000),
                &format!("pure{i}"),
                &expected,
            );
            kills += r.kills;
            i += 1;
        }
        eprintln!("{backend}: {kills} kills inside batches of pure steps");
        assert!(kills >= 8, "{backend}: {kills} kills");
    }
}
