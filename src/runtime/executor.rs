//! The executor: starts runs and drives them one step at a time (see [`Step`] for how a
//! step is cut into planning, effects and commit). The top of the runtime: it reads the
//! clock and holds the cancellation token, and hands both to the state machine
//! (`machine`) and to the effects it performs.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tracing::field::Empty;

use super::data::{
    Clock, Control, DecisionTrace, Pending, RunEvents, RunId, RunOutcome, RunState, RunStatus,
    TraceKind, Usage, now_ms,
};
use super::effects::{CancelWatch, Effect, EffectOutput, Performer};
use super::machine::{Planner, Step, commit_in_place, commit_step, item};
use super::plan::{Plan, check};
use crate::contracts::{CLARIFICATION_SLICE, SYSTEM_SLICE};
use crate::graph::CompiledGraph;

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
    /// [`Executor::with_cancellation`]): the token, watched so that the check before
    /// every step reads a flag instead of locking it (ADR 0051).
    pub(super) cancel: Arc<CancelWatch>,
    /// Where the runs' events are published (see [`Executor::with_events`]).
    pub(super) events: Option<RunEvents>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("workflow", &self.plan.graph.workflow())
            .finish_non_exhaustive()
    }
}

impl Executor {
    pub(crate) fn from_plan(plan: Plan, cancel: CancellationToken) -> Self {
        Self {
            plan: Arc::new(plan),
            cancel: Arc::new(CancelWatch::new(&cancel)),
            events: None,
        }
    }

    /// The compiled graph this executor runs.
    pub fn graph(&self) -> &CompiledGraph {
        &self.plan.graph
    }

    /// A record of `run` (the workflow document this executor was built from, with the run),
    /// ready to save to a file or to create in a run store: the caller need not keep the
    /// document beside the executor.
    pub fn record(&self, run: RunState) -> super::RunRecord {
        super::RunRecord::new(self.plan.graph.to_document(), run)
    }

