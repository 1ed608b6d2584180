//! Running external programs as nodes and supervisor policies.
//!
//! A program is spawned directly from `argv` (no shell), in its own process group, with
//! the input written to its stdin as one JSON value and one JSON value read from its stdout.
//! On a time-out or cancellation the whole process group is killed and the child reaped,
//! so no process outlives the step and no zombie is left behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use crate::contracts::ExecSpec;

/// Most bytes read from a program's stdout (a larger output fails the step).
pub const MAX_STDOUT_BYTES: usize = 64 * 1024 * 1024;
/// How much of the end of stderr error messages quote.
const STDERR_TAIL_BYTES: usize = 2048;

/// Why a program did not produce a JSON value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// `argv` is empty.
    #[error("exec: `argv` is empty")]
    EmptyArgv,
    /// The program could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program as resolved.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The program ran past its time limit and was killed.
    #[error(
        "`{program}` did not finish within {after_ms} ms and was killed{}",
        tail(stderr_tail)
    )]
    Timeout {
        /// The program.
        program: String,
        /// The limit.
        after_ms: u64,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The run was cancelled while the program ran; it was killed.
    #[error("`{program}` was killed because the run was cancelled")]
    Cancelled {
        /// The program.
        program: String,
    },
    /// The program exited unsuccessfully.
    #[error("`{program}` exited with {status}{}", tail(stderr_tail))]
    Exit {
        /// The program.
        program: String,
        /// Exit code or signal, in words.
        status: String,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The program's stdout is not one JSON value.
    #[error(
        "`{program}` printed invalid JSON on stdout: {message}; stdout began {stdout_head:?}{}",
        tail(stderr_tail)
    )]
    Output {
        /// The program.
        program: String,
        /// What is wrong with it.
        message: String,
        /// The first characters of stdout.
        stdout_head: String,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// Reading or waiting on the program failed.
    #[error("i/o error talking to `{program}`: {source}")]
    Io {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
}

fn tail(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", stderr.trim_end())
    }
}

impl ExecError {
    /// True for a time-out (termination reason `timeout`).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ExecError::Timeout { .. })
    }
    /// True for a cancellation (termination reason `cancelled`).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, ExecError::Cancelled { .. })
    }
}

/// The program path: a relative path with a `/` is resolved against `base_dir`; a bare
/// name is left for `PATH` look-up.
pub fn resolve_program(argv0: &str, base_dir: &Path) -> PathBuf {
    let p = Path::new(argv0);
    if p.is_relative() && argv0.contains('/') {
        base_dir.join(p)
    } else {
        p.to_path_buf()
    }
}

