//! Building an [`Executor`]: handlers by name, schemas compiled once, and the per-id
//! tables the executor looks up on every step.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::executor::Executor;
use super::handlers::{NodeHandler, PolicyHandler, SharedNode, SharedPolicy};
use super::rules::RuleTable;
use crate::contracts::pointer::join;
use crate::contracts::{
    ExecSpec, NodeBehaviour, NodeContract, SubgraphContract, SupervisorContract, SupervisorPolicy,
};
use crate::graph::CompiledGraph;
use crate::validator::ValidGraph;

/// Where trace timestamps and durations come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// The system clock (`at_ms` since the Unix epoch, measured durations).
    #[default]
    System,
    /// Always zero: traces are byte-for-byte reproducible (tests, golden files). Run
    /// deadlines still use the system clock.
    Frozen,
}

/// The executor could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorBuildError {
    /// A node or supervisor names a handler nobody registered.
    #[error(
        "{kind} `{id}` uses {{\"handler\": \"{handler}\"}} but no such handler is registered (at {pointer})"
    )]
    MissingHandler {
        /// `node` or `supervisor`.
        kind: &'static str,
        /// The contract's id.
        id: String,
        /// The handler name.
        handler: String,
        /// JSON Pointer of the reference in the document.
        pointer: String,
    },
    /// A JSON Schema in the workflow does not compile.
    #[error("invalid JSON Schema at {pointer}: {message}")]
    InvalidSchema {
        /// JSON Pointer of the schema in the document.
        pointer: String,
        /// What is wrong with it.
        message: String,
    },
}

/// A map keyed by contract id.
/// foldhash, as in the registry: the ids are trusted (from the workflow) and looked up
/// on every step.
pub(crate) type IdMap<V> = foldhash::HashMap<String, V>;

/// A compiled schema, shared.
pub(crate) type Schema = Arc<Validator>;

/// How a node runs, resolved.
#[derive(Clone)]
pub(crate) enum NodeRun {
    /// No behaviour: writes nothing.
    Nothing,
    /// Constant writes (an object of slices).
    Set(Value),
    /// A registered handler.
    Handler(SharedNode),
    /// A program.
    Exec(Arc<ExecSpec>),
}

/// A node, ready to run. The contract stays in the graph's registry (at `index`): the plan
/// adds only what running needs, so a large workflow is not held twice.
pub(crate) struct NodePlan {
    /// The id, shared by every trace item that names the node.
    pub(crate) id: Arc<str>,
    /// Position of the contract in the registry (see [`NodePlan::contract`]).
    index: usize,
    pub(crate) run: NodeRun,
    pub(crate) input_schema: Option<Schema>,
    pub(crate) output_schema: Option<Schema>,
}

impl NodePlan {
    /// The node's contract, from `graph`'s registry (the graph the plan was built from).
    pub(crate) fn contract<'g>(&self, graph: &'g CompiledGraph) -> &'g NodeContract {
        graph
            .registry()
            .node_at(self.index)
            .expect("the plan indexes the registry of the graph it was built from")
    }
}

/// How a supervisor decides, resolved.
pub(crate) enum PolicyRun {
    /// Triggers and priorities, compiled.
    Rules(RuleTable),
    /// A registered handler.
    Handler(SharedPolicy),
    /// A program.
    Exec(Arc<ExecSpec>),
}

/// A supervisor, ready to decide.
pub(crate) struct SupervisorPlan {
    /// The id, shared by every trace item that names the supervisor.
    pub(crate) id: Arc<str>,
    pub(crate) contract: Arc<SupervisorContract>,
    pub(crate) policy: PolicyRun,
}

/// A subgraph, ready to call.
pub(crate) struct SubgraphPlan {
    /// The id, shared by every trace item and frame that names the subgraph.
    pub(crate) id: Arc<str>,
    /// The entrypoint supervisor's id.
    pub(crate) entrypoint: Arc<str>,
    pub(crate) contract: SubgraphContract,
    pub(crate) input_schema: Option<Schema>,
    pub(crate) output_schema: Option<Schema>,
}

/// Everything the executor reads while running (immutable, shared).
pub(crate) struct Plan {
    pub(crate) graph: Arc<CompiledGraph>,
    pub(crate) nodes: IdMap<NodePlan>,
    pub(crate) supervisors: IdMap<SupervisorPlan>,
    pub(crate) subgraphs: IdMap<SubgraphPlan>,
    pub(crate) slice_schemas: IdMap<Schema>,
    pub(crate) base_dir: PathBuf,
    pub(crate) clock: Clock,
    pub(crate) trace_in_state: bool,
    pub(crate) trace_view: TraceView,
}

