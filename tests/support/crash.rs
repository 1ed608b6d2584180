//! Crash tests' machinery over the `pactgraph` binary ([`super::cli::Bench`]): a seeded
//! generator of kill points, runs killed with SIGKILL at random points and resumed, their
//! reference (uninterrupted) runs, and the checks that a resumed run ended as an
//! uninterrupted one, no step twice. Used by the crash tests and, by path,
//! `examples/crash_loop.rs`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::cli::{Bench, check_side, check_trace, id_of, signal, ticker_json, untimed};

/// A small xorshift generator: the crash tests' kill points (seed printed, to replay).
pub struct Rng(u64);

impl Rng {
    /// Seeded from `PACTGRAPH_CRASH_SEED` or the clock.
    pub fn from_env() -> Self {
        let seed = std::env::var("PACTGRAPH_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("crash seed: {seed} (set PACTGRAPH_CRASH_SEED to replay)");
        Rng(seed.max(1))
    }

    /// A number in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + self.0 % (hi - lo).max(1)
    }
}

/// What [`crash_run`] did.
#[derive(Debug, Default, Clone, Copy)]
pub struct CrashReport {
    /// SIGKILLs that hit a live `pactgraph` process.
    pub kills: usize,
    /// Steps that ran more than once (in flight at a kill).
    pub repeated: usize,
}

