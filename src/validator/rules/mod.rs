//! One rule per file, run in the order of [`ALL`].

mod advisors;
mod agent_models;
mod agent_sites;
mod agent_templates;
mod agent_tools;
mod agent_turns;
mod allowlist;
mod boundary;
mod budgets;
mod chat;
mod clarification;
mod exits;
mod handoff;
mod info;
mod membership;
mod model_params;
mod reachability;
mod recursion;
mod references;
mod retry;
mod router_cycles;
mod router_destinations;
mod router_message;
mod router_terminal;
mod schema_fit;
mod schemas;
mod slice_names;
mod system;
mod team;
mod terminal_handoff;
mod tool_dispatch;
mod tool_nodes;

use super::{Context, Diagnostic};

/// A rule: a name and the function that appends its diagnostics in declaration order.
pub(crate) struct Rule {
    /// Short name, for documentation and debugging.
    #[allow(dead_code)]
    pub name: &'static str,
    /// Appends the rule's findings.
    pub check: fn(&Context<'_>, &mut Vec<Diagnostic>),
}

/// Every rule, in the order their diagnostics are reported.
pub(crate) const ALL: &[Rule] = &[
    Rule {
        name: "references",
        check: references::check,
    },
    Rule {
        name: "system",
        check: system::check,
    },
    Rule {
        name: "clarification",
        check: clarification::check,
    },
    Rule {
        name: "slice_names",
        check: slice_names::check,
    },
    Rule {
        name: "boundary",
        check: boundary::check,
    },
    Rule {
        name: "allowlist",
        check: allowlist::check,
    },
    Rule {
        name: "membership",
        check: membership::check,
    },
    Rule {
        name: "reachability",
        check: reachability::check,
    },
    Rule {
        name: "exits",
        check: exits::check,
    },
    Rule {
        name: "recursion",
        check: recursion::check,
    },
    Rule {
        name: "handoff",
        check: handoff::check,
    },
    Rule {
        name: "terminal_handoff",
        check: terminal_handoff::check,
    },
    Rule {
        name: "router_destinations",
        check: router_destinations::check,
    },
    Rule {
        name: "router_message",
        check: router_message::check,
    },
    Rule {
        name: "router_terminal",
        check: router_terminal::check,
    },
    Rule {
        name: "router_cycles",
        check: router_cycles::check,
    },
    Rule {
        name: "advisors",
        check: advisors::check,
    },
    Rule {
        name: "chat",
        check: chat::check,
    },
    Rule {
        name: "team",
        check: team::check,
    },
    Rule {
        name: "schemas",
        check: schemas::check,
    },
    Rule {
        name: "budgets",
        check: budgets::check,
    },
    Rule {
        name: "retry",
        check: retry::check,
    },
    Rule {
        name: "agent_models",
        check: agent_models::check,
    },
    Rule {
        name: "model_params",
        check: model_params::check,
    },
    Rule {
        name: "agent_templates",
        check: agent_templates::check,
    },
    Rule {
        name: "agent_tools",
        check: agent_tools::check,
    },
    Rule {
        name: "agent_turns",
        check: agent_turns::check,
    },
    Rule {
        name: "tool_dispatch",
        check: tool_dispatch::check,
    },
    Rule {
        name: "tool_nodes",
        check: tool_nodes::check,
    },
    Rule {
        name: "info",
        check: info::check,
    },
];

/// Test helpers shared by the rules' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::contracts::WorkflowDocument;
    use crate::graph::{CompiledGraph, GraphBuilder};
    use crate::validator::{Code, Context, Diagnostic};

    /// Parses a JSON document and builds it (partial graph on unresolved ids).
    pub fn graph(json: serde_json::Value) -> CompiledGraph {
        let doc = WorkflowDocument::from_value(json).expect("test document deserializes");
        match GraphBuilder::from_document(doc).build() {
            Ok(g) => g,
            Err(f) => f.into_partial(),
        }
    }

    /// Runs one rule over a document and returns `(code, pointer)` pairs.
    pub fn run(
        check: fn(&Context<'_>, &mut Vec<Diagnostic>),
        json: serde_json::Value,
    ) -> Vec<(Code, String)> {
        let g = graph(json);
        let ctx = Context::new(&g);
        let mut out = Vec::new();
        check(&ctx, &mut out);
        out.into_iter().map(|d| (d.code, d.pointer)).collect()
    }

    /// A small valid workflow with agents: `reply` runs an agent on the `default` model
    /// that may call the tool node `lookup`.
    pub fn agents() -> serde_json::Value {
        serde_json::json!({
            "workflow": "a",
            "slices": {"request": {}, "answer": {}},
            "models": {"default": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}},
            "entry": "root",
            "supervisors": {"root": {"allow": ["reply"], "default": {"stop_global": {}}}},
            "nodes": {
                "reply": {"supervisor": "root", "reads": ["request"], "writes": ["answer"],
                          "triggers": [{"when": true}], "terminal": true,
                          "run": {"agent": {
                              "instructions": "You answer questions about {{ request.topic }}.",
                              "prompt": "{{ input | tojson }}",
                              "tools": ["lookup"]}}},
                "lookup": {"supervisor": "root",
                           "tool": {"description": "Looks an order up by its id.",
                                    "parameters": {"type": "object",
                                                   "properties": {"id": {"type": "string"}},
                                                   "required": ["id"]}},
                           "run": {"exec": {"argv": ["python3", "lookup.py"]}}}
            }
        })
    }

    /// A small valid workflow: root calls subgraph `sub`, which runs `work`.
    pub fn base() -> serde_json::Value {
        serde_json::json!({
            "workflow": "t",
            "slices": {"request": {}, "out": {}, "answer": {}},
            "entry": "root",
            "supervisors": {
                "root": {"allow": ["sub", "reply"], "default": {"stop_global": {}}},
                "sub_sup": {"allow": ["work"]}
            },
            "subgraphs": {
                "sub": {"entrypoint": "sub_sup", "supervisors": ["sub_sup"],
                        "reads": ["request"], "writes": ["out"],
                        "triggers": [{"priority": 2, "when": {"path": "/out", "exists": false}}]}
            },
            "nodes": {
                "work": {"supervisor": "sub_sup", "reads": ["request"], "writes": ["out"],
                         "triggers": [{"when": {"path": "/out", "exists": false}}]},
                "reply": {"supervisor": "root", "reads": ["out"], "writes": ["answer"],
                          "triggers": [{"when": true}], "terminal": true}
            }
        })
    }
}
