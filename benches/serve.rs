//! `pactgraph serve`'s event streams (brief section 12, issue 27; ADR 0043), over real
//! HTTP on loopback against the release binary, on SQLite (a file in a temp folder):
//!
//! * `sse/commit_to_client_worker`: from a step's commit to an SSE client receiving its
//!   `step` event, for a run driven by the server's own worker (the feed is told by the
//!   in-process bus). Per event: the client's clock when the event's line arrived minus
//!   the event's `at_ms` (stamped just before its checkpoint is written, so the figure
//!   includes the commit itself; millisecond resolution). Target: median < 50 ms.
//! * `sse/commit_to_client_process`: the same for a run driven by another process
//!   (`pactgraph worker --once`): the feed polls the store every 50 ms.
//! * `sse/run_0_watchers`, `sse/run_200_watchers`: the wall time of `pactgraph worker
//!   --once` driving a 1,000-step `set` loop while the server streams the run to no
//!   client, and to 200 clients reading every event; each iteration runs both, one after
//!   the other, and prints the median ratio of the pairs at the end. Target: 200 watchers
//!   slow the run by less than 10%; the end line also gives the upper quantiles of the
//!   ratios and the ratio of the total times (a pair whose fan-out lands during the run
//!   shows there, not in the median). Each of the 200 clients ([`watch`], a task on one
//!   thread of this process, which shares the machine's cores with the server and the
//!   worker) does what a real SSE client must and no more: it reads the stream's lines
//!   into one reused buffer (no UTF-8 check, no allocation per line), counts the `data:`
//!   lines (the events; their JSON is not parsed), and parses the number of each `id:`
//!   line to check that the kept events came in order, each once (`seq` 1, 2, 3, ...
//!   with no gap). The iteration then checks that every client saw the same events, as
//!   many as ids (every event a kept one, none missed), and more of them than the loop's
//!   1,000 steps. The clients stand for browsers on other machines: their CPU on this one
//!   is not the product's cost, so they run on one thread at the lowest priority
//!   (niceness 19, set with `renice` on Linux; [`watch_all`] says why one thread), below
//!   the worker being timed (the bench's priority) and the server, started under
//!   `nice -n 10` as docs/guides/deployment.md advises for a server that watches the runs
//!   of other processes (ADR 0087). What is timed is then whether the server's fan-out,
//!   run as deployed, takes the cores from a run.
//!
//! `PACTGRAPH_SSE_NICE=N` starts the server under `nice -n N` instead (default 10; 0
//! starts it at the bench's priority), the clients unchanged.
//!
//! Run one group at a time, short: `cargo bench --bench serve -- sse --measurement-time
//! 3`. Figures in docs/performance.md.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");
const LOOP_STEPS: u32 = 1_000;
const WATCHERS: usize = 200;

/// A loop of `steps` `set` steps (no effects), stopped by its step budget.
fn pure_loop(steps: u32) -> Value {
    json!({"workflow": "pure", "slices": {"n": {}},
           "budgets": {"max_steps": steps},
           "entry": "boss",
           "supervisors": {"boss": {"allow": ["work"]}},
           "nodes": {"work": {"supervisor": "boss", "writes": ["n"],
             "triggers": [{"priority": 1, "when": true}],
             "run": {"set": {"n": {"ok": true}}}}}})
}

