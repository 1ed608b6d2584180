//! `pactgraph serve`'s event streams and its stop, over real HTTP on loopback, on both
//! stores: `GET /api/runs/{id}/events` (history, then live; `Last-Event-ID`;
//! keep-alives; a bound on streams) and SIGTERM during a run (interrupted, resumable).
#![cfg(feature = "store")]

mod serve_support;
mod support;

use std::time::Duration;

use serde_json::json;
use serve_support::{Server, SseRead, sse, sse_run};
use support::cli::{Bench, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

fn seqs(read: &SseRead) -> Vec<u64> {
    read.events
        .iter()
        .map(|e| e.data["seq"].as_u64().unwrap())
        .collect()
}

/// Proves a stream opened before a run moves gets every event in order, ids equal to
/// `seq`, live as the embedded worker commits them, ending after `run_ended`; that
/// `Last-Event-ID: K` resumes with K+1; and that the history matches `runs watch`.
#[test]
fn events_stream_history_then_live_and_resume_from_last_event_id() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("ticker.json", &ticker_json(3, 20));
        b.file("slow", "0.3");
        let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": "ticker", "name": "live"})),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        let read = sse_run(&s.addr, &id);
        assert_eq!(read.status, 200);
        assert!(read.ended, "the stream ends with the run");
        let n = read.events.len() as u64;
        assert!(n >= 4, "{read:?}");
        assert_eq!(seqs(&read), (1..=n).collect::<Vec<_>>());
        for e in &read.events {
            assert_eq!(e.id.as_deref(), Some(e.data["seq"].to_string().as_str()));
            assert_eq!(e.data["run_id"], id.as_str());
        }
        assert_eq!(read.events[0].data["event"], "run_started");
        assert!(read.events.iter().any(|e| e.data["event"] == "run_ended"));
        let watched = b.run(&["runs", "watch", &id]);
        assert_eq!(watched.code, 0, "{}", watched.err);
        let lines: Vec<serde_json::Value> = watched
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let data: Vec<serde_json::Value> = read.events.iter().map(|e| e.data.clone()).collect();
        assert_eq!(data, lines);

        // Resumed after event 2: 3.. only.
        let again = sse(
            &s.addr,
            "/api/runs/live/events",
            &[("Last-Event-ID", "2")],
            Duration::from_secs(30),
            |_| false,
        );
        assert_eq!(seqs(&again), (3..=n).collect::<Vec<_>>());
        let bad = sse(
            &s.addr,
            &format!("/api/runs/{id}/events"),
            &[("Last-Event-ID", "two")],
            Duration::from_secs(10),
            |_| false,
        );
        assert_eq!(bad.status, 400);
    }
}

/// Proves an idle stream gets keep-alive comments, and streams past `--max-streams`
/// get 503 while the others go on.
#[test]
fn idle_streams_are_kept_alive_and_bounded() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(2, 20));
    // No workers: the run stays queued and its stream idle.
    let s = Server::start(
        &b,
        "serve",
        &["--keep-alive", "200ms", "--max-streams", "2"],
    );
    let id = s
        .call("POST", "/api/runs", Some(&json!({"workflow": "ticker"})))
        .json()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/runs/{id}/events");
    let addr = s.addr.clone();
    let p = path.clone();
    let holder =
        std::thread::spawn(move || sse(&addr, &p, &[], Duration::from_millis(1500), |_| false));
    let addr = s.addr.clone();
    let p = path.clone();
    let holder2 =
        std::thread::spawn(move || sse(&addr, &p, &[], Duration::from_millis(1500), |_| false));
    std::thread::sleep(Duration::from_millis(500));
    let third = sse(&s.addr, &path, &[], Duration::from_secs(5), |_| false);
    assert_eq!(third.status, 503);
    let held = holder.join().unwrap();
    let held2 = holder2.join().unwrap();
    assert_eq!(held.status, 200);
    assert_eq!(held2.status, 200);
    assert!(held.events.is_empty());
    assert!(held.comments >= 3, "keep-alives: {held:?}");
}

