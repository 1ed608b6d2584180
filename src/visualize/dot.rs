//! DOT (Graphviz) writer.

use std::fmt::{self, Write};

use super::escape::{dot_id, dot_label};
use super::overlay::{self, Drawn, EdgeView, Overlay};
use super::team::{TeamDraw, Teams};
use super::{
    DotOptions, LabelSink, Nesting, VertexRef, cluster_label, exitpoints, members, root_members,
};
use crate::graph::CompiledGraph;

/// Colour of the path a run took.
pub(super) const TAKEN: &str = "#d62728";
/// Colour of a fallback the run went through, and of static fallback edges.
pub(super) const FALLBACK: &str = "#b35900";
/// Colour of vertices and edges a run never used.
pub(super) const UNUSED: &str = "#bbbbbb";
/// Colour of teams: their clusters, hubs and edges.
pub(super) const TEAM: &str = "#6a51a3";

/// A DOT label; the second field is the line break (`\\n` centred, `\\l` left-aligned).
struct DotLabel<'w, W>(&'w mut W, &'static str);

impl<W: Write> LabelSink for DotLabel<'_, W> {
    fn text(&mut self, s: &str) -> fmt::Result {
        super::escape::dot_label_br(self.0, s, self.1)
    }
    fn br(&mut self) -> fmt::Result {
        self.0.write_str(self.1)
    }
}

/// Deepest indentation written: deeper clusters are indented no further, so output stays
/// linear in size however deep the nesting.
pub(super) const MAX_INDENT: usize = 12;

fn indent(out: &mut impl Write, level: usize) -> fmt::Result {
    for _ in 0..level.min(MAX_INDENT) {
        out.write_str("  ")?;
    }
    Ok(())
}

fn quoted(out: &mut impl Write, id: &str) -> fmt::Result {
    out.write_char('"')?;
    dot_id(out, id)?;
    out.write_char('"')
}

