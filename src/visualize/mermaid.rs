//! Mermaid `flowchart` writer.
//!
//! Mermaid ids are restrictive, so vertices are named `n<i>` (their index in the compiled
//! graph: supervisors then nodes, in declaration order), clusters `g<i>` (declaration
//! order), guard-stop markers `x<i>`, team clusters `t<i>` and their broadcast hubs
//! `h<i>` (team order); labels carry the real ids. The workflow's name
//! is the diagram's `title` (front matter).

use std::fmt::{self, Write};

use super::dot::{FALLBACK, TAKEN, UNUSED};
use super::escape::mermaid_label;
use super::overlay::{self, Drawn, Overlay};
use super::team::Teams;
use super::{
    DotOptions, LabelSink, Nesting, VertexRef, cluster_label, exitpoints, members, root_members,
};
use crate::graph::CompiledGraph;

struct MermaidLabel<'w, W>(&'w mut W);

impl<W: Write> LabelSink for MermaidLabel<'_, W> {
    fn text(&mut self, s: &str) -> fmt::Result {
        mermaid_label(self.0, s)
    }
    fn br(&mut self) -> fmt::Result {
        self.0.write_str("<br/>")
    }
}

fn indent(out: &mut impl Write, level: usize) -> fmt::Result {
    for _ in 0..level.min(super::dot::MAX_INDENT) {
        out.write_str("  ")?;
    }
    Ok(())
}

/// Writes the Mermaid id of a vertex (`n<index>`).
fn vid(out: &mut impl Write, g: &CompiledGraph, id: &str) -> fmt::Result {
    match g.index_of(id) {
        Some(ix) => write!(out, "n{}", ix.index()),
        // Unreachable for a vertex of the graph; keeps the output well-formed anyway.
        None => out.write_str("unknown"),
    }
}

/// Link indices by the style they get, written as `linkStyle` lines at the end.
#[derive(Default)]
struct LinkStyles {
    thin: Vec<usize>,
    fallback: Vec<usize>,
    taken: Vec<usize>,
    fell_back: Vec<usize>,
    unused: Vec<usize>,
}

impl LinkStyles {
    fn write(&self, out: &mut impl Write) -> fmt::Result {
        let groups: [(&[usize], String); 5] = [
            (&self.thin, "stroke-width:1px,stroke:#777777".to_string()),
            (&self.fallback, format!("stroke:{FALLBACK}")),
            (&self.unused, format!("stroke:{UNUSED}")),
            (&self.taken, format!("stroke:{TAKEN},stroke-width:3px")),
            (
                &self.fell_back,
                format!("stroke:{FALLBACK},stroke-width:3px"),
            ),
        ];
        for (links, style) in groups {
            if links.is_empty() {
                continue;
            }
            out.write_str("  linkStyle ")?;
            for (i, l) in links.iter().enumerate() {
                if i > 0 {
                    out.write_char(',')?;
                }
                write!(out, "{l}")?;
            }
            writeln!(out, " {style}")?;
        }
        Ok(())
    }
}

