//! The executor: advances a [`RunState`] one step at a time.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tracing::field::Empty;

use super::budgets::check_clock;
use super::builder::{Clock, ExecutorBuilder, Plan, PolicyRun, SupervisorPlan, check};
use super::callstack::put;
use super::decisions::{Action, choice_label, resolve};
use super::guarded::{Fault, call_guarded, exec_program};
use super::handlers::{PolicyInput, RunContext};
use super::run_state::{Pending, RunOutcome, RunState};
use super::status::{RunStatus, TerminationReason};
use super::trace::{DecisionTrace, TraceItem, TraceKind};
use crate::contracts::{RoutingDecision, SYSTEM_SLICE, StopLocal, SupervisorOutput};
use crate::graph::CompiledGraph;

/// The slice `resume` writes the answer to.
pub const CLARIFICATION_SLICE: &str = "clarification";

/// `start` refused the initial state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// The graph's entry is not a supervisor.
    #[error("the entry `{0}` is not a supervisor of the workflow")]
    UnknownEntry(String),
}

/// `resume` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The run is not waiting for an answer.
    #[error("the run is not awaiting input (its status is `{0}`)")]
    NotAwaitingInput(RunStatus),
    /// The workflow declares no `clarification` slice to hold the answer.
    #[error(
        "the workflow declares no `clarification` slice to receive the answer; declare one to use ask_clarification"
    )]
    NoClarificationSlice,
}

