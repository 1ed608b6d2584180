//! `pactgraph serve` as a real process on a free loopback port, and a small HTTP/1.1
//! client over `TcpStream` (requests written by hand, so hostile ones can be too).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::cli::Bench;

/// A running `pactgraph serve`.
pub struct Server {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The process.
    pub child: Child,
    /// Its tag in the bench folder (`TAG.err` holds its log).
    pub tag: String,
    dir: std::path::PathBuf,
}

impl Server {
    /// Starts `serve --listen 127.0.0.1:0 --workflows DIR ARGS...` in `bench` and waits
    /// for the address it logs.
    pub fn start(bench: &Bench, tag: &str, args: &[&str]) -> Self {
        Self::start_with(bench, tag, args, &[])
    }

    /// As [`Server::start`], with environment variables set.
    pub fn start_with(bench: &Bench, tag: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = bench.dir.to_str().expect("a UTF-8 folder").to_string();
        let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--workflows", &dir];
        all.extend_from_slice(args);
        let out = std::fs::File::create(bench.dir.join(format!("{tag}.out"))).expect("out");
        let err = std::fs::File::create(bench.dir.join(format!("{tag}.err"))).expect("err");
        let mut command = bench.command(&all);
        command.stdout(out).stderr(err);
        for (k, v) in env {
            command.env(k, v);
        }
        let child = command.spawn().expect("serve starts");
        let mut server = Self {
            addr: String::new(),
            child,
            tag: tag.into(),
            dir: bench.dir.clone(),
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            let log = server.log();
            if let Some(rest) = log.split("listening on http://").nth(1) {
                server.addr = rest.split_whitespace().next().expect("an address").into();
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("serve exited ({status}) before listening: {log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("serve did not listen within 60 s: {}", server.log());
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join(format!("{}.err", self.tag))).unwrap_or_default()
    }

    /// `METHOD path` with `body` (JSON when given).
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        let text = body.map(Value::to_string);
        request(
            &self.addr,
            method,
            path,
            &[("Content-Type", "application/json")],
            text.as_deref().map(str::as_bytes),
        )
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Resp {
        self.call("GET", path, None)
    }

    /// Sends `signal` (e.g. `TERM`) and waits for the exit code.
    pub fn stop(mut self, signal: &str) -> i32 {
        super::support::cli::signal(&self.child, signal);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("serve did not stop within 60 s: {}", self.log());
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

    /// Waits until run `id`'s status is `status`; panics with the last seen otherwise.
    pub fn wait_status(&self, id: &str, status: &str) -> Value {
        let mut last = Value::Null;
        let ok = self.wait_until(Duration::from_secs(60), || {
            last = self.get(&format!("/api/runs/{id}")).json();
            last["run"]["status"] == status
        });
        assert!(ok, "run {id} never became {status}: {last}\n{}", self.log());
        last
    }

    /// Waits until run `id` has status `status` and its worker has let go of it (no
    /// `owner`): a run ends in its last checkpoint and is released by the next statement,
    /// so a view read between the two still names the worker.
    pub fn wait_released(&self, id: &str, status: &str) -> Value {
        let mut last = Value::Null;
        let ok = self.wait_until(Duration::from_secs(60), || {
            last = self.get(&format!("/api/runs/{id}")).json();
            last["run"]["status"] == status && last["run"]["owner"].is_null()
        });
        assert!(
            ok,
            "run {id} never became {status} and released: {last}\n{}",
            self.log()
        );
        last
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = self.log();
        assert!(!log.contains("panicked"), "serve panicked: {log}");
    }
}

/// A response.
#[derive(Debug)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON (panics with it otherwise).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// The first header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    /// `error.code` of a JSON error body (and checks its shape).
    pub fn error_code(&self) -> String {
        let v = self.json();
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "an error with a message: {v}"
        );
        v["error"]["code"].as_str().expect("error.code").to_string()
    }
}

/// Writes a request by hand (`Connection: close`) and reads the whole response.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut raw = head.into_bytes();
    if let Some(b) = body {
        raw.extend_from_slice(b);
    }
    send_raw(addr, &raw)
}

