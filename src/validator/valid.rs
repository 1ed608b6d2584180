//! A graph the validator has accepted: the only kind of graph the runtime runs.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use super::{Checked, Report, Validator};
use crate::graph::CompiledGraph;

/// A [`CompiledGraph`] that compiled fully (every id resolved) and that the validator
/// found no error in. The runtime takes only this type, so it never meets an unknown id,
/// a supervisor that is not one, or a handoff to a subgraph.
///
/// Made by [`Validator::accept`], [`ValidGraph::new`] or [`Checked::into_valid`]; the
/// report (warnings and infos) stays with it.
#[derive(Debug, Clone)]
pub struct ValidGraph {
    graph: Arc<CompiledGraph>,
    report: Report,
}

/// The validator refused a graph: the graph and the report are handed back.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", describe(self))]
pub struct Rejected {
    /// The graph that was refused (partial when some ids did not resolve).
    pub graph: Box<CompiledGraph>,
    /// Every diagnostic; at least one is an error, or the graph did not compile fully.
    pub report: Report,
}

fn describe(r: &Rejected) -> String {
    let problems = r.graph.problems();
    let first = r
        .report
        .diagnostics
        .iter()
        .find(|d| d.severity == super::Severity::Error);
    match (first, problems.first()) {
        (Some(d), _) => format!(
            "workflow `{}` is not valid ({} error(s)); first: {d}",
            r.graph.workflow(),
            r.report.count(super::Severity::Error)
        ),
        (None, Some(p)) => format!("workflow `{}` did not compile: {p}", r.graph.workflow()),
        (None, None) => format!("workflow `{}` was refused", r.graph.workflow()),
    }
}

impl ValidGraph {
    /// Validates `graph` with the default (non-strict) [`Validator`].
    pub fn new(graph: CompiledGraph) -> Result<Self, Rejected> {
        Validator::new().accept(graph)
    }

    /// The graph.
    pub fn graph(&self) -> &CompiledGraph {
        &self.graph
    }

    /// The graph, shared.
    pub fn shared(&self) -> Arc<CompiledGraph> {
        Arc::clone(&self.graph)
    }

    /// What the validator said (no errors: warnings and infos only).
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The graph, no longer marked valid (to change it and validate it again).
    pub fn into_graph(self) -> CompiledGraph {
        Arc::unwrap_or_clone(self.graph)
    }
}

impl Deref for ValidGraph {
    type Target = CompiledGraph;
    fn deref(&self) -> &CompiledGraph {
        &self.graph
    }
}

impl TryFrom<CompiledGraph> for ValidGraph {
    type Error = Rejected;
    fn try_from(graph: CompiledGraph) -> Result<Self, Rejected> {
        Self::new(graph)
    }
}

impl Validator {
    /// Validates `graph` and marks it valid when it compiled fully and no diagnostic is an
    /// error; otherwise hands the graph back with the report.
    pub fn accept(&self, graph: CompiledGraph) -> Result<ValidGraph, Rejected> {
        let report = self.validate(&graph);
        if report.has_errors() || !graph.problems().is_empty() {
            return Err(Rejected {
                graph: Box::new(graph),
                report,
            });
        }
        Ok(ValidGraph {
            graph: Arc::new(graph),
            report,
        })
    }
}

impl Checked {
    /// The validated graph when the file is runnable (see [`Checked::is_runnable`]);
    /// otherwise `self`, unchanged, to report from.
    pub fn into_valid(self) -> Result<ValidGraph, Box<Checked>> {
        if !self.is_runnable() {
            return Err(Box::new(self));
        }
        match self.graph {
            Some(graph) => Ok(ValidGraph {
                graph: Arc::new(graph),
                report: self.report,
            }),
            None => Err(Box::new(self)),
        }
    }
}

impl fmt::Display for ValidGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "valid workflow `{}`", self.graph.workflow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GraphBuilder, NodeContract, SliceDecl, SupervisorContract};

    fn graph(allow: &str) -> CompiledGraph {
        GraphBuilder::new("w")
            .slice("answer", SliceDecl::new())
            .entry("root")
            .supervisor(SupervisorContract::new("root").allow([allow]))
            .node(
                NodeContract::new("reply")
                    .supervisor("root")
                    .writes(["answer"])
                    .terminal(true),
            )
            .build()
            .expect("ids resolve")
    }

    #[test]
    fn accepts_a_valid_graph_and_keeps_its_report() {
        let valid = ValidGraph::new(graph("reply")).expect("valid");
        assert_eq!(valid.workflow(), "w");
        assert!(!valid.report().has_errors());
    }

    #[test]
    fn a_refused_graph_comes_back_with_the_report() {
        // `root` allows an id that names nothing: an error, not a panic later.
        let partial = match GraphBuilder::new("w")
            .slice("answer", SliceDecl::new())
            .entry("root")
            .supervisor(SupervisorContract::new("root").allow(["ghost"]))
            .build()
        {
            Ok(g) => g,
            Err(f) => f.into_partial(),
        };
        let err = ValidGraph::new(partial).expect_err("refused");
        assert_eq!(err.graph.workflow(), "w");
        assert!(err.report.has_errors(), "{:?}", err.report);
        assert!(err.to_string().contains("ghost"), "{err}");
    }
}