/// Writes `graph` as a Mermaid flowchart into `out`: the same information as the DOT
/// output (see the [module docs](super)).
///
/// Complexity: O(V + E) in the graph, plus O(T) in the trace.
pub fn write_mermaid<W: Write>(
    out: &mut W,
    graph: &CompiledGraph,
    options: &DotOptions<'_>,
) -> fmt::Result {
    let g = graph;
    let ov = options.trace.map(|t| overlay::overlay(g, t));
    let exits = exitpoints(g);
    let nesting = Nesting::of(g);

    // The workflow's name as the diagram title (front matter is YAML; a JSON string is a
    // valid YAML double-quoted scalar, escapes included).
    if let Ok(title) = serde_json::to_string(g.workflow()) {
        writeln!(out, "---\ntitle: {title}\n---")?;
    }
    out.write_str("flowchart TB\n")?;
    let teams = Teams::of(g);
    let plain = |out: &mut W, v: VertexRef<'_>, level: usize| {
        indent(out, level)?;
        vid(out, g, v.id())?;
        let exit = !exits.is_empty() && exits.contains(v.id());
        let (open, close) = match (v, exit) {
            (VertexRef::Supervisor(_), _) => ("{{\"", "\"}}"),
            (VertexRef::Node(_), true) => ("([\"", "\"])"),
            (VertexRef::Node(_), false) => ("(\"", "\")"),
        };
        out.write_str(open)?;
        super::vertex_label(&mut MermaidLabel(out), g, v, exit, options)?;
        out.write_str(close)?;
        out.write_char('\n')
    };
    let vertex = |out: &mut W, v: VertexRef<'_>, level: usize| {
        if teams.claimed.contains(v.id()) {
            // Drawn in its team's cluster, next to the team node.
            return Ok(());
        }
        plain(out, v, level)?;
        if let Some((i, t)) = teams.of_node(v.id()) {
            indent(out, level)?;
            write!(out, "subgraph t{i}[\"")?;
            MermaidLabel(out).text("team ")?;
            MermaidLabel(out).text(t.node)?;
            if let Some(n) = ov.as_ref().and_then(|o| o.team_cycles.get(t.node)) {
                write!(out, "<br/>{n} cycle(s)")?;
            }
            out.write_str("\"]\n")?;
            indent(out, level + 1)?;
            writeln!(out, "h{i}((\"broadcast\"))")?;
            let drawn = t
                .drawn
                .iter()
                .copied()
                .chain(t.lead.filter(|_| t.draws_lead));
            for p in drawn.filter_map(|p| g.registry().get_node(p)) {
                plain(out, VertexRef::Node(p), level + 1)?;
            }
            indent(out, level)?;
            out.write_str("end\n")?;
        }
        Ok(())
    };
    for v in root_members(g) {
        vertex(out, v, 1)?;
    }
    nesting.walk(
        out,
        |out, i, level| {
            indent(out, level)?;
            write!(out, "subgraph g{i}[\"")?;
            cluster_label(&mut MermaidLabel(out), g, i, options)?;
            out.write_str("\"]\n")?;
            for v in members(g, i) {
                vertex(out, v, level + 1)?;
            }
            Ok(())
        },
        |out, level| {
            indent(out, level)?;
            out.write_str("end\n")
        },
    )?;

    let mut styles = LinkStyles::default();
    let mut link = 0usize;
    let mut steps = String::new();
    for (i, e) in overlay::drawn_edges(g).enumerate() {
        steps.clear();
        let (arrow, label) = match e.kind {
            Drawn::Dispatch => ("-->", e.is_fallback.then_some("fallback")),
            Drawn::Return => ("-->", None),
            Drawn::Handoff => ("==>", None),
            Drawn::Call => ("-.->", Some("call")),
            Drawn::Fallback => ("-.->", Some("fallback")),
            Drawn::Route => ("==>", Some("route")),
            Drawn::Advice => ("-.->", Some("advice")),
            Drawn::Clarify => ("-.->", Some("clarify")),
            Drawn::Team => ("-.->", Some("team")),
        };
        match &ov {
            Some(o) => {
                let s = o.steps.get(i).map(Vec::as_slice).unwrap_or(&[]);
                overlay::step_list(s, &mut steps);
                if o.fell_back.contains(&i) {
                    styles.fell_back.push(link);
                } else if !s.is_empty() {
                    styles.taken.push(link);
                } else {
                    styles.unused.push(link);
                }
            }
            None => match e.kind {
                Drawn::Return => styles.thin.push(link),
                Drawn::Fallback => styles.fallback.push(link),
                _ => {}
            },
        }
        out.write_str("  ")?;
        vid(out, g, e.from)?;
        write!(out, " {arrow}")?;
        edge_label(out, label, &steps)?;
        out.write_char(' ')?;
        vid(out, g, e.to)?;
        out.write_char('\n')?;
        link += 1;
    }
    // Teams' hub links: members to the hub both ways, the hub to the lead.
    for (i, t) in teams.list.iter().enumerate() {
        for m in &t.members {
            out.write_str("  ")?;
            vid(out, g, m)?;
            writeln!(out, " <-.-> h{i}")?;
            link += 1;
        }
        if let Some(lead) = t.lead {
            write!(out, "  h{i} -.->|\"lead\"| ")?;
            vid(out, g, lead)?;
            out.write_char('\n')?;
            link += 1;
        }
    }
    if let Some(o) = &ov {
        write_extras(out, g, o, &mut styles, link)?;
    }
    styles.write(out)
}

fn edge_label(out: &mut impl Write, label: Option<&str>, steps: &str) -> fmt::Result {
    match (label, steps.is_empty()) {
        (None, true) => Ok(()),
        (label, _) => {
            out.write_str("|\"")?;
            if let Some(l) = label {
                mermaid_label(out, l)?;
                if !steps.is_empty() {
                    out.write_str("<br/>")?;
                }
            }
            mermaid_label(out, steps)?;
            out.write_str("\"|")
        }
    }
}

fn write_extras(
    out: &mut impl Write,
    g: &CompiledGraph,
    o: &Overlay,
    styles: &mut LinkStyles,
    mut link: usize,
) -> fmt::Result {
    let mut steps = String::new();
    for e in &o.extra {
        steps.clear();
        overlay::step_list(&e.steps, &mut steps);
        out.write_str("  ")?;
        match e
            .from_cluster
            .as_deref()
            .and_then(|c| g.clusters().get_index_of(c))
        {
            Some(c) => write!(out, "g{c}")?,
            None => vid(out, g, &e.from)?,
        }
        out.write_str(" -.->")?;
        edge_label(out, Some(e.kind), &steps)?;
        out.write_char(' ')?;
        vid(out, g, &e.to)?;
        out.write_char('\n')?;
        styles.taken.push(link);
        link += 1;
    }
    let mut unvisited = g
        .registry()
        .supervisors()
        .map(|s| s.id.as_str())
        .chain(g.registry().nodes().map(|n| n.id.as_str()))
        .filter(|id| !o.is_visited(id))
        .peekable();
    if unvisited.peek().is_some() {
        out.write_str("  classDef unvisited fill:#f2f2f2,stroke:#bbbbbb,color:#999999\n")?;
        out.write_str("  class ")?;
        for (i, id) in unvisited.enumerate() {
            if i > 0 {
                out.write_char(',')?;
            }
            vid(out, g, id)?;
        }
        out.write_str(" unvisited\n")?;
    }
    for (k, stop) in o.stops.iter().enumerate() {
        write!(out, "  x{k}{{{{\"guard stop<br/>")?;
        mermaid_label(out, &stop.reason)?;
        out.write_str("\"}}\n")?;
        if let Some(at) = &stop.at {
            out.write_str("  ")?;
            vid(out, g, at)?;
            writeln!(out, " ==>|\"{}\"| x{k}", stop.step)?;
            styles.taken.push(link);
            link += 1;
        }
    }
    if !o.stops.is_empty() {
        writeln!(
            out,
            "  classDef stop fill:{TAKEN},stroke:{TAKEN},color:#ffffff"
        )?;
        out.write_str("  class ")?;
        for k in 0..o.stops.len() {
            if k > 0 {
                out.write_char(',')?;
            }
            write!(out, "x{k}")?;
        }
        out.write_str(" stop\n")?;
    }
    Ok(())
}
