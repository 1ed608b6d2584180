//! Serving below running: the threads that serve (HTTP connections, the event streams'
//! fan-out, the feeds' pollers) lower their own scheduling priority, so that watching a
//! run can never take the cores from the runs (ADR 0052).
//!
//! On Linux a thread's niceness is its own (`setpriority(PRIO_PROCESS, TID, n)`), and a
//! thread it creates inherits it: [`serving_runtime`] builds a Tokio runtime whose every
//! thread (workers and blocking pool) lowers itself to the niceness asked as it starts,
//! and what those threads start (the store's SQLite connection threads they open) runs at
//! that niceness too. The runs get their own runtime, at the process's priority
//! ([`super::RunSide`]). Raising a niceness needs no privilege; lowering it back does,
//! which is why the serving threads are never the ones that start a run's threads.
//! Elsewhere than Linux, niceness is a process's (lowering one thread's is not possible
//! through `setpriority`): [`lower_current_thread`] says so and leaves the thread as it is.

use std::sync::atomic::{AtomicBool, Ordering};

/// The niceness `pactgraph serve` gives its serving threads unless `--serve-nice` says
/// otherwise: a tenth of a normal thread's share of a busy core (the kernel's weight of
/// nice 10 is 110 against 1,024 for nice 0).
pub const DEFAULT_SERVE_NICE: i8 = 10;

/// The name of the serving runtime's threads (`comm` in `/proc`, `ps -L`).
pub const SERVING_THREAD: &str = "pactgraph-serve";

/// The lowest priority a thread can ask for: niceness 19.
pub const NICEST: i8 = 19;

/// Why a thread's priority was not lowered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PriorityError {
    /// The niceness is outside 0 to 19 (a thread here only ever lowers its priority).
    #[error("niceness {0} is out of range: expected 0 (unchanged) to 19 (the lowest priority)")]
    OutOfRange(i8),
    /// The system refused.
    #[error("lowering thread {tid}'s priority to niceness {nice}: {reason}")]
    Refused {
        /// The thread (its TID).
        tid: i32,
        /// The niceness asked for.
        nice: i8,
        /// What the system said.
        reason: String,
    },
    /// This platform has no per-thread niceness.
    #[error("lowering one thread's priority is supported on Linux only")]
    Unsupported,
}

/// Lowers the calling thread's priority to niceness `nice` (0 to 19; 0 leaves it as it
/// is). A thread already nicer than `nice` (the process was started under `nice`, say) is
/// left as it is: this never raises a priority.
pub fn lower_current_thread(nice: i8) -> Result<(), PriorityError> {
    if !(0..=NICEST).contains(&nice) {
        return Err(PriorityError::OutOfRange(nice));
    }
    if nice == 0 {
        return Ok(());
    }
    lower(nice)
}

#[cfg(target_os = "linux")]
fn lower(nice: i8) -> Result<(), PriorityError> {
    use rustix::process::{getpriority_process, setpriority_process};
    let tid = rustix::thread::gettid();
    let refused = |e: rustix::io::Errno| PriorityError::Refused {
        tid: tid.as_raw_nonzero().get(),
        nice,
        reason: e.to_string(),
    };
    // PRIO_PROCESS with a TID names that one thread on Linux (setpriority(2), NOTES).
    let now = getpriority_process(Some(tid)).map_err(refused)?;
    if now >= i32::from(nice) {
        return Ok(());
    }
    setpriority_process(Some(tid), i32::from(nice)).map_err(refused)
}

#[cfg(not(target_os = "linux"))]
fn lower(_nice: i8) -> Result<(), PriorityError> {
    Err(PriorityError::Unsupported)
}

