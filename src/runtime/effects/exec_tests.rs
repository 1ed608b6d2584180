//! Tests of the program runner behind `exec` nodes and policies (real `python3` and `sh`
//! processes).

use std::path::Path;
use std::time::Duration;

use super::{ExecError, run_json_program};
use crate::contracts::ExecSpec;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn run(spec: &ExecSpec, dir: &Path, input: Value) -> Result<Value, ExecError> {
    run_json_program(spec, dir, &input, None, &CancellationToken::new()).await
}

fn py(code: &str) -> ExecSpec {
    ExecSpec::new(["python3", "-c", code])
}

#[tokio::test]
async fn passes_input_env_and_cwd_and_reads_json() {
    let dir = tempfile::tempdir().unwrap();
    let spec = py("import sys, json, os; d = json.load(sys.stdin); \
                   print(json.dumps({'got': d, 'env': os.environ['PG_TEST'], 'cwd': os.getcwd()}))")
    .env("PG_TEST", "yes");
    let out = run(&spec, dir.path(), json!({"node": "n", "input": {"a": 1}}))
        .await
        .unwrap();
    assert_eq!(out["got"], json!({"node": "n", "input": {"a": 1}}));
    assert_eq!(out["env"], "yes");
    let cwd = std::fs::canonicalize(out["cwd"].as_str().unwrap()).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(dir.path()).unwrap());
}

#[tokio::test]
async fn resolves_relative_programs_and_cwd_against_the_base_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let script = dir.path().join("bin/tool.py");
    std::fs::write(
        &script,
        "#!/usr/bin/env python3\nimport json, os\nprint(json.dumps({'cwd': os.getcwd()}))\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let spec = ExecSpec::new(["./bin/tool.py"]).cwd("work");
    let out = run(&spec, dir.path(), json!({})).await.unwrap();
    let cwd = std::fs::canonicalize(out["cwd"].as_str().unwrap()).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(dir.path().join("work")).unwrap());
}

#[tokio::test]
async fn failures_say_what_happened_with_the_stderr_tail() {
    let dir = tempfile::tempdir().unwrap();
    let e = run(
        &py("import sys; sys.stderr.write('model quota exceeded\\n'); sys.exit(3)"),
        dir.path(),
        json!({}),
    )
    .await
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ExecError::Exit { .. }), "{msg}");
    assert!(
        msg.contains("exit code 3") && msg.contains("model quota exceeded"),
        "{msg}"
    );

    let e = run(&py("print('not json')"), dir.path(), json!({}))
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::Output { .. }), "{e}");
    assert!(e.to_string().contains("not json"), "{e}");

    let e = run(&py("pass"), dir.path(), json!({})).await.unwrap_err();
    assert!(e.to_string().contains("printed nothing"), "{e}");

    let e = run(&ExecSpec::new(["./no-such-program"]), dir.path(), json!({}))
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::Spawn { .. }), "{e}");
    assert!(e.to_string().contains("no-such-program"), "{e}");

    let e = run(&ExecSpec::default(), dir.path(), json!({}))
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::EmptyArgv));
}

#[tokio::test]
async fn a_program_that_ignores_a_large_input_does_not_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let big = json!({"blob": "x".repeat(4 << 20)});
    let out = run(&py("print('{\"ok\": true}')"), dir.path(), big)
        .await
        .unwrap();
    assert_eq!(out, json!({"ok": true}));
}

fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // state is the field after the parenthesised command name
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Runs a program that records its pid and its child's pid, then hangs.
async fn hang(
    dir: &Path,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> (ExecError, u32, u32) {
    let pids = dir.join("pids");
    let code = format!(
        "import subprocess, os, time\n\
         c = subprocess.Popen(['sleep', '60'])\n\
         open({:?}, 'w').write(f'{{os.getpid()}} {{c.pid}}')\n\
         time.sleep(60)\n",
        pids.display().to_string()
    );
    let e = run_json_program(&py(&code), dir, &json!({}), timeout, cancel)
        .await
        .unwrap_err();
    let text = std::fs::read_to_string(&pids).unwrap();
    let mut it = text.split(' ').map(|p| p.parse::<u32>().unwrap());
    (e, it.next().unwrap(), it.next().unwrap())
}

#[tokio::test]
async fn a_hanging_program_is_killed_at_its_timeout_with_its_children_and_reaped() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough for Python to start and record the pids on a loaded machine (CI runs
    // test binaries side by side on two cores); the program then hangs for 60 s.
    let (e, pid, child) = hang(
        dir.path(),
        Some(Duration::from_millis(2500)),
        &CancellationToken::new(),
    )
    .await;
    assert!(e.is_timeout(), "{e}");
    assert!(e.to_string().contains("2500 ms"), "{e}");
    // Our child is reaped (no zombie); its own child was killed with the group.
    assert_eq!(process_state(pid), None, "the program is still there");
    for _ in 0..50 {
        if matches!(process_state(child), None | Some('Z')) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        matches!(process_state(child), None | Some('Z')),
        "grandchild still running"
    );
}

#[tokio::test]
async fn cancellation_kills_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let pids = dir.path().join("pids");
    // Cancel once the program runs (it has written its pids), however slow it starts.
    tokio::spawn(async move {
        for _ in 0..1000 {
            if std::fs::metadata(&pids).is_ok_and(|m| m.len() > 0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        c2.cancel();
    });
    let (e, pid, _) = hang(dir.path(), None, &cancel).await;
    assert!(e.is_cancelled(), "{e}");
    assert_eq!(process_state(pid), None);
}

#[tokio::test]
async fn the_smaller_of_the_spec_timeout_and_the_callers_limit_applies() {
    let dir = tempfile::tempdir().unwrap();
    let spec = py("import time; time.sleep(30)").timeout_ms(300);
    let e = run_json_program(
        &spec,
        dir.path(),
        &json!({}),
        Some(Duration::from_secs(60)),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("300 ms"), "{e}");
    let spec = py("import time; time.sleep(30)").timeout_ms(60_000);
    let e = run_json_program(
        &spec,
        dir.path(),
        &json!({}),
        Some(Duration::from_millis(300)),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("300 ms"), "{e}");
}
