//! Property test of the validator: for all documents (arbitrary contracts, ids that do
//! or do not resolve, any slice names, schemas, decisions and agents), building and
//! validating, strict or not, and rendering the report never panic.

use pactgraph::contracts::{
    AgentSpec, Condition, ModelSpec, NodeBehaviour, RouterSpec, SupervisorPolicy, ToolSpec,
};
use pactgraph::validator::Validator;
use pactgraph::{
    Budgets, GraphBuilder, NodeContract, RoutingDecision, SliceDecl, SubgraphContract,
    SupervisorContract, Trigger, WorkflowDocument,
};
use proptest::prelude::*;
use serde_json::json;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_any_document(doc in arbitrary_document()) {
        let text = serde_json::to_string(&doc).expect("serializes");
        // Only documents that deserialize count, as for a file.
        if let Ok(doc) = WorkflowDocument::from_value(serde_json::from_str(&text).expect("json")) {
            for strict in [false, true] {
                let graph = match GraphBuilder::from_document(doc.clone()).build() {
                    Ok(g) => g,
                    Err(f) => f.into_partial(),
                };
                let r = Validator::new().strict(strict).validate(&graph);
                #[cfg(feature = "render")]
                let _ = r.render_human(None);
                let _ = r.to_json();
            }
        }
    }
}

const IDS: &[&str] = &["a", "b", "c", "d", "e", "f"];
const SLICES: &[&str] = &["x", "y", "system", "z~1w"];

fn id() -> impl Strategy<Value = String> {
    proptest::sample::select(IDS).prop_map(String::from)
}
fn ids() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(id(), 0..4)
}
fn slices() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(
        proptest::sample::select(SLICES).prop_map(String::from),
        0..3,
    )
}
fn condition() -> impl Strategy<Value = Condition> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Condition::Const),
        proptest::sample::select(&["/x", "/y/q", "/", "/nope", "/system"][..])
            .prop_map(Condition::exists),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Condition::All),
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Condition::Any),
            inner.prop_map(|c| Condition::Not(Box::new(c))),
        ]
    })
}
fn triggers() -> impl Strategy<Value = Vec<Trigger>> {
    proptest::collection::vec(
        (-2i64..3, condition()).prop_map(|(priority, when)| Trigger { priority, when }),
        0..2,
    )
}
fn schema() -> impl Strategy<Value = Option<serde_json::Value>> {
    proptest::option::of(proptest::sample::select(vec![
        json!({"type": "object", "required": ["x"], "properties": {"x": {"type": "integer"}}}),
        json!({"type": "object", "required": ["x", "y"], "properties": {"x": {"type": "string"}}}),
        json!({"type": 3}),
        json!(true),
    ]))
}
fn decision() -> impl Strategy<Value = Option<RoutingDecision>> {
    proptest::option::of(prop_oneof![
        id().prop_map(RoutingDecision::node),
        id().prop_map(RoutingDecision::subgraph),
        Just(RoutingDecision::stop_local()),
        Just(RoutingDecision::stop_global("r")),
        Just(RoutingDecision::ask("q")),
        Just(RoutingDecision::fallback("r")),
    ])
}

/// Templates: valid, naming slices or not, malformed, and odd text.
fn template() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        Just("{{ x }}".to_string()),
        Just("{{ input | tojson }} {{ allow }}".to_string()),
        Just("{% for a in y %}{{ a.b }}{% endfor %}".to_string()),
        Just("{{ unclosed ".to_string()),
        Just("{% if %}".to_string()),
        "[{}%a-z \n]{0,12}",
    ])
}

fn agent() -> impl Strategy<Value = AgentSpec> {
    (
        proptest::sample::select(&["default", "other", ""][..]),
        template(),
        template(),
        ids(),
        proptest::option::of(0u32..3),
    )
        .prop_map(
            |(model, instructions, prompt, tools, max_turns)| AgentSpec {
                model: model.into(),
                instructions,
                prompt,
                tools,
                max_turns,
            },
        )
}

fn tool() -> impl Strategy<Value = ToolSpec> {
    (
        proptest::sample::select(&["", "Looks up."][..]),
        prop_oneof![
            Just(serde_json::Value::Null),
            Just(json!({"type": "object"})),
            Just(json!({"type": 3})),
            Just(json!([])),
        ],
    )
        .prop_map(|(description, parameters)| ToolSpec::new(description, parameters))
}

