//! The bench example: one JSON line per case, in a format other engines' harnesses can
//! print too, so one table can hold them side by side.
//!
//! ```sh
//! cargo run --release --example bench -- <case> <n> [--repeat R] [--no-state-trace] [--subscriber]
//! # cases: loop, linear, subgraph, build, dot
//! ```
//!
//! The case is measured `R` times (default 5) in one process and the median is printed.
//! `--no-state-trace` (run cases) keeps the trace in the run state only, without its
//! projection into `system.decision_trace` (see `ExecutorBuilder::trace_in_state`).
//! `--subscriber` (run cases) publishes the run's events to one subscriber with a roomy
//! buffer that is never read (as `cargo bench --bench runtime -- run_events/roomy`), so
//! the figure is the step plus building and publishing its events.
//!
//! Each line is `{"bench": case, "n": n, "total_s": f, "per_step_us": f, "peak_rss_mb": f}`.
//! `per_step_us` is per loop step, per chain step, per subgraph call and return, per node
//! built and validated, or per node drawn. `peak_rss_mb` is the process's high-water mark
//! (VmHWM), so run one case per process to read it for that case alone.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use pactgraph::WorkflowDocument;
use pactgraph::graph::{CompiledGraph, GraphBuilder, synth};
use pactgraph::runtime::{Executor, RunEvents, RunStatus, TerminationReason};
use pactgraph::validator::{ValidGraph, Validator};
use pactgraph::visualize::{DotOptions, to_dot};

fn compile(doc: WorkflowDocument) -> CompiledGraph {
    GraphBuilder::from_document(doc)
        .build()
        .expect("synthetic workflows compile")
}

/// How a run case is run: the trace projected into the state, events published.
#[derive(Debug, Clone, Copy)]
struct Options {
    state_trace: bool,
    subscriber: bool,
}

/// Runs a workflow to its end and returns (elapsed, steps, subgraph entries).
fn run(
    doc: WorkflowDocument,
    options: Options,
) -> (Duration, u32, u32, RunStatus, Option<TerminationReason>) {
    let graph = ValidGraph::new(compile(doc)).expect("synthetic workflows are valid");
    let mut executor = Executor::builder(graph)
        .trace_in_state(options.state_trace)
        .build()
        .expect("no handlers needed");
    let events = RunEvents::new();
    // Never read: every event stays buffered until the run is measured.
    let subscription = options.subscriber.then(|| events.subscribe(usize::MAX));
    if options.subscriber {
        executor = executor.with_events(events);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut state = executor
        .start(serde_json::json!({}))
        .expect("empty input is valid");
    let t = Instant::now();
    rt.block_on(executor.run_in_place(&mut state));
    let elapsed = t.elapsed();
    drop(subscription);
    let entries = state.entries().values().sum();
    (
        elapsed,
        state.steps(),
        entries,
        state.status(),
        state.termination_reason(),
    )
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// One measurement: the time taken and the units (steps, calls, nodes) it covered.
type Measured = (Duration, f64);

fn line(case: &str, n: usize, (total, units): Measured) -> String {
    let total_s = total.as_secs_f64();
    let per = if units > 0.0 {
        total_s * 1e6 / units
    } else {
        0.0
    };
    format!(
        "{{\"bench\": \"{case}\", \"n\": {n}, \"total_s\": {total_s:.6}, \"per_step_us\": {per:.4}, \"peak_rss_mb\": {:.1}}}",
        peak_rss_mb()
    )
}

/// Measures case `name` at size `n` once.
fn case(name: &str, n: usize, options: Options) -> Result<Measured, String> {
    let n32 = u32::try_from(n).map_err(|_| format!("n = {n} is too large"))?;
    Ok(match name {
        "loop" => {
            let (t, steps, _, _, reason) = run(synth::supervisor_loop(n32), options);
            if reason != Some(TerminationReason::MaxStepsExceeded) || steps != n32 {
                return Err(format!("loop ended after {steps} steps with {reason:?}"));
            }
            (t, f64::from(steps))
        }
        "linear" => {
            let (t, steps, _, status, _) = run(synth::handoff_chain(n), options);
            if status != RunStatus::Completed || steps != n32 {
                return Err(format!("chain ended after {steps} steps with {status}"));
            }
            (t, f64::from(steps))
        }
        "subgraph" => {
            let (t, _, calls, _, _) = run(synth::repeated_calls(n32), options);
            if calls < n32 {
                return Err(format!("only {calls} of {n} calls ran"));
            }
            (t, f64::from(calls))
        }
        "build" => {
            let doc = synth::handoff_chain(n);
            let t = Instant::now();
            let graph = compile(doc);
            let report = Validator::new().validate(&graph);
            let elapsed = t.elapsed();
            if report.has_errors() {
                return Err("the generated chain does not validate".into());
            }
            (elapsed, n as f64)
        }
        "dot" => {
            let graph = compile(synth::clustered(n, (n / 100).max(1)));
            let t = Instant::now();
            let dot = to_dot(&graph, &DotOptions::default());
            let elapsed = t.elapsed();
            std::hint::black_box(dot.len());
            (elapsed, n as f64)
        }
        other => {
            return Err(format!(
                "unknown case `{other}` (loop, linear, subgraph, build, dot)"
            ));
        }
    })
}

/// Measures a case `repeat` times and returns the median measurement.
fn median_of(name: &str, n: usize, repeat: usize, options: Options) -> Result<String, String> {
    let mut runs = (0..repeat)
        .map(|_| case(name, n, options))
        .collect::<Result<Vec<_>, _>>()?;
    runs.sort_by_key(|m| m.0);
    Ok(line(name, n, runs[runs.len() / 2]))
}

const USAGE: &str = "usage: cargo run --release --example bench -- \
                     <loop|linear|subgraph|build|dot> <n> [--repeat R] [--no-state-trace] [--subscriber]";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut positional, mut repeat) = (Vec::new(), Ok(5));
    let mut options = Options {
        state_trace: true,
        subscriber: false,
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--no-state-trace" => options.state_trace = false,
            "--subscriber" => options.subscriber = true,
            "--repeat" => {
                repeat = match args.next().map(|r| r.parse::<usize>()) {
                    Some(Ok(r)) if r > 0 => Ok(r),
                    _ => Err("--repeat takes a positive whole number".to_string()),
                }
            }
            _ if a.starts_with("--") => repeat = Err(format!("unknown option `{a}`; {USAGE}")),
            _ => positional.push(a),
        }
    }
    let result = repeat.and_then(|repeat| match positional.as_slice() {
        [name, n] => match n.parse::<usize>() {
            Ok(n) if n > 0 => median_of(name, n, repeat, options),
            _ => Err(format!("n must be a positive whole number, got `{n}`")),
        },
        _ => Err(USAGE.into()),
    });
    match result {
        Ok(l) => {
            println!("{l}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::from(2)
        }
    }
}
