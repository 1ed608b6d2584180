//! `CancelWatch`: a cancellation token's state as a flag read without a lock, for the
//! check before every step (ADR 0051).
//!
//! `CancellationToken::is_cancelled` locks the token's mutex (tokio-util keeps the
//! token tree under one mutex per node): two locked instructions a step. The watch
//! registers a waker with the token once, when the executor is made; cancelling the
//! token (or any of its parents) wakes it before `cancel()` returns, and the waker sets
//! an atomic flag. A step reads the flag: a plain load.
//!
//! - **Nothing is missed.** tokio-util sets a node's `is_cancelled` and then, with its
//!   locks released and before `cancel()` returns, wakes every waiter of the node
//!   (`notify_waiters`), synchronously. The watch's future was polled once when it was
//!   made, so it is such a waiter (a cancellation between its creation and that poll
//!   makes the poll ready: the flag is set there). A step that follows `cancel()` (on
//!   the same thread, or on another that synchronised with it) reads `true`.
//! - **A set flag is confirmed.** The flag only says the watch was woken; the token's
//!   own answer decides (a lock, on a path taken once).
//! - **The token stays the one effects await**: a running handler, program or wait is
//!   still cancelled through it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Set once the token's cancellation woke the watch.
#[derive(Debug, Default)]
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// A cancellation token and a flag its cancellation sets (see the module docs). Made
/// once per executor value; shared by its clones.
pub(crate) struct CancelWatch {
    token: CancellationToken,
    woken: Arc<Woken>,
    /// The registered waiter, kept so that the token keeps waking it (dropped with the
    /// watch). `None` when the token was cancelled already. In a mutex only to make the
    /// watch `Sync`; never locked after it is made.
    _waiting: Mutex<Option<Pin<Box<WaitForCancellationFutureOwned>>>>,
}

impl std::fmt::Debug for CancelWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelWatch")
            .field("woken", &self.woken.0.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CancelWatch {
    /// Watches `token`: registers a waker with it (one poll of its `cancelled` future;
    /// no runtime needed).
    pub(crate) fn new(token: &CancellationToken) -> Self {
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(Arc::clone(&woken));
        let mut waiting = Box::pin(token.clone().cancelled_owned());
        let waiting = match waiting.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(()) => {
                woken.0.store(true, Ordering::Release);
                None
            }
            Poll::Pending => Some(waiting),
        };
        Self {
            token: token.clone(),
            woken,
            _waiting: Mutex::new(waiting),
        }
    }

    /// The token watched (the one effects await).
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether the token is cancelled: one atomic load while it is not (no lock).
    #[inline]
    pub(crate) fn is_cancelled(&self) -> bool {
        self.woken.0.load(Ordering::Acquire) && self.token.is_cancelled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag follows the token at once: cancelling the token itself, a parent of it,
    /// or a token cancelled before the watch was made; and a sibling's cancellation does
    /// not set it. Each check reads the watch right after `cancel()` returns, with no
    /// runtime and nothing polled in between.
    #[test]
    fn the_flag_is_set_before_cancel_returns() {
        let token = CancellationToken::new();
        let watch = CancelWatch::new(&token);
        assert!(!watch.is_cancelled());
        token.cancel();
        assert!(watch.is_cancelled());

        let parent = CancellationToken::new();
        let child = parent.child_token();
        let sibling = parent.child_token();
        let watch = CancelWatch::new(&child);
        sibling.cancel();
        assert!(
            !watch.is_cancelled(),
            "a sibling's cancellation is not ours"
        );
        assert!(!watch.woken.0.load(Ordering::Acquire));
        parent.cancel();
        assert!(
            watch.is_cancelled(),
            "a parent's cancellation reaches the child"
        );

        let done = CancellationToken::new();
        done.cancel();
        assert!(CancelWatch::new(&done).is_cancelled());
    }

    /// Cancelled from another thread: once that thread's `cancel()` has returned (joined),
    /// the watch reads cancelled.
    #[test]
    fn a_cancel_on_another_thread_is_seen_once_it_returned() {
        for _ in 0..200 {
            let token = CancellationToken::new();
            let watch = CancelWatch::new(&token);
            let t = token.clone();
            std::thread::spawn(move || t.cancel())
                .join()
                .expect("the cancelling thread");
            assert!(watch.is_cancelled());
        }
    }
}
