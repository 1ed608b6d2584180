//! Teams in pictures: each team node's members and lead drawn in a cluster of their own
//! next to the team node, around a broadcast hub vertex (members broadcast to it, the
//! hub feeds the lead). Shared by the DOT and Mermaid writers.

use std::collections::{HashMap, HashSet};

use crate::graph::CompiledGraph;

/// One team as drawn.
pub(crate) struct TeamDraw<'a> {
    /// The team node.
    pub node: &'a str,
    /// The hub vertex's id (DOT): `<node>_broadcast`, with `_` appended until no
    /// supervisor or node has it.
    pub hub: String,
    /// Members drawn inside this team's cluster (those no earlier team drew), in order.
    pub drawn: Vec<&'a str>,
    /// Every member that is a node, in order (hub edges are drawn for all).
    pub members: Vec<&'a str>,
    /// The lead, when it is a node.
    pub lead: Option<&'a str>,
    /// Whether this team's cluster draws its lead.
    pub draws_lead: bool,
}

/// The teams of `g`, in declaration order, and the vertices their clusters draw.
pub(crate) struct Teams<'a> {
    pub list: Vec<TeamDraw<'a>>,
    /// Team node id to its position in `list`.
    pub by_node: HashMap<&'a str, usize>,
    /// Vertices drawn in a team's cluster instead of their own level.
    pub claimed: HashSet<&'a str>,
}

impl<'a> Teams<'a> {
    /// Collects the teams of `g`. A node in several teams is drawn in the first one's
    /// cluster; a team node is never drawn inside a cluster (its own or another's).
    pub fn of(g: &'a CompiledGraph) -> Self {
        let reg = g.registry();
        let team_nodes: HashSet<&str> = reg
            .nodes()
            .filter(|n| n.team.is_some())
            .map(|n| n.id.as_str())
            .collect();
        let mut claimed = HashSet::new();
        let mut list = Vec::new();
        let mut by_node = HashMap::new();
        for n in reg.nodes() {
            let Some(t) = &n.team else {
                continue;
            };
            let id = n.id.as_str();
            let ok = |m: &&'a str| reg.get_node(m).is_some() && *m != id;
            let members: Vec<&str> = t.members.iter().map(String::as_str).filter(ok).collect();
            let lead = Some(t.lead.as_str()).filter(ok);
            let mut claim = |m: &'a str| !team_nodes.contains(m) && claimed.insert(m);
            let drawn: Vec<&str> = members.iter().copied().filter(|m| claim(m)).collect();
            let draws_lead = lead.is_some_and(&mut claim);
            let mut hub = format!("{id}_broadcast");
            while g.index_of(&hub).is_some() {
                hub.push('_');
            }
            by_node.insert(id, list.len());
            list.push(TeamDraw {
                node: id,
                hub,
                drawn,
                members,
                lead,
                draws_lead,
            });
        }
        Self {
            list,
            by_node,
            claimed,
        }
    }

    /// The team whose node is `id`.
    pub fn of_node(&self, id: &str) -> Option<(usize, &TeamDraw<'a>)> {
        self.by_node.get(id).map(|&i| (i, &self.list[i]))
    }
}
