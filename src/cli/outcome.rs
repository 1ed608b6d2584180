//! What `run`, `resume` and `runs resume` print: the run's outcome, the answer first.
//! Every command that prints a run's outcome builds it here, with [`outcome_json`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::contracts::SYSTEM_SLICE;
use crate::runtime::{Clock, RunId, RunRecord, RunState, RunStatus};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::cli::exit;

/// `--full` and `--trace`: how much of the run the printed object holds.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShapeArgs {
    /// Print the whole run: `state` with its `system` slice (budgets, call stack, steps,
    /// decision trace), `uncommitted` and `accounting`.
    #[arg(long)]
    pub full: bool,
    /// Add the decision trace as a top-level `trace` (with `--full`, moved there out of
    /// `state.system`, so it appears once).
    #[arg(long)]
    pub trace: bool,
}

/// Where `run`, `resume` and `runs resume` write besides stdout, and what they print.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// `--trace-out`.
    pub trace_out: Option<PathBuf>,
    /// `--state-out`.
    pub state_out: Option<PathBuf>,
    /// `--quiet`.
    pub quiet: bool,
    /// `--frozen-clock`: zero timestamps and durations in the trace.
    pub frozen_clock: bool,
    /// `--full` and `--trace`.
    pub shape: ShapeArgs,
    /// `run --stream`: the events printer, finished before the outcome is printed.
    pub stream: Option<std::sync::Arc<crate::cli::stream::Streamer>>,
}

impl Outputs {
    /// Prints the events still buffered (`--stream`) before anything else is printed.
    pub async fn finish_stream(&self) {
        if let Some(stream) = &self.stream {
            stream.finish().await;
        }
    }

    /// The clock the run's executor records with.
    pub fn clock(&self) -> Clock {
        if self.frozen_clock {
            Clock::Frozen
        } else {
            Clock::System
        }
    }
}

/// The printed outcome of `run`:
///
/// - by default `{workflow, run_id, status, termination_reason, steps, message?, usage?,
///   state, question?}`, `state` holding the slices without `system` and `usage` what the
///   run cost (tokens in and out, `cost_usd` when priced; absent when nothing reported it);
/// - `--trace` adds `trace`, the decision trace items, last;
/// - `--full` is the whole summary: `state` with `system` (its `decision_trace` included),
///   then `uncommitted?` and `accounting`;
/// - `--full --trace` is the whole summary with the trace moved out of
///   `state.system.decision_trace` into a last `trace`.
pub fn outcome_json(run: &RunState, shape: ShapeArgs) -> Value {
    if shape.full {
        let mut full = full_json(run);
        if shape.trace
            && let Value::Object(map) = &mut full
        {
            if let Some(Value::Object(system)) =
                map.get_mut("state").and_then(|s| s.get_mut(SYSTEM_SLICE))
            {
                system.shift_remove("decision_trace");
            }
            map.insert("trace".into(), trace_json(run));
        }
        return full;
    }
    // The default shape is `Outcome`'s (what `outcome_text` prints borrowed), as a value.
    serde_json::to_value(Outcome::of(run, shape)).expect("an outcome is plain data")
}

/// What `run` prints when a signal interrupted a stored run: `{workflow, run_id, status:
/// "interrupted", termination_reason: null, steps}`.
pub fn interrupted_json(workflow: &str, run_id: impl Serialize, steps: u32) -> Value {
    json!({
        "workflow": workflow,
        "run_id": run_id,
        "status": "interrupted",
        "termination_reason": null,
        "steps": steps,
    })
}

/// The decision trace items as a JSON array.
fn trace_json(run: &RunState) -> Value {
    serde_json::to_value(run.trace()).unwrap_or(Value::Null)
}

/// The run's whole summary with `run_id` after `workflow` (every other key as the
/// library serializes it).
fn full_json(run: &RunState) -> Value {
    let summary = serde_json::to_value(run.summary()).unwrap_or(Value::Null);
    let Value::Object(map) = summary else {
        return summary;
    };
    let mut out = Map::with_capacity(map.len() + 1);
    for (k, v) in map {
        let workflow = k == "workflow";
        out.insert(k, v);
        if workflow {
            out.insert("run_id".into(), json!(run.run_id()));
        }
    }
    Value::Object(out)
}

/// Writes the requested files (the whole trace, the whole saved run) and prints the
/// outcome; the exit code follows the run's status. `default_state_out` is where the
/// saved run goes without `--state-out`; `stored` says how a pause is answered.
pub fn finish(
    saved: &RunRecord,
    outputs: &Outputs,
    default_state_out: Option<&Path>,
    stored: bool,
) -> ExitCode {
    let state_out = outputs.state_out.as_deref().or(default_state_out);
    finish_with(
        saved.run_id,
        &saved.run,
        outputs,
        state_out.map(|p| (saved, p)),
        stored,
    )
}

/// [`finish`] for a stored run when no saved run is to be written (no `--state-out`):
/// the run as the drive last committed it is the stored one, so it is not loaded again.
pub fn finish_stored(run: &RunState, outputs: &Outputs) -> ExitCode {
    debug_assert!(
        outputs.state_out.is_none(),
        "--state-out needs the whole record"
    );
    finish_with(run.run_id(), run, outputs, None, true)
}