/// How much of the decision trace nodes and policies that read `system` see in
/// `system.decision_trace` (the stored trace is always whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceView {
    /// The last `n` items (the default: [`TraceView::DEFAULT_RECENT`]), so that a policy
    /// call costs the same at the run's 10,000th decision as at its first.
    Recent(usize),
    /// Every item so far: each call copies the whole trace, so a run's policy calls cost
    /// grows with the square of its length. For policies that need the whole history.
    Full,
}

impl TraceView {
    /// The number of recent items a view holds by default.
    pub const DEFAULT_RECENT: usize = 16;

    /// Where the items a view holds start, in a trace of `len` items.
    pub(crate) fn first(self, len: usize) -> usize {
        match self {
            TraceView::Recent(n) => len.saturating_sub(n),
            TraceView::Full => 0,
        }
    }
}

impl Default for TraceView {
    fn default() -> Self {
        TraceView::Recent(Self::DEFAULT_RECENT)
    }
}

/// Collects handlers and settings, then builds an [`Executor`]. Made by
/// [`Executor::builder`] from a [`ValidGraph`].
pub struct ExecutorBuilder {
    graph: Arc<CompiledGraph>,
    nodes: HashMap<String, SharedNode>,
    policies: HashMap<String, SharedPolicy>,
    base_dir: PathBuf,
    clock: Clock,
    cancel: CancellationToken,
    trace_in_state: bool,
    trace_view: TraceView,
}

impl ExecutorBuilder {
    pub(crate) fn new(graph: ValidGraph) -> Self {
        Self {
            graph: graph.shared(),
            nodes: HashMap::new(),
            policies: HashMap::new(),
            base_dir: PathBuf::from("."),
            clock: Clock::System,
            cancel: CancellationToken::new(),
            trace_in_state: true,
            trace_view: TraceView::default(),
        }
    }

    /// Registers a node handler under `name` (for `{"handler": name}` behaviours).
    pub fn node_handler(mut self, name: impl Into<String>, handler: impl NodeHandler) -> Self {
        self.nodes
            .insert(name.into(), SharedNode(Arc::new(handler)));
        self
    }

    /// Registers a supervisor policy handler under `name` (for `{"handler": name}`
    /// policies).
    pub fn policy_handler(mut self, name: impl Into<String>, handler: impl PolicyHandler) -> Self {
        self.policies
            .insert(name.into(), SharedPolicy(Arc::new(handler)));
        self
    }