/// A loop of `steps` program steps (each an effect, committed on its own), 20 ms apart.
fn paced_loop(steps: u32) -> Value {
    json!({"workflow": "paced", "slices": {"n": {}},
           "budgets": {"max_steps": steps},
           "entry": "boss",
           "supervisors": {"boss": {"allow": ["work"]}},
           "nodes": {"work": {"supervisor": "boss", "writes": ["n"],
             "triggers": [{"priority": 1, "when": true}],
             "run": {"exec": {"argv": ["sh", "-c", "sleep 0.02; echo '{\"n\": 1}'"]}}}}})
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A server over `dir`'s store and workflows, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

/// The server's niceness: `PACTGRAPH_SSE_NICE` (0 to 19) when set, else 10 (the module
/// docs).
fn serve_nice() -> String {
    std::env::var("PACTGRAPH_SSE_NICE")
        .ok()
        .filter(|v| v.trim().parse::<u8>().is_ok_and(|n| n <= 19))
        .map_or_else(|| "10".to_string(), |v| v.trim().to_string())
}

impl Server {
    fn start(dir: &Path, workers: usize) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new("nice")
            .args(["-n", &serve_nice(), BIN])
            .current_dir(dir)
            .args(["serve", "--listen", &addr, "--workflows", ".", "--store"])
            .arg(format!("sqlite:{}", dir.join("store.db").display()))
            .args(["--workers", &workers.to_string(), "--poll", "20ms"])
            .args(["--max-streams", "1000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let s = Self { child, addr };
        let start = Instant::now();
        while request(&s.addr, "GET", "/healthz", None).is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the server answers"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// Starts a run of `workflow`: its id.
    fn start_run(&self, workflow: &str) -> String {
        let body = json!({ "workflow": workflow }).to_string();
        let answer = request(&self.addr, "POST", "/api/runs", Some(&body)).expect("an answer");
        answer["run_id"].as_str().expect("a run id").to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request (`Connection: close`): the JSON body of a 2xx answer.
fn request(addr: &str, method: &str, path: &str, body: Option<&str>) -> Option<Value> {
    let mut s = TcpStream::connect(addr).ok()?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut s, &mut raw).ok()?;
    let (head, rest) = raw.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 2") {
        return None;
    }
    serde_json::from_str(rest.trim()).ok()
}

/// An event stream of run `id`: reads every line, calling `seen` with each event's JSON
/// and the time it arrived, until the stream ends. Returns how many events it read.
fn follow(addr: &str, id: &str, mut seen: impl FnMut(&Value, u64)) -> usize {
    let mut s = TcpStream::connect(addr).expect("connects");
    write!(
        s,
        "GET /api/runs/{id}/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
    )
    .expect("writes");
    s.set_read_timeout(Some(Duration::from_secs(120))).ok();
    let mut n = 0;
    for line in BufReader::new(s).lines() {
        let Ok(line) = line else { break };
        if let Some(data) = line.strip_prefix("data:") {
            let at = now_ms();
            if let Ok(event) = serde_json::from_str::<Value>(data.trim_start()) {
                seen(&event, at);
                n += 1;
            }
        }
    }
    n
}

/// Latencies (ms) of the `step` events of one run of `steps` paced steps, followed from
/// before it starts; driven by the server's worker, or by a `worker --once` process.
fn latencies(dir: &Path, s: &Server, steps: u32, by_process: bool) -> Vec<u64> {
    let id = s.start_run(&format!("paced{steps}"));
    let addr = s.addr.clone();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        follow(&addr, &id, |e, at| {
            if e["event"] == "step" {
                out.push(at.saturating_sub(e["at_ms"].as_u64().unwrap_or(at)));
            }
        });
        out
    });
    if by_process {
        worker_once(dir);
    }
    reader.join().expect("the reader")
}

/// `pactgraph worker --once` on `dir`'s store: runs what is runnable, then exits.
fn worker_once(dir: &Path) {
    let status = Command::new(BIN)
        .current_dir(dir)
        .args(["worker", "--once", "--store"])
        .arg(format!("sqlite:{}", dir.join("store.db").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the worker runs");
    assert!(status.success());
}

fn write_workflows(dir: &Path, paced_steps: &[u32]) {
    for n in paced_steps {
        let mut doc = paced_loop(*n);
        doc["workflow"] = json!(format!("paced{n}"));
        std::fs::write(dir.join(format!("paced{n}.json")), doc.to_string()).expect("writes");
    }
    std::fs::write(dir.join("pure.json"), pure_loop(LOOP_STEPS).to_string()).expect("writes");
}

fn commit_to_client(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for (label, by_process) in [("worker", false), ("process", true)] {
        let dir = tempfile::tempdir().expect("a temp dir");
        // A run's length per criterion iteration count, rounded to a few sizes.
        let sizes = [1u32, 2, 4, 8, 16, 32, 64, 128];
        write_workflows(dir.path(), &sizes);
        let s = Server::start(dir.path(), usize::from(!by_process));
        let mut all = Vec::new();
        group.bench_function(format!("commit_to_client_{label}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let size = *sizes
                        .iter()
                        .rev()
                        .find(|&&n| u64::from(n) <= left)
                        .unwrap_or(&1);
                    let got = latencies(dir.path(), &s, size, by_process);
                    for ms in got.iter().take(usize::try_from(left).unwrap_or(usize::MAX)) {
                        total += Duration::from_millis(*ms);
                        left -= 1;
                    }
                    all.extend(got);
                }
                total
            })
        });
        all.sort_unstable();
        if !all.is_empty() {
            eprintln!(
                "sse/commit_to_client_{label}: {} step events, median {} ms, p90 {} ms, max {} ms",
                all.len(),
                all[all.len() / 2],
                all[all.len() * 9 / 10],
                all[all.len() - 1]
            );
        }
    }
    group.finish();
}

/// Lowers the calling thread to niceness 19 with `renice` (on Linux a thread's niceness is
/// its own, its id from `/proc/thread-self`).
fn lower_this_thread() -> Result<(), String> {
    let link = std::fs::read_link("/proc/thread-self").map_err(|e| format!("no thread id: {e}"))?;
    let tid = link
        .file_name()
        .and_then(|t| t.to_str())
        .ok_or("no thread id in /proc/thread-self")?
        .to_string();
    let done = Command::new("renice")
        .args(["-n", "19", "-p", &tid])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("renice: {e}"))?;
    done.success()
        .then_some(())
        .ok_or_else(|| format!("renice -n 19 -p {tid}: {done}"))
}

/// What a watcher saw of a run's event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// `data:` lines: the events.
    events: u64,
    /// The last `id:` (the `seq` of the last kept event).
    last_id: u64,
}