/// Proves SIGTERM during a run stops the server (exit 0): the run in flight is
/// interrupted, its lease given up, and a worker later finishes it.
#[test]
fn sigterm_during_a_run_interrupts_it_and_releases_its_lease() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("ticker.json", &ticker_json(3, 20));
        b.file("slow", "30");
        let s = Server::start(&b, "serve", &["--workers", "1", "--poll", "20ms"]);
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": "ticker", "name": "cut"})),
        );
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        s.wait_status(&id, "running");
        assert!(s.wait_until(Duration::from_secs(30), || !b.pids().is_empty()));
        let log_before = s.log();
        let started = std::time::Instant::now();
        let code = s.stop("TERM");
        assert_eq!(code, 0, "{log_before}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "stopped without waiting for the step"
        );
        assert_eq!(b.status("cut"), "interrupted");
        let shown = b.show("cut");
        assert_eq!(shown["run"]["owner"], serde_json::Value::Null, "{shown}");
        // Its program was killed with it.
        for pid in b.pids() {
            assert!(
                b.wait_until(Duration::from_secs(10), || support::cli::process_gone(pid)),
                "pid {pid} left running"
            );
        }
        // A run resumed through the API (no workers) is interrupted the same way.
        let s = Server::start(&b, "resumer", &[]);
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": "ticker", "name": "api"})),
        );
        let api = r.json()["run_id"].as_str().unwrap().to_string();
        let r = s.call("POST", &format!("/api/runs/{api}/resume"), None);
        assert_eq!(r.status, 202, "{}", r.text());
        s.wait_status(&api, "running");
        assert_eq!(s.stop("TERM"), 0);
        assert_eq!(b.status("api"), "interrupted");

        b.remove("slow");
        let w = b.run(&["worker", "--once"]);
        assert_eq!(w.code, 0, "{}", w.err);
        assert_eq!(b.status("cut"), "completed");
        assert_eq!(b.status("api"), "completed");
    }
}

/// A loop of `steps` `set` steps, each writing a ~10 KB constant (so a stalled client's
/// socket fills long before the run ends), stopped by its step budget.
fn big_loop(steps: u32) -> String {
    let blob = "y".repeat(10_000);
    json!({"workflow": "loop", "slices": {"blob": {}},
           "budgets": {"max_steps": steps},
           "entry": "boss",
           "supervisors": {"boss": {"allow": ["work"]}},
           "nodes": {"work": {"supervisor": "boss", "writes": ["blob"],
             "triggers": [{"priority": 1, "when": true}],
             "run": {"set": {"blob": {"text": blob}}}}}})
    .to_string()
}

/// Opens `GET path` as an event stream (the request sent, nothing read).
fn open_stream(addr: &str, path: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    c
}

/// Reads a stream until the server ends it (a minute at most): its events' ids and data.
fn read_stream(c: &mut std::net::TcpStream) -> (Vec<u64>, Vec<serde_json::Value>) {
    use std::io::Read;
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).expect("the stream ends");
    let (head, body) = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (&raw[..i], &raw[i + 4..]))
        .expect("a response");
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(head)
    );
    let body = if String::from_utf8_lossy(head)
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        serve_support::dechunk(body).0
    } else {
        body.to_vec()
    };
    let text = String::from_utf8_lossy(&body);
    let (mut ids, mut data) = (Vec::new(), Vec::new());
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            ids.push(v.trim().parse().unwrap());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(serde_json::from_str(v.trim_start()).unwrap());
        }
    }
    (ids, data)
}

