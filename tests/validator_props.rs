//! Property tests of the validator: generated valid workflows pass, and one mutation per
//! rule is reported with exactly that rule's code at the mutated place (no document makes
//! it panic: `validator_never_panics.rs`).

mod support;

use pactgraph::contracts::{
    AgentSpec, Condition, ModelSpec, NodeBehaviour, RouterSpec, SupervisorPolicy, ToolSpec,
};
use pactgraph::validator::{Code, Report, Severity, Validator};
use pactgraph::{
    Budgets, GraphBuilder, NodeContract, RoutingDecision, SliceDecl, Trigger, WorkflowDocument,
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

}
