//! The model client (`pactgraph::model::ChatClient`) against the scripted Chat Completions
//! server over real HTTP on loopback: the protocol (brief 10.1, 10.4, 10.6; `docs/spec/models.md`).
//! Retries, time-outs, cancellation and the property test are in `tests/model_client_failures.rs`.
#![cfg(feature = "agents")]

#[path = "support/chat_server.rs"]
mod chat_server;

use chat_server::{ChatServer, Reply, chunk};
use pactgraph::contracts::ModelSpec;
use pactgraph::model::{
    ChatClient, ChatMessage, ChatRequest, ModelDelta, ModelError, ToolCall, ToolChoice, ToolDef,
    Usage,
};
use serde_json::{Value, json};
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
async fn a_plain_reply_and_the_request_sent() {
    let server = ChatServer::start([Reply::text("hello there")]).await;
    let spec = spec(&server)
        .param("temperature", json!(0))
        .param("seed", json!(7));
    let (reply, deltas) = call(&spec, &ask("hi")).await;
    let reply = reply.expect("a reply");
    assert_eq!(
        reply.message,
        ChatMessage::assistant(Some("hello there".into()), vec![])
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 11,
            output_tokens: 7,
            cached_input_tokens: None
        })
    );
    assert_eq!(reply.attempts.len(), 1);
    assert_eq!(reply.attempts[0].status, Some(200));
    assert_eq!(reply.attempts[0].error, None);
    assert!(deltas.is_empty(), "a JSON reply publishes no deltas");

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.header("authorization"),
        None,
        "no key set: no Authorization header"
    );
    assert_eq!(
        r.body,
        json!({
            "model": "scripted-model",
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            "temperature": 0, "seed": 7
        }),
        "params pass through; no tools, tool_choice, stream or response_format"
    );
}

#[tokio::test]
async fn a_tool_call_and_what_the_request_offered() {
    let server = ChatServer::start([
        Reply::tool_calls(&[
            ("call_a", "lookup_order", r#"{"order": 12}"#),
            ("call_b", "final_report", r#"{"ticket": {"id": 1}}"#),
        ]),
        Reply::text("done"),
        Reply::text("done"),
    ])
    .await;
    let tools = vec![
        ToolDef {
            name: "lookup_order".into(),
            description: "Looks an order up".into(),
            parameters: json!({"type": "object", "properties": {"order": {"type": "integer"}}}),
            strict: false,
        },
        ToolDef {
            name: "final_report".into(),
            description: "Ends the session with the node's writes".into(),
            parameters: json!({"type": "object", "properties": {"ticket": {"type": "object"}},
                               "required": ["ticket"], "additionalProperties": false}),
            strict: true,
        },
    ];
    let mut req = ask("where is my order?");
    req.tools = tools;
    req.tool_choice = Some(ToolChoice::Function("final_report".into()));
    let (reply, _) = call(&spec(&server), &req).await;
    let reply = reply.expect("a reply");
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall::new("call_a", "lookup_order", r#"{"order": 12}"#),
            ToolCall::new("call_b", "final_report", r#"{"ticket": {"id": 1}}"#),
        ]
    );
    assert_eq!(reply.message.content, None);
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));

    // The conversation goes on with the tool messages; the request carries them as sent.
    let mut next = req.clone();
    next.messages.push(reply.message.clone());
    next.messages
        .push(ChatMessage::tool("call_a", r#"{"status": "shipped"}"#));
    next.messages
        .push(ChatMessage::tool("call_b", r#"{"ok": true}"#));
    next.tool_choice = Some(ToolChoice::Required);
    call(&spec(&server), &next).await.0.expect("a reply");
    next.tool_choice = Some(ToolChoice::Auto);
    call(&spec(&server), &next).await.0.expect("a reply");

    let reqs = server.requests();
    let body = &reqs[0].body;
    assert_eq!(
        body["tools"],
        json!([
            {"type": "function", "function": {"name": "lookup_order", "description": "Looks an order up",
             "parameters": {"type": "object", "properties": {"order": {"type": "integer"}}}}},
            {"type": "function", "function": {"name": "final_report",
             "description": "Ends the session with the node's writes",
             "parameters": {"type": "object", "properties": {"ticket": {"type": "object"}},
                            "required": ["ticket"], "additionalProperties": false},
             "strict": true}}
        ])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "final_report"}})
    );
    let second = &reqs[1].body;
    assert_eq!(second["tool_choice"], json!("required"));
    assert_eq!(reqs[2].body["tool_choice"], json!("auto"));
    let msgs = second["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 5);
    assert_eq!(msgs[2]["tool_calls"][1]["id"], json!("call_b"));
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "content": "{\"status\": \"shipped\"}", "tool_call_id": "call_a"})
    );
    assert_eq!(msgs[4]["tool_call_id"], json!("call_b"));
}