fn arbitrary_document() -> impl Strategy<Value = WorkflowDocument> {
    let supervisor = (
        ids(),
        proptest::option::of(id()),
        decision(),
        any::<bool>(),
        proptest::option::of(agent()),
    )
        .prop_map(|(allow, fallback, default, policy, agent)| {
            let mut s = SupervisorContract::new("").allow(allow);
            s.fallback = fallback;
            s.default = default;
            if policy {
                s.policy = Some(SupervisorPolicy::Handler("h".into()));
            }
            if let Some(a) = agent {
                s.policy = Some(SupervisorPolicy::Agent(a));
            }
            s
        });
    let subgraph = (
        id(),
        ids(),
        slices(),
        slices(),
        triggers(),
        schema(),
        proptest::option::of(proptest::sample::select(SLICES)),
        ids(),
        proptest::option::of(0u32..3),
    )
        .prop_map(
            |(entry, sups, reads, writes, trig, sch, result, exits, reentry)| {
                let mut g = SubgraphContract::new("")
                    .supervisors(sups)
                    .reads(reads)
                    .writes(writes);
                g.entrypoint = entry;
                g.triggers = trig;
                g.output_schema = sch;
                g.result_slice = result.map(String::from);
                g.exitpoints = exits;
                g.max_reentry = reentry;
                g
            },
        );
    let node = (
        id(),
        slices(),
        slices(),
        triggers(),
        proptest::option::of(id()),
        any::<bool>(),
        schema(),
        schema(),
        proptest::option::of(0u32..2),
        any::<bool>(),
        proptest::option::of((
            ids(),
            proptest::option::of(proptest::sample::select(SLICES)),
            any::<bool>(),
            0u32..3,
        )),
        (proptest::option::of(agent()), proptest::option::of(tool())),
    )
        .prop_map(
            |(
                owner,
                reads,
                writes,
                trig,
                handoff,
                terminal,
                i,
                o,
                visits,
                set_system,
                router,
                (agent, tool),
            )| {
                let mut n = NodeContract::new("")
                    .supervisor(owner)
                    .reads(reads)
                    .writes(writes);
                n.triggers = trig;
                n.handoff = handoff;
                n.terminal = terminal;
                n.input_schema = i;
                n.output_schema = o;
                n.max_visits = visits;
                if set_system {
                    n.run = Some(NodeBehaviour::set([("system", json!(1))]));
                }
                n.router = router.map(|(destinations, message, may_answer, retries)| {
                    let mut r = RouterSpec::new(destinations)
                        .may_answer(may_answer)
                        .retries(retries);
                    r.message_slice = message.map(String::from);
                    r
                });
                if let Some(a) = agent {
                    n.run = Some(NodeBehaviour::Agent(a));
                }
                n.tool = tool;
                n
            },
        );
    (
        proptest::collection::btree_map(id(), supervisor, 0..4),
        proptest::collection::btree_map(id(), subgraph, 0..3),
        proptest::collection::btree_map(id(), node, 0..5),
        id(),
        proptest::collection::vec(proptest::sample::select(&["x", "y", "system"][..]), 0..3),
        (0u32..3, 0u32..3, 0u32..3),
    )
        .prop_map(|(sups, subs, nodes, entry, slice_names, (d, s, r))| {
            let mut doc = WorkflowDocument {
                workflow: "arb".into(),
                entry,
                budgets: Budgets::default().max_depth(d).max_steps(s).max_reentry(r),
                ..WorkflowDocument::default()
            };
            for name in slice_names {
                doc.slices.insert(name.into(), SliceDecl::new());
            }
            if d % 2 == 0 {
                let mut m = ModelSpec::new("http://127.0.0.1:9/v1", "m");
                if s == 1 {
                    m.params.insert("stream".into(), json!(true));
                }
                doc.models.insert("default".into(), m);
            }
            doc.supervisors = sups.into_iter().collect();
            doc.subgraphs = subs.into_iter().collect();
            doc.nodes = nodes.into_iter().collect();
            doc.fill_ids();
            doc
        })
}
