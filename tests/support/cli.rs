//! The `pactgraph` binary against a real SQLite store in a temporary folder, and a
//! workflow of `exec` steps (a Python program) that logs every call to a side file: what
//! the run store's command-line and crash tests drive. Also used by
//! `examples/crash_loop.rs` (by path).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The ticker's program: reads `{"input": {"n"}, "step", "attempt"}`, checks the
/// environment agrees, appends `STEP ATTEMPT` to `side.txt` (and its pid to `pids.txt`),
/// fails on purpose on attempt 1 of the step named in `fail_step`, sleeps the seconds in
/// `slow` (if that file exists), and writes `n + 1` and `done` once `n + 1` reaches
/// `TICKS`.
pub const TICK_PY: &str = r#"import json, os, sys, time
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
step, attempt = req["step"], req["attempt"]
assert os.environ["PACTGRAPH_STEP"] == str(step), "PACTGRAPH_STEP"
assert os.environ["PACTGRAPH_ATTEMPT"] == str(attempt), "PACTGRAPH_ATTEMPT"
assert os.environ["PACTGRAPH_RUN_ID"] == req["run_id"], "PACTGRAPH_RUN_ID"
with open(os.path.join(here, "side.txt"), "a") as f:
    f.write(f"{step} {attempt}\n")
with open(os.path.join(here, "pids.txt"), "a") as f:
    f.write(f"{os.getpid()}\n")
fail = os.path.join(here, "fail_step")
if os.path.exists(fail) and open(fail).read().strip() == str(step) and attempt == 1:
    sys.exit("tick: failing step %d on purpose" % step)
slow = os.path.join(here, "slow")
if os.path.exists(slow):
    time.sleep(float(open(slow).read()))
n = req["input"].get("n") or 0
print(json.dumps({"n": n + 1, "done": n + 1 >= int(os.environ["TICKS"])}))
"#;

/// One `set` step writing `out`, then the supervisor stops (completed); `deps` can
/// receive dependency results.
pub const EMIT: &str = r#"{"workflow": "emit",
 "slices": {"out": {}, "deps": {}},
 "entry": "boss",
 "supervisors": {"boss": {"allow": ["emit"], "default": {"stop_global": {"reason": "done"}}}},
 "nodes": {"emit": {"supervisor": "boss", "reads": [], "writes": ["out"],
   "triggers": [{"when": {"path": "/out", "exists": false}}],
   "run": {"set": {"out": {"v": 1}}}}}}"#;

/// One exec step that exits 3: the run fails (`node_failed`).
pub const FAIL: &str = r#"{"workflow": "fail",
 "slices": {"out": {}},
 "entry": "boss",
 "supervisors": {"boss": {"allow": ["boom"], "default": {"stop_global": {"reason": "done"}}}},
 "nodes": {"boom": {"supervisor": "boss", "reads": [], "writes": ["out"],
   "triggers": [{"when": {"path": "/out", "exists": false}}],
   "run": {"exec": {"argv": ["python3", "-c", "import sys; sys.exit(3)"]}}}}}"#;

/// The ask workflow: pauses with a question, ends once answered.
pub const ASKER: &str = r#"{"workflow": "asker", "slices": {"clarification": {}}, "entry": "root",
    "supervisors": {"root": {"allow": ["x"],
      "default": {"ask_clarification": {"question": "which?"}}}},
    "nodes": {"x": {"supervisor": "root", "writes": ["clarification"],
      "terminal": true,
      "triggers": [{"priority": 1, "when": {"path": "/clarification", "exists": true}}],
      "run": {"set": {"clarification": 1}}}}}"#;

/// A ticker workflow of `ticks` exec steps (budget `max_steps`).
pub fn ticker_json(ticks: u32, max_steps: u32) -> String {
    format!(
        r#"{{"workflow": "ticker",
 "slices": {{"n": {{}}, "done": {{}}}},
 "budgets": {{"max_steps": {max_steps}, "node_timeout_ms": 120000}},
 "entry": "boss",
 "supervisors": {{"boss": {{"allow": ["tick"], "default": {{"stop_global": {{"reason": "counted"}}}}}}}},
 "nodes": {{"tick": {{"supervisor": "boss", "reads": ["n"], "writes": ["n", "done"],
   "triggers": [{{"priority": 1, "when": {{"not": {{"path": "/done", "equals": true}}}}}}],
   "run": {{"exec": {{"argv": ["python3", "tick.py"], "timeout_ms": 120000,
                      "env": {{"TICKS": "{ticks}"}}}}}}}}}}}}"#
    )
}

/// A folder holding a store and workflows, and the binary to run against it.
pub struct Bench {
    /// The temporary folder (removed on drop when owned).
    pub dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    /// The `pactgraph` binary.
    pub bin: PathBuf,
    /// `sqlite:DIR/store.db`, or a PostgreSQL schema's URL ([`Bench::on`]).
    pub store: String,
    /// Where a PostgreSQL store lives (dropped with the bench).
    _place: Option<super::stores::Place>,
}

