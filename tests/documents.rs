//! Workflow documents: contract round-trips, shipped examples, strict loading, schema.

#[cfg(feature = "yaml")]
use std::path::PathBuf;

use pactgraph::contracts::LoadError;
#[cfg(feature = "yaml")]
use pactgraph::contracts::document_schema;
use pactgraph::contracts::{
    Budgets, Condition, DocumentFormat, ExecSpec, NodeBehaviour, NodeContract, RoutingDecision,
    SliceDecl, SubgraphContract, SupervisorContract, SupervisorPolicy, Trigger, WorkflowDocument,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

fn round_trip<T>(value: &T) -> T
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    round_trip_with(value, |t| t)
}

/// Round trip with a fix-up applied to the result before comparing (contracts get their
/// id back from the document key, not from their own body).
fn round_trip_with<T>(value: &T, fix: impl Fn(T) -> T) -> T
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(value).unwrap();
    let back: T = fix(serde_json::from_str(&text).unwrap());
    assert_eq!(&back, value, "{text}");
    back
}

fn full_node() -> NodeContract {
    NodeContract::new("trend")
        .description("finds a trend")
        .supervisor("fashion_supervisor")
        .reads(["request"])
        .writes(["fashion"])
        .trigger(Trigger::new(5, Condition::missing("/fashion")))
        .run(NodeBehaviour::set([(
            "fashion",
            json!({"trend": "wide-leg"}),
        )]))
        .terminal(true)
        .handoff("next")
        .max_visits(3)
        .input_schema(json!({"type": "object"}))
        .output_schema(json!({"type": "object", "required": ["fashion"]}))
}

#[test]
fn every_contract_type_round_trips() {
    // Ids are document keys, not fields: a round trip of one contract keeps the rest.
    let node = round_trip_with(&full_node(), |n| n.with_id("trend"));
    assert_eq!(node.handoff.as_deref(), Some("next"));
    let sup = SupervisorContract::new("s")
        .description("d")
        .allow(["a", "g"])
        .fallback("a")
        .default_decision(RoutingDecision::stop_global("nothing"))
        .policy(SupervisorPolicy::Exec(
            ExecSpec::new(["./decide.py", "--fast"]).timeout_ms(500),
        ))
        .honor_should_end(false);
    round_trip_with(&sup, |s| s.with_id("s"));
    let handler_sup = SupervisorContract::new("h").handler("pick");
    round_trip_with(&handler_sup, |s| s.with_id("h"));
    let sub = SubgraphContract::new("g")
        .description("d")
        .entrypoint("s")
        .supervisors(["s", "s2"])
        .reads(["request"])
        .writes(["fashion"])
        .trigger(Trigger::default())
        .input_schema(json!({"type": "object"}))
        .output_schema(json!({}))
        .result_slice("answer")
        .exitpoints(["trend"])
        .max_reentry(1);
    round_trip_with(&sub, |s| s.with_id("g"));
    round_trip(
        &SliceDecl::new()
            .schema(json!({"type": "object"}))
            .description("x"),
    );
    round_trip(
        &Budgets::default()
            .max_depth(3)
            .max_steps(9)
            .max_reentry(1)
            .timeout_ms(5)
            .node_timeout_ms(2),
    );
    round_trip(&Trigger::new(
        -2,
        Condition::Any(vec![Condition::Const(false)]),
    ));
    for b in [
        NodeBehaviour::set([("a", json!(1))]),
        NodeBehaviour::Exec(
            ExecSpec::new(["python3", "x.py"])
                .env("K", "V")
                .cwd("/tmp")
                .timeout_ms(10),
        ),
        NodeBehaviour::handler("h"),
    ] {
        round_trip(&b);
    }
    round_trip(&SupervisorPolicy::Handler("p".into()));
    for d in [
        RoutingDecision::node("n"),
        RoutingDecision::subgraph("g"),
        RoutingDecision::stop_local_with(json!({"x": 1})),
        RoutingDecision::stop_global("r"),
        RoutingDecision::ask("q?"),
        RoutingDecision::fallback("f"),
    ] {
        round_trip(&d);
    }
}

#[test]
fn budgets_default_to_the_brief() {
    let b: Budgets = serde_json::from_str("{}").unwrap();
    assert_eq!((b.max_depth, b.max_steps, b.max_reentry), (2, 40, 2));
    assert_eq!(b, Budgets::default());
}

#[cfg(feature = "yaml")]
fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml" | "yml")
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
#[cfg(feature = "yaml")]
fn shipped_examples_load_and_round_trip_in_both_formats() {
    let files = examples();
    assert!(files.iter().any(|p| p.ends_with("fashion.json")));
    assert!(files.iter().any(|p| p.extension().unwrap() == "yaml"));
    for path in files {
        let (doc, map) =
            WorkflowDocument::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!map.is_empty());
        assert!(!doc.nodes.is_empty(), "{}", path.display());
        for (id, n) in &doc.nodes {
            assert_eq!(&n.id, id);
        }
        // The same document re-read from its JSON serialization is identical.
        let (again, _) =
            WorkflowDocument::parse(&doc.to_json_pretty(), DocumentFormat::Json).unwrap();
        assert_eq!(again, doc);
    }
}