/// The uncrashed reference: the ticker's final state and trace (untimed), from a run in
/// its own folder.
pub fn reference(bin: &Path, ticks: u32) -> (Value, Value) {
    let b = Bench::new(bin);
    let wf = b.file("wf.json", &ticker_json(ticks, ticks + 10));
    let r = b.run(&[
        "run",
        wf.to_str().expect("utf-8"),
        "--quiet",
        "--name",
        "ref",
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    let shown = b.show("ref");
    (untimed(&shown["state"]), untimed(&shown["trace"]))
}

/// Runs the ticker (`ticks` exec steps) in `b`'s folder as run `name`, killing the
/// `pactgraph` process (the first `run`, then each `runs resume`) with SIGKILL at random
/// moments until `kills` kills have hit a live process, then resumes it to the end. After
/// each kill the run is `interrupted` at once (its owner is a dead process of this host),
/// or `queued` when the kill came before its first claim. Checks the end against
/// `reference`, the trace's steps and the side file; returns what happened.
pub fn crash_run(
    b: &Bench,
    rng: &mut Rng,
    ticks: u32,
    kills: usize,
    name: &str,
    reference: &(Value, Value),
) -> CrashReport {
    let wf = b.file("wf.json", &ticker_json(ticks, ticks + 10));
    let wf = wf.to_str().expect("utf-8").to_string();
    let mut report = CrashReport::default();
    // Each step sleeps a little, so a run lasts long enough for the kills to land in it.
    b.file("slow", "0.02");
    let start = ["run", wf.as_str(), "--quiet", "--name", name];
    report.kills = kill_until(b, rng, kills, (20, 700), name, &start, "completed");
    b.remove("slow");
    if id_of(b, name).is_none() {
        // Every kill came before the run was created: run it whole.
        let r = b.run(&["run", &wf, "--quiet", "--name", name]);
        assert_eq!(r.code, 0, "{}", r.err);
    }
    if b.status(name) != "completed" {
        let r = b.run(&["runs", "resume", name, "--quiet"]);
        assert_eq!(r.code, 0, "the last resume: {}", r.err);
    }
    let shown = b.show(name);
    assert_eq!(shown["run"]["status"], "completed");
    check_trace(&shown["trace"], ticks);
    assert_eq!(untimed(&shown["state"]), reference.0, "the final state");
    assert_eq!(untimed(&shown["trace"]), reference.1, "the final trace");
    report.repeated = check_side(&b.side(), ticks, report.kills);
    report
}

// ---- Batches of pure steps (ADR 0035): mixed and pure chains, killed mid-batch. ----

/// The mixed chain's program: as the ticker's, but it writes `phase` back to `a` (the
/// chain's pure steps `p1` and `p2` move it to `b`, then `x`) and reads `slow` too.
pub const MIX_PY: &str = r#"import json, os, sys, time
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
step, attempt = req["step"], req["attempt"]
assert os.environ["PACTGRAPH_STEP"] == str(step), "PACTGRAPH_STEP"
assert os.environ["PACTGRAPH_ATTEMPT"] == str(attempt), "PACTGRAPH_ATTEMPT"
with open(os.path.join(here, "side.txt"), "a") as f:
    f.write(f"{step} {attempt}\n")
slow = os.path.join(here, "slow")
if os.path.exists(slow):
    time.sleep(float(open(slow).read()))
n = req["input"].get("n") or 0
print(json.dumps({"n": n + 1, "done": n + 1 >= int(os.environ["TICKS"]), "phase": "a"}))
"#;

/// Which chain a batch crash test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// `ticks` rounds of two pure `set` steps and one `exec` step (`mix.py`).
    Mixed(u32),
    /// `steps` pure steps (a supervisor loop of `set` nodes, stopped by `max_steps`), each
    /// writing the same 30 KB constant: slow enough for kills to land inside its batches,
    /// and a slice written by every step of a batch is stored once per checkpoint.
    Pure(u32),
}

impl Chain {
    /// The workflow document.
    pub fn json(self) -> String {
        match self {
            Chain::Mixed(ticks) => {
                let on = |p: &str| {
                    format!(
                        r#"{{"all": [{{"not": {{"path": "/done", "equals": true}}}}, {{"path": "/phase", "equals": "{p}"}}]}}"#
                    )
                };
                format!(
                    r#"{{"workflow": "mixed",
 "slices": {{"n": {{}}, "done": {{}}, "phase": {{}}}},
 "budgets": {{"max_steps": {max}, "node_timeout_ms": 120000}},
 "entry": "boss",
 "supervisors": {{"boss": {{"allow": ["p1", "p2", "tick"], "default": {{"stop_global": {{"reason": "counted"}}}}}}}},
 "nodes": {{
  "p1": {{"supervisor": "boss", "reads": ["phase"], "writes": ["phase"],
    "triggers": [{{"priority": 3, "when": {a}}}], "run": {{"set": {{"phase": "b"}}}}}},
  "p2": {{"supervisor": "boss", "reads": ["phase"], "writes": ["phase"],
    "triggers": [{{"priority": 2, "when": {b}}}], "run": {{"set": {{"phase": "x"}}}}}},
  "tick": {{"supervisor": "boss", "reads": ["n", "phase"], "writes": ["n", "done", "phase"],
    "triggers": [{{"priority": 1, "when": {x}}}],
    "run": {{"exec": {{"argv": ["python3", "mix.py"], "timeout_ms": 120000,
                      "env": {{"TICKS": "{ticks}"}}}}}}}}}}}}"#,
                    max = ticks * 3 + 10,
                    a = on("a"),
                    b = on("b"),
                    x = on("x"),
                )
            }
            Chain::Pure(steps) => {
                let big: Vec<String> = (0..2_500).map(|i| format!("item-{i:05}")).collect();
                format!(
                    r#"{{"workflow": "pure",
 "slices": {{"task": {{}}, "result": {{}}}},
 "budgets": {{"max_steps": {steps}}},
 "entry": "boss",
 "supervisors": {{"boss": {{"allow": ["work"]}}}},
 "nodes": {{"work": {{"supervisor": "boss", "reads": ["task"], "writes": ["result"],
   "triggers": [{{"priority": 1, "when": true}}],
   "run": {{"set": {{"result": {big}}}}}}}}}}}"#,
                    big = serde_json::to_string(&big).expect("a list")
                )
            }
        }
    }

    /// The input of a run of it.
    pub fn input(self) -> &'static str {
        match self {
            Chain::Mixed(_) => r#"{"n": 0, "phase": "a"}"#,
            Chain::Pure(_) => r#"{"task": 1}"#,
        }
    }

    /// The status it ends with.
    pub fn end(self) -> &'static str {
        match self {
            Chain::Mixed(_) => "completed",
            Chain::Pure(_) => "stopped",
        }
    }

    /// Writes its workflow (and program) into `b`'s folder; returns the workflow's path.
    pub fn write(self, b: &Bench) -> String {
        b.file("mix.py", MIX_PY);
        let wf = b.file("chain.json", &self.json());
        wf.to_str().expect("utf-8").to_string()
    }
}

/// The uncrashed reference of `chain`: its final state and trace (untimed) and its side
/// file, from a run in its own folder.
pub fn chain_reference(bin: &Path, chain: Chain) -> (Value, Value, Vec<(u32, u32)>) {
    let b = Bench::new(bin);
    let wf = chain.write(&b);
    let r = b.run(&[
        "run",
        &wf,
        "--input",
        chain.input(),
        "--quiet",
        "--name",
        "ref",
    ]);
    assert!(r.code == 0 || chain.end() == "stopped", "{}", r.err);
    let shown = b.show("ref");
    assert_eq!(shown["run"]["status"], chain.end());
    (untimed(&shown["state"]), untimed(&shown["trace"]), b.side())
}