#[tokio::test]
async fn streamed_text_is_published_and_assembled() {
    let server = ChatServer::start([Reply::stream_text(&["Hel", "lo, ", "world"], true)]).await;
    let (reply, deltas) = call(&spec(&server).stream(true), &ask("hi")).await;
    let reply = reply.expect("a reply");
    assert_eq!(reply.message.content.as_deref(), Some("Hello, world"));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        reply.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((11, 7))
    );
    assert_eq!(
        deltas,
        vec![
            ModelDelta::Text("Hel".into()),
            ModelDelta::Text("lo, ".into()),
            ModelDelta::Text("world".into())
        ]
    );
    let body = &server.requests()[0].body;
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn a_streamed_tool_call_with_arguments_split_across_chunks() {
    // Split between events, and (second reply) in the middle of SSE lines.
    let first = chunk(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_7", "type": "function",
               "function": {"name": "final_report", "arguments": "{\"tic"}}]}),
        None,
    )
    .to_string();
    let second = chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "ket\": {\"id\": 3}}"}}]}),
        None,
    )
    .to_string();
    let last = chunk(json!({}), Some("tool_calls")).to_string();
    let stream = format!("data: {first}\n\ndata: {second}\r\n\r\ndata: {last}\n\ndata: [DONE]\n\n");
    let (a, b) = stream.split_at(first.len() / 2);
    let (b, c) = b.split_at(first.len() + 10);
    let server = ChatServer::start([
        Reply::stream_tool_call(
            "call_1",
            "final_report",
            &["{\"ticket\"", ": {\"id\"", ": 3}}"],
            false,
        ),
        Reply::sse_chunks(vec![a.into(), b.into(), c.into()]),
    ])
    .await;
    let spec = spec(&server).stream(true);
    for id in ["call_1", "call_7"] {
        let (reply, deltas) = call(&spec, &ask("report")).await;
        let reply = reply.expect("a reply");
        assert_eq!(reply.message.tool_calls.len(), 1);
        let call = &reply.message.tool_calls[0];
        assert_eq!((call.id.as_str(), call.name.as_str()), (id, "final_report"));
        let args: Value = serde_json::from_str(&call.arguments).expect("the arguments parse");
        assert_eq!(args, json!({"ticket": {"id": 3}}));
        assert_eq!(reply.usage, None, "no usage chunk: usage unknown");
        let published: String = deltas
            .iter()
            .map(|d| match d {
                ModelDelta::ToolArguments { index: 0, text } => text.as_str(),
                other => panic!("unexpected delta {other:?}"),
            })
            .collect();
        assert_eq!(published, call.arguments);
    }
}

#[tokio::test]
async fn usage_with_cached_tokens_and_missing_usage() {
    let server = ChatServer::start([
        Reply::json(
            200,
            chat_server::completion(
                json!({"role": "assistant", "content": "a"}),
                "stop",
                Some(json!({"prompt_tokens": 100, "completion_tokens": 5,
                            "prompt_tokens_details": {"cached_tokens": 64}})),
            ),
        ),
        Reply::json(
            200,
            chat_server::completion(json!({"role": "assistant", "content": "b"}), "stop", None),
        ),
    ])
    .await;
    let (r, _) = call(&spec(&server), &ask("x")).await;
    assert_eq!(
        r.expect("a reply").usage,
        Some(Usage {
            input_tokens: 100,
            output_tokens: 5,
            cached_input_tokens: Some(64)
        })
    );
    let (r, _) = call(&spec(&server), &ask("x")).await;
    let r = r.expect("a reply");
    assert_eq!(r.message.content.as_deref(), Some("b"));
    assert_eq!(r.usage, None, "no usage sent: unknown, not zero");
}