#[test]
#[cfg(feature = "yaml")]
fn yaml_and_json_give_the_same_contracts() {
    let yaml = "workflow: w\nentry: s\nslices: {a: {}}\nsupervisors:\n  s: {allow: [n]}\nnodes:\n  n: {supervisor: s, writes: [a], run: {set: {a: {x: 1.5, y: null}}}}\n";
    let json = r#"{"workflow":"w","entry":"s","slices":{"a":{}},"supervisors":{"s":{"allow":["n"]}},
        "nodes":{"n":{"supervisor":"s","writes":["a"],"run":{"set":{"a":{"x":1.5,"y":null}}}}}}"#;
    let (y, _) = WorkflowDocument::parse(yaml, DocumentFormat::Yaml).unwrap();
    let (j, _) = WorkflowDocument::parse(json, DocumentFormat::Json).unwrap();
    assert_eq!(y, j);
}

#[cfg(feature = "yaml")]
fn line_col(e: &LoadError) -> (usize, usize) {
    let s = e.span().expect("error carries a location");
    (s.line, s.column)
}

#[test]
#[cfg(feature = "yaml")]
fn duplicate_keys_are_rejected_with_line_and_column() {
    let json = "{\n  \"workflow\": \"w\",\n  \"entry\": \"s\",\n  \"nodes\": {\n    \"n\": {\"supervisor\": \"s\"},\n    \"n\": {\"supervisor\": \"s\"}\n  }\n}";
    let e = WorkflowDocument::parse(json, DocumentFormat::Json).unwrap_err();
    assert!(
        matches!(&e, LoadError::DuplicateKey { key, parent, .. } if key == "n" && parent == "/nodes"),
        "{e}"
    );
    assert_eq!(line_col(&e), (6, 5));
    assert!(
        e.to_string().contains("duplicate key `n` in `/nodes`"),
        "{e}"
    );
    assert!(e.to_string().contains("first at line 5, column 5"), "{e}");

    let yaml = "workflow: w\nentry: s\nentry: t\n";
    let e = WorkflowDocument::parse(yaml, DocumentFormat::Yaml).unwrap_err();
    assert!(
        matches!(&e, LoadError::DuplicateKey { key, .. } if key == "entry"),
        "{e}"
    );
    assert_eq!(line_col(&e), (3, 1));
}

