//! The model client's failures against the scripted Chat Completions server over real
//! HTTP on loopback: retries (`Retry-After`, backoff), statuses that are not retried,
//! time-outs, malformed bodies, broken streams, cancellation, and a property test over
//! random scripts (brief 10.5; `docs/spec/models.md`). The protocol itself is in
//! `tests/model_client.rs`.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;

use std::time::{Duration, Instant};

use chat_server::{ChatServer, Reply};
use pactgraph::contracts::ModelSpec;
use pactgraph::model::{ChatClient, ChatMessage, ChatRequest, ModelDelta, ModelError};
use proptest::prelude::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A key variable no test environment sets: requests go without `Authorization`.
const NO_KEY: &str = "PACTGRAPH_TEST_UNSET_API_KEY";

fn spec(server: &ChatServer) -> ModelSpec {
    ModelSpec::new(server.base_url(), "scripted-model").key_env(NO_KEY)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::system("be brief"), ChatMessage::user(text)],
        ..ChatRequest::default()
    }
}

async fn call(
    spec: &ModelSpec,
    req: &ChatRequest,
) -> (
    Result<pactgraph::model::ChatReply, ModelError>,
    Vec<ModelDelta>,
) {
    let client = ChatClient::new(spec).expect("the client builds");
    let mut deltas = Vec::new();
    let mut on = |d: ModelDelta| deltas.push(d);
    let r = client
        .complete(req, &CancellationToken::new(), &mut on)
        .await;
    (r, deltas)
}

#[tokio::test]
async fn a_429_with_retry_after_waits_then_succeeds() {
    let server = ChatServer::start([
        Reply::error(429, "Rate limit reached").header("Retry-After", "1"),
        Reply::text("ok"),
    ])
    .await;
    let (r, _) = call(&spec(&server), &ask("x")).await;
    let r = r.expect("a reply after the retry");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    assert!(
        gap >= Duration::from_millis(950),
        "Retry-After: 1 obeyed, waited {gap:?}"
    );
    assert!(gap < Duration::from_millis(1900), "waited {gap:?}");
    assert_eq!(r.attempts.len(), 2);
    assert_eq!(r.attempts[0].status, Some(429));
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("Rate limit reached"))
    );
    assert_eq!(r.attempts[1].waited_ms, 1000);
    assert_eq!(r.attempts[1].status, Some(200));
}

#[tokio::test]
async fn a_500_then_success_backs_off_within_the_first_bound() {
    let server = ChatServer::start([Reply::error(500, "boom"), Reply::text("ok")]).await;
    let (r, _) = call(&spec(&server), &ask("x")).await;
    let r = r.expect("a reply");
    assert_eq!(
        r.attempts.iter().map(|a| a.status).collect::<Vec<_>>(),
        vec![Some(500), Some(200)]
    );
    assert!(
        r.attempts[1].waited_ms <= 500,
        "full jitter within 0.5 s: {:?}",
        r.attempts
    );
    // retry-after-ms is obeyed too.
    let server = ChatServer::start([
        Reply::error(503, "busy").header("retry-after-ms", "250"),
        Reply::text("ok"),
    ])
    .await;
    let (r, _) = call(&spec(&server), &ask("x")).await;
    let r = r.expect("a reply");
    assert_eq!(r.attempts[1].waited_ms, 250);
    let reqs = server.requests();
    assert!(reqs[1].at - reqs[0].at >= Duration::from_millis(240));
}

#[tokio::test]
async fn a_401_is_not_retried_and_names_model_status_and_message() {
    let server = ChatServer::start([
        Reply::error(401, "Incorrect API key provided"),
        Reply::text("never sent"),
    ])
    .await;
    let (r, _) = call(&spec(&server), &ask("x")).await;
    let e = r.expect_err("a 401 fails");
    assert_eq!(e.status(), Some(401));
    assert!(!e.is_retryable());
    assert_eq!(e.attempts().len(), 1);
    let text = e.to_string();
    assert_eq!(
        text,
        "model `scripted-model`: HTTP 401: Incorrect API key provided"
    );
    assert_eq!(server.requests().len(), 1, "no retry");
    // A redirect is not followed either (the key goes to base_url only).
    for status in [400, 403, 404, 422, 307] {
        let no = Reply::error(status, "no").header("Location", "/v1/other");
        let server = ChatServer::start([no, Reply::text("x")]).await;
        let (r, _) = call(&spec(&server), &ask("x")).await;
        assert_eq!(r.expect_err("fails").status(), Some(status));
        assert_eq!(server.requests().len(), 1, "HTTP {status} is not retried");
    }
}

