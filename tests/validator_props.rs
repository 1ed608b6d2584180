//! Property tests of the validator: generated valid workflows pass, one mutation per
//! rule is reported with exactly that rule's code at the mutated place, and no document
//! makes the validator panic.

mod support;

use pactgraph::contracts::{
    AgentSpec, Condition, ModelSpec, NodeBehaviour, RouterSpec, SupervisorPolicy, ToolSpec,
};
use pactgraph::validator::{Code, Report, Severity, Validator};
use pactgraph::{
    Budgets, GraphBuilder, NodeContract, RoutingDecision, SliceDecl, SubgraphContract,
    SupervisorContract, Trigger, WorkflowDocument,
};
use proptest::prelude::*;
use serde_json::json;
use support::valid_workflow::{Shape, depths, node, parent, sub, sup, valid_workflow};

fn validate(doc: &WorkflowDocument) -> Report {
    let graph = match GraphBuilder::from_document(doc.clone()).build() {
        Ok(g) => g,
        Err(f) => f.into_partial(),
    };
    Validator::new().validate(&graph)
}

fn shapes(min_subgraphs: usize) -> impl Strategy<Value = Shape> {
    (
        min_subgraphs..12usize,
        1..5usize,
        1..4usize,
        any::<bool>(),
        any::<bool>(),
        0..3usize,
    )
        .prop_map(
            |(subgraphs, nodes_per_subgraph, fanout, handoffs, schemas, policy_every)| Shape {
                subgraphs,
                nodes_per_subgraph,
                fanout,
                handoffs,
                schemas,
                policy_every,
            },
        )
}

/// Non-information findings, as `(code, pointer)`.
fn findings(r: &Report) -> Vec<(Code, String)> {
    r.diagnostics
        .iter()
        .filter(|d| d.severity != Severity::Info)
        .map(|d| (d.code, d.pointer.clone()))
        .collect()
}

type Mutation = fn(&Shape, &mut WorkflowDocument) -> Option<(Code, String)>;

/// The generated workflow with agents: a `default` model; every policy supervisor decides
/// with an agent whose templates name `request` and `allow`; `g0_n0` runs an agent over
/// `request` that may call the tool node `lookup` (owned by `g0_sup`).
fn with_agents(doc: &mut WorkflowDocument) {
    doc.models.insert(
        "default".into(),
        ModelSpec::new("${OPENAI_BASE_URL:-http://127.0.0.1:11434/v1}", "m"),
    );
    for s in doc.supervisors.values_mut() {
        if s.policy.is_some() {
            s.policy = Some(SupervisorPolicy::Agent(
                AgentSpec::new()
                    .instructions("Choose among {{ allow | join(', ') }}.")
                    .prompt("{{ request | tojson }}"),
            ));
        }
    }
    n0(doc).run = Some(NodeBehaviour::agent(
        AgentSpec::new()
            .prompt("{% if request.topic %}{{ request.topic }}{% endif %} {{ input }}")
            .tools(["lookup"])
            .max_turns(3),
    ));
    let owner = sup(0);
    doc.nodes.insert(
        "lookup".into(),
        NodeContract::new("lookup")
            .supervisor(owner)
            .tool(ToolSpec::new(
                "Looks something up.",
                json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            ))
            .run(NodeBehaviour::handler("lookup")),
    );
    doc.fill_ids();
}

/// `g0_n0`'s agent (after [`with_agents`]).
fn agent0(doc: &mut WorkflowDocument) -> &mut AgentSpec {
    match &mut n0(doc).run {
        Some(NodeBehaviour::Agent(a)) => a,
        _ => unreachable!("with_agents gave g0_n0 an agent"),
    }
}

/// The tool node (after [`with_agents`]).
fn lookup(doc: &mut WorkflowDocument) -> &mut NodeContract {
    doc.nodes.get_mut("lookup").expect("with_agents added it")
}

fn n0(doc: &mut WorkflowDocument) -> &mut NodeContract {
    doc.nodes.get_mut(&node(0, 0)).expect("g0_n0 exists")
}

