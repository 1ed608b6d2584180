//! The model client against a real OpenAI-compatible server: the one at
//! `PACTGRAPH_MODEL_URL` (`.ci/model-server start DIR PORT` prints it: llama-cpp-python's
//! server with SmolLM2-135M-Instruct). Checks the shape of what comes back, not its
//! meaning. Without `PACTGRAPH_MODEL_URL` each test is skipped with a line on stderr,
//! unless `CI` is `true`: then it fails (CI must talk to a real model).
//! `PACTGRAPH_MODEL_NAME` names the model (default `smollm2`, the alias
//! `.ci/model-server` serves under).
#![cfg(feature = "agents")]

use pactgraph::contracts::ModelSpec;
use pactgraph::model::{
    ChatClient, ChatMessage, ChatReply, ChatRequest, ModelDelta, Role, ToolChoice, ToolDef,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn model() -> Option<ModelSpec> {
    let Some(url) = std::env::var("PACTGRAPH_MODEL_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true but PACTGRAPH_MODEL_URL is not set: start .ci/model-server");
        }
        eprintln!("PACTGRAPH_MODEL_URL is not set: the real-model test is skipped");
        return None;
    };
    let name = std::env::var("PACTGRAPH_MODEL_NAME").unwrap_or_else(|_| "smollm2".into());
    Some(
        ModelSpec::new(url, name)
            .key_env("PACTGRAPH_MODEL_API_KEY")
            .param("temperature", json!(0))
            .param("max_tokens", json!(48))
            .with_timeout_ms(120_000)
            .with_max_retries(2),
    )
}

fn question() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a helpful assistant. Answer in one short sentence."),
        ChatMessage::user("What is the capital of France?"),
    ]
}

/// A usage, when the server sent one, counts the prompt.
fn check_usage(reply: &ChatReply) {
    if let Some(u) = reply.usage {
        assert!(u.input_tokens > 0, "a prompt was sent: {u:?}");
    }
    assert_eq!(reply.attempts.last().and_then(|a| a.status), Some(200));
}

async fn complete(spec: &ModelSpec, req: &ChatRequest) -> (ChatReply, Vec<ModelDelta>) {
    let client = ChatClient::new(spec).expect("the client builds");
    let mut deltas = Vec::new();
    let mut on = |d: ModelDelta| deltas.push(d);
    let reply = client
        .complete(req, &CancellationToken::new(), &mut on)
        .await
        .unwrap_or_else(|e| panic!("the real model answers: {e}"));
    (reply, deltas)
}

#[tokio::test]
async fn a_forced_tool_call_has_parseable_arguments() {
    let Some(spec) = model() else { return };
    let req = ChatRequest {
        messages: question(),
        tools: vec![ToolDef {
            name: "final_report".into(),
            description: "Report the answer.".into(),
            parameters: json!({"type": "object", "properties": {"answer": {"type": "string"}},
                               "required": ["answer"], "additionalProperties": false}),
            strict: true,
        }],
        tool_choice: Some(ToolChoice::Function("final_report".into())),
    };
    let (reply, _) = complete(&spec, &req).await;
    eprintln!("forced tool: {reply:?}");
    assert_eq!(reply.message.role, Role::Assistant);
    let call = reply
        .message
        .tool_calls
        .first()
        .unwrap_or_else(|| panic!("a forced tool is called: {reply:?}"));
    assert_eq!(call.name, "final_report");
    assert!(!call.id.is_empty());
    let args: Value = serde_json::from_str(&call.arguments)
        .unwrap_or_else(|e| panic!("the arguments parse ({e}): {}", call.arguments));
    assert!(args.is_object(), "{args}");
    check_usage(&reply);
}

#[tokio::test]
async fn a_plain_reply_and_a_streamed_one() {
    let Some(spec) = model() else { return };
    let req = ChatRequest {
        messages: question(),
        ..ChatRequest::default()
    };
    let (reply, _) = complete(&spec, &req).await;
    eprintln!("plain: {reply:?}");
    assert_eq!(reply.message.role, Role::Assistant);
    assert!(
        reply
            .message
            .content
            .as_deref()
            .is_some_and(|c| !c.trim().is_empty()),
        "a text reply: {reply:?}"
    );
    assert!(reply.finish_reason.is_some(), "{reply:?}");
    check_usage(&reply);

    let (reply, deltas) = complete(&spec.clone().stream(true), &req).await;
    eprintln!("streamed: {reply:?}");
    let text: String = deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Text(t) => Some(t.as_str()),
            ModelDelta::ToolArguments { .. } => None,
        })
        .collect();
    assert!(
        !text.trim().is_empty(),
        "text arrived in pieces: {deltas:?}"
    );
    assert_eq!(reply.message.content.as_deref(), Some(text.as_str()));
    assert!(reply.finish_reason.is_some(), "{reply:?}");
    check_usage(&reply);
}
