//! Building an [`Executor`]: handlers by name, schemas compiled once, and the per-id
//! tables (the plan, see `plan/`) the executor looks up on every step.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::agents;
use super::data::Clock;
use super::effects::{NodeHandler, PolicyHandler, SharedNode, SharedPolicy};
use super::executor::Executor;
use super::machine::root_verdicts;
use super::plan::{
    IdMap, NodeMap, NodePlan, NodeRun, Plan, PolicyRun, RuleTable, Schema, SubgraphPlan,
    SupervisorMap, SupervisorPlan, TraceView,
};
use crate::contracts::pointer::join;
use crate::contracts::{NodeBehaviour, SupervisorPolicy};
use crate::graph::CompiledGraph;
use crate::validator::ValidGraph;

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
    /// An agent node cannot be run as written: its model or a tool it names is missing,
    /// its model client cannot be made, or it plays a part agents cannot play yet.
    #[error("agent node `{id}` cannot run: {message} (at {pointer})")]
    Agent {
        /// The node's id.
        id: String,
        /// What is wrong.
        message: String,
        /// JSON Pointer of the behaviour in the document.
        pointer: String,
    },
    /// A supervisor's policy agent cannot be run as written: its model or a tool it
    /// names is missing, or its model client cannot be made.
    #[error("the agent policy of supervisor `{id}` cannot run: {message} (at {pointer})")]
    AgentPolicy {
        /// The supervisor's id.
        id: String,
        /// What is wrong.
        message: String,
        /// JSON Pointer of the policy in the document.
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

impl Executor {
    /// Starts building an executor for a graph the validator accepted.
    pub fn builder(graph: ValidGraph) -> ExecutorBuilder {
        ExecutorBuilder::new(graph)
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
        let mut nodes = NodeMap::with_capacity_and_hasher(reg.nodes().len(), Default::default());
        for (index, n) in reg.nodes().enumerate() {
            let at = |field: &str| join(["nodes", n.id.as_str(), field]);
            let run = match &n.run {
                None => NodeRun::Nothing,
                Some(NodeBehaviour::Set(m)) => NodeRun::Set(Arc::new(Value::Object(
                    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                ))),
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
                Some(NodeBehaviour::Agent(spec)) => {
                    NodeRun::Agent(Arc::new(agents::agent_plan(&self.graph, n, spec)?))
                }
            };
            nodes.insert(
                n.id.clone(),
                NodePlan {
                    id: Arc::from(n.id.as_str()),
                    index,
                    run,
                    input_schema: compile(n.input_schema.as_ref(), || at("input_schema"))?,
                    output_schema: compile(n.output_schema.as_ref(), || at("output_schema"))?,
                    root_verdict: None,
                    returns_at_root: n.router.is_none() && n.handoff.is_none() && !n.terminal,
                },
            );
        }
        let mut supervisors =
            SupervisorMap::with_capacity_and_hasher(reg.supervisors().len(), Default::default());
        for s in reg.supervisors() {
            let policy = match &s.policy {
                None => PolicyRun::Rules(
                    RuleTable::new(s, reg).with_node_plans(|id| nodes.get_index_of(id)),
                ),
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
                Some(SupervisorPolicy::Agent(spec)) => {
                    PolicyRun::Agent(Arc::new(agents::policy_plan(&self.graph, s, spec)?))
                }
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
        let mut plan = Plan {
            graph: self.graph,
            nodes,
            supervisors,
            subgraphs,
            slice_schemas,
            base_dir: self.base_dir,
            clock: self.clock,
            trace_in_state: self.trace_in_state,
            trace_view: self.trace_view,
        };
        // `set` nodes' constant writes checked once, at the root (ADR 0064).
        let verdicts = root_verdicts(&plan);
        for (np, verdict) in plan.nodes.values_mut().zip(verdicts) {
            np.root_verdict = verdict;
        }
        Ok(Executor::from_plan(plan, self.cancel))
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

/// The folder a workflow document's `exec` programs run in: the folder of `file` (`.` for
/// a bare file name), made absolute where it exists, so a stored run resumed from another
/// directory still finds its programs. What [`ExecutorBuilder::base_dir`] and a
/// [`RunRecord`](super::RunRecord)'s `base_dir` are given for a document read from `file`.
pub fn document_dir(file: &std::path::Path) -> PathBuf {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}