/// Runs a compiled workflow with registered handlers. Cheap to clone; one executor can
/// drive many runs (each a [`RunState`]).
///
/// ```
/// use pactgraph::runtime::{Executor, RunStatus};
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
    /// Starts building an executor for `graph`.
    pub fn builder(graph: impl Into<Arc<CompiledGraph>>) -> ExecutorBuilder {
        ExecutorBuilder::new(graph.into())
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

    /// A new run at `entry` with `initial_state`. Undeclared slices are an error;
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
        if graph.registry().get_supervisor(graph.entry()).is_none() {
            return Err(StartError::UnknownEntry(graph.entry().to_string()));
        }
        let mut run = RunState {
            workflow: graph.workflow().to_string(),
            status: RunStatus::Running,
            termination_reason: None,
            message: None,
            question: None,
            state: Value::Object(state),
            stack: Vec::new(),
            steps: 0,
            visits: Default::default(),
            entries: Default::default(),
            pending: Pending::Decide {
                supervisor: match self.plan.supervisors.get(graph.entry()) {
                    Some(sp) => Arc::clone(&sp.id),
                    None => Arc::from(graph.entry()),
                },
            },
            trace: DecisionTrace {
                items: Vec::with_capacity(
                    usize::try_from(graph.budgets().max_steps.saturating_mul(3))
                        .unwrap_or(usize::MAX)
                        .clamp(8, 4096),
                ),
            },
            uncommitted: Vec::new(),
            started_at_ms: wall_ms(),
            clock: Default::default(),
            trace_in_state: self.plan.trace_in_state,
        };
        self.sync_system(&mut run);
        Ok(run)
    }

    /// Runs until the run completes, stops, fails or pauses, and returns its outcome.
    pub async fn run(&self, mut run: RunState) -> RunOutcome {
        self.run_in_place(&mut run).await;
        run.into_outcome()
    }

    /// Like [`Executor::run`], leaving the finished [`RunState`] with the caller (to save
    /// a paused run, say).
    pub async fn run_in_place(&self, run: &mut RunState) -> RunStatus {
        while run.is_running() {
            self.step(run).await;
        }
        run.status
    }

    /// Continues a run paused by `ask_clarification`: writes `{"question", "answer"}` to
    /// the `clarification` slice of the level that asked (which must be declared) and lets
    /// the same supervisor decide again. The run deadline (`timeout_ms`) starts again.
    /// Call [`Executor::run`] afterwards.
    pub fn resume(
        &self,
        mut run: RunState,
        answer: impl Into<String>,
    ) -> Result<RunState, ResumeError> {
        if run.status != RunStatus::AwaitingInput {
            return Err(ResumeError::NotAwaitingInput(run.status));
        }
        if !self.plan.graph.slices().contains_key(CLARIFICATION_SLICE) {
            return Err(ResumeError::NoClarificationSlice);
        }
        let answer = answer.into();
        let question = run.question.take().unwrap_or_default();
        put(
            run.level_state_mut(),
            CLARIFICATION_SLICE,
            json!({"question": question, "answer": answer}),
        );
        run.status = RunStatus::Running;
        run.termination_reason = None;
        // Time spent waiting for the user does not count against the run deadline.
        run.started_at_ms = wall_ms();
        let supervisor = match &run.pending {
            Pending::Decide { supervisor } => Some(supervisor.clone()),
            _ => None,
        };
        let mut item = self.item(&run, TraceKind::Resume, supervisor);
        item.reason = Some(answer.into());
        run.trace.push(item);
        Ok(run)
    }

    /// Takes one step: a supervisor decision and what it leads to (a node run, a subgraph
    /// entry, a return, the end), or one handoff. Budgets, the deadline and cancellation
    /// are checked first. Returns the status after the step.
    pub async fn step(&self, run: &mut RunState) -> RunStatus {
        if !run.is_running() {
            return run.status;
        }
        let first = run.trace.len();
        let span = tracing::info_span!(
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
        self.step_inner(run).instrument(span.clone()).await;
        if !span.is_disabled() {
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
        }
        run.status
    }

    async fn step_inner(&self, run: &mut RunState) {
        let plan = &*self.plan;
        let budgets = plan.graph.budgets();
        let now = if plan.clock == Clock::System || budgets.timeout_ms.is_some() {
            wall_ms()
        } else {
            0
        };
        run.clock.at_ms = if plan.clock == Clock::System { now } else { 0 };
        if let Err(g) = check_clock(run, budgets, &self.cancel, now) {
            let sup = self.pending_supervisor(run);
            self.guard_stop(run, g, sup);
            return;
        }
        match std::mem::replace(&mut run.pending, Pending::Nothing) {
            Pending::Decide { supervisor } => self.decide(run, supervisor).await,
            Pending::Handoff { node, dispatcher } => {
                let from = run.trace.items.last().and_then(|i| i.target.clone());
                self.run_node(run, &node, dispatcher, TraceKind::Handoff, from)
                    .await;
            }
            Pending::Nothing => self.finish(
                run,
                RunStatus::Failed,
                TerminationReason::NodeFailed,
                Some("the run state has nothing pending but is marked running".into()),
                None,
            ),
        }
    }

    fn pending_supervisor(&self, run: &RunState) -> Option<Arc<str>> {
        match &run.pending {
            Pending::Decide { supervisor } => Some(supervisor.clone()),
            Pending::Handoff { dispatcher, .. } => Some(dispatcher.clone()),
            Pending::Nothing => None,
        }
    }

    // ---- timing and trace items ------------------------------------------------------

    pub(super) fn timer(&self) -> Option<Instant> {
        match self.plan.clock {
            Clock::System => Some(Instant::now()),
            Clock::Frozen => None,
        }
    }

    pub(super) fn item(
        &self,
        run: &RunState,
        kind: TraceKind,
        supervisor: Option<Arc<str>>,
    ) -> TraceItem {
        let mut item = TraceItem::new(kind, run.steps, run.depth());
        item.supervisor = supervisor;
        item.subgraph = run.stack.last().map(|f| Arc::clone(&f.subgraph_id));
        item.at_ms = run.clock.at_ms;
        item
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

    // ---- decisions -------------------------------------------------------------------

    /// The state a policy sees: the current level's slices, with `system` fresh at the root.
    fn policy_view(&self, run: &RunState) -> Map<String, Value> {
        let mut view = level_map(run);
        if run.stack.is_empty() && view.contains_key(SYSTEM_SLICE) {
            view.insert(SYSTEM_SLICE.into(), self.system_value(run));
        }
        view
    }

    /// Calls a handler or program policy.
    async fn ask_policy(
        &self,
        run: &RunState,
        sup_id: &str,
        sp: &SupervisorPlan,
    ) -> Result<SupervisorOutput, Fault> {
        let plan = &*self.plan;
        match &sp.policy {
            PolicyRun::Rules(_) => Err(Fault::Failed(
                "rule-based supervisors have no policy".into(),
            )),
            PolicyRun::Handler(h) => {
                let input = PolicyInput {
                    supervisor: sup_id.to_string(),
                    state: self.policy_view(run),
                    contract: Arc::clone(&sp.contract),
                    context: RunContext {
                        workflow: run.workflow.clone(),
                        step: run.steps,
                        depth: run.depth(),
                        subgraph: run.current_subgraph().map(str::to_string),
                        call_stack: run
                            .stack
                            .iter()
                            .map(|f| f.subgraph_id.to_string())
                            .collect(),
                    },
                };
                let limit = self.call_limit(run, None);
                call_guarded(|| h.0.decide(input), limit, &self.cancel).await
            }
            PolicyRun::Exec(spec) => {
                let input = json!({
                    "supervisor": sup_id,
                    "depth": run.depth(),
                    "allow": sp.contract.allow,
                    "state": self.policy_view(run),
                });
                let limit = self.call_limit(run, spec.timeout_ms);
                let v = exec_program(spec, &plan.base_dir, &input, limit, &self.cancel).await?;
                serde_json::from_value::<SupervisorOutput>(v)
                    .map_err(|e| Fault::Failed(format!("printed an invalid decision: {e}")))
            }
        }
    }

    async fn decide(&self, run: &mut RunState, sup_id: Arc<str>) {
        let plan = &*self.plan;
        let Some(sp) = plan.supervisors.get(&*sup_id) else {
            let msg = format!("unknown supervisor `{sup_id}`");
            self.fail(run, TerminationReason::NodeFailed, msg, None);
            return;
        };
        let action = match &sp.policy {
            PolicyRun::Rules(table) => {
                // Triggers on `/system/...` see it as policies do: built fresh.
                let fresh = table
                    .reads_system
                    .then(|| Value::Object(self.policy_view(run)));
                let verdict = table.decide(fresh.as_ref().unwrap_or(run.level_state()));
                let mut item = self.item(run, TraceKind::Decision, Some(Arc::clone(&sp.id)));
                item.reason = Some(verdict.reason);
                item.candidates = verdict.candidates;
                match verdict.winner {
                    // A winning trigger names an `allow` entry of the right kind already.
                    Some(e) => {
                        item.target = Some(Arc::clone(&e.id));
                        run.trace.push(item);
                        if e.is_subgraph {
                            return self.call(run, &e.id, Arc::clone(&sp.id));
                        }
                        let from = Some(Arc::clone(&sp.id));
                        return self
                            .run_node(run, &e.id, Arc::clone(&sp.id), TraceKind::Dispatch, from)
                            .await;
                    }
                    None => {
                        item.target = Some(Arc::clone(&table.default_label));
                        run.trace.push(item);
                        let default = table
                            .default
                            .clone()
                            .unwrap_or_else(RoutingDecision::stop_local);
                        resolve(
                            SupervisorOutput::Decision(default),
                            &sp.contract,
                            plan.graph.registry(),
                        )
                    }
                }
            }
            PolicyRun::Handler(_) | PolicyRun::Exec(_) => {
                let t0 = self.timer();
                // Boxed so the common rule-based step keeps a small future.
                let output = match Box::pin(self.ask_policy(run, &sup_id, sp)).await {
                    Ok(o) => o,
                    Err(f) => return self.fault(run, &sup_id, "the policy of supervisor", f),
                };
                let mut item = self.item(run, TraceKind::Decision, Some(Arc::clone(&sp.id)));
                item.target = Some(choice_label(&output).into());
                item.reason = decision_reason(&output).map(Into::into);
                item.duration_us = Self::elapsed(t0);
                run.trace.push(item);
                resolve(output, &sp.contract, plan.graph.registry())
            }
        };
        let sup_id = Arc::clone(&sp.id);
        match action {
            Action::Node(id) => {
                let from = Some(Arc::clone(&sup_id));
                self.run_node(run, &id, sup_id, TraceKind::Dispatch, from)
                    .await;
            }
            Action::Subgraph(id) => self.call(run, &id, sup_id),
            Action::StopLocal(s) => self.end_level(run, sup_id, s, TerminationReason::StopLocal),
            Action::StopGlobal(s) => self.stop_global(run, sup_id, s),
            Action::Ask(q) => self.pause(run, sup_id, q),
            Action::Fallback { violation, reason } => {
                let fallback = sp.contract.fallback.as_deref();
                let mut item = self.item(run, TraceKind::Fallback, Some(Arc::clone(&sup_id)));
                item.target = Some(fallback.unwrap_or("stop_local").into());
                item.reason = Some(reason.as_str().into());
                item.termination_reason =
                    violation.then_some(TerminationReason::AllowlistViolation);
                run.trace.push(item);
                match fallback {
                    Some(node) => {
                        let from = Some(Arc::clone(&sup_id));
                        self.run_node(run, node, sup_id, TraceKind::Dispatch, from)
                            .await;
                    }
                    None => {
                        let why = if violation {
                            TerminationReason::AllowlistViolation
                        } else {
                            TerminationReason::StopLocal
                        };
                        let stop = StopLocal {
                            reason: Some(reason),
                            ..StopLocal::default()
                        };
                        self.end_level(run, sup_id, stop, why);
                    }
                }
            }
        }
    }
}

/// The current level's state as an owned map.
pub(super) fn level_map(run: &RunState) -> Map<String, Value> {
    match run.level_state() {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    }
}

/// The reason a typed decision carries, for the trace.
fn decision_reason(output: &SupervisorOutput) -> Option<String> {
    use crate::contracts::RoutingDecision as D;
    match output {
        SupervisorOutput::Legacy(_) => Some("legacy string decision".into()),
        SupervisorOutput::Decision(d) => match d {
            D::StopLocal(s) => s.reason.clone(),
            D::StopGlobal(s) | D::Fallback(s) => s.reason.clone(),
            D::AskClarification(c) => Some(c.question.clone()),
            D::Node(_) | D::Subgraph(_) => None,
        },
    }
}