    /// The token that cancels this executor's runs.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.token().clone()
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
            cancel: Arc::new(CancelWatch::new(&token)),
            events: self.events.clone(),
        }
    }

    /// This executor publishing its runs' events to `events` (docs/spec/events.md): the
    /// same compiled workflow, handlers and cancellation token. Subscribe
    /// ([`RunEvents::subscribe`]) before the run starts. [`Executor::step`] (and so
    /// [`Executor::run`]) publishes each step's events once it is committed; a durable
    /// driver (`store::drive`) publishes them once its checkpoint is, numbered as the
    /// store keeps them, with a `checkpoint` event.
    ///
    /// ```
    /// # use pactgraph::runtime::{Executor, RunEvents};
    /// # fn with(executor: &Executor) {
    /// let events = RunEvents::new();
    /// let mut subscription = events.subscribe(1024);
    /// let executor = executor.with_events(events);
    /// // ... run it; `subscription.next().await` yields run_started, step, ..., run_ended.
    /// # }
    /// ```
    pub fn with_events(&self, events: RunEvents) -> Executor {
        Self {
            plan: Arc::clone(&self.plan),
            cancel: Arc::clone(&self.cancel),
            events: Some(events),
        }
    }

    /// Where this executor publishes its runs' events, if anywhere.
    pub fn events(&self) -> Option<&RunEvents> {
        self.events.as_ref()
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
            trace: DecisionTrace::with_capacity(
                usize::try_from(graph.budgets().max_steps.saturating_mul(3))
                    .unwrap_or(usize::MAX)
                    .clamp(8, 4096),
            ),
            uncommitted: Vec::new(),
            usage_total: Usage::new(),
            kept: Vec::new(),
            started_at_ms: now_ms(),
            trace_in_state: self.plan.trace_in_state,
            sessions: Vec::new(),
            changes: Default::default(),
        };
        self.plan.sync_system(&mut run);
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
        let now = now_ms();
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
        // Published once committed (docs/spec/events.md), without a store.
        let trace_before = match &self.events {
            Some(_) => {
                run.record_values();
                run.trace.len()
            }
            None => 0,
        };
        // The span costs a few hundred instructions a step even with no subscriber (more
        // when a dependency turns on tracing's `log` bridge): taken only when wanted. The
        // common step is planned and committed here, in this future, not in a second one
        // made and polled for it.
        let status = if tracing::enabled!(target: "pactgraph", tracing::Level::INFO) {
            Box::pin(self.step_in_span(run)).await
        } else {
            match self.step_at_once(run) {
                Ok(status) => status,
                // Boxed so the common step without effects keeps a small future.
                Err(step) => Box::pin(self.finish_step(run, *step)).await,
            }
        };
        if let Some(events) = &self.events {
            events.after_step(run, trace_before);
            run.events_made();
        }
        status
    }

    /// [`Executor::step`] in a `pactgraph.step` span, with what the step decided recorded
    /// on it.
    async fn step_in_span(&self, run: &mut RunState) -> RunStatus {
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
        if let Some(i) = run.trace.get(first) {
            span.record("supervisor", i.supervisor());
            span.record("subgraph", i.subgraph());
            span.record("kind", tracing::field::debug(i.kind));
            span.record("target", i.target());
            span.record("reason", i.reason());
        }
        if let Some(r) = run
            .trace
            .iter_from(first)
            .rev()
            .find_map(|i| i.termination_reason)
        {
            span.record("termination_reason", r.as_str());
        }
        run.status()
    }

    /// Plans a step of `run` and, when it waits on no effect, commits it at once: the
    /// common step is planned and committed in this function's frame, never stored in
    /// [`Executor::step`]'s future nor copied out of it (a local of an `async fn` that is
    /// moved before an await still gets a place in the future, and the step was copied
    /// into it and back, 328 bytes each way: ADR 0051). A step that waits on an effect
    /// is handed back, boxed, to be performed.
    #[inline(never)]
    fn step_at_once(&self, run: &mut RunState) -> Result<RunStatus, Box<Step<'_>>> {
        // Planned into a step held here, committed where it lies, and dropped only when
        // it owns something (ADR 0061; a panic in planning leaks it, nothing worse).
        let mut step = ManuallyDrop::new(Step::on(run));
        let planner = Planner {
            plan: &self.plan,
            now_ms: self.planning_time(),
        };
        planner.begin_in(run, &self.cancel, &mut step);
        if step.is_ready() {
            // The commit inlined here (not `Executor::commit_step`, which the compiler
            // keeps out of line), reading the step where planning left it: not copied
            // into another frame's argument nor moved out of its stage (ADR 0051, 0061).
            let status = commit_in_place(&self.plan, run, &mut step);
            if !step.owns_nothing() {
                drop(ManuallyDrop::into_inner(step));
            }
            Ok(status)
        } else {
            Err(Box::new(ManuallyDrop::into_inner(step)))
        }
    }

    /// Performs the effects `step` waits on, feeding each output back, and commits it.
    async fn finish_step(&self, run: &mut RunState, mut step: Step<'_>) -> RunStatus {
        while let Some(effect) = step.take_effect() {
            let output = self.perform(effect).await;
            self.resolve_step(run, &mut step, output);
        }
        self.commit_step(run, step)
    }

    // ---- the step in parts ---------------------------------------------------------

    /// The time planning a step of `run` reads: the system clock when the trace is
    /// timed or the run has a deadline, else 0 (nothing reads it).
    #[inline]
    fn planning_time(&self) -> u64 {
        if self.plan.clock == Clock::System || self.plan.graph.budgets().timeout_ms.is_some() {
            now_ms()
        } else {
            0
        }
    }

    /// Plans the run's next step without changing the run: checks the deadline and
    /// cancellation, decides (rule-based supervisors decide here; a policy becomes an
    /// effect), gates the node it leads to (budgets, visits, input schema) and describes
    /// its handler or program call as an effect. A run that is not running gives a step
    /// that commits nothing.
    #[inline]
    pub fn begin_step<'e>(&'e self, run: &RunState) -> Step<'e> {
        let planner = Planner {
            plan: &self.plan,
            now_ms: self.planning_time(),
        };
        planner.begin(run, &self.cancel)
    }

    /// Feeds an effect's output to the step waiting on it and plans the rest (a policy's
    /// decision may lead to a node whose call is the next effect). A step not waiting on
    /// an effect is left as it is.
    pub fn resolve_step<'e>(&'e self, run: &RunState, step: &mut Step<'e>, output: EffectOutput) {
        // Only the run deadline reads the time here (the step keeps its timestamp).
        let now_ms = if self.plan.graph.budgets().timeout_ms.is_some() {
            now_ms()
        } else {
            0
        };
        let planner = Planner {
            plan: &self.plan,
            now_ms,
        };
        planner.resolve(run, step, output);
    }

    /// Commits a step to the run it was planned on: records its trace items and applies
    /// its outcome. Returns the status after it. A step still waiting on an effect, or
    /// planned on a run that has moved since (or on another run), commits nothing.
    #[inline]
    pub fn commit_step(&self, run: &mut RunState, step: Step<'_>) -> RunStatus {
        commit_step(&self.plan, run, step)
    }

    /// Performs an effect: calls the handler or runs the program under the effect's time
    /// limit and this executor's cancellation token, and reads a node's output envelope.
    /// Never panics: a panic, an error, bad output, a time-out or cancellation comes back
    /// as a failed output.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future aborts the handler at its next await point (or
    /// the backoff wait before it) and kills a running program; the run is untouched
    /// (effects never change it).
    pub async fn perform(&self, effect: Effect) -> EffectOutput {
        Performer {
            base_dir: &self.plan.base_dir,
            clock: self.plan.clock,
            cancel: self.cancel.token(),
            events: self.events.as_ref(),
        }
        .perform(effect)
        .await
    }
}