#[tokio::test]
async fn retries_run_out_with_every_attempt_kept() {
    let server = ChatServer::start(
        (0..3).map(|_| Reply::error(502, "bad gateway").header("Retry-After", "0")),
    )
    .await;
    let (r, _) = call(&spec(&server).with_max_retries(2), &ask("x")).await;
    let e = r.expect_err("fails");
    assert_eq!(e.status(), Some(502));
    assert!(e.is_retryable());
    assert_eq!(e.attempts().len(), 3);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        e.to_string(),
        "model `scripted-model`: HTTP 502: bad gateway (after 3 attempts)"
    );
}

#[tokio::test]
async fn a_hanging_reply_is_ended_by_timeout_ms() {
    let server = ChatServer::start([Reply::hang(), Reply::hang()]).await;
    let spec = spec(&server).with_timeout_ms(300).with_max_retries(1);
    let started = Instant::now();
    let (r, _) = call(&spec, &ask("x")).await;
    let elapsed = started.elapsed();
    let e = r.expect_err("times out");
    assert!(
        matches!(
            e,
            ModelError::Timeout {
                timeout_ms: 300,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.attempts().len(), 2);
    assert_eq!(server.requests().len(), 2, "a time-out is retried");
    assert!(elapsed >= Duration::from_millis(600), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(600 + 500 + 1500),
        "{elapsed:?}"
    );
    assert!(
        e.to_string().contains("no complete reply within 300 ms"),
        "{e}"
    );
    assert!(
        server.wait_closed(1, Duration::from_secs(5)).await,
        "the request was aborted"
    );
    // A stream that stops in the middle is bounded as well.
    let server =
        ChatServer::start([Reply::stream_text(&["a", "b"], false).pause(Duration::from_secs(30))])
            .await;
    let spec = self::spec(&server)
        .stream(true)
        .with_timeout_ms(300)
        .with_max_retries(0);
    let (r, deltas) = call(&spec, &ask("x")).await;
    assert!(matches!(r, Err(ModelError::Timeout { .. })), "{r:?}");
    assert!(deltas.is_empty());
}

#[tokio::test]
async fn a_malformed_body_is_retried_then_fails() {
    let server = ChatServer::start([
        Reply::raw(200, "text/html", "<html>oops</html>"),
        Reply::json(200, json!({"id": "x", "object": "chat.completion"})),
        Reply::text("fine"),
        Reply::raw(200, "application/json", "{not json"),
        Reply::raw(200, "application/json", "{not json"),
    ])
    .await;
    let (r, _) = call(&spec(&server).with_max_retries(2), &ask("x")).await;
    let r = r.expect("the third answer is good");
    let errors: Vec<String> = r.attempts.iter().filter_map(|a| a.error.clone()).collect();
    assert_eq!(errors.len(), 2);
    assert!(errors[0].contains("not JSON"), "{errors:?}");
    assert!(errors[1].contains("no `choices[0]`"), "{errors:?}");
    let (r, _) = call(&spec(&server).with_max_retries(1), &ask("x")).await;
    let e = r.expect_err("malformed twice");
    assert!(
        matches!(e, ModelError::Malformed { status: 200, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("the body is not JSON"), "{e}");
    assert_eq!(server.requests().len(), 5);
}

#[tokio::test]
async fn a_broken_stream_and_a_closed_connection_are_retried() {
    let server = ChatServer::start([
        Reply::stream_text(&["par", "tial", "!"], true).broken_after(2),
        Reply::close(),
        Reply::stream_text(&["whole"], true),
    ])
    .await;
    let (r, deltas) = call(&spec(&server).stream(true), &ask("x")).await;
    let r = r.expect("the third answer is whole");
    assert_eq!(r.message.content.as_deref(), Some("whole"));
    assert_eq!(r.attempts.len(), 3);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("stream")),
        "{:?}",
        r.attempts
    );
    assert_eq!(
        r.attempts[1].status, None,
        "no answer on a closed connection"
    );
    // The broken attempt's pieces were published before the retry's.
    assert_eq!(deltas.last(), Some(&ModelDelta::Text("whole".into())));
    assert!(deltas.contains(&ModelDelta::Text("par".into())));
}

#[tokio::test]
async fn cancel_aborts_a_request_in_flight() {
    let server = ChatServer::start([Reply::hang()]).await;
    let client = ChatClient::new(&spec(&server)).expect("builds");
    let cancel = CancellationToken::new();
    let task = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let mut on = |_d: ModelDelta| {};
            client.complete(&ask("x"), &cancel, &mut on).await
        })
    };
    assert!(server.wait_requests(1, Duration::from_secs(10)).await);
    let at = Instant::now();
    cancel.cancel();
    let r = task.await.expect("the call task");
    assert!(
        at.elapsed() < Duration::from_millis(200),
        "aborted at once: {:?}",
        at.elapsed()
    );
    let e = r.expect_err("cancelled");
    assert!(matches!(e, ModelError::Cancelled { .. }), "{e:?}");
    assert!(!e.is_retryable());
    assert_eq!(e.attempts().len(), 1);
    assert!(
        server.wait_closed(0, Duration::from_secs(5)).await,
        "the server saw the connection closed"
    );
    assert_eq!(server.requests().len(), 1);

    // Cancelling during a backoff wait ends the call too.
    let server = ChatServer::start([Reply::error(429, "later").header("Retry-After", "30")]).await;
    let client = ChatClient::new(&spec(&server)).expect("builds");
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c2.cancel();
    });
    let at = Instant::now();
    let mut on = |_d: ModelDelta| {};
    let e = client
        .complete(&ask("x"), &cancel, &mut on)
        .await
        .expect_err("cancelled");
    assert!(matches!(e, ModelError::Cancelled { .. }), "{e:?}");
    assert!(at.elapsed() < Duration::from_secs(5));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn connection_refused_is_retried_and_named() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let spec = ModelSpec::new(format!("http://127.0.0.1:{port}/v1"), "m")
        .key_env(NO_KEY)
        .with_max_retries(1);
    let (r, _) = call(&spec, &ask("x")).await;
    let e = r.expect_err("nothing listens");
    assert!(matches!(e, ModelError::Connection { .. }), "{e:?}");
    assert_eq!(e.attempts().len(), 2);
    assert!(
        e.to_string().starts_with("model `m`: connection failed"),
        "{e}"
    );
}

