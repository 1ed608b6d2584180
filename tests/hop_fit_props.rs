//! Property test of the hop-fit proof (PG0803/PG0805, brief §5.2), with the `jsonschema`
//! crate as the oracle: for random upstream `output_schema`s and downstream
//! `input_schema`s of a handoff, whenever the validator says the hop fits (neither PG0803
//! nor PG0805 on it), every value the upstream schema accepts is accepted downstream. The
//! values checked are generated from the upstream schema (and then filtered by the
//! oracle), so they are values the upstream may really write.

use pactgraph::validator::{Code, Validator};
use pactgraph::{GraphBuilder, WorkflowDocument};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEYS: [&str; 3] = ["a", "b", "c"];

/// Random schemas over the keywords the proof compares.
fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({})),
        prop::sample::select(vec![
            "string", "number", "integer", "boolean", "null", "array", "object"
        ])
        .prop_map(|t| json!({"type": t})),
        prop::sample::subsequence(vec!["string", "integer", "null", "boolean"], 2)
            .prop_map(|ts| json!({"type": ts})),
        prop::collection::vec(scalar(), 1..4).prop_map(|vs| json!({"enum": vs})),
        scalar().prop_map(|v| json!({"const": v})),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map(
                    prop::sample::select(KEYS.to_vec()),
                    inner.clone(),
                    0..3
                ),
                prop::sample::subsequence(KEYS.to_vec(), 0..3),
                any::<bool>(),
            )
                .prop_map(|(props, required, closed)| {
                    let mut s =
                        json!({"type": "object", "properties": props, "required": required});
                    if closed {
                        s["additionalProperties"] = json!(false);
                    }
                    s
                }),
            inner.prop_map(|items| json!({"type": "array", "items": items})),
        ]
    })
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-2i64..3).prop_map(Value::from),
        Just(json!(1.5)),
        prop::sample::select(vec!["x", "y", ""]).prop_map(Value::from),
    ]
}

/// A small deterministic generator (xorshift) for values derived from a schema.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A value shaped by `schema` (usually valid for it, sometimes not: the oracle filters).
fn value_for(schema: &Value, rng: &mut Rng, depth: u32) -> Value {
    if let Some(vs) = schema.get("enum").and_then(Value::as_array) {
        return vs[rng.pick(vs.len())].clone();
    }
    if let Some(v) = schema.get("const") {
        return v.clone();
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![
            "string", "number", "integer", "boolean", "null", "array", "object",
        ],
    };
    let any = json!({});
    match types[rng.pick(types.len())] {
        "string" => json!(["x", "y", "", "zz"][rng.pick(4)]),
        "number" => [json!(1.5), json!(-2), json!(0)][rng.pick(3)].clone(),
        "integer" => json!(rng.pick(5) as i64 - 2),
        "boolean" => json!(rng.pick(2) == 0),
        "null" => Value::Null,
        "array" if depth < 4 => {
            let items = schema.get("items").unwrap_or(&any);
            (0..rng.pick(3))
                .map(|_| value_for(items, rng, depth + 1))
                .collect()
        }
        "object" if depth < 4 => {
            let props = schema.get("properties").and_then(Value::as_object);
            let mut m = Map::new();
            for k in KEYS {
                let required = schema
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|x| x == k));
                if required || rng.pick(2) == 0 {
                    let sub = props.and_then(|p| p.get(k)).unwrap_or(&any);
                    m.insert(k.to_string(), value_for(sub, rng, depth + 1));
                }
            }
            Value::Object(m)
        }
        _ => Value::Null,
    }
}

/// Root dispatches `up`, which hands off to `down`; `up` writes slice `s` (always), `down`
/// reads it.
fn document(up: &Value, down: &Value) -> WorkflowDocument {
    WorkflowDocument::from_value(json!({
        "workflow": "hop",
        "slices": {"s": {}},
        "entry": "root",
        "supervisors": {"root": {"allow": ["up"]}},
        "nodes": {
            "up": {"supervisor": "root", "writes": ["s"], "handoff": "down",
                   "triggers": [{"priority": 1, "when": true}],
                   "output_schema": {"type": "object", "properties": {"s": up}, "required": ["s"]}},
            "down": {"supervisor": "root", "reads": ["s"], "terminal": true,
                     "input_schema": {"type": "object", "properties": {"s": down}}}
        }
    }))
    .expect("a well-formed document")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_hop_said_to_fit_accepts_every_upstream_value(
        up in schema(),
        down in schema(),
        seed in 1u64..u64::MAX,
    ) {
        let graph = GraphBuilder::from_document(document(&up, &down)).build().expect("resolves");
        let report = Validator::new().validate(&graph);
        let misfit = report.with_code(Code::HANDOFF_SCHEMA).next().is_some();
        // Every generated schema is well formed: no other error may hide the verdict.
        prop_assert!(report.with_code(Code::BAD_SCHEMA).next().is_none());
        let undecided = report.with_code(Code::HANDOFF_SCHEMA_UNDECIDED).next().is_some();
        let up_check = jsonschema::validator_for(&up).expect("the generated schema compiles");
        let down_check = jsonschema::validator_for(&down).expect("the generated schema compiles");
        let mut rng = Rng(seed);
        let refused: Option<Value> = (0..64)
            .map(|_| value_for(&up, &mut rng, 0))
            .filter(|v| up_check.is_valid(v))
            .find(|v| !down_check.is_valid(v));
        if !misfit && !undecided {
            prop_assert!(
                refused.is_none(),
                "said to fit, but upstream {up} allows {} which downstream {down} refuses",
                refused.unwrap_or_default()
            );
        }
    }
}