#[test]
fn settings_are_expanded_and_checked() {
    let env = |name: &str| (name == "PG_TEST_HOST").then(|| "127.0.0.1:9".to_string());
    let spec = ModelSpec::new("${PG_TEST_HOST}/v1/", "${MODEL_NAME:-qwen2.5}");
    let e = ChatClient::with_env(&spec, env).expect_err("no scheme");
    assert!(e.to_string().contains("http://"), "{e}");
    let spec = ModelSpec::new("http://${PG_TEST_HOST}/v1/", "${MODEL_NAME:-qwen2.5}");
    let c = ChatClient::with_env(&spec, env).expect("expands");
    assert_eq!(
        (c.base_url(), c.model()),
        ("http://127.0.0.1:9/v1", "qwen2.5")
    );
    let spec = ModelSpec::new("http://${NOT_SET_ANYWHERE}/v1", "m");
    let e = ChatClient::with_env(&spec, env).expect_err("unset");
    assert!(matches!(e, ModelError::Config { .. }));
    assert!(e.to_string().contains("NOT_SET_ANYWHERE"), "{e}");
}

/// The API key: sent as the bearer header, and in no error or Debug text. Runs itself in a
/// child process with the key in its environment (this test binary sets no variables).
#[test]
fn the_api_key_is_sent_as_bearer_and_shown_nowhere() {
    const VAR: &str = "PACTGRAPH_TEST_MODEL_KEY";
    let Ok(key) = std::env::var(VAR) else {
        let key = format!("sk-test-{}-{}", std::process::id(), ulid_like());
        let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "--exact",
                "the_api_key_is_sent_as_bearer_and_shown_nowhere",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(VAR, &key)
            .output()
            .expect("the child runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
        assert!(stdout.contains("1 passed"), "{stdout}");
        assert!(
            stdout.contains("model `keyed`"),
            "the child printed its errors: {stdout}"
        );
        assert!(
            !stdout.contains(&key) && !stderr.contains(&key),
            "the key leaked:\n{stdout}\n{stderr}"
        );
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let server = ChatServer::start([
            Reply::text("ok"),
            Reply::error(401, &format!("Incorrect API key provided: {key}")),
            Reply::hang(),
        ])
        .await;
        let spec = ModelSpec::new(server.base_url(), "keyed")
            .key_env(VAR)
            .with_timeout_ms(200)
            .with_max_retries(0);
        let client = ChatClient::new(&spec).expect("builds");
        let mut on = |_d: ModelDelta| {};
        let cancel = CancellationToken::new();
        let reply = client
            .complete(&ask("x"), &cancel, &mut on)
            .await
            .expect("ok");
        let e401 = client
            .complete(&ask("x"), &cancel, &mut on)
            .await
            .expect_err("401");
        let timeout = client
            .complete(&ask("x"), &cancel, &mut on)
            .await
            .expect_err("timeout");
        let reqs = server.requests();
        assert_eq!(
            reqs[0].header("authorization"),
            Some(format!("Bearer {key}").as_str())
        );
        for text in [
            format!("{client:?}"),
            format!("{spec:?}"),
            format!("{reply:?}"),
            e401.to_string(),
            format!("{e401:?}"),
            timeout.to_string(),
            format!("{timeout:?}"),
        ] {
            println!("{text}");
            assert!(!text.contains(&key), "the key appears in {text}");
        }
        assert!(
            e401.to_string()
                .contains("Incorrect API key provided: [redacted]"),
            "{e401}"
        );
    });
}

fn ulid_like() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{t:x}")
}
