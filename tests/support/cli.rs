//! The `pactgraph` binary against a real SQLite store in a temporary folder, and a
//! workflow of `exec` steps (a Python program) that logs every call to a side file: what
//! the run store's command-line and crash tests drive (the crash machinery itself is
//! [`super::crash`]). Also used by `examples/crash_loop.rs` (by path).

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

    /// Runs the workflow at `wf` (one that asks, as [`ASKER`] does) as run `name` with
    /// `--stream`: asserts it pauses (exit 4) and returns the lines it streamed, the
    /// outcome object last.
    pub fn paused_stream(&self, wf: &Path, name: &str) -> Vec<String> {
        let wf = wf.to_str().expect("a UTF-8 path");
        let r = self.run(&["run", wf, "--quiet", "--name", name, "--stream"]);
        assert_eq!(r.code, 4, "{}", r.err);
        r.out.lines().map(str::to_string).collect()
    }

    /// `runs watch NAME --until-pause` on a run paused by [`Bench::paused_stream`]: asserts
    /// it exits 4 and prints the streamed lines but the last (the outcome object): the
    /// history the store kept is what was streamed (`what` says which history, for the
    /// failure message). Returns what the watch printed.
    pub fn history_until_pause(&self, name: &str, streamed: &[String], what: &str) -> Ran {
        let before = self.run(&["runs", "watch", name, "--until-pause"]);
        assert_eq!(before.code, 4, "{}", before.err);
        let history: Vec<&str> = before.out.lines().collect();
        assert_eq!(history, streamed[..streamed.len() - 1], "{what}");
        before
    }

    /// `runs resume NAME --answer yes --quiet`, asserting it ends with exit 0.
    pub fn resume_yes(&self, name: &str) {
        let r = self.run(&["runs", "resume", name, "--answer", "yes", "--quiet"]);
        assert_eq!(r.code, 0, "{}", r.err);
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
