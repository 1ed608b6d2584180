//! Where the document runs agents (not a rule): every `{"agent": ...}` of a node's `run` or
//! a supervisor's `policy`, with the names its templates may use.

use foldhash::{HashSet, HashSetExt};

use crate::contracts::pointer::join;
use crate::contracts::{AgentSpec, NodeBehaviour, SYSTEM_SLICE, SupervisorPolicy};
use crate::validator::Context;

/// Who runs an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A node (`run`).
    Node,
    /// A supervisor (`policy`).
    Supervisor,
}

/// One agent of the document.
pub(crate) struct AgentSite<'a> {
    /// The id of the node or supervisor running it.
    pub id: &'a str,
    /// Node or supervisor.
    pub owner: Owner,
    /// The agent.
    pub spec: &'a AgentSpec,
    /// JSON Pointer of the `agent` object.
    pub pointer: String,
}

impl AgentSite<'_> {
    /// "node `x`" or "supervisor `x`'s policy", for messages.
    pub fn who(&self) -> String {
        match self.owner {
            Owner::Node => format!("node `{}`", self.id),
            Owner::Supervisor => format!("supervisor `{}`'s policy", self.id),
        }
    }

    /// JSON Pointer of a field of the agent.
    pub fn field(&self, name: &str) -> String {
        format!("{}/{name}", self.pointer)
    }
}

/// Every agent, nodes first, each in declaration order.
pub(crate) fn agents<'a>(ctx: &Context<'a>) -> Vec<AgentSite<'a>> {
    let mut out = Vec::new();
    for n in ctx.reg.nodes() {
        if let Some(NodeBehaviour::Agent(spec)) = &n.run {
            out.push(AgentSite {
                id: &n.id,
                owner: Owner::Node,
                spec,
                pointer: join(["nodes", n.id.as_str(), "run", "agent"]),
            });
        }
    }
    for s in ctx.reg.supervisors() {
        if let Some(SupervisorPolicy::Agent(spec)) = &s.policy {
            out.push(AgentSite {
                id: &s.id,
                owner: Owner::Supervisor,
                spec,
                pointer: join(["supervisors", s.id.as_str(), "policy", "agent"]),
            });
        }
    }
    out
}

/// The variables an agent's templates may name: a node's read slices; a supervisor's
/// slices visible at its level (every declared slice at the root, the subgraph's `reads`
/// and `writes` inside one, `system` always) and `allow`; `input` for both.
pub(crate) fn template_names<'a>(ctx: &Context<'a>, site: &AgentSite<'a>) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    names.insert("input");
    match site.owner {
        Owner::Node => {
            if let Some(n) = ctx.node(site.id) {
                names.extend(n.reads.iter().map(String::as_str));
            }
        }
        Owner::Supervisor => {
            names.insert("allow");
            names.insert(SYSTEM_SLICE);
            match ctx
                .level_of_supervisor(site.id)
                .and_then(|g| ctx.boundaries.get(g))
            {
                Some(boundary) => names.extend(boundary.visible.iter().copied()),
                None => names.extend(ctx.graph.slices().keys().map(String::as_str)),
            }
        }
    }
    names
}
