//! The bench example prints the documented line format for every case, and the plot
//! example turns such lines into an SVG chart (and refuses anything else by line number).
//! A whole `cargo test` builds both examples already; `ensure_built` makes sure of it when
//! this file runs alone (`cargo test --test bench_tools`), so a stale build is never run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// `<target>/<profile>`: where this test and the examples of its profile are built.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .and_then(Path::parent)
        .expect("tests run from <target>/<profile>/deps")
        .to_path_buf()
}

/// Builds the two examples for this test's profile, once per test process.
fn ensure_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "--example",
            "bench",
            "--example",
            "plot_scaling",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir().ends_with("release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(status.success(), "building the examples failed");
    });
}

/// The path of an example built for the same profile as this test.
fn example(name: &str) -> PathBuf {
    ensure_built();
    profile_dir()
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

fn run_with_input(name: &str, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(example(name))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("example `{name}` did not start: {e}"));
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("the example ends")
}

/// Every case prints one line with exactly the documented keys, all positive numbers.
#[test]
fn bench_prints_one_line_per_case_in_the_documented_format() {
    let mut lines = String::new();
    for (case, n) in [
        ("loop", 50),
        ("linear", 50),
        ("subgraph", 20),
        ("build", 200),
        ("dot", 200),
    ] {
        let out = run_with_input("bench", &[case, &n.to_string(), "--repeat", "3"], "");
        let stdout = String::from_utf8(out.stdout).expect("utf-8");
        assert!(out.status.success(), "{case}: {stdout}");
        let [line] = stdout.lines().collect::<Vec<_>>()[..] else {
            panic!("{case}: expected one line, got {stdout:?}");
        };
        let v: Value = serde_json::from_str(line).expect("a JSON line");
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["bench", "n", "total_s", "per_step_us", "peak_rss_mb"],
            "{line}"
        );
        assert_eq!(
            (v["bench"].as_str(), v["n"].as_u64()),
            (Some(case), Some(n))
        );
        for k in ["total_s", "per_step_us"] {
            assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {line}");
        }
        if cfg!(target_os = "linux") {
            assert!(v["peak_rss_mb"].as_f64().is_some_and(|x| x > 0.0), "{line}");
        }
        lines.push_str(line);
        lines.push('\n');
    }

    // The same lines plot; another engine's line joins as its own series.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let svg = dir.path().join("scaling.svg");
    let svg_arg = svg.to_str().expect("utf-8 path");
    lines.push_str(
        r#"{"bench": "loop", "n": 1000, "total_s": 0.2, "per_step_us": 208.0, "peak_rss_mb": 80.0, "engine": "other"}"#,
    );
    let out = run_with_input("plot_scaling", &[svg_arg], &lines);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).expect("the chart was written");
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(80)]);
    let labels: Vec<&str> = text.lines().map(str::trim).collect();
    for series in ["loop", "linear", "subgraph", "build", "dot", "other loop"] {
        assert!(labels.contains(&series), "the legend lacks {series}");
    }
    // Deterministic: the same lines give the same bytes.
    let again = dir.path().join("again.svg");
    let out = run_with_input("plot_scaling", &[again.to_str().unwrap()], &lines);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&again).unwrap(), text.as_bytes());
}

#[test]
fn bench_refuses_bad_arguments_with_usage() {
    for args in [
        &["nope", "10"][..],
        &["loop", "0"],
        &["loop"],
        &["loop", "10", "--repeat", "0"],
        &["loop", "10", "--frobnicate"],
    ] {
        let out = run_with_input("bench", args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("bench: "), "{args:?}: {err}");
    }
}

#[test]
fn plot_names_the_line_it_cannot_read() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let svg = dir.path().join("x.svg");
    let svg = svg.to_str().unwrap();
    let good =
        r#"{"bench": "loop", "n": 10, "total_s": 1.0, "per_step_us": 1.0, "peak_rss_mb": 1.0}"#;
    for (input, want) in [
        (
            format!("{good}\n\nnot json\n"),
            "line 3 is not a bench line",
        ),
        (
            format!("{good}\n{}\n", good.replace("\"n\": 10", "\"n\": 0")),
            "line 2: `n` and `per_step_us` must be positive",
        ),
        (
            r#"{"bench": "loop", "n": 10}"#.to_string(),
            "line 1 is not a bench line: missing field `per_step_us`",
        ),
        (String::new(), "no bench lines"),
    ] {
        let out = run_with_input("plot_scaling", &[svg], &input);
        assert_eq!(out.status.code(), Some(1), "{input:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{input:?}: {err}");
    }
    let out = run_with_input("plot_scaling", &[], "");
    assert_eq!(out.status.code(), Some(2));
}
