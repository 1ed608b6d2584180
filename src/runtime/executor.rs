//! The executor: starts runs and drives them one step at a time (see [`super::step`] for
//! how a step is cut into planning, effects and commit).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tracing::field::Empty;

use super::builder::{Clock, ExecutorBuilder, Plan, check};
use super::output::Usage;
use super::record::RunId;
use super::run_state::{Control, Pending, RunState};
use super::status::RunStatus;
use super::step::item;
use super::trace::{DecisionTrace, TraceKind};
use crate::contracts::SYSTEM_SLICE;
use crate::graph::CompiledGraph;
use crate::validator::ValidGraph;

/// The slice `resume` writes the answer to.
pub const CLARIFICATION_SLICE: &str = "clarification";

/// `start` refused the initial state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The initial state is not a JSON object.
    #[error("the initial state must be a JSON object of slices")]
    NotAnObject,
    /// The initial state has slices the workflow does not declare.
    #[error("undeclared slice(s) in the initial state: {}", .0.join(", "))]
    UndeclaredSlices(Vec<String>),
    /// `system` is present but not an object.
    #[error("the `system` slice must be an object")]
    SystemNotAnObject,
    /// A slice does not match its declared schema.
    #[error("slice `{slice}` does not match its schema: {message}")]
    SliceInvalid {
        /// The slice.
        slice: String,
        /// What is wrong.
        message: String,
    },
}

/// Why `resume` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeErrorKind {
    /// The run is not waiting for an answer.
    #[error("the run is not awaiting input (its status is `{0}`)")]
    NotAwaitingInput(RunStatus),
    /// The workflow declares no `clarification` slice to hold the answer.
    #[error(
        "the workflow declares no `clarification` slice to receive the answer; declare one to use ask_clarification"
    )]
    NoClarificationSlice,
}

/// `resume` refused; the run state is handed back unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind}")]
pub struct ResumeError {
    kind: ResumeErrorKind,
    run: Box<RunState>,
}

impl ResumeError {
    /// Why.
    pub fn kind(&self) -> &ResumeErrorKind {
        &self.kind
    }

    /// The run state, unchanged.
    pub fn into_run(self) -> RunState {
        *self.run
    }
}

/// Runs a compiled workflow with registered handlers. Cheap to clone; one executor can
/// drive many runs (each a [`RunState`]).
///
/// ```
/// use pactgraph::runtime::{Executor, RunStatus};
/// use pactgraph::validator::ValidGraph;
/// use pactgraph::{GraphBuilder, NodeBehaviour, NodeContract, RoutingDecision, SliceDecl,
///     SupervisorContract};
/// use serde_json::json;
///
/// let graph = GraphBuilder::new("hello")
///     .slice("answer", SliceDecl::new())
///     .entry("root")
///     .supervisor(SupervisorContract::new("root").allow(["reply"]).handler("pick"))
///     .node(NodeContract::new("reply").supervisor("root").writes(["answer"])
///         .run(NodeBehaviour::handler("greet")).terminal(true))
///     .build()
///     .unwrap();
/// let graph = ValidGraph::new(graph).unwrap();
/// let executor = Executor::builder(graph)
///     .policy_handler("pick", |_| async { Ok("reply".into()) })
///     .node_handler("greet", |_| async {
///         let mut w = serde_json::Map::new();
///         w.insert("answer".into(), json!("hello"));
///         Ok(w)
///     })
///     .build()
///     .unwrap();
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let outcome = rt.block_on(executor.run(executor.start(json!({})).unwrap()));
/// assert_eq!(outcome.status, RunStatus::Completed);
/// assert_eq!(outcome.state["answer"], "hello");
/// ```
#[derive(Clone)]
pub struct Executor {
    pub(super) plan: Arc<Plan>,
    /// Cancels the runs this executor drives (per executor value, see
    /// [`Executor::with_cancellation`]).
    pub(super) cancel: CancellationToken,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("workflow", &self.plan.graph.workflow())
            .finish_non_exhaustive()
    }
}