/// A scripted reply for the property test.
fn arb_reply() -> impl Strategy<Value = Reply> {
    let fast = |r: Reply| r.header("retry-after-ms", "1");
    prop_oneof![
        "[a-z ]{0,12}".prop_map(|t| Reply::text(&t)),
        ("[a-z_]{1,8}", "\\PC{0,16}").prop_map(|(n, a)| Reply::tool_calls(&[(
            "c1",
            n.as_str(),
            a.as_str()
        )])),
        prop::sample::select(vec![
            400u16, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503, 504
        ])
        .prop_map(move |s| fast(Reply::error(s, "scripted"))),
        "\\PC{0,24}".prop_map(move |b| fast(Reply::raw(200, "application/json", &b))),
        prop::collection::vec("\\PC{0,20}", 0..4).prop_map(Reply::sse_chunks),
        (
            prop::collection::vec("[a-z]{1,4}", 1..4),
            any::<bool>(),
            0usize..4
        )
            .prop_map(|(p, u, keep)| {
                let parts: Vec<&str> = p.iter().map(String::as_str).collect();
                let r = Reply::stream_text(&parts, u);
                if keep < 3 { r.broken_after(keep) } else { r }
            }),
        Just(Reply::close()),
        Just(Reply::hang()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Any script of replies and statuses ends in a reply or a defined error, within the
    /// retries, never a panic.
    #[test]
    fn any_script_ends_in_a_reply_or_a_defined_error(
        script in prop::collection::vec(arb_reply(), 1..5),
        retries in 0u32..3,
        stream in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async {
            let server = ChatServer::start(script).await;
            let spec = spec(&server).stream(stream).with_timeout_ms(150).with_max_retries(retries);
            let (r, _) = call(&spec, &ask("x")).await;
            let made = server.requests().len();
            match r {
                Ok(reply) => {
                    prop_assert!(reply.attempts.len() as u32 <= retries + 1);
                    prop_assert_eq!(reply.attempts.last().and_then(|a| a.error.clone()), None);
                    prop_assert!(reply.attempts[..reply.attempts.len() - 1].iter().all(|a| a.error.is_some()));
                }
                Err(e) => {
                    prop_assert!(!matches!(e, ModelError::Config { .. } | ModelError::Cancelled { .. }), "{e:?}");
                    prop_assert!(e.attempts().len() as u32 <= retries + 1);
                    prop_assert!(e.to_string().starts_with("model `scripted-model`: "), "{e}");
                    if e.attempts().len() as u32 <= retries {
                        prop_assert!(!e.is_retryable(), "{e:?}");
                    }
                }
            }
            prop_assert!(made as u32 <= retries + 1);
            Ok(())
        })?;
    }
}

/// `https://` goes through rustls: against a plain-HTTP server (which answers the
/// ClientHello with an HTTP 400, as web servers do) the TLS handshake fails, and that is a
/// connection error (retried), not an unsupported scheme.
#[tokio::test]
async fn https_speaks_tls() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let plain = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("the client connects");
        let answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let _ = socket.write_all(answer).await;
    });
    let spec = ModelSpec::new(format!("https://{addr}/v1"), "m")
        .key_env(NO_KEY)
        .with_timeout_ms(10_000)
        .with_max_retries(0);
    let (r, _) = call(&spec, &ask("x")).await;
    let e = r.expect_err("no TLS on the other side");
    assert!(matches!(e, ModelError::Connection { .. }), "{e:?}");
    assert!(e.is_retryable());
    plain.await.expect("the plain server");
}