/// Runs `spec` with `input` on stdin and returns the JSON value it prints.
///
/// The time limit is the smaller of `spec.timeout_ms` and `limit` (the caller's: the
/// workflow's `node_timeout_ms` and what is left of the run deadline), or whichever is set.
/// `base_dir` is the default working directory (the workflow file's folder) and resolves
/// relative paths.
#[cfg(test)]
pub async fn run_json_program(
    spec: &ExecSpec,
    base_dir: &Path,
    input: &Value,
    limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<Value, ExecError> {
    run_json_program_with_env(spec, base_dir, input, &[], limit, cancel).await
}

/// `run_json_program` (a test helper) with `extra_env` set in the program's environment after the
/// spec's own `env` (node programs get `PACTGRAPH_RUN_ID`, `PACTGRAPH_STEP` and
/// `PACTGRAPH_ATTEMPT` this way).
pub async fn run_json_program_with_env(
    spec: &ExecSpec,
    base_dir: &Path,
    input: &Value,
    extra_env: &[(&str, String)],
    limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<Value, ExecError> {
    let argv0 = spec.argv.first().ok_or(ExecError::EmptyArgv)?;
    let program_path = resolve_program(argv0, base_dir);
    let program = program_path.display().to_string();
    let cwd = match &spec.cwd {
        Some(dir) => base_dir.join(dir),
        None => base_dir.to_path_buf(),
    };
    let mut cmd = Command::new(&program_path);
    cmd.args(&spec.argv[1..])
        .envs(&spec.env)
        .envs(extra_env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(&cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|source| ExecError::Spawn {
        program: program.clone(),
        source,
    })?;
    // Declared after `child`, so dropped before it: if this future is dropped while the
    // program runs, its whole group is killed (tokio's `kill_on_drop` kills the child only).
    let mut group = GroupGuard::arm(&child);

    let payload = serde_json::to_vec(input).expect("a JSON value always serializes");
    let mut stdin = child.stdin.take().expect("stdin was piped");
    // A program may ignore its input: a broken pipe here is not an error.
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&payload).await;
        let _ = stdin.shutdown().await;
    });
    let mut stdout = child.stdout.take().expect("stdout was piped");
    let reader = tokio::spawn(async move {
        let mut buf = Vec::new();
        let r = (&mut stdout)
            .take(MAX_STDOUT_BYTES as u64 + 1)
            .read_to_end(&mut buf)
            .await;
        r.map(|_| buf)
    });
    let mut stderr = child.stderr.take().expect("stderr was piped");
    let err_reader = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        buf
    });

    let limit = match (spec.timeout_ms.map(Duration::from_millis), limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let sleep = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        status = child.wait() => Ok(status),
        () = sleep => Err(true),
        () = cancel.cancelled() => Err(false),
    };
    let status = match outcome {
        Ok(status) => status.map_err(|source| ExecError::Io {
            program: program.clone(),
            source,
        })?,
        Err(timed_out) => {
            kill_group(&mut child).await;
            group.disarm();
            writer.abort();
            reader.abort();
            let stderr_tail = stderr_tail(&collect(err_reader).await);
            return Err(if timed_out {
                ExecError::Timeout {
                    program,
                    after_ms: limit.map_or(0, |d| d.as_millis() as u64),
                    stderr_tail,
                }
            } else {
                ExecError::Cancelled { program }
            });
        }
    };
    let _ = writer.await;
    // The direct child exited (and was reaped, so `child.id()` is gone): anything it left
    // in its group goes too, signalled through the group id kept at spawn. A group with a
    // live member keeps its id, so no other process is signalled.
    group.kill_now();
    let out = match reader.await {
        Ok(Ok(buf)) => buf,
        Ok(Err(source)) => return Err(ExecError::Io { program, source }),
        Err(e) => {
            return Err(ExecError::Io {
                program,
                source: std::io::Error::other(e.to_string()),
            });
        }
    };
    let stderr_tail = stderr_tail(&collect(err_reader).await);
    if !status.success() {
        return Err(ExecError::Exit {
            program,
            status: describe_status(status),
            stderr_tail,
        });
    }
    if out.len() > MAX_STDOUT_BYTES {
        return Err(ExecError::Output {
            program,
            message: format!("more than {MAX_STDOUT_BYTES} bytes"),
            stdout_head: head(&out),
            stderr_tail,
        });
    }
    if out.iter().all(u8::is_ascii_whitespace) {
        return Err(ExecError::Output {
            program,
            message: "it printed nothing".into(),
            stdout_head: String::new(),
            stderr_tail,
        });
    }
    serde_json::from_slice(&out).map_err(|e| ExecError::Output {
        program,
        message: e.to_string(),
        stdout_head: head(&out),
        stderr_tail,
    })
}

async fn collect(task: tokio::task::JoinHandle<Vec<u8>>) -> Vec<u8> {
    // The group is dead, so stderr closes promptly; bound the wait anyway.
    match tokio::time::timeout(Duration::from_secs(2), task).await {
        Ok(Ok(buf)) => buf,
        _ => Vec::new(),
    }
}

/// Kills a running program's process group when dropped armed: what makes dropping a step
/// (or any future running a program) kill the program and everything it started. Disarmed
/// once the child is reaped, so a reused process id is never signalled.
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    fn arm(child: &Child) -> Self {
        Self {
            pgid: child.id().and_then(|p| i32::try_from(p).ok()),
        }
    }

    fn disarm(&mut self) {
        self.pgid = None;
    }

    /// Kills what is left of the group now, and disarms.
    fn kill_now(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.pgid.take() {
            // The group may already be gone; ESRCH is fine.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.pgid {
            // The group may already be gone; ESRCH is fine.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Kills the child's process group (the child and anything it started) and reaps it.
async fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // The group may already be gone; ESRCH is fine.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}

fn describe_status(status: std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("signal {sig}");
        }
    }
    "an unknown status".into()
}

fn stderr_tail(buf: &[u8]) -> String {
    let text = String::from_utf8_lossy(buf);
    let text = text.trim_end();
    if text.len() <= STDERR_TAIL_BYTES {
        return text.to_string();
    }
    let mut start = text.len() - STDERR_TAIL_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

fn head(buf: &[u8]) -> String {
    String::from_utf8_lossy(buf).chars().take(200).collect()
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
