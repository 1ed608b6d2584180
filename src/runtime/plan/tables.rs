//! The executor's plan: every contract resolved once (handlers found, schemas compiled,
//! ids shared), in per-id tables that planning looks up on every step. Immutable and
//! shared by every step of every run of one executor.

use std::path::PathBuf;
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;

use super::agent::AgentPlan;
use super::rules::RuleTable;
use crate::contracts::lookup::SCAN_MAX;
use crate::contracts::{ExecSpec, NodeContract, SubgraphContract, SupervisorContract};
use crate::graph::CompiledGraph;
use crate::runtime::data::{Clock, TerminationReason, Writes};
use crate::runtime::effects::{SharedNode, SharedPolicy};

/// A map keyed by contract id.
/// foldhash, as in the registry: the ids are trusted (from the workflow) and looked up
/// on every step.
pub(crate) type IdMap<V> = foldhash::HashMap<String, V>;

/// The plan's nodes by id, hashed as [`IdMap`] and also indexed by position: a rule
/// table's entry holds its node's position, so a dispatch reads the node's plan without
/// hashing its id (ADR 0058).
pub(crate) type NodeMap = indexmap::IndexMap<String, NodePlan, foldhash::fast::RandomState>;

/// The plan's supervisors by id, hashed as [`IdMap`] and kept in order, so that the few
/// supervisors of most workflows can be scanned ([`Plan::supervisor`]).
pub(crate) type SupervisorMap =
    indexmap::IndexMap<String, SupervisorPlan, foldhash::fast::RandomState>;

/// A compiled schema, shared.
pub(crate) type Schema = Arc<Validator>;

/// How a node runs, resolved.
#[derive(Clone)]
pub(crate) enum NodeRun {
    /// No behaviour: writes nothing.
    Nothing,
    /// Constant writes (an object of slices), shared: a run whose events carry its
    /// writes (`Tx::note_writes`) shares this value rather than copying it.
    Set(Arc<Value>),
    /// A registered handler.
    Handler(SharedNode),
    /// A program.
    Exec(Arc<ExecSpec>),
    /// A model session (see [`AgentPlan`]).
    Agent(Arc<AgentPlan>),
}

/// A node, ready to run. The contract stays in the graph's registry (at `index`): the plan
/// adds only what running needs, so a large workflow is not held twice.
pub(crate) struct NodePlan {
    /// The id, shared by every trace item that names the node.
    pub(crate) id: Arc<str>,
    /// Position of the contract in the registry (see [`NodePlan::contract`]).
    pub(crate) index: usize,
    pub(crate) run: NodeRun,
    pub(crate) input_schema: Option<Schema>,
    pub(crate) output_schema: Option<Schema>,
    /// A `set` node's constant writes checked at the root level, once, when the plan is
    /// built (its writes, the `system` slice, its `output_schema`, each slice's schema):
    /// the verdict commit would reach on every run of it there, error message and all
    /// (ADR 0064). `None` for other nodes; inside a subgraph the boundary is checked too,
    /// so the writes are checked at commit as before.
    pub(crate) root_verdict: Option<Verdict>,
    /// Control goes back to the dispatching supervisor after the node at the root level:
    /// it is not a router and has no `handoff` and is not `terminal` (worked out once
    /// from the contract; inside a subgraph an exitpoint ends the level instead).
    pub(crate) returns_at_root: bool,
}

/// What checking a node's writes found: `Ok`, or why they are refused (the reason the
/// run fails with and the message).
pub(crate) type Verdict = Result<(), (TerminationReason, String)>;

impl NodePlan {
    /// The node's contract, from `graph`'s registry (the graph the plan was built from).
    pub(crate) fn contract<'g>(&self, graph: &'g CompiledGraph) -> &'g NodeContract {
        graph
            .registry()
            .node_at(self.index)
            .expect("the plan indexes the registry of the graph it was built from")
    }

    /// The node's own time limit: a program's `timeout_ms` (a handler has none).
    pub(crate) fn own_timeout_ms(&self) -> Option<u64> {
        match &self.run {
            NodeRun::Exec(spec) => spec.timeout_ms,
            _ => None,
        }
    }

    /// The writes of a node that calls nothing: a `set` node's constants, or nothing.
    pub(crate) fn constant_writes(&self) -> Writes {
        match &self.run {
            NodeRun::Set(v) => match &**v {
                Value::Object(m) => m.clone(),
                _ => Writes::new(),
            },
            _ => Writes::new(),
        }
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
    /// A model session per decision, ending with `route` (see [`AgentPlan`]).
    Agent(Arc<AgentPlan>),
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
    pub(crate) nodes: NodeMap,
    pub(crate) supervisors: SupervisorMap,
    pub(crate) subgraphs: IdMap<SubgraphPlan>,
    pub(crate) slice_schemas: IdMap<Schema>,
    pub(crate) base_dir: PathBuf,
    pub(crate) clock: Clock,
    pub(crate) trace_in_state: bool,
    pub(crate) trace_view: TraceView,
}

impl Plan {
    /// The plan of supervisor `id`: found by the address of its shared id when `id` is
    /// the plan's own (control handed back to a supervisor holds it) and the plan has a
    /// few supervisors, without hashing; else by hashing the text.
    #[inline]
    pub(crate) fn supervisor(&self, id: &Arc<str>) -> Option<&SupervisorPlan> {
        if self.supervisors.len() <= SCAN_MAX
            && let Some(sp) = self.supervisors.values().find(|sp| Arc::ptr_eq(&sp.id, id))
        {
            return Some(sp);
        }
        self.supervisors.get(&**id)
    }
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
