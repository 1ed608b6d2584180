//! A PostgreSQL store that stops answering for a while: the network between a worker and
//! the database is cut (a TCP proxy in this test drops every connection and refuses new
//! ones for 3 s), then restored. Proves the worker does not die: it says the store did
//! not answer, asks again with a backoff, and every run completes exactly as an
//! uninterrupted one would (trace steps unique and contiguous), the runs whose store
//! calls failed being resumed from their last commit once their lease lapsed.
#![cfg(all(target_os = "linux", feature = "cli"))]

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::cli::{Bench, check_trace, signal};
use support::stores::{Backend, backends};

/// A TCP proxy to `target` on a loopback port of its own that can be cut (every open
/// connection shut, new ones closed at once) and restored.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn new(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let up = Arc::new(AtomicBool::new(true));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (up2, open2) = (Arc::clone(&up), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !up2.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let mut kept = open2.lock().expect("the list");
                for s in [&client, &server] {
                    kept.push(s.try_clone().expect("a clone"));
                }
                pipe(
                    client.try_clone().expect("a clone"),
                    server.try_clone().expect("a clone"),
                );
                pipe(server, client);
            }
        });
        Self { port, up, open }
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for s in self.open.lock().expect("the list").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` on a thread until either end closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

#[test]
fn a_worker_survives_the_database_going_away_and_coming_back() {
    const TICKS: u32 = 8;
    const RUNS: usize = 12;
    if !backends().contains(&Backend::Postgres) {
        return;
    }
    let b = Bench::on(env!("CARGO_BIN_EXE_pactgraph"), Backend::Postgres);
    // The store's URL through the proxy: same database and schema, another port.
    let (head, tail) = b.store.rsplit_once('@').expect("credentials in PG_URL");
    let (hostport, rest) = tail.split_once('/').expect("a database in PG_URL");
    let proxy = Proxy::new(hostport.to_string());
    let proxied = format!("{head}@127.0.0.1:{}/{rest}", proxy.port);

    let wf = b.file("wf.json", &support::cli::ticker_json(TICKS, 40));
    b.file("slow", "0.1");
    let ids: Vec<String> = (0..RUNS)
        .map(|_| {
            let r = b.run(&["run", wf.to_str().unwrap(), "--detach"]);
            assert_eq!(r.code, 0, "{}", r.err);
            r.json()["run_id"].as_str().unwrap().to_string()
        })
        .collect();
    let mut worker = b
        .command(&[
            "worker",
            "--store",
            &proxied,
            "--concurrency",
            "4",
            "--lease",
            "1s",
            "--poll",
            "20ms",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(b.dir.join("worker.err")).unwrap())
        .spawn()
        .expect("the worker starts");
    let completed = |b: &Bench| {
        let list = b.run(&["runs", "list", "--format", "json", "--limit", "0"]);
        list.json()
            .as_array()
            .expect("a list")
            .iter()
            .filter(|r| r["status"] == "completed")
            .count()
    };
    assert!(
        b.wait_until(Duration::from_secs(60), || completed(&b) >= 2),
        "runs complete before the cut"
    );
    proxy.cut();
    std::thread::sleep(Duration::from_secs(3));
    proxy.restore();
    assert!(
        b.wait_until(Duration::from_secs(120), || completed(&b) == RUNS),
        "every run completes after the store comes back"
    );
    signal(&worker, "TERM");
    let status = worker.wait().unwrap();
    let log = std::fs::read_to_string(b.dir.join("worker.err")).unwrap();
    assert_eq!(status.code(), Some(0), "{log}");
    // The outage is said: by the worker's look for runs (when a slot was free), or by
    // the runs' own store calls riding it out (ADR 0036).
    assert!(
        log.contains("the run store did not answer") || log.contains("trying again"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    for id in &ids {
        let show = b.show(id);
        assert_eq!(show["run"]["status"], "completed", "{show}");
        check_trace(&show["trace"], TICKS);
    }
}
