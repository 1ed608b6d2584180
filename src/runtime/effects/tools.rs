//! Performing an agent session's calls: one model call (the client's request under the
//! effect's time limit and the run's cancellation, which aborts the request in flight),
//! and the tool calls of one reply, run at once and returned in the reply's order.

use std::time::Duration;

use super::effect::{ModelCall, ModelReply, Produced, ToolInvocation, ToolRan};
use super::guarded::Fault;
use super::perform::Performer;
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
        let mut ignore = |_| {};
        let request = call.client.complete(&request, self.cancel, &mut ignore);
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
                    retried: reply
                        .attempts
                        .iter()
                        .filter(|a| a.error.is_some() || a.status.is_some_and(|s| s >= 400))
                        .map(describe_attempt)
                        .collect(),
                    message: reply.message,
                    finish_reason: reply.finish_reason,
                    usage: reply.usage,
                }))),
                Err(_) if self.cancel.is_cancelled() => Err(Fault::Cancelled),
                Err(e) => Err(Fault::Permanent(e.to_string())),
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

/// One failed HTTP attempt in words: its status or error, and the wait before the next.
#[cfg(feature = "agents")]
fn describe_attempt(a: &crate::model::client::Attempt) -> String {
    let what = match (a.status, &a.error) {
        (Some(s), Some(e)) => format!("HTTP {s}: {e}"),
        (Some(s), None) => format!("HTTP {s}"),
        (None, Some(e)) => e.clone(),
        (None, None) => "failed".into(),
    };
    format!(
        "{what} after {} ms, waited {} ms",
        a.duration_ms, a.waited_ms
    )
}