    /// The folder `exec` programs run in (normally the workflow file's folder).
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = dir.into();
        self
    }

    /// Where trace timestamps come from ([`Clock::Frozen`] for reproducible traces).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Whether the decision trace appears as `system.decision_trace` in the state (default:
    /// yes: the workflow contract promises it there).
    ///
    /// The trace is stored once, in [`RunState::trace`](super::RunState::trace) and
    /// [`RunOutcome::trace`](super::RunOutcome::trace). With `true`,
    /// `system.decision_trace` is a projection of it: every serialized form of the run
    /// state and the outcome (saved runs, the CLI's output) has it, streamed from the
    /// typed trace; `state_json()` materializes it; nodes and policies that read `system`
    /// see it; the in-memory `state` field does not hold it. With `false` it appears
    /// nowhere and `system` holds the budgets, call stack and step count only. The
    /// executor that starts, pauses or ends a run sets this for the run.
    pub fn trace_in_state(mut self, keep: bool) -> Self {
        self.trace_in_state = keep;
        self
    }

    /// How much of the trace nodes and policies that read `system` see in
    /// `system.decision_trace`: the last [`TraceView::DEFAULT_RECENT`] items by default,
    /// [`TraceView::Full`] on request. The outcome and saved runs always hold the whole
    /// trace.
    pub fn trace_view(mut self, view: TraceView) -> Self {
        self.trace_view = view;
        self
    }

    /// The token that cancels runs of this executor: checked between steps, and a running
    /// node is aborted when it fires. To cancel runs one at a time, give each its own
    /// executor with [`Executor::with_cancellation`].
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// Resolves every handler and compiles every schema.
    pub fn build(self) -> Result<Executor, ExecutorBuildError> {
        let reg = self.graph.registry();
        let mut nodes = IdMap::with_capacity_and_hasher(reg.nodes().len(), Default::default());
        for (index, n) in reg.nodes().enumerate() {
            let at = |field: &str| join(["nodes", n.id.as_str(), field]);
            let run = match &n.run {
                None => NodeRun::Nothing,
                Some(NodeBehaviour::Set(m)) => NodeRun::Set(Value::Object(
                    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                )),
                Some(NodeBehaviour::Exec(spec)) => NodeRun::Exec(Arc::new(spec.clone())),
                Some(NodeBehaviour::Handler(name)) => match self.nodes.get(name) {
                    Some(h) => NodeRun::Handler(h.clone()),
                    None => {
                        return Err(ExecutorBuildError::MissingHandler {
                            kind: "node",
                            id: n.id.clone(),
                            handler: name.clone(),
                            pointer: format!("{}/handler", at("run")),
                        });
                    }
                },
            };
            nodes.insert(
                n.id.clone(),
                NodePlan {
                    id: Arc::from(n.id.as_str()),
                    index,
                    run,
                    input_schema: compile(n.input_schema.as_ref(), || at("input_schema"))?,
                    output_schema: compile(n.output_schema.as_ref(), || at("output_schema"))?,
                },
            );
        }
        let mut supervisors =
            IdMap::with_capacity_and_hasher(reg.supervisors().len(), Default::default());
        for s in reg.supervisors() {
            let policy = match &s.policy {
                None => PolicyRun::Rules(RuleTable::new(s, reg)),
                Some(SupervisorPolicy::Exec(spec)) => PolicyRun::Exec(Arc::new(spec.clone())),
                Some(SupervisorPolicy::Handler(name)) => match self.policies.get(name) {
                    Some(h) => PolicyRun::Handler(h.clone()),
                    None => {
                        return Err(ExecutorBuildError::MissingHandler {
                            kind: "supervisor",
                            id: s.id.clone(),
                            handler: name.clone(),
                            pointer: join(["supervisors", s.id.as_str(), "policy", "handler"]),
                        });
                    }
                },
            };
            supervisors.insert(
                s.id.clone(),
                SupervisorPlan {
                    id: Arc::from(s.id.as_str()),
                    contract: Arc::new(s.clone()),
                    policy,
                },
            );
        }
        let mut subgraphs =
            IdMap::with_capacity_and_hasher(reg.subgraphs().len(), Default::default());
        for g in reg.subgraphs() {
            let at = |field: &str| join(["subgraphs", g.id.as_str(), field]);
            subgraphs.insert(
                g.id.clone(),
                SubgraphPlan {
                    id: Arc::from(g.id.as_str()),
                    entrypoint: Arc::from(g.entrypoint.as_str()),
                    contract: g.clone(),
                    input_schema: compile(g.input_schema.as_ref(), || at("input_schema"))?,
                    output_schema: compile(g.output_schema.as_ref(), || at("output_schema"))?,
                },
            );
        }
        let mut slice_schemas = IdMap::default();
        for (name, decl) in self.graph.slices() {
            if let Some(s) = compile(decl.schema.as_ref(), || {
                join(["slices", name.as_str(), "schema"])
            })? {
                slice_schemas.insert(name.clone(), s);
            }
        }
        Ok(Executor::from_plan(
            Plan {
                graph: self.graph,
                nodes,
                supervisors,
                subgraphs,
                slice_schemas,
                base_dir: self.base_dir,
                clock: self.clock,
                trace_in_state: self.trace_in_state,
                trace_view: self.trace_view,
            },
            self.cancel,
        ))
    }
}

/// Compiles an optional schema; `{}` and `true` compile to nothing (they accept all).
fn compile(
    schema: Option<&Value>,
    pointer: impl FnOnce() -> String,
) -> Result<Option<Schema>, ExecutorBuildError> {
    match schema {
        None | Some(Value::Bool(true)) => Ok(None),
        Some(Value::Object(m)) if m.is_empty() => Ok(None),
        Some(s) => jsonschema::validator_for(s)
            .map(|v| Some(Arc::new(v)))
            .map_err(|e| ExecutorBuildError::InvalidSchema {
                pointer: pointer(),
                message: e.to_string(),
            }),
    }
}

/// Checks `value` against a compiled schema; the error lists every problem.
/// Like [`check`], also giving the JSON Pointer (into `value`) of the first offending
/// value.
pub(crate) fn check_at(schema: &Schema, value: &Value) -> Result<(), (String, String)> {
    if schema.is_valid(value) {
        return Ok(());
    }
    let at = schema
        .iter_errors(value)
        .next()
        .map(|e| e.instance_path().to_string())
        .unwrap_or_default();
    let at = if at.is_empty() { "/".to_string() } else { at };
    check(schema, value).map_err(|msg| (at, msg))
}

pub(crate) fn check(schema: &Schema, value: &Value) -> Result<(), String> {
    if schema.is_valid(value) {
        return Ok(());
    }
    let problems: Vec<String> = schema
        .iter_errors(value)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{e} at {at}")
            }
        })
        .collect();
    Err(problems.join("; "))
}
