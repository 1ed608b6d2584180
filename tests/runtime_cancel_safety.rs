//! Dropping a `step` future at its await point leaves the run exactly as before the step,
//! and the run then finishes exactly as one that was never interrupted. This is what a
//! worker that loses its lease, or a `select!` on shutdown, relies on.

mod support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::Poll;

use pactgraph::contracts::SupervisorOutput;
use pactgraph::runtime::{Executor, NodeInput, PolicyInput, RunState, TraceKind, Writes};
use serde_json::json;
use support::runtime::{builder, graph, rt};
use tokio::sync::Semaphore;

/// A workflow whose every step awaits: a policy handler decides (one effect) and its
/// nodes are async handlers (a second effect in the same step), one of them handing off.
fn doc() -> serde_json::Value {
    json!({
        "workflow": "awaiting",
        "slices": {"count": {}, "log": {}},
        "budgets": {"max_steps": 20},
        "entry": "boss",
        "supervisors": {"boss": {"allow": ["work", "note"], "policy": {"handler": "boss"}}},
        "nodes": {
            "work": {"supervisor": "boss", "reads": ["count"], "writes": ["count"],
                     "run": {"handler": "inc"}, "handoff": "note"},
            "note": {"supervisor": "boss", "reads": ["count", "log"], "writes": ["log"],
                     "run": {"handler": "note"}}
        }
    })
}

/// Handlers that each pass a gate (one permit per call) before answering, so a test
/// decides where a step stands when it drops it, and that count their calls.
fn executor(calls: Arc<AtomicU32>, gate: Arc<Semaphore>) -> Executor {
    let pass = move |calls: Arc<AtomicU32>, gate: Arc<Semaphore>| async move {
        calls.fetch_add(1, Ordering::SeqCst);
        gate.acquire().await.expect("the gate stays open").forget();
    };
    let (p1, p2, p3) = (pass, pass, pass);
    let (c1, c2, c3) = (Arc::clone(&calls), Arc::clone(&calls), calls);
    let (g1, g2, g3) = (Arc::clone(&gate), Arc::clone(&gate), gate);
    builder(graph(doc()))
        .policy_handler("boss", move |input: PolicyInput| {
            let wait = p1(Arc::clone(&c1), Arc::clone(&g1));
            async move {
                wait.await;
                let n = input
                    .state
                    .get("count")
                    .and_then(|c| c.as_u64())
                    .unwrap_or(0);
                let out: SupervisorOutput = if n < 3 { "work".into() } else { "done".into() };
                Ok(out)
            }
        })
        .node_handler("inc", move |input: NodeInput| {
            let wait = p2(Arc::clone(&c2), Arc::clone(&g2));
            async move {
                wait.await;
                let n = input
                    .view
                    .get("count")
                    .and_then(|c| c.as_u64())
                    .unwrap_or(0);
                let mut w = Writes::new();
                w.insert("count".into(), json!(n + 1));
                Ok(w)
            }
        })
        .node_handler("note", move |input: NodeInput| {
            let wait = p3(Arc::clone(&c3), Arc::clone(&g3));
            async move {
                wait.await;
                let mut log = input.view.get("log").cloned().unwrap_or(json!([]));
                if let Some(items) = log.as_array_mut() {
                    items.push(input.view["count"].clone());
                }
                let mut w = Writes::new();
                w.insert("log".into(), log);
                Ok(w)
            }
        })
        .build()
        .unwrap()
}

/// Plenty of permits: no handler waits.
const OPEN: usize = 1 << 20;

/// Drives `ex.step(run)` until it can go no further with the permits it has, then drops
/// it. Returns true if the step completed instead.
fn step_until_stuck_then_drop(
    rt: &tokio::runtime::Runtime,
    ex: &Executor,
    run: &mut RunState,
) -> bool {
    rt.block_on(async {
        let mut fut = Box::pin(ex.step(run));
        for _ in 0..10 {
            let ready =
                std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_ready())).await;
            if ready {
                return true;
            }
            tokio::task::yield_now().await;
        }
        false
    })
}