/// The `n` watchers of run `id`, each as cheap as a real SSE client can be ([`watch`]),
/// multiplexed on one thread (this one) at niceness 19, and what each saw once the server
/// ended their streams. One thread, not one each: the kernel's fair scheduler weighs
/// threads, not processes, and 200 runnable threads at niceness 19 (weight 15 each) would
/// together outweigh the worker being timed (1,024), as 200 browsers on other machines
/// never could. Where the thread cannot lower its priority (not Linux, no `renice`) it
/// says so once.
fn watch_all(addr: &str, id: &str, n: usize) -> Vec<Seen> {
    if let Err(e) = lower_this_thread() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| eprintln!("sse watchers at the bench's priority: {e}"));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the watchers' runtime");
    rt.block_on(async {
        let clients: Vec<_> = (0..n)
            .map(|_| tokio::spawn(watch(addr.to_string(), id.to_string())))
            .collect();
        let mut seen = Vec::with_capacity(n);
        for client in clients {
            seen.push(client.await.expect("a watcher"));
        }
        seen
    })
}

/// A watcher of run `id`, as cheap as a real SSE client can be (see the module docs):
/// reads lines into one buffer, counts `data:` lines, parses `id:` lines and panics unless
/// they go 1, 2, 3, ... Reads until the server ends the stream.
async fn watch(addr: String, id: String) -> Seen {
    let mut s = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connects");
    let request = format!(
        "GET /api/runs/{id}/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).await.expect("writes");
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, s);
    let mut line = Vec::with_capacity(4096);
    let mut seen = Seen {
        events: 0,
        last_id: 0,
    };
    loop {
        line.clear();
        let read = tokio::time::timeout(
            Duration::from_secs(120),
            reader.read_until(b'\n', &mut line),
        );
        match read.await {
            Ok(Ok(0) | Err(_)) | Err(_) => break,
            Ok(Ok(_)) => {}
        }
        if line.starts_with(b"data:") {
            seen.events += 1;
        } else if let Some(rest) = line.strip_prefix(b"id:") {
            let id: u64 = std::str::from_utf8(rest)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .expect("an id is a number");
            assert_eq!(
                id,
                seen.last_id + 1,
                "ids in order, none missed or repeated"
            );
            seen.last_id = id;
        }
    }
    seen
}

/// Runs the pure loop with `worker --once` while `watchers` clients stream it: the
/// worker's wall time.
fn watched_run(dir: &Path, s: &Server, watchers: usize) -> Duration {
    let id = s.start_run("pure");
    let (addr, run) = (s.addr.clone(), id.clone());
    let readers = std::thread::spawn(move || watch_all(&addr, &run, watchers));
    if watchers > 0 {
        // Every client connected (the run is queued: no worker in the server).
        let start = Instant::now();
        loop {
            let text = metrics(&s.addr);
            if text.contains(&format!("pactgraph_event_streams {watchers}")) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{text}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let t = Instant::now();
    worker_once(dir);
    let took = t.elapsed();
    let seen: Vec<Seen> = readers.join().expect("the readers");
    if let Some(first) = seen.first() {
        assert!(
            seen.iter().all(|s| s == first),
            "every client got every event: {seen:?}"
        );
        assert!(
            first.events == first.last_id && first.events > u64::from(LOOP_STEPS),
            "every event kept, one per step and more: {first:?}"
        );
    }
    took
}

fn metrics(addr: &str) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut raw = String::new();
    let _ = std::io::Read::read_to_string(&mut s, &mut raw);
    raw
}

fn watchers(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temp dir");
    write_workflows(dir.path(), &[]);
    let s = Server::start(dir.path(), 0);
    let mut group = c.benchmark_group("sse");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    let mut pairs = Vec::new();
    for (label, mine) in [("run_0_watchers", 0usize), ("run_200_watchers", 1)] {
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Both, interleaved; this function's half counted.
                    let none = watched_run(dir.path(), &s, 0);
                    let many = watched_run(dir.path(), &s, WATCHERS);
                    pairs.push((none, many));
                    total += if mine == 0 { none } else { many };
                }
                total
            })
        });
    }
    group.finish();
    let mut ratios: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| b.as_secs_f64() / a.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    if !ratios.is_empty() {
        // The median, and the tail: a pair whose fan-out lands during the run shows in
        // the upper quantiles and in the ratio of the total times, not in the median.
        let at = |q: usize| ratios[(ratios.len() - 1) * q / 100];
        let (none, many): (Duration, Duration) = pairs
            .iter()
            .fold((Duration::ZERO, Duration::ZERO), |(a, b), (x, y)| {
                (a + *x, b + *y)
            });
        eprintln!(
            "sse/run_{WATCHERS}_watchers over run_0_watchers: median ratio {:.3} over {} pairs \
             (p25 {:.3}, p75 {:.3}, p90 {:.3}; total time {:.3})",
            ratios[ratios.len() / 2],
            ratios.len(),
            at(25),
            at(75),
            at(90),
            many.as_secs_f64() / none.as_secs_f64()
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = commit_to_client, watchers
}
criterion_main!(benches);