/// What a finished command gave.
#[derive(Debug)]
pub struct Ran {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub out: String,
    /// Standard error.
    pub err: String,
}

impl Ran {
    /// Standard output as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.out)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.out, self.err))
    }
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Ran {
            code: o.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Bench {
    /// A new temporary folder with the ticker program and binary `bin`.
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        let temp = tempfile::tempdir().expect("a temp dir");
        let dir = temp.path().to_path_buf();
        Self::at(bin, dir, Some(temp))
    }

    /// `dir` (kept), with the ticker program and binary `bin`.
    pub fn at(bin: impl Into<PathBuf>, dir: PathBuf, temp: Option<tempfile::TempDir>) -> Self {
        std::fs::create_dir_all(&dir).expect("the folder");
        std::fs::write(dir.join("tick.py"), TICK_PY).expect("tick.py");
        let store = format!("sqlite:{}", dir.join("store.db").display());
        Self {
            dir,
            _temp: temp,
            bin: bin.into(),
            store,
            _place: None,
        }
    }

    /// A new temporary folder with the ticker program and binary `bin`, whose store is on
    /// `backend` (for PostgreSQL, a fresh schema at `PG_URL`).
    pub fn on(bin: impl Into<PathBuf>, backend: super::stores::Backend) -> Self {
        let mut bench = Self::new(bin);
        eprintln!("== on {backend}");
        if backend == super::stores::Backend::Postgres {
            let (url, place) = super::stores::place(backend);
            bench.store = url;
            bench._place = Some(place);
        }
        bench
    }

    /// One bench per store the tests run on ([`super::stores::backends`]).
    pub fn each(bin: &Path) -> Vec<Self> {
        super::stores::backends()
            .into_iter()
            .map(|b| Self::on(bin, b))
            .collect()
    }

    /// Writes `text` to `name` in the folder; returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("writes");
        path
    }

    /// Removes `name` from the folder if it is there.
    pub fn remove(&self, name: &str) {
        let _ = std::fs::remove_file(self.dir.join(name));
    }

    /// A command for the binary with `args`, in the folder, against the store.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.current_dir(&self.dir)
            .env("PACTGRAPH_STORE", &self.store)
            .env_remove("RUST_BACKTRACE")
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// Runs the binary with `args` to the end.
    pub fn run(&self, args: &[&str]) -> Ran {
        let ran: Ran = self.command(args).output().expect("the binary runs").into();
        assert!(!ran.err.contains("panicked"), "a panic: {}", ran.err);
        ran
    }

    /// Starts the binary with `args` in the background (output to files in the folder).
    pub fn spawn(&self, args: &[&str], tag: &str) -> Child {
        let out = std::fs::File::create(self.dir.join(format!("{tag}.out"))).expect("out");
        let err = std::fs::File::create(self.dir.join(format!("{tag}.err"))).expect("err");
        self.command(args)
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("the binary starts")
    }

    /// What a background command tagged `tag` wrote to stdout and stderr.
    pub fn outputs(&self, tag: &str) -> (String, String) {
        let read = |ext| {
            std::fs::read_to_string(self.dir.join(format!("{tag}.{ext}"))).unwrap_or_default()
        };
        (read("out"), read("err"))
    }

    /// The lines of the side file as `(step, attempt)`.
    pub fn side(&self) -> Vec<(u32, u32)> {
        std::fs::read_to_string(self.dir.join("side.txt"))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let (s, a) = l.split_once(' ').expect("STEP ATTEMPT");
                (s.parse().expect("a step"), a.parse().expect("an attempt"))
            })
            .collect()
    }

    /// The pids the ticker's programs had.
    pub fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("pids.txt"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// `runs show RUN --trace --state --format json`.
    pub fn show(&self, run: &str) -> Value {
        let r = self.run(&[
            "runs", "show", run, "--trace", "--state", "--format", "json",
        ]);
        assert_eq!(r.code, 0, "runs show {run}: {}", r.err);
        r.json()
    }

    /// The run's stored status (`runs show`).
    pub fn status(&self, run: &str) -> String {
        self.show(run)["run"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs the binary with `args` in the background (tag `run`), waits (up to 30 s)
    /// until `ready` holds (`what`: what it waits for, said if it never comes), then
    /// kills it with SIGKILL and waits for its end: the crash a resume test starts from.
    pub fn kill_when(&self, args: &[&str], what: &str, ready: impl FnMut() -> bool) {
        let mut child = self.spawn(args, "run");
        assert!(self.wait_until(Duration::from_secs(30), ready), "{what}");
        signal(&child, "KILL");
        child.wait().expect("the process ends");
    }

    /// The side file as written (`side.txt`, empty when there is none).
    pub fn side_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("side.txt")).unwrap_or_default()
    }

    /// Waits (up to `limit`) until `f` holds.
    pub fn wait_until(&self, limit: Duration, mut f: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        f()
    }
}