#[test]
fn a_step_dropped_at_any_await_leaves_the_run_untouched_and_the_run_ends_the_same() {
    let rt = rt();
    let whole = {
        let ex = executor(Arc::new(AtomicU32::new(0)), Arc::new(Semaphore::new(OPEN)));
        let mut run = ex.start(json!({})).unwrap();
        rt.block_on(ex.run_in_place(&mut run));
        run
    };
    assert_eq!(
        whole.state()["log"],
        json!([1, 2, 3]),
        "the workflow ran as designed"
    );
    let steps = whole
        .trace()
        .iter()
        .filter(|i| matches!(i.kind, TraceKind::Decision | TraceKind::Handoff))
        .count();

    // For every step k and every await point in it (after 0 or 1 of its effects
    // returned): drop the step there, check nothing changed, finish the run, compare.
    let mut dropped = [0usize; 2];
    for k in 0..steps {
        for (finished_effects, dropped_here) in dropped.iter_mut().enumerate() {
            let calls = Arc::new(AtomicU32::new(0));
            let gate = Arc::new(Semaphore::new(OPEN));
            let ex = executor(Arc::clone(&calls), Arc::clone(&gate));
            let mut run = ex.start(json!({})).unwrap();
            for _ in 0..k {
                rt.block_on(ex.step(&mut run));
            }
            if !run.is_running() {
                continue;
            }
            gate.forget_permits(OPEN);
            gate.add_permits(finished_effects);
            let before = run.clone();
            let calls_before = calls.load(Ordering::SeqCst);
            if !step_until_stuck_then_drop(&rt, &ex, &mut run) {
                *dropped_here += 1;
                assert_eq!(
                    run, before,
                    "step {k} dropped after {finished_effects} effect(s) changed the run"
                );
                assert_eq!(
                    calls.load(Ordering::SeqCst),
                    calls_before + 1 + finished_effects as u32,
                    "the dropped step was waiting in a handler"
                );
            }
            gate.add_permits(OPEN);
            rt.block_on(ex.run_in_place(&mut run));
            assert_eq!(
                run.state(),
                whole.state(),
                "step {k}, after {finished_effects} effect(s)"
            );
            assert_eq!(run.status(), whole.status());
            assert_eq!(run.steps(), whole.steps());
            assert_eq!(run.trace().without_timing(), whole.trace().without_timing());
        }
    }
    // Every step was dropped at its first await; the decide-then-run steps also at their
    // second (after the policy returned, while the node ran).
    assert_eq!(dropped[0], steps, "{dropped:?}");
    assert!(dropped[1] >= 3, "{dropped:?}");
}

#[cfg(unix)]
#[test]
fn a_step_dropped_while_its_program_runs_kills_the_program_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = dir.path().join("slow.py");
    std::fs::write(
        &script,
        format!(
            "import os, subprocess, sys, time\nc = subprocess.Popen(['sleep', '60'])\nopen({:?}, 'w').write(f'{{os.getpid()}} {{c.pid}}')\nsys.stdout.flush()\ntime.sleep(30)\nprint('{{}}')\n",
            pidfile.display().to_string()
        ),
    )
    .unwrap();
    let ex = builder(graph(json!({
        "workflow": "slow",
        "slices": {"out": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["slow"]}},
        "nodes": {"slow": {"supervisor": "root", "writes": ["out"], "terminal": true,
            "triggers": [{"priority": 1, "when": true}],
            "run": {"exec": {"argv": ["python3", script.display().to_string()], "timeout_ms": 60000}}}}
    })))
    .base_dir(dir.path())
    .build()
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut run = ex.start(json!({})).unwrap();
    let before = run.clone();
    rt.block_on(async {
        let step = ex.step(&mut run);
        // Long enough for the program to start and write its pid; far shorter than its sleep.
        let finished = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            tokio::pin!(step);
            loop {
                tokio::select! {
                    _ = &mut step => return true,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                        if pidfile.exists() && std::fs::read_to_string(&pidfile).is_ok_and(|p| !p.is_empty()) {
                            return false;
                        }
                    }
                }
            }
        })
        .await;
        assert_eq!(finished, Ok(false), "the program started and the step did not finish");
    });
    assert_eq!(run, before, "dropping the step changed the run");
    // The program and the process it started (its whole group) are killed on drop; give
    // the kernel a moment, then each is gone or a zombie.
    let pids = std::fs::read_to_string(&pidfile).unwrap();
    let pids: Vec<u32> = pids.split(' ').map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 2, "the program and its child");
    for pid in pids {
        let mut gone = false;
        for _ in 0..100 {
            match std::fs::read_to_string(format!("/proc/{pid}/status")) {
                Err(_) => gone = true,
                Ok(s) => {
                    gone = s
                        .lines()
                        .any(|l| l.starts_with("State:") && l.contains('Z'))
                }
            }
            if gone {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(gone, "process {pid} still runs after its step was dropped");
    }
}

/// Proves `perform` never panics on the program path either: on a tokio runtime without
/// I/O, spawning the program panics inside tokio; the run fails with `node_failed` naming
/// the panic instead of taking the caller down.
#[test]
fn a_program_that_cannot_be_spawned_fails_the_run_instead_of_panicking() {
    let ex = builder(graph(json!({
        "workflow": "no_io",
        "slices": {"out": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["p"]}},
        "nodes": {"p": {"supervisor": "root", "writes": ["out"], "terminal": true,
            "triggers": [{"priority": 1, "when": true}],
            "run": {"exec": {"argv": ["python3", "-c", "print('{}')"], "timeout_ms": 5000}}}}
    })))
    .build()
    .unwrap();
    let no_io = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let outcome = no_io.block_on(ex.run(ex.start(json!({})).unwrap()));
    assert_eq!(outcome.status, pactgraph::runtime::RunStatus::Failed);
    assert_eq!(
        outcome.termination_reason,
        Some(pactgraph::runtime::TerminationReason::NodeFailed)
    );
    let message = outcome.message.unwrap();
    assert!(message.contains("node `p` failed: panicked"), "{message}");
}