/// Sends `raw` bytes and reads the response to the end of the connection.
pub fn send_raw(addr: &str, raw: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    // The server may answer (413) and close before reading everything sent.
    let _ = s.write_all(raw);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse(&buf)
        .unwrap_or_else(|| panic!("not an HTTP response: {:?}", String::from_utf8_lossy(&buf)))
}

/// Parses a whole response.
pub fn parse(buf: &[u8]) -> Option<Resp> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &buf[end + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest).0
    } else {
        rest.to_vec()
    };
    Some(Resp {
        status,
        headers,
        body,
    })
}

/// The data of complete chunks in `buf`, and how many bytes they took.
pub fn dechunk(buf: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let Some(nl) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
            return (out, at);
        };
        let size_text = String::from_utf8_lossy(&buf[at..at + nl]);
        let Ok(size) = usize::from_str_radix(size_text.trim(), 16) else {
            return (out, at);
        };
        let start = at + nl + 2;
        if size == 0 || buf.len() < start + size + 2 {
            return (out, at);
        }
        out.extend_from_slice(&buf[start..start + size]);
        at = start + size + 2;
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// `id:`.
    pub id: Option<String>,
    /// `data:` as JSON.
    pub data: Value,
}

/// What an event stream gave: its status, events, and keep-alive comments seen.
#[derive(Debug)]
pub struct SseRead {
    /// The status code.
    pub status: u16,
    /// The events.
    pub events: Vec<SseEvent>,
    /// Comment lines (keep-alives).
    pub comments: usize,
    /// True when the server ended the stream.
    pub ended: bool,
}

/// Reads run `id`'s whole event stream, from its first event until the server ends it
/// (60 s at most).
pub fn sse_run(addr: &str, id: &str) -> SseRead {
    sse(
        addr,
        &format!("/api/runs/{id}/events"),
        &[],
        Duration::from_secs(60),
        |_| false,
    )
}

/// Reads `GET path` as an event stream until `enough` holds, the stream ends or
/// `limit` passes.
pub fn sse(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    limit: Duration,
    mut enough: impl FnMut(&SseRead) -> bool,
) -> SseRead {
    let mut s = TcpStream::connect(addr).expect("connects");
    let mut head = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nConnection: close\r\n"
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("writes");
    s.set_read_timeout(Some(Duration::from_millis(100))).ok();
    let start = Instant::now();
    let mut raw = Vec::new();
    let mut read = SseRead {
        status: 0,
        events: Vec::new(),
        comments: 0,
        ended: false,
    };
    let mut chunk = [0u8; 8192];
    while start.elapsed() < limit {
        match s.read(&mut chunk) {
            Ok(0) => {
                read.ended = true;
            }
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_string();
            read.status = head
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let body = if head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked")
            {
                dechunk(&raw[end + 4..]).0
            } else {
                raw[end + 4..].to_vec()
            };
            let text = String::from_utf8_lossy(&body).to_string();
            read.events.clear();
            read.comments = 0;
            // Whole events only: each ends with a blank line.
            let whole = text.rfind("\n\n").map_or("", |i| &text[..i]);
            for block in whole.split("\n\n").filter(|b| !b.is_empty()) {
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if line.starts_with(':') {
                        read.comments += 1;
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if !data.is_empty() {
                    let data = serde_json::from_str(&data)
                        .unwrap_or_else(|e| panic!("event data not JSON ({e}): {data}"));
                    read.events.push(SseEvent { id, data });
                }
            }
            if read.status != 200 || read.ended || enough(&read) {
                return read;
            }
        } else if read.ended {
            return read;
        }
    }
    read
}

/// `p`'s text.
pub fn path_text(p: &Path) -> String {
    p.to_str().expect("UTF-8").to_string()
}

/// The ask workflow (shared with the command-line tests).
#[allow(unused_imports)]
pub use super::support::cli::ASKER;

/// `draft` (a `set` node reading `task`) then `polish` (a program reading `task` and
/// `draft`, writing `out`), then the supervisor stops. `secret` is a slice no node reads.
pub const CHAIN: &str = r#"{"workflow": "chain",
 "slices": {"task": {}, "draft": {}, "out": {}, "secret": {}},
 "entry": "boss",
 "supervisors": {"boss": {"allow": ["draft", "polish"],
   "default": {"stop_global": {"reason": "done"}}}},
 "nodes": {
   "draft": {"supervisor": "boss", "reads": ["task"], "writes": ["draft"],
     "triggers": [{"priority": 2, "when": {"path": "/draft", "exists": false}}],
     "run": {"set": {"draft": {"text": "first words"}}}},
   "polish": {"supervisor": "boss", "reads": ["task", "draft"], "writes": ["out"],
     "triggers": [{"priority": 1, "when": {"path": "/out", "exists": false}}],
     "run": {"exec": {"argv": ["python3", "polish.py"]}}}}}"#;