/// One mutation per rule (and a few per family): each returns the code and pointer it
/// expects, or `None` when the shape does not allow it.
const MUTATIONS: &[(&str, Mutation)] = &[
    ("drop a slice declaration", |_, d| {
        d.slices.shift_remove("answer");
        Some((Code::UNKNOWN_SLICE, "/nodes/reply/writes/0".into()))
    }),
    ("unknown owner supervisor", |_, d| {
        n0(d).supervisor = "ghost".into();
        Some((Code::UNKNOWN_ID, "/nodes/g0_n0/supervisor".into()))
    }),
    ("reuse a subgraph's id for a node", |_, d| {
        d.nodes
            .insert("g0".into(), NodeContract::new("g0").supervisor("root"));
        Some((Code::ID_COLLISION, "/nodes/g0".into()))
    }),
    ("read outside the boundary", |_, d| {
        n0(d).reads.push("answer".into());
        Some((Code::BOUNDARY_READ, "/nodes/g0_n0/reads/1".into()))
    }),
    ("default decision outside the allowlist", |_, d| {
        d.supervisors.get_mut("root")?.default = Some(RoutingDecision::node(node(0, 0)));
        Some((
            Code::DEFAULT_NOT_ALLOWED,
            "/supervisors/root/default".into(),
        ))
    }),
    ("write the system slice", |_, d| {
        n0(d).writes.push("system".into());
        Some((Code::SYSTEM_WRITE, "/nodes/g0_n0/writes/1".into()))
    }),
    ("add an undeclared write", |_, d| {
        n0(d).writes.push("answer".into());
        Some((Code::BOUNDARY_WRITE, "/nodes/g0_n0/writes/1".into()))
    }),
    ("trigger on a slice the subgraph cannot see", |_, d| {
        n0(d).triggers.push(Trigger {
            priority: 0,
            when: Condition::exists("/answer"),
        });
        let i = n0(d).triggers.len() - 1;
        Some((
            Code::BOUNDARY_TRIGGER,
            format!("/nodes/g0_n0/triggers/{i}/when/path"),
        ))
    }),
    ("widen a nested boundary", |s, d| {
        let k = (0..s.subgraphs).find(|k| parent(s, *k).is_some())?;
        let g = d.subgraphs.get_mut(&sub(k))?;
        g.writes.push("answer".into());
        Some((
            Code::BOUNDARY_NESTED,
            format!("/subgraphs/{}/writes/{}", sub(k), g.writes.len() - 1),
        ))
    }),
    ("point an allow entry at another subgraph's node", |_, d| {
        let root = d.supervisors.get_mut("root")?;
        root.allow.push(node(0, 0));
        Some((
            Code::ALLOW_OTHER_LEVEL,
            format!("/supervisors/root/allow/{}", root.allow.len() - 1),
        ))
    }),
    ("fallback outside the allowlist", |_, d| {
        d.nodes.insert(
            "g0_extra".into(),
            NodeContract::new("g0_extra")
                .supervisor(sup(0))
                .reads(["request"])
                .writes(["s0"]),
        );
        d.supervisors.get_mut(&sup(0))?.fallback = Some("g0_extra".into());
        Some((
            Code::FALLBACK_NOT_ALLOWED,
            "/supervisors/g0_sup/fallback".into(),
        ))
    }),
    ("empty allowlist", |s, d| {
        if s.subgraphs < 1 || (s.fanout <= 1 && s.subgraphs > 1) {
            return None; // g0 must have no children to keep the rest reachable
        }
        let k = (0..s.subgraphs)
            .rev()
            .find(|k| (0..s.subgraphs).all(|c| parent(s, c) != Some(*k)))?;
        d.supervisors.get_mut(&sup(k))?.allow.clear();
        for j in 0..s.nodes_per_subgraph.max(1) {
            d.nodes.shift_remove(&node(k, j));
        }
        Some((Code::EMPTY_ALLOW, format!("/supervisors/{}/allow", sup(k))))
    }),
    ("supervisor in two subgraphs", |_, d| {
        let g = d.subgraphs.get_mut(&sub(1))?;
        g.supervisors.push(sup(0));
        Some((
            Code::MULTI_MEMBERSHIP,
            format!("/subgraphs/g1/supervisors/{}", g.supervisors.len() - 1),
        ))
    }),
    ("unreachable node", |_, d| {
        d.nodes.insert(
            "orphan".into(),
            NodeContract::new("orphan")
                .supervisor("root")
                .writes(["answer"])
                .trigger(Trigger::default()),
        );
        Some((Code::UNREACHABLE, "/nodes/orphan".into()))
    }),
    ("subgraph that cannot return", |_, d| {
        let s = d.supervisors.get_mut(&sup(0))?;
        s.policy = None;
        s.default = Some(RoutingDecision::node(node(0, 0)));
        Some((Code::NO_RETURN, "/subgraphs/g0".into()))
    }),
    ("recursive call", |_, d| {
        let s = d.supervisors.get_mut(&sup(0))?;
        s.allow.push(sub(0));
        Some((
            Code::RECURSION,
            format!("/supervisors/g0_sup/allow/{}", s.allow.len() - 1),
        ))
    }),
    ("nesting deeper than max_depth", |s, d| {
        let depth = depths(s);
        let max = depth.iter().copied().max()?;
        if max < 2 {
            return None;
        }
        d.budgets = Budgets::default().max_depth(max - 1);
        let k = depth.iter().position(|x| *x == max)?;
        Some((Code::TOO_DEEP, format!("/subgraphs/{}", sub(k))))
    }),
    ("close a handoff loop", |_, d| {
        let reply = d.nodes.get_mut("reply")?;
        reply.handoff = Some("reply".into());
        // `reply` is terminal; a node that hands off is not (PG0804, its own mutation).
        reply.terminal = false;
        Some((Code::HANDOFF_CYCLE, "/nodes/reply/handoff".into()))
    }),
    ("hand off to another level", |s, d| {
        let last = node(0, s.nodes_per_subgraph.max(1) - 1);
        d.nodes.get_mut(&last)?.handoff = Some("reply".into());
        Some((Code::HANDOFF_OTHER_LEVEL, format!("/nodes/{last}/handoff")))
    }),
    ("make a terminal node hand off", |_, d| {
        d.nodes.get_mut("reply")?.handoff = Some("reply_twin".into());
        let twin = d.nodes.get("reply")?.clone();
        let mut twin = twin;
        twin.id = "reply_twin".into();
        twin.handoff = None;
        twin.triggers.clear();
        d.nodes.insert("reply_twin".into(), twin);
        Some((Code::TERMINAL_HANDOFF, "/nodes/reply/terminal".into()))
    }),
    ("handoff schemas that do not line up", |s, d| {
        let m = s.nodes_per_subgraph;
        if !(s.handoffs && s.schemas && m >= 2) {
            return None;
        }
        // A true counterexample: inside the slice the upstream writes, the downstream now
        // requires a field the upstream's output_schema may leave out. (Requiring a slice
        // the upstream does not write is not the upstream's fault: no diagnostic.)
        let target = d.nodes.get_mut(&node(0, m - 1))?;
        let own = target.writes.first()?.clone();
        let down = target.input_schema.as_mut()?;
        down["properties"][own.as_str()]["required"] = json!(["missing"]);
        Some((
            Code::HANDOFF_SCHEMA,
            format!("/nodes/{}/handoff", node(0, m - 2)),
        ))
    }),
    ("router without destinations", |_, d| {
        n0(d).router = Some(RouterSpec::new(Vec::<String>::new()));
        Some((
            Code::ROUTER_NO_DESTINATIONS,
            "/nodes/g0_n0/router/destinations".into(),
        ))
    }),
    ("router routing to itself", |_, d| {
        n0(d).router = Some(RouterSpec::new([node(0, 0)]));
        Some((
            Code::ROUTER_SELF_DESTINATION,
            "/nodes/g0_n0/router/destinations/0".into(),
        ))
    }),
    ("router naming a destination twice", |s, d| {
        if s.nodes_per_subgraph < 2 {
            return None;
        }
        n0(d).router = Some(RouterSpec::new([node(0, 1), node(0, 1)]));
        Some((
            Code::ROUTER_DUPLICATE_DESTINATION,
            "/nodes/g0_n0/router/destinations/1".into(),
        ))
    }),
    ("router routing to another level", |_, d| {
        n0(d).router = Some(RouterSpec::new(["reply"]));
        Some((
            Code::ROUTER_OTHER_LEVEL,
            "/nodes/g0_n0/router/destinations/0".into(),
        ))
    }),
    ("router with an undeclared message slice", |s, d| {
        if s.nodes_per_subgraph < 2 {
            return None;
        }
        n0(d).router = Some(RouterSpec::new([node(0, 1)]).message_slice("nope"));
        Some((
            Code::ROUTER_MESSAGE_SLICE,
            "/nodes/g0_n0/router/message_slice".into(),
        ))
    }),
    ("router message its destination does not read", |s, d| {
        if s.nodes_per_subgraph < 2 {
            return None;
        }
        n0(d).router = Some(RouterSpec::new([node(0, 1)]).message_slice("answer"));
        Some((
            Code::ROUTER_MESSAGE_UNREAD,
            "/nodes/g0_n0/router/destinations/0".into(),
        ))
    }),
    ("terminal router", |s, d| {
        if s.nodes_per_subgraph < 2 {
            return None;
        }
        let n = n0(d);
        n.router = Some(RouterSpec::new([node(0, 1)]));
        n.terminal = true;
        n.handoff = None; // terminal with a handoff is PG0804's
        Some((Code::ROUTER_TERMINAL, "/nodes/g0_n0/terminal".into()))
    }),
    ("router cycle without a bound", |s, d| {
        if s.nodes_per_subgraph < 2 {
            return None;
        }
        // The last node routes back through the chain's end: g0_n0 -> last -> g0_n0.
        let last = node(0, s.nodes_per_subgraph - 1);
        let n = n0(d);
        n.router = Some(RouterSpec::new([last.clone()]));
        n.handoff = None;
        let back = d.nodes.get_mut(&last)?;
        back.handoff = Some(node(0, 0));
        back.terminal = false;
        Some((Code::ROUTER_CYCLE, "/nodes/g0_n0/router".into()))
    }),
    ("broken slice schema", |_, d| {
        d.slices.insert(
            "request".into(),
            SliceDecl::new().schema(json!({"type": 12})),
        );
        Some((Code::BAD_SCHEMA, "/slices/request/schema".into()))
    }),
    ("zero max_steps", |_, d| {
        d.budgets = d.budgets.max_steps(0);
        Some((Code::ZERO_STEPS, "/budgets/max_steps".into()))
    }),
    ("agent on an undeclared model", |_, d| {
        with_agents(d);
        agent0(d).model = "ghost".into();
        Some((Code::UNKNOWN_MODEL, "/nodes/g0_n0/run/agent/model".into()))
    }),
    ("model params setting what the engine sets", |_, d| {
        with_agents(d);
        let m = d.models.get_mut("default").expect("declared");
        m.params.insert("tool_choice".into(), json!("auto"));
        Some((
            Code::ENGINE_PARAM,
            "/models/default/params/tool_choice".into(),
        ))
    }),
    ("template that does not parse", |_, d| {
        with_agents(d);
        agent0(d).instructions = Some("{% for x in request %}".into());
        Some((
            Code::BAD_TEMPLATE,
            "/nodes/g0_n0/run/agent/instructions".into(),
        ))
    }),
    ("template naming a slice not read", |_, d| {
        with_agents(d);
        agent0(d).prompt = Some("{{ request }} {{ answer }}".into());
        Some((
            Code::TEMPLATE_UNKNOWN_VARIABLE,
            "/nodes/g0_n0/run/agent/prompt".into(),
        ))
    }),
    (
        "policy template naming a slice outside its level",
        |s, d| {
            if s.policy_every == 0 {
                return None;
            }
            with_agents(d);
            let p = d.supervisors.get_mut(&sup(0)).expect("g0_sup");
            p.policy = Some(SupervisorPolicy::Agent(
                AgentSpec::new().prompt("{{ answer }}"),
            ));
            Some((
                Code::TEMPLATE_UNKNOWN_VARIABLE,
                "/supervisors/g0_sup/policy/agent/prompt".into(),
            ))
        },
    ),
    ("tools naming an ordinary node", |_, d| {
        with_agents(d);
        agent0(d).tools = vec!["lookup".into(), "reply".into()];
        Some((Code::NOT_A_TOOL, "/nodes/g0_n0/run/agent/tools/1".into()))
    }),
    ("agent with zero turns", |_, d| {
        with_agents(d);
        agent0(d).max_turns = Some(0);
        Some((Code::ZERO_TURNS, "/nodes/g0_n0/run/agent/max_turns".into()))
    }),
    ("tool node a policy can dispatch", |s, d| {
        if s.policy_every == 0 {
            return None;
        }
        with_agents(d);
        let p = d.supervisors.get_mut(&sup(0)).expect("g0_sup");
        p.allow.push("lookup".into());
        let at = p.allow.len() - 1;
        Some((
            Code::DISPATCHABLE_TOOL,
            format!("/supervisors/g0_sup/allow/{at}"),
        ))
    }),
    ("tool node writing a slice", |_, d| {
        with_agents(d);
        lookup(d).writes = vec![support::valid_workflow::slice(0)];
        Some((Code::TOOL_WRITES, "/nodes/lookup/writes/0".into()))
    }),
    ("tool without a description", |_, d| {
        with_agents(d);
        lookup(d).tool.as_mut().expect("a tool").description = String::new();
        Some((
            Code::INCOMPLETE_TOOL,
            "/nodes/lookup/tool/description".into(),
        ))
    }),
    ("tool parameters that are not an object schema", |_, d| {
        with_agents(d);
        lookup(d).tool.as_mut().expect("a tool").parameters = json!({"type": "array"});
        Some((
            Code::BAD_TOOL_PARAMETERS,
            "/nodes/lookup/tool/parameters".into(),
        ))
    }),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn generated_workflows_are_valid(shape in shapes(0)) {
        let doc = valid_workflow(&shape);
        let r = validate(&doc);
        prop_assert!(findings(&r).is_empty(), "{shape:?}: {:#?}", r.diagnostics);
        let strict = Validator::new().strict(true).validate(
            &GraphBuilder::from_document(doc.clone()).build().expect("ids resolve"));
        prop_assert!(!strict.has_errors());
        // The same workflow with agents, a model and a tool node is valid too.
        if shape.subgraphs > 0 {
            let mut agents = doc;
            with_agents(&mut agents);
            let r = validate(&agents);
            prop_assert!(findings(&r).is_empty(), "{shape:?} with agents: {:#?}", r.diagnostics);
        }
    }

    #[test]
    fn each_mutation_is_reported_with_its_code_and_place(shape in shapes(2)) {
        let base = valid_workflow(&shape);
        let mut applied = 0;
        for (name, mutate) in MUTATIONS {
            let mut doc = base.clone();
            let Some((code, pointer)) = mutate(&shape, &mut doc) else { continue };
            applied += 1;
            doc.fill_ids();
            let found = findings(&validate(&doc));
            prop_assert!(found.iter().all(|(c, _)| *c == code),
                "{name} on {shape:?}: expected only {code}, got {found:?}");
            prop_assert!(found.contains(&(code, pointer.clone())),
                "{name} on {shape:?}: expected {code} at {pointer}, got {found:?}");
        }
        // Eighteen mutations apply to every shape with two subgraphs.
        prop_assert!(applied >= 18, "only {applied} mutations applied");
    }

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