fn metric(s: &Server, name: &str) -> f64 {
    let text = s.get("/metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Proves the streams of one run share one follower: six streams on a queued run are
/// one feed (`pactgraph_event_feeds` 1, `pactgraph_event_streams` 6); a `worker` process
/// then runs it (over 8,000 events, twice what a feed's ring holds, and tens of MB beyond
/// it: more than the kernel's socket buffers absorb for the stalled stream, so it must fall
/// behind the ring); five streams read as
/// it goes and one reads nothing until the run ended (its socket full): every stream
/// gets every kept event once, in order, ids equal to `seq`, the same as `runs watch`
/// prints; the stalled one, fallen behind the ring, reads what it missed from the store
/// (`pactgraph_event_stream_lags_total` counts it).
/// Once the run ended the feed is gone.
#[test]
fn the_streams_of_a_run_share_one_follower_and_a_stalled_one_only_lags() {
    for b in Bench::each(BIN.as_ref()) {
        b.file("loop.json", &big_loop(3_000));
        let s = Server::start(&b, "serve", &[]);
        let r = s.call("POST", "/api/runs", Some(&json!({"workflow": "loop"})));
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        let path = format!("/api/runs/{id}/events");
        let readers: Vec<_> = (0..5)
            .map(|_| {
                let mut c = open_stream(&s.addr, &path);
                std::thread::spawn(move || read_stream(&mut c))
            })
            .collect();
        let mut stalled = open_stream(&s.addr, &path);
        assert!(
            s.wait_until(Duration::from_secs(10), || metric(
                &s,
                "pactgraph_event_streams"
            ) == 6.0),
            "six streams"
        );
        assert_eq!(metric(&s, "pactgraph_event_feeds"), 1.0, "one follower");

        let w = b.run(&["worker", "--once"]);
        assert_eq!(w.code, 0, "{}", w.err);
        assert_eq!(b.status(&id), "stopped");
        let watched: Vec<serde_json::Value> = b
            .run(&["runs", "watch", &id])
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let n = watched.len() as u64;
        assert!(n > 8_000, "{n} events");
        for reader in readers {
            let (ids, data) = reader.join().unwrap();
            assert_eq!(ids, (1..=n).collect::<Vec<_>>());
            assert_eq!(data, watched);
        }
        // The stalled stream, read only now.
        let (ids, data) = read_stream(&mut stalled);
        assert_eq!(
            ids,
            (1..=n).collect::<Vec<_>>(),
            "the stalled stream, whole"
        );
        assert_eq!(data, watched);
        assert!(
            metric(&s, "pactgraph_event_stream_lags_total") >= 1.0,
            "the stalled stream fell behind the ring and read the store"
        );
        assert!(
            s.wait_until(Duration::from_secs(10), || metric(
                &s,
                "pactgraph_event_feeds"
            ) == 0.0),
            "the feed ends with the run"
        );
    }
}

/// The payloads of a chunked HTTP body, one per chunk, until the last (empty) one.
fn chunks(body: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(nl) = body[at..].windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&body[at..at + nl]).trim(), 16)
            .expect("a chunk size");
        let start = at + nl + 2;
        if size == 0 {
            break;
        }
        out.push(body[start..start + size].to_vec());
        at = start + size + 2;
    }
    out
}

/// Proves a stream sends the events it can send at once as one chunk of whole messages,
/// each formatted the one way: the history of an ended run of ~1,200 events (400 of them
/// ~10 KB) comes in at most one chunk per page the stream reads from the store (500
/// events), not one per event; every chunk starts a message and ends one; and the body
/// is byte for byte `id: SEQ`, `data: ` and the line `runs watch` prints, then a blank
/// line, for each event in order.
#[test]
fn a_stream_sends_what_it_has_in_one_chunk_of_whole_messages() {
    use std::io::Read;
    for b in Bench::each(BIN.as_ref()) {
        b.file("loop.json", &big_loop(400));
        let s = Server::start(&b, "serve", &[]);
        let r = s.call("POST", "/api/runs", Some(&json!({"workflow": "loop"})));
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        let w = b.run(&["worker", "--once"]);
        assert_eq!(w.code, 0, "{}", w.err);
        let watched = b.run(&["runs", "watch", &id]).out;
        let n = watched.lines().count();
        assert!(n > 1_000, "{n} events");
        let mut expected = Vec::new();
        for (i, line) in watched.lines().enumerate() {
            expected.extend_from_slice(format!("id: {}\ndata: {line}\n\n", i + 1).as_bytes());
        }

        let mut c = open_stream(&s.addr, &format!("/api/runs/{id}/events"));
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut raw = Vec::new();
        c.read_to_end(&mut raw).expect("the stream ends");
        let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..at]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        assert!(head.contains("cache-control: no-cache"), "{head}");
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        let chunks = chunks(&raw[at + 4..]);
        assert!(
            chunks.len() <= n.div_ceil(500),
            "{} chunks for {n} events",
            chunks.len()
        );
        for chunk in &chunks {
            assert!(chunk.starts_with(b"id: ") && chunk.ends_with(b"\n\n"));
        }
        assert_eq!(
            String::from_utf8(chunks.concat()).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }
}