/// Writes `out` from what it read: the task and the draft's text.
pub const POLISH_PY: &str = r#"import json, sys
req = json.load(sys.stdin)
s = req["input"]
print(json.dumps({"out": {"task": s["task"], "from": s["draft"]["text"], "n": 2}}))
"#;

/// The root asks which colour; once answered, `note` (reading the answer) writes
/// `colour`, the subgraph `paint` (its node `brush` reading `colour` in its frame) writes
/// `out`, and the terminal `finish` reads `out` and the answer: node runs after a resume,
/// inside a subgraph and after its return.
#[allow(dead_code)]
pub const ANSWERED: &str = r#"{"workflow": "answered",
 "slices": {"clarification": {}, "colour": {}, "out": {}, "done": {}},
 "entry": "root",
 "supervisors": {
   "root": {"allow": ["note", "paint", "finish"],
     "default": {"ask_clarification": {"question": "which colour?"}}},
   "painter": {"allow": ["brush"], "default": {"stop_local": {}}}},
 "subgraphs": {"paint": {"entrypoint": "painter", "supervisors": ["painter"],
   "reads": ["colour"], "writes": ["out"],
   "triggers": [{"priority": 2, "when": {"all": [{"path": "/colour", "exists": true},
                                                 {"path": "/out", "exists": false}]}}]}},
 "nodes": {
   "note": {"supervisor": "root", "reads": ["clarification"], "writes": ["colour"],
     "triggers": [{"priority": 3, "when": {"all": [{"path": "/clarification", "exists": true},
                                                   {"path": "/colour", "exists": false}]}}],
     "run": {"set": {"colour": "blue"}}},
   "brush": {"supervisor": "painter", "reads": ["colour"], "writes": ["out"],
     "triggers": [{"priority": 1, "when": {"path": "/out", "exists": false}}],
     "run": {"set": {"out": "a blue wall"}}},
   "finish": {"supervisor": "root", "reads": ["out", "clarification"], "writes": ["done"],
     "terminal": true,
     "triggers": [{"priority": 4, "when": {"path": "/out", "exists": true}}],
     "run": {"set": {"done": true}}}}}"#;

/// Starts an `answered` run (ANSWERED) through the API, answers its question with
/// "the blue one" once it pauses, and waits until it completed: its id.
#[allow(dead_code)]
pub fn run_answered(s: &Server) -> String {
    let r = s.call(
        "POST",
        "/api/runs",
        Some(&serde_json::json!({"workflow": "answered", "input": {}})),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["run_id"].as_str().expect("run_id").to_string();
    s.wait_status(&id, "awaiting_input");
    let r = s.call(
        "POST",
        &format!("/api/runs/{id}/resume"),
        Some(&serde_json::json!({"answer": "the blue one"})),
    );
    assert!(r.status < 300, "{}", r.text());
    s.wait_status(&id, "completed");
    id
}