/// A multi-thread Tokio runtime of `threads` workers (all its features enabled) whose
/// threads are named [`SERVING_THREAD`] and lower themselves to niceness `nice` as they
/// start. A thread that cannot is logged (once per runtime) and serves at the priority
/// it has: never fatal.
pub fn serving_runtime(threads: usize, nice: i8) -> std::io::Result<tokio::runtime::Runtime> {
    if !(0..=NICEST).contains(&nice) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            PriorityError::OutOfRange(nice),
        ));
    }
    let warned = AtomicBool::new(false);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name(SERVING_THREAD)
        .on_thread_start(move || lower_or_warn(nice, &warned))
        .enable_all()
        .build()
}

/// Runs `f` on a new thread named [`SERVING_THREAD`] that first lowers itself to niceness
/// `nice` (logged, never fatal, when it cannot): the thread that drives the serving
/// runtime's `block_on`.
pub fn serving_thread<T: Send + 'static>(
    nice: i8,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(SERVING_THREAD.into())
        .spawn(move || {
            lower_or_warn(nice, &AtomicBool::new(false));
            f()
        })
}

/// Lowers the calling thread to `nice`, logging a failure unless `warned` says one was.
fn lower_or_warn(nice: i8, warned: &AtomicBool) {
    if let Err(e) = lower_current_thread(nice)
        && !warned.swap(true, Ordering::Relaxed)
    {
        tracing::warn!(
            target: "pactgraph::serve",
            "the serving threads keep their priority (--serve-nice {nice}): {e}"
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The niceness of thread `tid` of this process, read from `/proc` (field 19 of
    /// `stat`, counted after the command name, which may hold spaces).
    fn niceness_of(tid: i32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
            .expect("the thread's stat");
        let after = stat.rsplit_once(')').expect("a command name").1;
        after
            .split_whitespace()
            .nth(16)
            .and_then(|n| n.parse().ok())
            .expect("a niceness")
    }

    fn tid() -> i32 {
        rustix::thread::gettid().as_raw_nonzero().get()
    }

    /// Proves the runtime's threads (a worker and a blocking one) run at the niceness
    /// asked, as `/proc` shows it, while the thread that built the runtime keeps its own.
    #[test]
    fn the_serving_runtimes_threads_run_at_the_niceness_asked() {
        let before = niceness_of(tid());
        let rt = serving_runtime(1, 7).expect("a runtime");
        let (worker, blocking) = rt.block_on(async {
            let worker = tokio::spawn(async { (tid(), niceness_of(tid())) })
                .await
                .expect("the task");
            let blocking = tokio::task::spawn_blocking(|| (tid(), niceness_of(tid())))
                .await
                .expect("the blocking task");
            (worker, blocking)
        });
        assert_ne!(worker.0, tid(), "the task ran on a worker thread");
        assert_eq!(worker.1, 7.max(before), "a worker thread is niced");
        assert_eq!(blocking.1, 7.max(before), "a blocking thread is niced");
        assert_eq!(niceness_of(tid()), before, "the builder's thread is not");
    }

    /// Proves a niceness outside 0..=19 is refused with an error naming it, before any
    /// thread is touched, and that 0 leaves the thread as it is.
    #[test]
    fn a_niceness_out_of_range_is_refused_and_zero_is_a_no_op() {
        let e = lower_current_thread(20).expect_err("20 is out of range");
        assert!(e.to_string().contains("niceness 20"), "{e}");
        assert!(lower_current_thread(-1).is_err());
        assert!(serving_runtime(1, 25).is_err());
        let before = niceness_of(tid());
        lower_current_thread(0).expect("0 is allowed");
        assert_eq!(niceness_of(tid()), before);
    }

    /// Proves a thread is never raised: one at niceness 12 asked for 5 stays at 12.
    #[test]
    fn a_thread_already_nicer_stays_where_it_is() {
        std::thread::spawn(|| {
            let at = 12.max(niceness_of(tid()));
            lower_current_thread(12).expect("lowered to 12");
            assert_eq!(niceness_of(tid()), at);
            lower_current_thread(5).expect("a no-op");
            assert_eq!(niceness_of(tid()), at);
        })
        .join()
        .expect("the thread");
    }
}