/// The text `run`, `resume` and `runs resume` print of `run`'s outcome ([`outcome_json`]
/// as `shape` says): pretty JSON and a line break, or (`--stream`, `line`) one line of
/// JSON Lines like the events before it.
pub fn outcome_text(run: &RunState, shape: ShapeArgs, line: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let written = if shape.full {
        write_outcome(&mut out, &outcome_json(run, shape), line)
    } else {
        // The default shape borrowed from the run: the same text as `outcome_json`'s
        // value, without a copy of every string of the state (ADR 0070).
        write_outcome(&mut out, &Outcome::of(run, shape), line)
    };
    // String keys and finite numbers: always serializes.
    written.expect("an outcome serializes");
    out.push(b'\n');
    out
}

/// Writes `outcome` into `out`: on one line, or pretty.
fn write_outcome(
    out: &mut Vec<u8>,
    outcome: &impl Serialize,
    line: bool,
) -> serde_json::Result<()> {
    if line {
        serde_json::to_writer(out, outcome)
    } else {
        serde_json::to_writer_pretty(out, outcome)
    }
}

/// The outcome's object when not `--full` (see [`outcome_json`]), borrowed from the run:
/// printed from it without a copy of its state (ADR 0070).
#[derive(Serialize)]
struct Outcome<'a> {
    workflow: &'a str,
    run_id: RunId,
    status: RunStatus,
    termination_reason: Option<crate::runtime::TerminationReason>,
    steps: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Cost<'a>>,
    state: SlicesBut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    question: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<Value>,
}

impl<'a> Outcome<'a> {
    fn of(run: &'a RunState, shape: ShapeArgs) -> Self {
        Self {
            workflow: run.workflow(),
            run_id: run.run_id(),
            status: run.status(),
            termination_reason: run.termination_reason(),
            steps: run.steps(),
            message: run.message(),
            usage: Cost::of(run.usage_total()),
            state: SlicesBut(run.state()),
            question: run.question(),
            trace: shape.trace.then(|| trace_json(run)),
        }
    }
}

/// The names of a run's summed usage its printed `usage` shows (brief 10.4): the tokens
/// in (`cached_input_tokens` of them read from the model's cache) and out, the cost when
/// the models are priced, and how many calls' usage the server did not say.
const COST_NAMES: [&str; 5] = [
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "cost_usd",
    "usage_unknown",
];

/// What a run cost, as its printed `usage` (ADR 0088): the amounts of [`COST_NAMES`] the
/// run's nodes and model calls reported, summed.
struct Cost<'a>(&'a crate::runtime::Usage);

impl<'a> Cost<'a> {
    /// `None` when the run reported none of them (no model call, no such `$usage`).
    fn of(usage: &'a crate::runtime::Usage) -> Option<Self> {
        COST_NAMES
            .iter()
            .any(|name| usage.get(name).is_some())
            .then_some(Self(usage))
    }
}

impl Serialize for Cost<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            COST_NAMES
                .iter()
                .filter_map(|name| self.0.get(name).map(|amount| (name, amount))),
        )
    }
}

/// A state's slices but `system`, as a map.
struct SlicesBut<'a>(&'a Map<String, Value>);

impl Serialize for SlicesBut<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().filter(|(k, _)| k.as_str() != SYSTEM_SLICE))
    }
}

/// The rest of [`finish`]: `state_out` is the saved run and where it goes, if anywhere.
fn finish_with(
    run_id: RunId,
    run: &RunState,
    outputs: &Outputs,
    state_out: Option<(&RunRecord, &Path)>,
    stored: bool,
) -> ExitCode {
    if let Some(path) = &outputs.trace_out
        && let Err(e) = std::fs::write(path, run.trace().to_json_pretty())
    {
        return exit::failed(&format!(
            "cannot write the trace to {}: {e}",
            path.display()
        ));
    }
    if let Some((saved, path)) = state_out {
        if let Err(e) = write_json(std::fs::File::create(path), saved, "\n") {
            return exit::failed(&format!(
                "cannot write the run state to {}: {e}",
                path.display()
            ));
        }
    } else if run.status() == RunStatus::AwaitingInput && !outputs.quiet {
        if stored {
            eprintln!(
                "pactgraph: the run awaits input; answer with `pactgraph runs resume {} \
                 --answer TEXT`",
                run_id
            );
        } else {
            eprintln!(
                "pactgraph: the run awaits input; pass --state-out FILE to be able to resume it"
            );
        }
    }
    let text = outcome_text(run, outputs.shape, outputs.stream.is_some());
    let written = {
        let mut out = std::io::stdout().lock();
        out.write_all(&text).and_then(|()| out.flush())
    };
    if let Err(e) = written {
        return exit::failed(&format!("cannot write the result: {e}"));
    }
    if let (Some(m), false) = (run.message(), outputs.quiet)
        && matches!(run.status(), RunStatus::Failed | RunStatus::Stopped)
    {
        let reason = run
            .termination_reason()
            .map(|r| r.as_str())
            .unwrap_or("unknown");
        eprintln!("pactgraph: run {} ({reason}): {m}", run.status());
    }
    ExitCode::from(exit::of_status(run.status()))
}

