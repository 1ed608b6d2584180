//! Random valid workflows for property tests: a seeded generator (SplitMix64) of
//! workflows the validator accepts, with random rule outcomes, and their inputs.
#![allow(dead_code)]

use serde_json::{Value, json};

/// SplitMix64: a tiny deterministic generator driven by proptest's seed.
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub const SLICES: [&str; 3] = ["s0", "s1", "s2"];

fn condition(g: &mut Gen) -> Value {
    let slice = SLICES[g.below(3) as usize];
    match g.below(5) {
        0 => json!(true),
        1 => json!({"path": format!("/{slice}"), "exists": g.chance(50)}),
        2 => json!({"not": {"path": format!("/{slice}"), "equals": g.below(3)}}),
        _ => json!({"path": format!("/{slice}"), "in": [g.below(3), g.below(3)]}),
    }
}

fn triggers(g: &mut Gen) -> Value {
    let n = g.below(3);
    Value::Array(
        (0..n)
            .map(|_| json!({"priority": g.below(4), "when": condition(g)}))
            .collect(),
    )
}

/// A random valid workflow (the runtime runs only what the validator accepts): a root
/// supervisor and up to two subgraphs (which may call each other or themselves), nodes
/// writing small values, random triggers, handoffs, terminals, exitpoints, defaults and
/// budgets. Returns it with its `max_steps`.
pub fn workflow(seed: u64) -> (Value, u32) {
    let mut g = Gen(seed);
    let n_subgraphs = g.below(3) as usize;
    let supervisors: Vec<String> = std::iter::once("root".to_string())
        .chain((0..n_subgraphs).map(|i| format!("sup{i}")))
        .collect();
    // Every supervisor owns at least one node: an empty `allow` is an error (PG0301).
    let n_nodes = supervisors.len() + g.below(5) as usize;
    let owner: Vec<usize> = (0..n_nodes)
        .map(|i| {
            if i < supervisors.len() {
                i
            } else {
                g.below(supervisors.len() as u64) as usize
            }
        })
        .collect();
    let mut nodes = serde_json::Map::new();
    for i in 0..n_nodes {
        let slice = SLICES[g.below(3) as usize];
        let mut node = json!({
            "supervisor": supervisors[owner[i]],
            "reads": SLICES,
            "writes": [slice],
            "triggers": triggers(&mut g),
            "run": {"set": {slice: g.below(3)}},
        });
        if g.chance(15) {
            node["terminal"] = json!(true);
        }
        // Handoffs go forward only: a handoff cycle is a validator error (PG0801).
        let later: Vec<usize> = (i + 1..n_nodes).filter(|j| owner[*j] == owner[i]).collect();
        if g.chance(20) && !later.is_empty() {
            node["handoff"] = json!(format!("n{}", later[g.below(later.len() as u64) as usize]));
            // A node hands off or is terminal, not both (PG0804); the runtime always
            // followed the handoff, so dropping `terminal` keeps the runs as they were.
            if let Some(n) = node.as_object_mut() {
                n.remove("terminal");
            }
        }
        if g.chance(20) {
            node["max_visits"] = json!(1 + g.below(3));
        }
        nodes.insert(format!("n{i}"), node);
    }
    let mut sups = serde_json::Map::new();
    for (si, sup) in supervisors.iter().enumerate() {
        let mut allow: Vec<String> = (0..n_nodes)
            .filter(|i| owner[*i] == si)
            .map(|i| format!("n{i}"))
            .collect();
        for j in 0..n_subgraphs {
            if g.chance(60) {
                allow.push(format!("g{j}"));
            }
        }
        // Every level can end (PG0601, PG0602): a subgraph's supervisor can always
        // `stop_local`, the root can always stop. Runs may still loop until a budget
        // stops them: triggers keep matching, subgraphs call each other.
        let default = match (si, g.below(4)) {
            (0, 0) | (0, 2) => json!({"stop_global": {"reason": "default"}}),
            (_, 1) => json!({"stop_local": {"should_end": true}}),
            _ => json!({"stop_local": {}}),
        };
        let mut s = json!({"allow": allow, "default": default});
        if g.chance(30) && !allow.is_empty() {
            s["fallback"] = json!(allow[0].clone()).clone();
            if allow[0].starts_with('g') {
                s.as_object_mut().unwrap().remove("fallback");
            }
        }
        if g.chance(20) {
            s["honor_should_end"] = json!(false);
        }
        sups.insert(sup.clone(), s);
    }
    let mut subgraphs = serde_json::Map::new();
    for j in 0..n_subgraphs {
        let mut sg = json!({
            "entrypoint": format!("sup{j}"),
            "supervisors": [format!("sup{j}")],
            "reads": SLICES,
            "writes": SLICES,
            "triggers": triggers(&mut g),
            "result_slice": if g.chance(30) { json!("s2") } else { Value::Null },
        });
        if sg["result_slice"].is_null() {
            sg.as_object_mut().unwrap().remove("result_slice");
        }
        if g.chance(20) {
            // 0 would make the subgraph impossible to enter (PG1003).
            sg["max_reentry"] = json!(1 + g.below(2));
        }
        let own: Vec<usize> = (0..n_nodes).filter(|i| owner[*i] == j + 1).collect();
        if !own.is_empty() && g.chance(25) {
            sg["exitpoints"] = json!([format!("n{}", own[0])]);
        }
        subgraphs.insert(format!("g{j}"), sg);
    }
    let max_steps = 1 + g.below(25) as u32;
    let doc = json!({
        "workflow": "random",
        "slices": {"s0": {}, "s1": {}, "s2": {}},
        // With subgraphs, depth and re-entry budgets of 0 are validator errors (PG1002,
        // PG1003); 1 still lets recursion hit them.
        "budgets": {"max_steps": max_steps, "max_depth": 1 + g.below(3), "max_reentry": 1 + g.below(3)},
        "entry": "root",
        "supervisors": sups,
        "subgraphs": subgraphs,
        "nodes": nodes,
    });
    (doc, max_steps)
}

pub fn input(seed: u64) -> Value {
    let mut g = Gen(seed ^ 0xABCD);
    let mut m = serde_json::Map::new();
    for s in SLICES {
        if g.chance(50) {
            m.insert(s.into(), json!(g.below(3)));
        }
    }
    Value::Object(m)
}
