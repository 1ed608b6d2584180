//! Performing an agent session's calls: one model call (the client's request under the
//! effect's time limit and the run's cancellation, which aborts the request in flight),
//! and the tool calls of one reply, run at once and returned in the reply's order.

#[cfg(feature = "agents")]
use std::sync::Arc;
use std::time::Duration;

use super::effect::{ModelCall, Produced, ToolInvocation, ToolRan};
#[cfg(feature = "agents")]
use super::effect::{ModelFailure, ModelReply};
use super::guarded::Fault;
use super::perform::Performer;
#[cfg(feature = "agents")]
use crate::runtime::data::HttpAttempt;
use crate::runtime::data::{Role, elapsed};

impl Performer<'_> {
    /// Makes a model call. The client retries what 10.5 retries; its final error is a
    /// permanent fault (no node `retry` policy tries it again) whose message names the
    /// model, the HTTP status and the server's message, never the key. Cancellation
    /// drops the request in flight.
    #[cfg(feature = "agents")]
    pub(crate) async fn call_model(
        self,
        limit: Option<Duration>,
        call: ModelCall,
    ) -> Result<Produced, Fault> {
        if self.cancel.is_cancelled() {
            return Err(Fault::Cancelled);
        }
        let request = crate::model::client::ChatRequest {
            messages: call.messages,
            tools: call.tools,
            tool_choice: call.tool_choice,
        };
        // A streamed reply's pieces go out live as `model_delta` events (never kept),
        // when the model streams; the bus skips a piece nobody listens to (a subscriber
        // may come while the reply streams: an event stream opened mid-call).
        let publisher = self
            .events
            .filter(|_| call.client.streams())
            .map(|e| e.publisher(call.ids.run_id));
        let (node, turn) = (Arc::clone(&call.node), call.turn);
        let mut on_delta = |delta: crate::model::client::ModelDelta| {
            let Some(p) = &publisher else { return };
            match delta {
                crate::model::client::ModelDelta::Text(text) => p.model_delta(&node, turn, &text),
                crate::model::client::ModelDelta::ToolArguments { index, text } => {
                    p.tool_arguments_delta(&node, turn, index, &text);
                }
            }
        };
        let request = call.client.complete(&request, self.cancel, &mut on_delta);
        let limited = async {
            match limit {
                Some(d) => tokio::time::timeout(d, request).await.map_err(|_| {
                    Fault::Timeout(format!(
                        "(model `{}`) did not answer within {} ms",
                        call.model,
                        d.as_millis()
                    ))
                }),
                None => Ok(request.await),
            }
        };
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(Fault::Cancelled),
            r = limited => match r? {
                Ok(reply) => Ok(Produced::Reply(Box::new(ModelReply {
                    failed_attempts: reply
                        .attempts
                        .iter()
                        .filter(|a| a.error.is_some() || a.status.is_some_and(|s| s >= 400))
                        .map(failed_attempt)
                        .collect(),
                    message: reply.message,
                    finish_reason: reply.finish_reason,
                    usage: reply.usage,
                }))),
                Err(_) if self.cancel.is_cancelled() => Err(Fault::Cancelled),
                // Failed for good: the error and its attempts, for the `model_call` item.
                Err(e) => Ok(Produced::ModelFailed(Box::new(ModelFailure {
                    message: e.to_string(),
                    attempts: e.attempts().iter().map(failed_attempt).collect(),
                }))),
            },
        }
    }

    /// Without the `agents` feature no model call is ever planned (the builder refuses
    /// agent nodes); one given here fails.
    #[cfg(not(feature = "agents"))]
    pub(crate) async fn call_model(
        self,
        _limit: Option<Duration>,
        call: ModelCall,
    ) -> Result<Produced, Fault> {
        Err(Fault::Permanent(format!(
            "cannot call model `{}`: pactgraph was built without the `agents` feature",
            call.model
        )))
    }

    /// Runs the tool nodes of one reply's tool calls at once, each under its limit, and
    /// returns their results in the reply's order. Never fails: a tool's error, time-out
    /// or bad output is its result.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops every call: handlers are aborted at their next await
    /// point and programs' process groups are killed.
    pub(crate) async fn call_tools(self, calls: Vec<ToolInvocation>) -> Vec<ToolRan> {
        let runs = calls.into_iter().map(|t| async move {
            let t0 = self.clock.timer();
            let result = Box::pin(self.call_node(t.limit, t.call, Role::Plain)).await;
            ToolRan {
                index: t.index,
                result,
                duration_us: elapsed(t0),
            }
        });
        futures_util::future::join_all(runs).await
    }
}

/// One failed HTTP attempt, as its `model_call` item records it.
#[cfg(feature = "agents")]
fn failed_attempt(a: &crate::model::client::Attempt) -> HttpAttempt {
    HttpAttempt {
        status: a.status,
        error: a.error.clone().unwrap_or_else(|| "failed".into()),
        duration_ms: a.duration_ms,
        waited_ms: a.waited_ms,
    }
}