/// Writes `graph` as DOT into `out` (see the [module docs](super) for what is drawn).
///
/// Complexity: O(V + E) in the graph, plus O(T) in the trace.
pub fn write_dot<W: Write>(
    out: &mut W,
    graph: &CompiledGraph,
    options: &DotOptions<'_>,
) -> fmt::Result {
    let g = graph;
    let ov = options.trace.map(|t| overlay::overlay(g, t));
    let exits = exitpoints(g);
    let nesting = Nesting::of(g);

    out.write_str("digraph ")?;
    quoted(out, g.workflow())?;
    out.write_str(" {\n  graph [label=\"")?;
    DotLabel(out, "\\n").text(g.workflow())?;
    if let Some(d) = g.description().filter(|_| options.descriptions) {
        let (line, cut) = super::escape::shorten(d, 2 * super::DESCRIPTION_CHARS);
        out.write_str("\\n")?;
        dot_label(out, line)?;
        if cut {
            out.write_str("…")?;
        }
    }
    out.write_str("\", labelloc=t, fontname=\"Helvetica\", fontsize=12")?;
    let compound = ov.as_ref().is_some_and(|o| {
        o.extra
            .iter()
            .any(|e| ltail(g, e.from_cluster.as_deref(), &e.from, &e.to))
    });
    if compound {
        out.write_str(", compound=true")?;
    }
    out.write_str("];\n  node [fontname=\"Helvetica\", fontsize=10];\n")?;
    out.write_str("  edge [fontname=\"Helvetica\", fontsize=9];\n")?;

    let teams = Teams::of(g);
    let vertex = |out: &mut W, v: VertexRef<'_>, level: usize| {
        if teams.claimed.contains(v.id()) {
            // Drawn in its team's cluster, next to the team node.
            return Ok(());
        }
        let exit = !exits.is_empty() && exits.contains(v.id());
        write_vertex(out, g, v, exit, ov.as_ref(), options, level)?;
        if let Some((_, t)) = teams.of_node(v.id()) {
            indent(out, level)?;
            out.write_str("subgraph ")?;
            quoted(out, &format!("cluster_team_{}", t.node))?;
            out.write_str(" {\n")?;
            indent(out, level + 1)?;
            out.write_str("label=\"team ")?;
            DotLabel(out, "\\n").text(t.node)?;
            if let Some(n) = ov.as_ref().and_then(|o| o.team_cycles.get(t.node)) {
                write!(out, "\\n{n} cycle(s)")?;
            }
            writeln!(
                out,
                "\"; labeljust=l; style=\"dashed,rounded\"; color=\"{TEAM}\"; fontcolor=\"{TEAM}\";"
            )?;
            indent(out, level + 1)?;
            quoted(out, &t.hub)?;
            writeln!(
                out,
                " [shape=circle, style=filled, fillcolor=\"#efedf5\", color=\"{TEAM}\", fontcolor=\"{TEAM}\", label=\"broadcast\"];"
            )?;
            let drawn = t
                .drawn
                .iter()
                .copied()
                .chain(t.lead.filter(|_| t.draws_lead));
            for p in drawn.filter_map(|p| g.registry().get_node(p)) {
                let exit = !exits.is_empty() && exits.contains(p.id.as_str());
                let pv = VertexRef::Node(p);
                write_vertex(out, g, pv, exit, ov.as_ref(), options, level + 1)?;
            }
            indent(out, level)?;
            out.write_str("}\n")?;
        }
        Ok(())
    };
    for v in root_members(g) {
        vertex(out, v, 1)?;
    }
    nesting.walk(
        out,
        |out, i, level| {
            let Some((id, _)) = g.clusters().get_index(i) else {
                return Ok(());
            };
            indent(out, level)?;
            out.write_str("subgraph \"cluster_")?;
            dot_id(out, id)?;
            out.write_str("\" {\n")?;
            indent(out, level + 1)?;
            out.write_str("label=\"")?;
            cluster_label(&mut DotLabel(out, "\\l"), g, i, options)?;
            out.write_str("\\l")?;
            // Nested clusters alternate shades so each boundary stays visible.
            let fill = if level % 2 == 1 { "#f3f6fa" } else { "#e4ecf5" };
            writeln!(
                out,
                "\"; labeljust=l; labelloc=b; style=\"rounded,filled\"; color=\"#7a8ca3\"; fillcolor=\"{fill}\";"
            )?;
            let tooltip = g
                .registry()
                .get_subgraph(id)
                .and_then(|s| s.description.as_deref());
            if let Some(t) = tooltip {
                indent(out, level + 1)?;
                out.write_str("tooltip=\"")?;
                dot_label(out, t)?;
                out.write_str("\";\n")?;
            }
            for v in members(g, i) {
                vertex(out, v, level + 1)?;
            }
            Ok(())
        },
        |out, level| {
            indent(out, level)?;
            out.write_str("}\n")
        },
    )?;

    let mut steps = String::new();
    for (i, e) in overlay::drawn_edges(g).enumerate() {
        steps.clear();
        let (taken, fell_back) = match &ov {
            Some(o) => {
                let s = o.steps.get(i).map(Vec::as_slice).unwrap_or(&[]);
                overlay::step_list(s, &mut steps);
                (Some(!s.is_empty()), o.fell_back.contains(&i))
            }
            None => (None, false),
        };
        write_edge(out, &e, taken, fell_back, &steps)?;
    }
    for t in &teams.list {
        write_hub_edges(out, t)?;
    }
    if let Some(o) = &ov {
        write_overlay_extras(out, g, o)?;
    }
    out.write_str("}\n")
}

