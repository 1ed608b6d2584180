//! `pactgraph run --model NAME=MODEL`: the override lands in the run's document (what a
//! resumed run and a worker use), and a malformed value or an unknown NAME is a usage
//! error (exit 2) naming it.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

/// A workflow declaring two models; its one node is a `set` (no model is called).
fn write_workflow(dir: &Path) -> String {
    let doc = json!({
        "workflow": "models",
        "slices": {"answer": {}},
        "models": {
            "default": {"base_url": "http://127.0.0.1:9/v1", "model": "small"},
            "judge": {"base_url": "http://127.0.0.1:9/v1", "model": "large", "stream": true}
        },
        "entry": "root",
        "supervisors": {"root": {"allow": ["reply"], "default": {"stop_global": {}}}},
        "nodes": {"reply": {"supervisor": "root", "writes": ["answer"],
            "triggers": [{"when": {"path": "/answer", "exists": false}}], "terminal": true,
            "run": {"set": {"answer": "done"}}}}
    });
    let path = dir.join("models.json");
    std::fs::write(&path, doc.to_string()).expect("written");
    path.display().to_string()
}

fn pactgraph(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .current_dir(dir)
        .args(["run", "--store", "none", "--quiet"])
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn overrides_land_in_the_runs_document_and_leave_the_rest() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = write_workflow(dir.path());
    let saved = dir.path().join("run.json");
    let o = pactgraph(
        dir.path(),
        &[
            &file,
            "--model",
            "judge=other:7b",
            "--model",
            "default = tiny",
            "--state-out",
            saved.to_str().expect("UTF-8 path"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).expect("saved")).expect("JSON");
    let models = &run["document"]["models"];
    assert_eq!(models["default"]["model"], "tiny", "{run}");
    assert_eq!(models["judge"]["model"], "other:7b");
    assert_eq!(models["judge"]["stream"], true);
    assert_eq!(models["judge"]["base_url"], "http://127.0.0.1:9/v1");
}

#[test]
fn malformed_values_and_unknown_names_are_usage_errors_naming_them() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = write_workflow(dir.path());
    for (value, says) in [
        ("default", "`default` is not NAME=MODEL"),
        ("=m", "`=m` is not NAME=MODEL"),
        ("default=", "`default=` is not NAME=MODEL"),
        (
            "critic=big",
            "no model `critic` under `models` (it declares `default`, `judge`)",
        ),
    ] {
        let o = pactgraph(dir.path(), &[&file, "--model", value]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{value}: {err}");
        assert!(err.contains(says), "{value}: {err}");
        assert!(o.stdout.is_empty(), "{value}: nothing ran");
    }
    let o = pactgraph(
        dir.path(),
        &[&file, "--model", "judge=a", "--model", "judge=b"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("model `judge` is overridden twice"));
}
