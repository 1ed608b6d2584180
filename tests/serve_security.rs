//! `pactgraph serve`'s security over real HTTP on loopback: loopback by default, a token
//! for anything else, bearer tokens and session cookies, CORS only when asked, no secret
//! in responses or logs, and hostile requests (oversized bodies, bad JSON, path tricks,
//! many connections) answered with clear errors, never a panic.
#![cfg(feature = "store")]

mod serve_support;
mod support;

use serde_json::json;
use serve_support::{Server, request, send_raw};
use support::cli::{Bench, ticker_json};

const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");
const TOKEN: &str = "s3cret-token-for-the-tests-0123456789";

/// Proves a non-loopback `--listen` without `--token-env` is refused at start (exit 2,
/// saying why), as are a missing or short token.
#[test]
fn a_public_address_needs_a_token() {
    let b = Bench::new(BIN);
    let r = b.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("not a loopback address"), "{}", r.err);
    assert!(r.err.contains("--token-env"), "{}", r.err);
    let r = b.run(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--token-env",
        "PG_SERVE_NO_SUCH_VAR",
    ]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("not set"), "{}", r.err);
    let mut c = b.command(&["serve", "--token-env", "PG_SERVE_SHORT"]);
    let out = c.env("PG_SERVE_SHORT", "short").output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shorter than 16"));
    let r = b.run(&["serve", "--listen", "localhost"]);
    assert_eq!(r.code, 2, "{}", r.err);
}