/// Runs `chain` in `b`'s folder as run `name` (`--checkpoints effects`, the default),
/// killing the `pactgraph` process with SIGKILL `delay_ms` (a random range) after each
/// start until `kills` kills have hit a live process, then resumes it to the end. Checks
/// the end against `reference`: the same state and trace (timestamps aside), dispatch
/// steps contiguous (no step twice), every `exec` step of the reference in the side file,
/// once or again with distinct higher attempts (in flight at a kill), and no other.
pub fn crash_chain(
    b: &Bench,
    rng: &mut Rng,
    chain: Chain,
    kills: usize,
    delay_ms: (u64, u64),
    name: &str,
    reference: &(Value, Value, Vec<(u32, u32)>),
) -> CrashReport {
    let wf = chain.write(b);
    let mut report = CrashReport::default();
    if matches!(chain, Chain::Mixed(_)) {
        b.file("slow", "0.02");
    }
    let start = [
        "run",
        wf.as_str(),
        "--input",
        chain.input(),
        "--quiet",
        "--name",
        name,
    ];
    report.kills = kill_until(b, rng, kills, delay_ms, name, &start, chain.end());
    b.remove("slow");
    if id_of(b, name).is_none() {
        let r = b.run(&[
            "run",
            &wf,
            "--input",
            chain.input(),
            "--quiet",
            "--name",
            name,
        ]);
        assert!(r.code == 0 || chain.end() == "stopped", "{}", r.err);
    }
    if b.status(name) != chain.end() {
        let r = b.run(&["runs", "resume", name, "--quiet"]);
        assert!(
            r.code == 0 || chain.end() == "stopped",
            "the last resume: {}",
            r.err
        );
    }
    let shown = b.show(name);
    assert_eq!(shown["run"]["status"], chain.end());
    let steps = shown["run"]["steps"].as_u64().expect("steps");
    let dispatched: Vec<u64> = shown["trace"]
        .as_array()
        .expect("a trace array")
        .iter()
        .filter(|i| i["kind"] == "dispatch")
        .map(|i| i["step"].as_u64().expect("a step"))
        .collect();
    assert_eq!(
        dispatched,
        (1..=steps).collect::<Vec<_>>(),
        "dispatch steps unique and contiguous"
    );
    assert_eq!(untimed(&shown["state"]), reference.0, "the final state");
    assert_eq!(untimed(&shown["trace"]), reference.1, "the final trace");
    // Every effect of the reference ran, once, or again (in flight at a kill) with a
    // higher attempt; none that the reference did not run.
    let side = b.side();
    let expected: Vec<u32> = reference.2.iter().map(|(s, _)| *s).collect();
    for (s, _) in &side {
        assert!(expected.contains(s), "step {s} ran an effect: {side:?}");
    }
    for step in &expected {
        let mut attempts: Vec<u32> = side
            .iter()
            .filter(|(s, _)| s == step)
            .map(|(_, a)| *a)
            .collect();
        assert!(!attempts.is_empty(), "step {step} never ran: {side:?}");
        let n = attempts.len();
        attempts.sort_unstable();
        attempts.dedup();
        assert_eq!(
            attempts.len(),
            n,
            "step {step} ran twice as one attempt: {side:?}"
        );
        if n > 1 {
            report.repeated += 1;
        }
    }
    assert!(
        report.repeated <= report.kills,
        "{} effects repeated for {} kills: {side:?}",
        report.repeated,
        report.kills
    );
    report
}

/// Starts run `name` (`start`, or `runs resume` once it exists) and SIGKILLs the process
/// after a random delay in `delay_ms`, until `kills` kills landed in a live process (at
/// most `kills * 4` tries) or the run reached `end`; after each kill the run is
/// `interrupted`, `queued` or `end`. Returns the kills that landed.
fn kill_until(
    b: &Bench,
    rng: &mut Rng,
    kills: usize,
    delay_ms: (u64, u64),
    name: &str,
    start: &[&str],
    end: &str,
) -> usize {
    let mut landed = 0;
    let mut tries = 0;
    while landed < kills && tries < kills * 4 {
        tries += 1;
        let exists = id_of(b, name).is_some();
        if exists && b.status(name) == end {
            break;
        }
        let resume = ["runs", "resume", name, "--quiet"];
        let args: &[&str] = if exists { &resume } else { start };
        let mut child = b.spawn(args, "crash");
        std::thread::sleep(Duration::from_millis(rng.range(delay_ms.0, delay_ms.1)));
        let alive = child.try_wait().expect("try_wait").is_none();
        signal(&child, "KILL");
        let status = child.wait().expect("waits");
        if alive && status.code().is_none() {
            landed += 1;
        }
        if id_of(b, name).is_some() {
            let s = b.status(name);
            assert!(
                ["interrupted", "queued", end].contains(&s.as_str()),
                "after a kill the run is {s}"
            );
        }
    }
    landed
}