pub(super) fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Executor {
    /// Starts building an executor for a graph the validator accepted.
    pub fn builder(graph: ValidGraph) -> ExecutorBuilder {
        ExecutorBuilder::new(graph)
    }

    pub(crate) fn from_plan(plan: Plan, cancel: CancellationToken) -> Self {
        Self {
            plan: Arc::new(plan),
            cancel,
        }
    }

    /// The compiled graph this executor runs.
    pub fn graph(&self) -> &CompiledGraph {
        &self.plan.graph
    }

    /// The token that cancels this executor's runs.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// This executor with another cancellation token: the same compiled workflow and
    /// handlers (shared, not copied), cancelled on its own. Drive each run with its own
    /// executor to cancel runs one at a time; pass a child of this executor's token
    /// (`executor.cancellation_token().child_token()`) so that cancelling the parent still
    /// stops them all.
    ///
    /// ```
    /// # use pactgraph::runtime::Executor;
    /// # fn per_run(shared: &Executor) {
    /// let token = shared.cancellation_token().child_token();
    /// let this_run = shared.with_cancellation(token.clone());
    /// // ... drive one run with `this_run`; `token.cancel()` stops that run alone.
    /// # }
    /// ```
    pub fn with_cancellation(&self, token: CancellationToken) -> Executor {
        Self {
            plan: Arc::clone(&self.plan),
            cancel: token,
        }
    }

    /// A new run at `entry` with `initial_state`, with a fresh [`RunId`]. Undeclared slices are an error;
    /// `system` is created if absent, its `call_stack`, `budgets` and `steps` are (re)set
    /// by the runtime and a `decision_trace` in it is dropped (the trace is projected
    /// there from [`RunState::trace`]).
    pub fn start(&self, initial_state: Value) -> Result<RunState, StartError> {
        let graph = &self.plan.graph;
        let Value::Object(mut state) = initial_state else {
            return Err(StartError::NotAnObject);
        };
        let undeclared: Vec<String> = state
            .keys()
            .filter(|k| *k != SYSTEM_SLICE && !graph.slices().contains_key(*k))
            .cloned()
            .collect();
        if !undeclared.is_empty() {
            return Err(StartError::UndeclaredSlices(undeclared));
        }
        match state.get(SYSTEM_SLICE) {
            None => {
                state.insert(SYSTEM_SLICE.into(), Value::Object(Map::new()));
            }
            Some(Value::Object(_)) => {}
            Some(_) => return Err(StartError::SystemNotAnObject),
        }
        // In declaration order, so the slice named is the same on every run.
        for slice in graph.slices().keys() {
            if let Some(schema) = self.plan.slice_schemas.get(slice)
                && let Some(v) = state.get(slice)
                && let Err(message) = check(schema, v)
            {
                return Err(StartError::SliceInvalid {
                    slice: slice.clone(),
                    message,
                });
            }
        }
        // A valid graph's entry is a supervisor: its plan holds the shared id.
        let entry = match self.plan.supervisors.get(graph.entry()) {
            Some(sp) => Arc::clone(&sp.id),
            None => Arc::from(graph.entry()),
        };
        let mut run = RunState {
            workflow: graph.workflow().to_string(),
            run_id: RunId::new(),
            control: Control::Running(Pending::Decide { supervisor: entry }),
            state,
            stack: Vec::new(),
            steps: 0,
            visits: Default::default(),
            entries: Default::default(),
            trace: DecisionTrace {
                items: Vec::with_capacity(
                    usize::try_from(graph.budgets().max_steps.saturating_mul(3))
                        .unwrap_or(usize::MAX)
                        .clamp(8, 4096),
                ),
            },
            uncommitted: Vec::new(),
            usage_total: Usage::new(),
            kept: Vec::new(),
            started_at_ms: wall_ms(),
            trace_in_state: self.plan.trace_in_state,
            changes: Default::default(),
        };
        self.sync_system(&mut run);
        Ok(run)
    }

    /// Runs until the run completes, stops, fails or pauses, and returns its outcome.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in the sense that the run is consumed: dropping the future loses
    /// the run. To keep a run across a cancellation, drive it with
    /// [`Executor::run_in_place`] or [`Executor::step`].
    pub async fn run(&self, mut run: RunState) -> RunOutcome {
        self.run_in_place(&mut run).await;
        run.into_outcome()
    }

    /// Like [`Executor::run`], leaving the finished [`RunState`] with the caller (to save
    /// a paused run, say).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if the future is dropped, `run` holds every step committed so far and
    /// nothing of the step in flight (see [`Executor::step`]); driving it again continues
    /// exactly where it stood.
    pub async fn run_in_place(&self, run: &mut RunState) -> RunStatus {
        while run.is_running() {
            self.step(run).await;
        }
        run.status()
    }

    /// Continues a run paused by `ask_clarification`: writes `{"question", "answer"}` to
    /// the `clarification` slice of the level that asked (which must be declared) and lets
    /// the same supervisor decide again. The run deadline (`timeout_ms`) starts again.
    /// Call [`Executor::run`] afterwards. On refusal the run is handed back unchanged.
    pub fn resume(
        &self,
        mut run: RunState,
        answer: impl Into<String>,
    ) -> Result<RunState, ResumeError> {
        let refuse = |kind, run| {
            Err(ResumeError {
                kind,
                run: Box::new(run),
            })
        };
        let (question, supervisor) = match &run.control {
            Control::AwaitingInput {
                question,
                supervisor,
            } => (question.clone(), Arc::clone(supervisor)),
            _ => {
                let status = run.status();
                return refuse(ResumeErrorKind::NotAwaitingInput(status), run);
            }
        };
        if !self.plan.graph.slices().contains_key(CLARIFICATION_SLICE) {
            return refuse(ResumeErrorKind::NoClarificationSlice, run);
        }
        let answer = answer.into();
        run.level_state_mut().insert(
            CLARIFICATION_SLICE.into(),
            json!({"question": question, "answer": answer}),
        );
        run.control = Control::Running(Pending::Decide {
            supervisor: Arc::clone(&supervisor),
        });
        // Time spent waiting for the user does not count against the run deadline.
        let now = wall_ms();
        run.started_at_ms = now;
        let at = if self.plan.clock == Clock::System {
            now
        } else {
            0
        };
        let mut it = item(&run, TraceKind::Resume, Some(supervisor), at);
        it.reason = Some(answer.into());
        run.trace.push(it);
        Ok(run)
    }

    /// Takes one step: a supervisor decision and what it leads to (a node run, a subgraph
    /// entry, a return, the end), or one handoff. Budgets, the deadline and cancellation
    /// are checked first. Returns the status after the step.
    ///
    /// The step is planned from the run, its effect (a handler or program call) performed,
    /// and the outcome committed; see [`Executor::begin_step`] to drive those parts
    /// yourself.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the run is changed only after the step's effects have returned, in
    /// one synchronous commit. If the future is dropped before it completes (a
    /// `select!` on shutdown, a lost lease), `run` is exactly as it was before the step,
    /// the handler is aborted at its next await point and a running program is killed.
    pub async fn step(&self, run: &mut RunState) -> RunStatus {
        if !run.is_running() {
            return run.status();
        }
        // The span costs a few hundred instructions a step even with no subscriber (more
        // when a dependency turns on tracing's `log` bridge): take it only when wanted.
        if !tracing::enabled!(target: "pactgraph", tracing::Level::INFO) {
            let mut step = self.begin_step(run);
            while let Some(effect) = step.take_effect() {
                // Boxed so the common step without effects keeps a small future.
                let output = Box::pin(self.perform(effect)).await;
                self.resolve_step(run, &mut step, output);
            }
            return self.commit_step(run, step);
        }
        let first = run.trace.len();
        let span = tracing::info_span!(
            target: "pactgraph",
            "pactgraph.step",
            step = run.steps,
            depth = run.depth(),
            supervisor = Empty,
            subgraph = Empty,
            kind = Empty,
            target = Empty,
            reason = Empty,
            termination_reason = Empty,
        );
        let mut step = span.in_scope(|| self.begin_step(run));
        while let Some(effect) = step.take_effect() {
            let output = Box::pin(self.perform(effect).instrument(span.clone())).await;
            span.in_scope(|| self.resolve_step(run, &mut step, output));
        }
        span.in_scope(|| self.commit_step(run, step));
        if let Some(i) = run.trace.items.get(first) {
            span.record("supervisor", i.supervisor.as_deref());
            span.record("subgraph", i.subgraph.as_deref());
            span.record("kind", tracing::field::debug(i.kind));
            span.record("target", i.target.as_deref());
            span.record("reason", i.reason.as_deref());
        }
        if let Some(r) = run.trace.items[first..]
            .iter()
            .rev()
            .find_map(|i| i.termination_reason)
        {
            span.record("termination_reason", r.as_str());
        }
        run.status()
    }

    // ---- timing ----------------------------------------------------------------------

    pub(super) fn timer(&self) -> Option<Instant> {
        match self.plan.clock {
            Clock::System => Some(Instant::now()),
            Clock::Frozen => None,
        }
    }

    pub(super) fn elapsed(t0: Option<Instant>) -> u64 {
        t0.map_or(0, |t| {
            u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
        })
    }

    /// The time limit for one handler call: the node limit, capped by the run deadline.
    pub(super) fn call_limit(&self, run: &RunState, own: Option<u64>) -> Option<Duration> {
        let budgets = self.plan.graph.budgets();
        let own = own.or(budgets.node_timeout_ms);
        let left = budgets
            .timeout_ms
            .map(|t| t.saturating_sub(wall_ms().saturating_sub(run.started_at_ms)));
        match (own, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(Duration::from_millis)
    }
}

use super::outcome::RunOutcome;