/// Proves that with `--token-env` every `/api` request needs the bearer token or the
/// session cookie (401 otherwise), `/healthz` stays open, and the token appears in no
/// response and no log line.
#[test]
fn the_token_guards_every_api_request() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(2, 20));
    let s = Server::start_with(
        &b,
        "auth",
        &["--token-env", "PG_TOKEN"],
        &[("PG_TOKEN", TOKEN)],
    );
    let bearer = format!("Bearer {TOKEN}");
    for path in [
        "/api/runs",
        "/api/workflows",
        "/api/runs/x",
        "/api/nothing",
        "/metrics",
    ] {
        let r = s.get(path);
        assert_eq!(r.status, 401, "{path}: {}", r.text());
        assert_eq!(r.error_code(), "unauthorized");
        let wrong = request(
            &s.addr,
            "GET",
            path,
            &[("Authorization", "Bearer wrong-token-of-some-length")],
            None,
        );
        assert_eq!(wrong.status, 401, "{path}");
    }
    let r = request(
        &s.addr,
        "GET",
        "/api/runs",
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = request(
        &s.addr,
        "POST",
        "/api/runs",
        &[("Authorization", &bearer)],
        Some(br#"{"workflow": "ticker"}"#),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(s.get("/healthz").status, 200);

    // The session: a wrong token is refused; the right one sets the cookie.
    let bad = s.call("POST", "/api/session", Some(&json!({"token": "nope"})));
    assert_eq!(bad.status, 401);
    assert!(bad.header("set-cookie").is_none());
    let ok = s.call("POST", "/api/session", Some(&json!({"token": TOKEN})));
    assert_eq!(ok.status, 200, "{}", ok.text());
    let cookie = ok.header("set-cookie").expect("a cookie").to_string();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains(TOKEN), "the cookie is not the token");
    let pair = cookie.split(';').next().unwrap().to_string();
    let r = request(&s.addr, "GET", "/api/runs", &[("Cookie", &pair)], None);
    assert_eq!(r.status, 200, "{}", r.text());
    let forged = request(
        &s.addr,
        "GET",
        "/api/runs",
        &[("Cookie", "pactgraph_session=00ff")],
        None,
    );
    assert_eq!(forged.status, 401);

    // No CORS headers unless --cors.
    let r = request(
        &s.addr,
        "GET",
        "/api/runs",
        &[
            ("Authorization", &bearer),
            ("Origin", "https://evil.example"),
        ],
        None,
    );
    assert!(r.header("access-control-allow-origin").is_none());
    let log = s.log();
    assert!(!log.contains(TOKEN), "the token is logged: {log}");
    assert!(
        !log.contains(&pair[pair.find('=').unwrap() + 1..]),
        "the session is logged"
    );
}

/// Proves `--cors ORIGIN` allows that origin only.
#[test]
fn cors_only_for_the_origin_given() {
    let b = Bench::new(BIN);
    let s = Server::start(&b, "cors", &["--cors", "https://ui.example"]);
    let r = request(
        &s.addr,
        "GET",
        "/api/runs",
        &[("Origin", "https://ui.example")],
        None,
    );
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://ui.example")
    );
    let r = request(
        &s.addr,
        "GET",
        "/api/runs",
        &[("Origin", "https://evil.example")],
        None,
    );
    assert!(r.header("access-control-allow-origin").is_none());
    let pre = request(
        &s.addr,
        "OPTIONS",
        "/api/runs",
        &[
            ("Origin", "https://ui.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
        None,
    );
    assert!(pre.status < 300, "{}", pre.status);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://ui.example")
    );
}

/// Proves hostile requests get clear errors and the server stays up: a huge
/// `Content-Length` refused before the body is read, a chunked body over the limit,
/// bad JSON, path tricks in names (no file is read), and many connections at once.
#[test]
fn hostile_requests_get_clear_errors() {
    let b = Bench::new(BIN);
    b.file("ticker.json", &ticker_json(2, 20));
    std::fs::write(
        b.dir.join("..").join("outside-secret.json"),
        r#"{"workflow": "secret"}"#,
    )
    .ok();
    let s = Server::start(&b, "hostile", &["--max-body", "4KB"]);

    // 413 from the header alone: the 10 GB body is never sent.
    let raw = format!(
        "POST /api/runs HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n{{",
        s.addr
    );
    let r = send_raw(&s.addr, raw.as_bytes());
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.error_code(), "body_too_large");
    assert!(r.text().contains("10000000000"));
    // A chunked body (no Content-Length) over the limit: 413 as it is read.
    let big = "x".repeat(8 * 1024);
    let raw = format!(
        "POST /api/runs HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
        s.addr,
        big.len()
    );
    let r = send_raw(&s.addr, raw.as_bytes());
    assert_eq!(r.status, 413, "{}", r.text());
    // A Content-Length that is not a number.
    let raw = format!(
        "POST /api/runs HTTP/1.1\r\nHost: {}\r\nContent-Length: lots\r\n\r\n",
        s.addr
    );
    let r = send_raw(&s.addr, raw.as_bytes());
    assert_eq!(r.status, 400, "{}", r.text());
    // Bad JSON of every kind.
    for body in [
        "",
        "{",
        "null",
        "\"text\"",
        "{\"workflow\": \"ticker\"}}",
        "\u{0}\u{1}",
    ] {
        let r = request(&s.addr, "POST", "/api/runs", &[], Some(body.as_bytes()));
        assert!(r.status == 400, "{body:?}: {} {}", r.status, r.text());
    }
    // Path tricks: names are looked up among the documents, never opened as files.
    for name in [
        "..%2Foutside-secret",
        "../outside-secret",
        "%2E%2E%2Fticker",
        "%2Fetc%2Fpasswd",
        "ticker.json",
    ] {
        let r = s.get(&format!("/api/workflows/{name}"));
        assert_eq!(r.status, 404, "{name}: {}", r.text());
        let r = s.call(
            "POST",
            "/api/runs",
            Some(&json!({"workflow": format!("../{name}")})),
        );
        assert_eq!(r.status, 404, "{name}: {}", r.text());
    }
    let r = s.get("/api/runs/..%2F..%2Fstore.db");
    assert_eq!(r.status, 404, "{}", r.text());
    // Many connections at once: every one answered.
    let addr = s.addr.clone();
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let path = if i % 2 == 0 {
                    "/api/runs"
                } else {
                    "/api/workflows"
                };
                request(&addr, "GET", path, &[], None).status
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().expect("a thread"), 200);
    }
    // Garbage instead of HTTP: the connection is dropped or refused, the server lives.
    let _ = std::net::TcpStream::connect(&s.addr).and_then(|mut c| {
        use std::io::Write;
        c.write_all(b"\x16\x03\x01 not http at all\r\n\r\n")
    });
    assert_eq!(s.get("/healthz").status, 200);
}
