//! Running one handler call safely: panics caught, a time limit, cancellation, and the
//! hook for `exec` behaviours.

use std::any::Any;
use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::handlers::{BoxFuture, HandlerError};
use crate::contracts::{ExecSpec, RetryOn, RetryPolicy};

/// Why a handler call did not produce a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// It returned an error, panicked or produced garbage (`node_failed`).
    Failed(String),
    /// It returned an error marked permanent ([`HandlerError::permanent`]): like
    /// `Failed`, but no retry policy tries it again.
    Permanent(String),
    /// It ran past its time limit (`timeout`).
    Timeout(String),
    /// The run was cancelled while it ran (`cancelled`).
    Cancelled,
    /// A node's output broke the envelope (`invalid_output`).
    InvalidOutput(String),
}

/// Polls a boxed future, turning a panic into an error message.
pub(crate) struct CatchUnwind<'a, T>(pub(crate) Pin<Box<dyn Future<Output = T> + Send + 'a>>);

impl Fault {
    /// Whether `policy` retries this failure.
    pub(crate) fn is_retried_by(&self, policy: &RetryPolicy) -> bool {
        let kind = match self {
            Fault::Failed(_) => RetryOn::Failed,
            Fault::Timeout(_) => RetryOn::Timeout,
            Fault::InvalidOutput(_) => RetryOn::InvalidOutput,
            Fault::Permanent(_) | Fault::Cancelled => return false,
        };
        policy.on.contains(&kind)
    }

    /// The failure in words, and its kind as the trace names it.
    pub(crate) fn describe(&self) -> (&'static str, &str) {
        match self {
            Fault::Failed(m) | Fault::Permanent(m) => ("failed", m),
            Fault::Timeout(m) => ("timeout", m),
            Fault::InvalidOutput(m) => ("invalid_output", m),
            Fault::Cancelled => ("cancelled", "the run was cancelled"),
        }
    }
}

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, String>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.get_mut().0;
        match catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    format!("panicked: {text}")
}

/// Creates and awaits a handler future with a time limit and cancellation. Dropping the
/// future on timeout or cancellation aborts the handler at its next await point.
pub(crate) async fn call_guarded<T>(
    make: impl FnOnce() -> BoxFuture<Result<T, HandlerError>>,
    limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<T, Fault> {
    let fut = match catch_unwind(AssertUnwindSafe(make)) {
        Ok(f) => f,
        Err(payload) => return Err(Fault::Failed(panic_message(payload.as_ref()))),
    };
    let caught = CatchUnwind(fut);
    let limited = async move {
        match limit {
            Some(d) => match tokio::time::timeout(d, caught).await {
                Ok(r) => Ok(r),
                Err(_) => Err(Fault::Timeout(format!(
                    "did not finish within {} ms",
                    d.as_millis()
                ))),
            },
            None => Ok(caught.await),
        }
    };
    let settle = |r: Result<Result<Result<T, HandlerError>, String>, Fault>| match r? {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if e.is_retryable() => Err(Fault::Failed(e.describe())),
        Ok(Err(e)) => Err(Fault::Permanent(e.describe())),
        Err(panic) => Err(Fault::Failed(panic)),
    };
    if cancel.is_cancelled() {
        return Err(Fault::Cancelled);
    }
    // Most handlers finish on their first poll: try that before arming the cancellation
    // waiter, which costs a registration with the token on every call.
    let mut limited = pin!(limited);
    if let Poll::Ready(r) = poll_fn(|cx| Poll::Ready(limited.as_mut().poll(cx))).await {
        return settle(r);
    }
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(Fault::Cancelled),
        r = limited => settle(r),
    }
}

/// Runs an `exec` behaviour or policy program with `input` on its stdin and returns the
/// JSON value it printed (see [`super::exec`]). Node stdin is
/// `{"node": id, "input": {slice: value...}, "run_id", "step", "attempt"}`; policy stdin is
/// `{"supervisor": id, "depth": n, "allow": [...], "state": {...}}`; callers build it.
/// `env` is added to the program's environment.
pub(crate) async fn exec_program(
    spec: &ExecSpec,
    base_dir: &Path,
    input: &Value,
    env: &[(&str, String)],
    limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<Value, Fault> {
    super::exec::run_json_program_with_env(spec, base_dir, input, env, limit, cancel)
        .await
        .map_err(|e| {
            if e.is_timeout() {
                Fault::Timeout(e.to_string())
            } else if e.is_cancelled() {
                Fault::Cancelled
            } else {
                Fault::Failed(e.to_string())
            }
        })
}
