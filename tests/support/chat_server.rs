//! A scripted OpenAI-compatible Chat Completions server on loopback, for tests that speak
//! real HTTP to a model (brief 10.6). Include it with
//! `#[path = "support/chat_server.rs"] mod chat_server;`.
//!
//! [`ChatServer::start`] listens on `127.0.0.1` (a free port) and answers each request
//! (any path) with the next [`Reply`] of its script: a JSON body with a status and headers,
//! an SSE stream written chunk by chunk (split where the script says, optionally broken off
//! before its end), a hang, or a closed connection. It speaks HTTP/1.1 with
//! `Connection: close`, one request per connection. Every request is recorded
//! ([`ChatServer::requests`]: method, path, headers, body, arrival time), and so is every
//! connection the client closed while the server still held it
//! ([`ChatServer::wait_closed`]). With the script used up it answers HTTP 400
//! `chat_server: the script has no reply left`.
//!
//! ```ignore
//! let server = ChatServer::start([Reply::error(429, "slow down").header("Retry-After", "1"),
//!                                 Reply::text("hello")]).await;
//! let spec = ModelSpec::new(server.base_url(), "m");
//! // ... call the model, then:
//! assert_eq!(server.requests().len(), 2);
//! ```
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

#[path = "chat_script.rs"]
mod script;
pub use script::*;

/// A multi-threaded tokio runtime with `workers` threads, for a test that runs the
/// server (and an executor) on it.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    /// `POST`, ...
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The body as text.
    pub raw_body: String,
    /// When the request (head and body) had arrived.
    pub at: Instant,
}

impl Request {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    script: Mutex<VecDeque<Reply>>,
    /// Replies kept for the first request whose body contains their needle.
    routed: Mutex<Vec<(String, Reply)>>,
    requests: Mutex<Vec<Request>>,
    closed: Mutex<Vec<usize>>,
    changed: Notify,
}

/// The scripted server; stops when dropped.
pub struct ChatServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl ChatServer {
    /// Starts a server on `127.0.0.1` answering with `script`, in order.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> ChatServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        let state = Arc::new(State::default());
        state.script.lock().expect("script lock").extend(script);
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, st.clone()));
            }
        });
        ChatServer { addr, state, task }
    }

    /// The base URL to give a model: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Reply) {
        self.state
            .script
            .lock()
            .expect("script lock")
            .push_back(reply);
    }

    /// Keeps `reply` for the first request whose body contains `needle` (before the
    /// script): concurrent requests (advisors, team members) get each its own answer,
    /// whichever arrives first. Several replies for one needle are served in order.
    pub fn route(&self, needle: &str, reply: Reply) {
        self.state
            .routed
            .lock()
            .expect("routed lock")
            .push((needle.to_string(), reply));
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.state.requests.lock().expect("requests lock").clone()
    }

    /// The bodies of the requests holding `needle`, in arrival order.
    pub fn requests_with(&self, needle: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.raw_body.contains(needle))
            .map(|r| r.body)
            .collect()
    }

    /// Waits (at most `limit`) until `n` requests have arrived; whether they did.
    pub async fn wait_requests(&self, n: usize, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            let notified = self.state.changed.notified();
            if self.requests().len() >= n {
                return true;
            }
            if tokio::time::timeout_at(until.into(), notified)
                .await
                .is_err()
            {
                return self.requests().len() >= n;
            }
        }
    }

    /// Waits (at most `limit`) until the client has closed the connection of request
    /// number `index` (0-based) while the server held it; whether it did.
    pub async fn wait_closed(&self, index: usize, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            let notified = self.state.changed.notified();
            if self.closed().contains(&index) {
                return true;
            }
            if tokio::time::timeout_at(until.into(), notified)
                .await
                .is_err()
            {
                return self.closed().contains(&index);
            }
        }
    }

    /// The requests whose connection the client closed while the server held it.
    pub fn closed(&self) -> Vec<usize> {
        self.state.closed.lock().expect("closed lock").clone()
    }
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request, records it, answers with the next reply.
async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let reply = {
        let mut routed = state.routed.lock().expect("routed lock");
        let found = routed
            .iter()
            .position(|(needle, _)| request.raw_body.contains(needle.as_str()));
        found.map(|i| routed.remove(i).1)
    };
    let reply = reply.or_else(|| state.script.lock().expect("script lock").pop_front());
    let index = {
        let mut requests = state.requests.lock().expect("requests lock");
        requests.push(request);
        requests.len() - 1
    };
    state.changed.notify_waiters();
    let mut reply =
        reply.unwrap_or_else(|| Reply::error(400, "chat_server: the script has no reply left"));
    if let Some((n, limit)) = reply.hold.take() {
        let until = Instant::now() + limit;
        let arrived = loop {
            let notified = state.changed.notified();
            if state.requests.lock().expect("requests lock").len() >= n {
                break true;
            }
            if tokio::time::timeout_at(until.into(), notified)
                .await
                .is_err()
            {
                break state.requests.lock().expect("requests lock").len() >= n;
            }
        };
        if !arrived {
            reply = Reply::error(500, "chat_server: held alone");
        }
    }
    let closed = answer(&mut stream, reply).await;
    if closed {
        state.closed.lock().expect("closed lock").push(index);
        state.changed.notify_waiters();
    }
}

/// Writes `reply`; true when the client closed the connection first.
async fn answer(stream: &mut TcpStream, reply: Reply) -> bool {
    if !reply.delay.is_zero() && wait_or_closed(stream, Some(reply.delay)).await {
        return true;
    }
    let reason = reason(reply.status);
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nConnection: close\r\n",
        reply.status
    );
    for (n, v) in &reply.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    match reply.body {
        Body::Full { content_type, text } => {
            head.push_str(&format!(
                "Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                text.len()
            ));
            head.push_str(&text);
            if stream.write_all(head.as_bytes()).await.is_err() {
                return true;
            }
            let _ = stream.shutdown().await;
            false
        }
        Body::Sse {
            chunks,
            pause,
            complete,
        } => {
            head.push_str(
                "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n",
            );
            if stream.write_all(head.as_bytes()).await.is_err() {
                return true;
            }
            for c in chunks {
                let piece = format!("{:x}\r\n{c}\r\n", c.len());
                if stream.write_all(piece.as_bytes()).await.is_err()
                    || stream.flush().await.is_err()
                {
                    return true;
                }
                if !pause.is_zero() && wait_or_closed(stream, Some(pause)).await {
                    return true;
                }
            }
            if complete {
                if stream.write_all(b"0\r\n\r\n").await.is_err() {
                    return true;
                }
                let _ = stream.shutdown().await;
            }
            false
        }
        Body::Hang => wait_or_closed(stream, None).await,
        Body::Close => false,
    }
}

/// Waits `limit` (forever when `None`), watching the connection: true when the client
/// closed it meanwhile.
async fn wait_or_closed(stream: &mut TcpStream, limit: Option<Duration>) -> bool {
    let watch = async {
        let mut buf = [0u8; 256];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    match limit {
        Some(d) => tokio::time::timeout(d, watch).await.is_ok(),
        None => {
            watch.await;
            true
        }
    }
}

/// Reads a request head and its `Content-Length` body; `None` on a broken request.
async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let raw_body = String::from_utf8_lossy(&buf[head_end..head_end + length]).to_string();
    Some(Request {
        method,
        path,
        headers,
        body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
        raw_body,
        at: Instant::now(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}