/// `value` as one line of JSON on stdout.
pub fn write_line(value: &Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Streams `value` as pretty JSON, then `end`, to `out` (opened by the caller).
pub fn write_json(
    out: std::io::Result<impl Write>,
    value: &impl Serialize,
    end: &str,
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out?);
    serde_json::to_writer_pretty(&mut out, value)?;
    out.write_all(end.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GraphBuilder, synth};
    use crate::runtime::Executor;
    use crate::validator::ValidGraph;

    /// Proves `outcome_text` prints exactly `outcome_json`'s value, pretty and on one
    /// line, in every shape (default, `--trace`, `--full`, both), for runs that completed,
    /// stopped with a message, and paused with a question: the default shape, written
    /// from the run without a copy of its state, keeps the keys and their order.
    #[test]
    fn the_outcome_text_is_the_outcome_values() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let input = json!({"task": ["a\"b", "é\n", 1.5, {"k": [null, true]}]});
        let mut runs = Vec::new();
        for doc in [synth::supervisor_loop(3), synth::nested_levels(2)] {
            let graph = GraphBuilder::from_document(doc).build().expect("compiles");
            let ex = Executor::builder(ValidGraph::new(graph).expect("valid"))
                .build()
                .expect("builds");
            let mut run = ex.start(input.clone()).expect("starts");
            while run.is_running() {
                rt.block_on(ex.step(&mut run));
            }
            runs.push(run);
        }
        let mut paused = runs[0].clone();
        paused
            .set_control(
                RunStatus::AwaitingInput,
                Some(crate::runtime::TerminationReason::AwaitingInput),
                None,
                Some("which one?".into()),
                Some(crate::runtime::Pending::Decide {
                    supervisor: "boss".into(),
                }),
            )
            .expect("a paused run");
        runs.push(paused);
        let mut failed = runs[1].clone();
        failed
            .set_control(
                RunStatus::Failed,
                Some(crate::runtime::TerminationReason::NodeFailed),
                Some("it \"failed\"".into()),
                None,
                None,
            )
            .expect("a failed run");
        runs.push(failed);
        let mut priced = runs[0].clone();
        priced.usage_total = crate::runtime::Usage::new()
            .with("input_tokens", 30)
            .with("output_tokens", 4)
            .with(
                "cost_usd",
                serde_json::Number::from_f64(0.25).expect("finite"),
            )
            .with("calls", 2);
        runs.push(priced);
        for run in &runs {
            for (full, trace) in [(false, false), (false, true), (true, false), (true, true)] {
                let shape = ShapeArgs { full, trace };
                let value = outcome_json(run, shape);
                let mut pretty = serde_json::to_vec_pretty(&value).expect("serializes");
                pretty.push(b'\n');
                assert_eq!(outcome_text(run, shape, false), pretty, "{shape:?}");
                let mut line = serde_json::to_vec(&value).expect("serializes");
                line.push(b'\n');
                assert_eq!(outcome_text(run, shape, true), line, "{shape:?}");
            }
        }
    }

    /// Proves the default outcome says what a run cost: `usage` with the tokens in and
    /// out and `cost_usd` when priced (other names left to `--full`'s accounting), after
    /// `steps`; absent for a run that reported no tokens or cost.
    #[test]
    fn the_outcome_says_what_the_run_cost() {
        let graph = GraphBuilder::from_document(synth::supervisor_loop(2))
            .build()
            .expect("compiles");
        let ex = Executor::builder(ValidGraph::new(graph).expect("valid"))
            .build()
            .expect("builds");
        let mut run = ex.start(json!({})).expect("starts");
        let plain = outcome_json(&run, ShapeArgs::default());
        assert!(plain.get("usage").is_none(), "{plain}");
        run.usage_total = crate::runtime::Usage::new().with("calls", 3);
        let custom = outcome_json(&run, ShapeArgs::default());
        assert!(custom.get("usage").is_none(), "{custom}");
        run.usage_total = crate::runtime::Usage::new()
            .with("output_tokens", 7)
            .with("calls", 3)
            .with("input_tokens", 11);
        let unpriced = outcome_json(&run, ShapeArgs::default());
        assert_eq!(
            unpriced["usage"],
            json!({"input_tokens": 11, "output_tokens": 7})
        );
        run.usage_total = run.usage_total.clone().with(
            "cost_usd",
            serde_json::Number::from_f64(0.5).expect("finite"),
        );
        let priced = outcome_json(&run, ShapeArgs::default());
        assert_eq!(
            priced["usage"],
            json!({"input_tokens": 11, "output_tokens": 7, "cost_usd": 0.5})
        );
        let keys: Vec<&str> = priced
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "workflow",
                "run_id",
                "status",
                "termination_reason",
                "steps",
                "usage",
                "state"
            ]
        );
    }
}