/// A team's hub edges: each member to the hub (both ways: it broadcasts and reads its
/// inbox), the hub to the lead.
fn write_hub_edges(out: &mut impl Write, t: &TeamDraw<'_>) -> fmt::Result {
    for m in &t.members {
        out.write_str("  ")?;
        quoted(out, m)?;
        out.write_str(" -> ")?;
        quoted(out, &t.hub)?;
        writeln!(
            out,
            " [style=dashed, dir=both, arrowsize=0.6, color=\"{TEAM}\"];"
        )?;
    }
    if let Some(lead) = t.lead {
        out.write_str("  ")?;
        quoted(out, &t.hub)?;
        out.write_str(" -> ")?;
        quoted(out, lead)?;
        writeln!(
            out,
            " [style=dashed, color=\"{TEAM}\", fontcolor=\"{TEAM}\", label=\"lead\"];"
        )?;
    }
    Ok(())
}

/// Whether an edge leaving `cluster` from `from` can be drawn from the cluster's border.
/// The tail must be in the cluster and the head outside it (Graphviz ignores `ltail`
/// with a warning otherwise, e.g. for a recursive call returning into the same cluster).
fn ltail(g: &CompiledGraph, cluster: Option<&str>, from: &str, to: &str) -> bool {
    let Some(c) = cluster else {
        return false;
    };
    if g.subgraph_of_supervisor(from) != Some(c) {
        return false;
    }
    // Walk the head's clusters outwards; nesting is cycle-free, the bound is a guard.
    let mut at = g.subgraph_of_supervisor(to);
    for _ in 0..=g.clusters().len() {
        match at {
            None => return true,
            Some(a) if a == c => return false,
            Some(a) => at = g.cluster(a).and_then(|k| k.parent.as_deref()),
        }
    }
    true
}

fn write_vertex<W: Write>(
    out: &mut W,
    g: &CompiledGraph,
    v: VertexRef<'_>,
    exit: bool,
    ov: Option<&Overlay>,
    options: &DotOptions<'_>,
    level: usize,
) -> fmt::Result {
    let id = v.id();
    indent(out, level)?;
    quoted(out, id)?;
    let unused = ov.is_some_and(|o| !o.is_visited(id));
    match v {
        VertexRef::Supervisor(_) => {
            let fill = if unused { "#f2f2f2" } else { "#dbe9f6" };
            write!(out, " [shape=hexagon, style=filled, fillcolor=\"{fill}\"")?;
            if g.entry() == id {
                out.write_str(", penwidth=2")?;
            }
        }
        VertexRef::Node(_) => {
            let fill = if unused { "#f2f2f2" } else { "#ffffff" };
            write!(
                out,
                " [shape=box, style=\"rounded,filled\", fillcolor=\"{fill}\""
            )?;
            if exit {
                out.write_str(", peripheries=2")?;
            }
        }
    }
    if unused {
        write!(out, ", color=\"{UNUSED}\", fontcolor=\"#999999\"")?;
    }
    out.write_str(", label=\"")?;
    super::vertex_label(&mut DotLabel(out, "\\n"), g, v, exit, options)?;
    out.write_char('"')?;
    if let Some(d) = v.description() {
        out.write_str(", tooltip=\"")?;
        dot_label(out, d)?;
        out.write_char('"')?;
    }
    out.write_str("];\n")
}