#[test]
#[cfg(feature = "yaml")]
fn unknown_fields_are_rejected_with_pointer_line_and_column() {
    let json = "{\n  \"workflow\": \"w\",\n  \"entry\": \"s\",\n  \"nodes\": {\n    \"n\": {\"supervisor\": \"s\", \"wrtes\": []}\n  }\n}";
    let e = WorkflowDocument::parse(json, DocumentFormat::Json).unwrap_err();
    match &e {
        LoadError::Invalid {
            message, pointer, ..
        } => {
            assert_eq!(pointer, "/nodes/n/wrtes");
            assert!(message.contains("unknown field `wrtes`"), "{message}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(line_col(&e), (5, 30));

    let yaml = "workflow: w\nentry: s\nbudgets:\n  max_step: 3\n";
    let e = WorkflowDocument::parse(yaml, DocumentFormat::Yaml).unwrap_err();
    assert_eq!(line_col(&e), (4, 3));
    assert!(e.to_string().contains("/budgets/max_step"), "{e}");

    // Inside a condition and a decision too.
    let yaml = "workflow: w\nentry: s\nnodes:\n  n:\n    supervisor: s\n    triggers:\n      - when: {path: /a, exist: true}\n";
    let e = WorkflowDocument::parse(yaml, DocumentFormat::Yaml).unwrap_err();
    assert!(e.to_string().contains("unknown field `exist`"), "{e}");
    assert_eq!(line_col(&e).0, 7);
}

#[test]
fn wrong_types_name_their_place() {
    let e = WorkflowDocument::parse(
        r#"{"workflow":"w","entry":"s","budgets":{"max_steps":"many"}}"#,
        DocumentFormat::Json,
    )
    .unwrap_err();
    match e {
        LoadError::Invalid { pointer, span, .. } => {
            assert_eq!(pointer, "/budgets/max_steps");
            assert_eq!(span.map(|s| s.column), Some(40));
        }
        other => panic!("{other}"),
    }
    let e = WorkflowDocument::parse(r#"{"workflow":"w"}"#, DocumentFormat::Json).unwrap_err();
    assert!(e.to_string().contains("missing field `entry`"), "{e}");
}

#[test]
#[cfg(feature = "yaml")]
fn the_generated_schema_accepts_every_example_and_rejects_typos() {
    let schema = document_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for path in examples() {
        let (doc, _) = WorkflowDocument::load(&path).unwrap();
        let value = serde_json::to_value(&doc).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        // Raw text too (the file as written, not our re-serialization).
        if path.extension().unwrap() == "json" {
            let raw: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert!(validator.is_valid(&raw), "{}", path.display());
        }
    }
    let typo =
        json!({"workflow": "w", "entry": "s", "nodes": {"n": {"supervisor": "s", "wrtes": []}}});
    assert!(!validator.is_valid(&typo));
    let bad_condition = json!({"workflow": "w", "entry": "s", "nodes": {"n": {"supervisor": "s",
        "triggers": [{"when": {"path": "/a", "exist": true}}]}}});
    assert!(!validator.is_valid(&bad_condition));
}

/// `models`, the `agent` behaviour of nodes and policies and `tool` read the same from
/// JSON and YAML, round-trip, and come from the builder methods too.
#[test]
#[cfg(feature = "yaml")]
fn agents_models_and_tools_read_alike_in_both_formats() {
    use pactgraph::contracts::{AgentSpec, ModelSpec, Price, ToolSpec};
    let yaml = r#"workflow: w
slices: {request: {}, answer: {}}
models:
  default:
    base_url: "${OPENAI_BASE_URL:-http://127.0.0.1:11434/v1}"
    model: m
    params: {temperature: 0}
    price: {input_per_mtok: 0.15, output_per_mtok: 0.6}
    stream: true
entry: s
supervisors:
  s:
    allow: [a]
    policy: {agent: {instructions: "Pick from {{ allow }}", max_turns: 2}}
nodes:
  a:
    supervisor: s
    reads: [request]
    writes: [answer]
    run:
      agent:
        prompt: "{{ request.text }}"
        tools: [look]
  look:
    supervisor: s
    tool: {description: Looks., parameters: {type: object}}
    run: {exec: {argv: [python3, look.py]}}
"#;
    let json = r#"{"workflow": "w", "slices": {"request": {}, "answer": {}},
      "models": {"default": {"base_url": "${OPENAI_BASE_URL:-http://127.0.0.1:11434/v1}",
        "model": "m", "params": {"temperature": 0},
        "price": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}, "stream": true}},
      "entry": "s",
      "supervisors": {"s": {"allow": ["a"],
        "policy": {"agent": {"instructions": "Pick from {{ allow }}", "max_turns": 2}}}},
      "nodes": {
        "a": {"supervisor": "s", "reads": ["request"], "writes": ["answer"],
              "run": {"agent": {"prompt": "{{ request.text }}", "tools": ["look"]}}},
        "look": {"supervisor": "s", "tool": {"description": "Looks.", "parameters": {"type": "object"}},
                 "run": {"exec": {"argv": ["python3", "look.py"]}}}}}"#;
    let (y, _) = WorkflowDocument::parse(yaml, DocumentFormat::Yaml).expect("YAML");
    let (j, _) = WorkflowDocument::parse(json, DocumentFormat::Json).expect("JSON");
    assert_eq!(y, j);
    assert_eq!(
        j.models["default"],
        ModelSpec::new("${OPENAI_BASE_URL:-http://127.0.0.1:11434/v1}", "m")
            .param("temperature", json!(0))
            .price(Price {
                input_per_mtok: 0.15,
                output_per_mtok: 0.6
            })
            .stream(true)
    );
    assert_eq!(
        j.nodes["a"].run,
        Some(NodeBehaviour::agent(
            AgentSpec::new()
                .prompt("{{ request.text }}")
                .tools(["look"])
        ))
    );
    assert_eq!(
        j.supervisors["s"],
        SupervisorContract::new("s").allow(["a"]).agent(
            AgentSpec::new()
                .instructions("Pick from {{ allow }}")
                .max_turns(2)
        )
    );
    assert_eq!(
        j.nodes["look"].tool,
        Some(ToolSpec::new("Looks.", json!({"type": "object"})))
    );
    let (again, _) =
        WorkflowDocument::parse(&j.to_json_pretty(), DocumentFormat::Json).expect("reads back");
    assert_eq!(again, j);
}

/// A typo inside `models`, `agent` or `tool` is refused naming its JSON Pointer, line and
/// column, in both formats.
#[test]
#[cfg(feature = "yaml")]
fn typos_in_agents_models_and_tools_are_located() {
    let cases = [
        (
            "{\"workflow\": \"w\", \"entry\": \"s\",\n \"models\": {\"default\": {\"base_url\": \"u\", \"model\": \"m\",\n   \"timeout\": 5}}}",
            DocumentFormat::Json,
            "/models/default/timeout",
            3,
        ),
        (
            "workflow: w\nentry: s\nnodes:\n  a:\n    supervisor: s\n    run:\n      agent: {max_turn: 3}\n",
            DocumentFormat::Yaml,
            "/nodes/a/run/agent/max_turn",
            7,
        ),
        (
            "workflow: w\nentry: s\nnodes:\n  t:\n    supervisor: s\n    tool:\n      description: d\n      schema: {}\n",
            DocumentFormat::Yaml,
            "/nodes/t/tool/schema",
            8,
        ),
    ];
    for (text, format, pointer, line) in cases {
        match WorkflowDocument::parse(text, format).expect_err("a typo") {
            LoadError::Invalid {
                pointer: p, span, ..
            } => {
                assert_eq!(p, pointer);
                assert_eq!(span.map(|s| s.line), Some(line), "{pointer}");
            }
            e => panic!("{pointer}: {e}"),
        }
    }
}
