//! `pactgraph validate` end to end: exit codes and both output formats.

use std::process::Command;

fn pactgraph(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("pactgraph-cli-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const VALID: &str = r#"{
  "workflow": "hello",
  "slices": {"answer": {}},
  "entry": "root",
  "supervisors": {"root": {"allow": ["reply"]}},
  "nodes": {"reply": {"supervisor": "root", "writes": ["answer"],
                      "triggers": [{"when": true}], "terminal": true}}
}"#;

#[test]
fn valid_file_exits_zero() {
    let (code, out, _) = pactgraph(&["validate", &file("ok.json", VALID)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 errors"), "{out}");
}

#[test]
fn invalid_file_exits_one_with_underlined_line_and_json() {
    let bad = VALID.replace(
        r#""writes": ["answer"]"#,
        r#""writes": ["answer", "system"]"#,
    );
    let path = file("bad.json", &bad);
    let (code, _, err) = pactgraph(&["validate", &path]);
    assert_eq!(code, 1);
    assert!(err.contains("error[PG0101]"), "{err}");
    assert!(err.contains("^^^^^^^^ /nodes/reply/writes/1"), "{err}");
    let (code, out, _) = pactgraph(&["validate", &path, "--format", "json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
    let d = &v.as_array().unwrap()[0];
    assert_eq!(d["code"], "PG0101");
    assert_eq!(d["pointer"], "/nodes/reply/writes/1");
    assert_eq!(d["line"], 6);
}

#[test]
fn strict_mode_fails_on_warnings() {
    let warned = VALID
        .replace(r#""allow": ["reply"]"#, r#""allow": ["reply", "idle"]"#)
        .replace(
            r#""nodes": {"#,
            r#""nodes": {"idle": {"supervisor": "root"}, "#,
        );
    let path = file("warn.json", &warned);
    assert_eq!(pactgraph(&["validate", &path]).0, 0);
    let (code, _, err) = pactgraph(&["validate", &path, "--strict"]);
    assert_eq!(code, 1);
    assert!(err.contains("error[PG0304]"), "{err}");
}

#[test]
fn usage_errors_exit_two_and_unreadable_files_one() {
    assert_eq!(pactgraph(&["validate"]).0, 2);
    assert_eq!(pactgraph(&["validate", "x.json", "--format", "xml"]).0, 2);
    let (code, _, err) = pactgraph(&["validate", "/nonexistent/wf.json"]);
    assert_eq!(code, 1);
    assert!(err.contains("error[PG0000]"), "{err}");
    let (code, _, err) = pactgraph(&["validate", &file("syntax.json", "{\n  \"workflow\": ,\n}")]);
    assert_eq!(code, 1);
    assert!(err.contains("PG0000") && err.contains("2 |"), "{err}");
}
