//! `pactgraph dot`: output destinations, exit codes and error messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn pactgraph(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pactgraph-cli-dot-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn prints_dot_and_mermaid_to_stdout() {
    let o = pactgraph(&["dot", "examples/workflows/fashion.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with("digraph \"fashion_advisor\" {"));
    assert!(text.contains("subgraph \"cluster_fashion\""));

    let o = pactgraph(&["dot", "examples/workflows/support_triage.yaml", "--mermaid"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with("---\ntitle: \"support_triage\"\n---\nflowchart TB\n"));
}

#[test]
fn writes_dot_files_and_paints_a_trace() {
    let dir = temp_dir("trace");
    let trace = dir.join("trace.json");
    std::fs::write(
        &trace,
        r#"[{"step":0,"depth":0,"supervisor":"domain_supervisor","subgraph":null,"kind":"call",
             "source":"domain_supervisor","target":"fashion","reason":null,"termination_reason":null},
            {"step":1,"depth":1,"supervisor":"fashion_supervisor","subgraph":"fashion","kind":"dispatch",
             "source":"fashion_supervisor","target":"nope","reason":null,"termination_reason":null}]"#,
    )
    .unwrap();
    let out = dir.join("out.dot");
    let o = pactgraph(&[
        "dot",
        "examples/workflows/fashion.json",
        "--trace",
        trace.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("label=\"call\\n1\""), "{text}");
    // The dispatch to an unknown node is reported, not drawn.
    assert!(stderr(&o).contains("1 item(s) of trace"), "{}", stderr(&o));
}

#[test]
fn bad_inputs_exit_1_with_the_file_named() {
    let dir = temp_dir("bad");
    let o = pactgraph(&["dot", "no/such/file.json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no/such/file.json"), "{}", stderr(&o));

    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{\"workflow\": \"x\",\n \"entry\": 3}").unwrap();
    let o = pactgraph(&["dot", broken.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("broken.json: line 2"), "{err}");

    let unresolved = dir.join("unresolved.json");
    std::fs::write(
        &unresolved,
        r#"{"workflow": "x", "entry": "root",
  "supervisors": {"root": {"allow": ["ghost"]}}}"#,
    )
    .unwrap();
    let o = pactgraph(&["dot", unresolved.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("unresolved.json:2:") && err.contains("`ghost`"),
        "{err}"
    );

    let trace = dir.join("trace.json");
    std::fs::write(&trace, "{\"not\": \"a trace\"}").unwrap();
    let o = pactgraph(&[
        "dot",
        "examples/workflows/fashion.json",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not a decision trace"),
        "{}",
        stderr(&o)
    );

    let o = pactgraph(&[
        "dot",
        "examples/workflows/fashion.json",
        "--mermaid",
        "--output",
        "x.svg",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--mermaid writes text"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(pactgraph(&["dot"]).status.code(), Some(2));
    assert_eq!(
        pactgraph(&["dot", "a.json", "--bogus"]).status.code(),
        Some(2)
    );
}

#[test]
fn images_need_graphviz_and_say_how_to_install_it() {
    let dir = temp_dir("image");
    let svg = dir.join("out.svg");
    // An empty PATH: `dot` cannot be found.
    let o = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .args(["dot", "examples/workflows/fashion.json", "--output"])
        .arg(&svg)
        .current_dir(root())
        .env("PATH", "")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("Graphviz's `dot` was not found on PATH"),
        "{err}"
    );
    assert!(err.contains("apt-get install graphviz") && err.contains("brew install graphviz"));
    assert!(!svg.exists());

    if Command::new("dot").arg("-V").output().is_ok() {
        let o = pactgraph(&[
            "dot",
            "examples/workflows/fashion.json",
            "--output",
            svg.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("cluster_fashion"));
    }
}
