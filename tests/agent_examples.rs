//! The shipped agent workflows (`examples/workflows/agents/*.json`) load, round-trip,
//! validate with neither errors nor warnings in strict mode (library and CLI), and
//! together cover every pattern with agents: a router, advisors, a team, a supervisor
//! policy, and a node with `final_report` calling a tool.

mod support;

use std::path::PathBuf;
use std::process::Command;

use pactgraph::contracts::{DocumentFormat, NodeBehaviour, SupervisorPolicy, WorkflowDocument};
use pactgraph::validator::{Severity, check_file};
use support::runtime::{builder, graph_file};

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/workflows/agents");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the agents examples folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml")
            )
        })
        .collect();
    files.sort();
    files
}

fn is_agent(b: &Option<NodeBehaviour>) -> bool {
    matches!(b, Some(NodeBehaviour::Agent(_)))
}

#[test]
fn every_agent_example_validates_clean_and_round_trips() {
    let files = examples();
    assert!(files.len() >= 5, "{files:?}");
    for path in &files {
        let shown = path.display();
        let checked = check_file(path, true);
        let report = &checked.report;
        assert!(
            !report.has_errors() && report.count(Severity::Warning) == 0,
            "{shown}: {:#?}",
            report.diagnostics
        );
        assert!(checked.is_runnable(), "{shown}");
        let (doc, _) = WorkflowDocument::load(path).unwrap_or_else(|e| panic!("{shown}: {e}"));
        let (again, _) = WorkflowDocument::parse(&doc.to_json_pretty(), DocumentFormat::Json)
            .unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(again, doc, "{shown}");
        // One environment variable points every example at a server; another picks the
        // model.
        let default = doc.models.get("default").expect("a `default` model");
        assert!(
            default.base_url.starts_with("${OPENAI_BASE_URL:-"),
            "{shown}"
        );
        assert!(default.model.starts_with("${PACTGRAPH_MODEL:-"), "{shown}");
        let agents = doc.nodes.values().filter(|n| is_agent(&n.run)).count()
            + doc
                .supervisors
                .values()
                .filter(|s| matches!(s.policy, Some(SupervisorPolicy::Agent(_))))
                .count();
        assert!(agents > 0, "{shown}: no agent");
    }
}

#[test]
fn the_examples_cover_every_pattern_with_agents() {
    let docs: Vec<WorkflowDocument> = examples()
        .iter()
        .map(|p| WorkflowDocument::load(p).expect("loads").0)
        .collect();
    let nodes = || docs.iter().flat_map(|d| d.nodes.values());
    let agent = |id: &str, d: &WorkflowDocument| d.nodes.get(id).is_some_and(|n| is_agent(&n.run));
    assert!(
        nodes().any(|n| n.router.is_some() && is_agent(&n.run)),
        "a router agent"
    );
    assert!(
        docs.iter()
            .any(|d| d.nodes.values().any(|n| is_agent(&n.run)
                && n.advisors
                    .as_ref()
                    .is_some_and(|a| a.members.iter().all(|m| agent(m, d))))),
        "an agent with agent advisors"
    );
    assert!(
        docs.iter().any(|d| d.nodes.values().any(|n| n
            .team
            .as_ref()
            .is_some_and(|t| { agent(&t.lead, d) && t.members.iter().all(|m| agent(m, d)) }))),
        "a team of agents"
    );
    assert!(
        docs.iter().any(|d| d
            .supervisors
            .values()
            .any(|s| matches!(s.policy, Some(SupervisorPolicy::Agent(_))))),
        "a supervisor with an agent policy"
    );
    assert!(
        docs.iter().any(|d| d.nodes.values().any(|n| match &n.run {
            Some(NodeBehaviour::Agent(a)) =>
                !n.writes.is_empty()
                    && !a.tools.is_empty()
                    && a.tools.iter().all(|t| d.nodes[t].tool.is_some()),
            _ => false,
        })),
        "a node with final_report that calls a tool"
    );
    assert!(
        nodes().any(|n| n.tool.is_some() && is_agent(&n.run)),
        "an agent called as a tool"
    );
}

#[test]
fn the_cli_validates_them_strictly() {
    for path in examples() {
        let o = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
            .args(["validate", "--strict"])
            .arg(&path)
            .output()
            .expect("the binary runs");
        let text =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{}: {text}", path.display());
        assert!(
            text.contains("0 errors, 0 warnings"),
            "{}: {text}",
            path.display()
        );
    }
}

/// `validate` underlines a template's unknown name where it stands in the file (not the
/// template's key), in the human report, and gives that place in the JSON report.
#[test]
fn a_template_mistake_is_shown_where_it_stands() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("bad.json");
    let text = r#"{"workflow": "w", "slices": {"request": {}, "answer": {}},
 "models": {"default": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}},
 "entry": "root",
 "supervisors": {"root": {"allow": ["reply"], "default": {"stop_global": {}}}},
 "nodes": {"reply": {"supervisor": "root", "reads": ["request"], "writes": ["answer"],
   "triggers": [{"when": true}], "terminal": true,
   "run": {"agent": {"prompt": "Say \"hi\" to {{ request.name }} about {{ ticket.id }}"}}}}}
"#;
    std::fs::write(&path, text).expect("written");
    let run = |format: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
            .args(["validate", "--format", format])
            .arg(&path)
            .output()
            .expect("the binary runs");
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let human = run("human");
    let line = text.lines().nth(6).expect("line 7");
    let column = line.find("ticket").expect("ticket") + 1;
    assert!(human.contains(&format!("bad.json:7:{column}")), "{human}");
    let marks = human
        .lines()
        .find(|l| l.contains("^^^^^^ /nodes/reply/run/agent/prompt"))
        .expect("an underline");
    let at = marks.find('^').expect("a caret");
    let shown = human
        .lines()
        .find(|l| l.contains("{{ ticket.id }}"))
        .expect("the line shown");
    assert_eq!(&shown[at..at + 6], "ticket", "{human}");
    let json: serde_json::Value = serde_json::from_str(&run("json")).expect("JSON report");
    let d = &json[0];
    assert_eq!(d["code"], "PG1204");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(7), Some(column as u64))
    );
}

/// Proves that an agent needs the `agents` feature and says so: with it, the executor of
/// an agent example builds (its model client is made; nothing is called); without it,
/// `build()` refuses the workflow, naming the agent node and where its behaviour stands,
/// instead of a run that would fail at its first model call.
#[test]
fn an_agent_is_refused_at_build_without_the_agents_feature() {
    let built = builder(graph_file("examples/workflows/agents/agent_tool_call.json"))
        .base_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/workflows/agents"))
        .build();
    if cfg!(feature = "agents") {
        assert!(built.is_ok(), "{:?}", built.err());
    } else {
        match built {
            Err(pactgraph::runtime::ExecutorBuildError::Agent {
                id,
                message,
                pointer,
            }) => {
                assert_eq!(id, "support");
                assert_eq!(pointer, "/nodes/support/run/agent");
                assert!(message.contains("`agents` feature"), "{message}");
            }
            other => panic!("expected the agent refused, got {:?}", other.err()),
        }
    }
}