/// One drawn edge. `taken` is `None` without a trace, else whether the run took it.
fn write_edge(
    out: &mut impl Write,
    e: &EdgeView<'_>,
    taken: Option<bool>,
    fell_back: bool,
    steps: &str,
) -> fmt::Result {
    out.write_str("  ")?;
    quoted(out, e.from)?;
    out.write_str(" -> ")?;
    quoted(out, e.to)?;
    let (style, mut color, mut penwidth, label) = match e.kind {
        Drawn::Dispatch => ("solid", None, None, e.is_fallback.then_some("fallback")),
        Drawn::Return => ("solid", Some("#777777"), Some("0.6"), None),
        Drawn::Handoff => ("bold", None, None, None),
        Drawn::Call => ("dotted", None, Some("1.5"), Some("call")),
        Drawn::Fallback => ("dashed", Some(FALLBACK), None, Some("fallback")),
        Drawn::Route => ("bold", None, None, Some("route")),
        Drawn::Advice => ("dashed", None, None, Some("advice")),
        Drawn::Clarify => ("dashed", None, Some("1.5"), Some("clarify")),
        Drawn::Team => ("dotted", Some(TEAM), None, Some("team")),
    };
    match (taken, fell_back) {
        (_, true) => {
            color = Some(FALLBACK);
            penwidth = Some("2.5");
        }
        (Some(true), false) => {
            color = Some(TAKEN);
            penwidth = Some("2.5");
        }
        (Some(false), false) => color = Some(UNUSED),
        (None, false) => {}
    }
    write!(out, " [style={style}")?;
    if let Some(c) = color {
        write!(out, ", color=\"{c}\", fontcolor=\"{c}\"")?;
    }
    if let Some(p) = penwidth {
        write!(out, ", penwidth={p}")?;
    }
    if e.kind == Drawn::Return {
        out.write_str(", arrowsize=0.6")?;
    }
    match (label, steps.is_empty()) {
        (Some(l), true) => write!(out, ", label=\"{l}\"")?,
        (Some(l), false) => write!(out, ", label=\"{l}\\n{steps}\"")?,
        (None, false) => write!(out, ", label=\"{steps}\"")?,
        (None, true) => {}
    }
    if let Some(sub) = e.subgraph {
        let what = match e.kind {
            Drawn::Route => "route to",
            Drawn::Clarify => "clarify",
            _ => "call",
        };
        write!(out, ", tooltip=\"{what} ")?;
        dot_label(out, sub)?;
        out.write_char('"')?;
    }
    out.write_str("];\n")
}

/// Transitions without a drawn edge, and guard-stop markers.
fn write_overlay_extras(out: &mut impl Write, g: &CompiledGraph, o: &Overlay) -> fmt::Result {
    let mut steps = String::new();
    for e in &o.extra {
        steps.clear();
        overlay::step_list(&e.steps, &mut steps);
        out.write_str("  ")?;
        quoted(out, &e.from)?;
        out.write_str(" -> ")?;
        quoted(out, &e.to)?;
        write!(
            out,
            " [style=dashed, color=\"{TAKEN}\", fontcolor=\"{TAKEN}\", penwidth=2.5, label=\"{}\\n{steps}\"",
            e.kind
        )?;
        if let Some(c) = e.from_cluster.as_deref()
            && ltail(g, Some(c), &e.from, &e.to)
        {
            out.write_str(", ltail=\"cluster_")?;
            dot_id(out, c)?;
            out.write_char('"')?;
        }
        out.write_str("];\n")?;
    }
    for (k, stop) in o.stops.iter().enumerate() {
        let id = marker_id(g, k);
        out.write_str("  ")?;
        quoted(out, &id)?;
        write!(
            out,
            " [shape=octagon, style=filled, fillcolor=\"{TAKEN}\", color=\"{TAKEN}\", fontcolor=\"#ffffff\", label=\"guard stop\\n"
        )?;
        dot_label(out, &stop.reason)?;
        out.write_str("\"];\n")?;
        if let Some(at) = &stop.at {
            out.write_str("  ")?;
            quoted(out, at)?;
            out.write_str(" -> ")?;
            quoted(out, &id)?;
            writeln!(
                out,
                " [style=bold, color=\"{TAKEN}\", fontcolor=\"{TAKEN}\", label=\"{}\"];",
                stop.step
            )?;
        }
    }
    Ok(())
}

/// `stop_<k>`, with `_` appended until no supervisor or node has that id.
pub(super) fn marker_id(g: &CompiledGraph, k: usize) -> String {
    let mut id = format!("stop_{}", k + 1);
    while g.index_of(&id).is_some() {
        id.push('_');
    }
    id
}
