//! Bad input never panics `pactgraph run`: proptest-generated `--input` values and
//! documents (random JSON, and the shipped example with one value replaced).

use std::process::Command;

use proptest::prelude::*;
use serde_json::Value;

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z/~ \"\\\\é]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Every JSON Pointer of a value.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        _ => {}
    }
}

fn check(args: &[&str]) -> Result<(), TestCaseError> {
    let o = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        // These tests predate the run store: nothing is kept (and nothing written to the
        // checkout); tests/cli_runs.rs tests the store.
        .env("PACTGRAPH_STORE", "none")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    prop_assert!(!err.contains("panicked"), "{}", err);
    let code = o.status.code();
    prop_assert!(matches!(code, Some(0..=4)), "exit {:?}: {}", code, err);
    if matches!(code, Some(1 | 2)) && o.stdout.is_empty() {
        prop_assert!(!err.trim().is_empty(), "an error exit says why");
    }
    Ok(())
}

fn fashion() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/workflows/fashion.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_never_panic(input in prop_oneof![
        arb_json().prop_map(|v| v.to_string()),
        // Any text an argv can carry (no NUL byte).
        "[^\\x00]{0,40}",
    ]) {
        let wf = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/workflows/fashion.json");
        check(&["run", wf, "--input", &input, "--quiet"])?;
    }

    #[test]
    fn mutated_documents_never_panic(pick in any::<prop::sample::Index>(), replacement in arb_json()) {
        let mut doc = fashion();
        let mut ptrs = Vec::new();
        pointers(&doc, String::new(), &mut ptrs);
        let p = pick.get(&ptrs).clone();
        *doc.pointer_mut(&p).unwrap() = replacement;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("wf.json");
        std::fs::write(&file, doc.to_string()).unwrap();
        check(&["run", file.to_str().unwrap(), "--input", r#"{"request": {"topic": "fashion"}}"#, "--quiet"])?;
    }

    #[test]
    fn random_documents_never_panic(doc in arb_json(), yaml in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(if yaml { "wf.yaml" } else { "wf.json" });
        std::fs::write(&file, doc.to_string()).unwrap();
        check(&["run", file.to_str().unwrap(), "--quiet"])?;
    }
}