/// `value` without its timestamps and durations (`at_ms`, `duration_us`), anywhere.
pub fn untimed(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "at_ms" | "duration_us" | "wall_ms"))
                .map(|(k, v)| (k.clone(), untimed(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(untimed).collect()),
        other => other.clone(),
    }
}

/// True when process `pid` is gone (or a zombie waiting to be reaped).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|s| s == "Z" || s == "X"),
        Err(_) => true,
    }
}

/// Sends SIGKILL or SIGTERM to `child` (through `kill`, the test has no libc).
/// Every file directly in `dir`, as text run together: what a test searches for a
/// secret that must not be stored.
pub fn all_files(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).expect("the folder").flatten() {
        if let Ok(bytes) = std::fs::read(entry.path()) {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    text
}

pub fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok || name == "KILL", "kill -{name} failed");
}

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

/// Checks the side file of a ticker run of `ticks` steps that was killed `kills` times:
/// steps `0..ticks` all there, each once, or several times (a step in flight at a kill)
/// with distinct, higher attempts; returns how many steps ran more than once.
pub fn check_side(side: &[(u32, u32)], ticks: u32, kills: usize) -> usize {
    let mut repeated = 0;
    for step in 0..ticks {
        let mut attempts: Vec<u32> = side
            .iter()
            .filter(|(s, _)| *s == step)
            .map(|(_, a)| *a)
            .collect();
        assert!(!attempts.is_empty(), "step {step} never ran: {side:?}");
        attempts.sort_unstable();
        let n = attempts.len();
        attempts.dedup();
        assert_eq!(
            attempts.len(),
            n,
            "step {step} ran twice as one attempt: {side:?}"
        );
        if n > 1 {
            repeated += 1;
        }
    }
    assert!(
        side.iter().all(|(s, _)| *s < ticks),
        "a step past the end: {side:?}"
    );
    assert!(
        repeated <= kills,
        "{repeated} steps repeated for {kills} kills: {side:?}"
    );
    repeated
}

/// Checks a ticker run's trace: dispatch steps `1..=ticks`, each once, in order.
pub fn check_trace(trace: &Value, ticks: u32) {
    let steps: Vec<u64> = trace
        .as_array()
        .expect("a trace array")
        .iter()
        .filter(|i| i["kind"] == "dispatch")
        .map(|i| i["step"].as_u64().expect("a step"))
        .collect();
    let expected: Vec<u64> = (1..=u64::from(ticks)).collect();
    assert_eq!(steps, expected, "dispatch steps unique and contiguous");
}

/// The id in a `runs list --format json` entry named `name`, if the run exists.
pub fn id_of(bench: &Bench, name: &str) -> Option<String> {
    let r = bench.run(&["runs", "list", "--all", "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    r.json()
        .as_array()?
        .iter()
        .find(|i| i["name"] == name)
        .and_then(|i| i["run_id"].as_str().map(str::to_string))
}

/// The path of a file in `dir`, as a string.
pub fn path_str(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
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
    let mut tries = 0;
    while report.kills < kills && tries < kills * 4 {
        tries += 1;
        let exists = id_of(b, name).is_some();
        if exists && b.status(name) == "completed" {
            break;
        }
        let args: Vec<&str> = if exists {
            vec!["runs", "resume", name, "--quiet"]
        } else {
            vec!["run", &wf, "--quiet", "--name", name]
        };
        let mut child = b.spawn(&args, "crash");
        std::thread::sleep(Duration::from_millis(rng.range(20, 700)));
        let alive = child.try_wait().expect("try_wait").is_none();
        signal(&child, "KILL");
        let status = child.wait().expect("waits");
        if alive && status.code().is_none() {
            report.kills += 1;
        }
        if id_of(b, name).is_some() {
            let s = b.status(name);
            assert!(
                ["interrupted", "queued", "completed"].contains(&s.as_str()),
                "after a kill the run is {s}"
            );
        }
    }
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
    let mut tries = 0;
    while report.kills < kills && tries < kills * 4 {
        tries += 1;
        let exists = id_of(b, name).is_some();
        if exists && b.status(name) == chain.end() {
            break;
        }
        let args: Vec<&str> = if exists {
            vec!["runs", "resume", name, "--quiet"]
        } else {
            vec![
                "run",
                &wf,
                "--input",
                chain.input(),
                "--quiet",
                "--name",
                name,
            ]
        };
        let mut child = b.spawn(&args, "crash");
        std::thread::sleep(Duration::from_millis(rng.range(delay_ms.0, delay_ms.1)));
        let alive = child.try_wait().expect("try_wait").is_none();
        signal(&child, "KILL");
        let status = child.wait().expect("waits");
        if alive && status.code().is_none() {
            report.kills += 1;
        }
        if id_of(b, name).is_some() {
            let s = b.status(name);
            assert!(
                ["interrupted", "queued", chain.end()].contains(&s.as_str()),
                "after a kill the run is {s}"
            );
        }
    }
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
