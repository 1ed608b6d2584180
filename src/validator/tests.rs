//! Tests of the report, strict mode, file checking and rendering.

use super::*;
use crate::validator::rules::testing::{base, graph};

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pactgraph-validator-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn base_document_is_valid_with_only_info() {
    let r = Validator::new().validate(&graph(base()));
    assert!(!r.has_errors(), "{r:?}");
    assert_eq!(r.count(Severity::Warning), 0);
    assert!(r.diagnostics.iter().all(|d| d.severity == Severity::Info));
}

#[test]
fn strict_turns_warnings_into_errors_and_keeps_info() {
    let mut doc = base();
    doc["nodes"]["orphan"] = serde_json::json!({"supervisor": "root"});
    let g = graph(doc);
    let lax = Validator::new().validate(&g);
    assert_eq!(lax.with_code(Code::UNREACHABLE).count(), 1);
    assert!(!lax.has_errors());
    let strict = Validator::new().strict(true).validate(&g);
    assert!(strict.has_errors());
    assert!(
        strict
            .with_code(Code::WRITE_ONLY)
            .all(|d| d.severity == Severity::Info)
    );
}

#[test]
fn every_rule_reports_together_in_rule_order() {
    let mut doc = base();
    doc["nodes"]["work"]["writes"] = serde_json::json!(["out", "ghost", "system"]);
    doc["budgets"] = serde_json::json!({"max_steps": 0});
    let r = Validator::new().validate(&graph(doc));
    let codes: Vec<Code> = r.diagnostics.iter().map(|d| d.code).collect();
    let pos = |c| codes.iter().position(|x| *x == c).unwrap();
    assert!(pos(Code::UNKNOWN_SLICE) < pos(Code::SYSTEM_WRITE));
    assert!(pos(Code::SYSTEM_WRITE) < pos(Code::ZERO_STEPS));
}

#[test]
fn check_file_locates_diagnostics_and_renders_them() {
    let mut doc = base();
    doc["nodes"]["work"]["writes"] = serde_json::json!(["out", "ghost"]);
    let text = serde_json::to_string_pretty(&doc).unwrap();
    let p = write("bad.json", &text);
    let checked = check_file(&p, false);
    assert!(!checked.is_runnable());
    let d = checked
        .report
        .with_code(Code::UNKNOWN_SLICE)
        .next()
        .unwrap();
    let line = d.line.expect("located");
    assert!(text.lines().nth(line - 1).unwrap().contains("\"ghost\""));
    #[cfg(feature = "render")]
    {
        let human = checked
            .report
            .render_human(checked.graph.as_ref().and_then(|g| g.source()));
        assert!(human.contains("error[PG0004]"), "{human}");
        assert!(human.contains("^"), "{human}");
        assert!(human.contains("\"ghost\""), "{human}");
        assert!(human.contains("help: declare `ghost`"), "{human}");
    }
    let json: serde_json::Value = serde_json::from_str(&checked.report.to_json()).unwrap();
    let first = &json.as_array().unwrap()[0];
    assert_eq!(first["code"], "PG0004");
    assert_eq!(first["severity"], "error");
    assert_eq!(first["pointer"], "/nodes/work/writes/1");
    assert_eq!(first["line"], line);
}

#[test]
fn load_failures_become_pg0000_with_a_location() {
    let p = write(
        "dup.json",
        "{\n  \"workflow\": \"a\",\n  \"workflow\": \"b\"\n}",
    );
    let c = check_file(&p, false);
    assert!(c.graph.is_none());
    let d = &c.report.diagnostics[0];
    assert_eq!((d.code, d.line), (Code::LOAD, Some(3)));
    #[cfg(feature = "render")]
    {
        let human = c.report.render_human(c.source());
        assert!(human.contains("3 |   \"workflow\": \"b\""), "{human}");
    }
    let p = write(
        "typo.json",
        "{\"workflow\": \"a\", \"entry\": \"r\", \"nodez\": {}}",
    );
    let d = &check_file(&p, false).report.diagnostics[0];
    assert_eq!((d.code, d.pointer.as_str()), (Code::LOAD, "/nodez"));
    let d = &check_file("/nonexistent/x.json", false).report.diagnostics[0];
    assert_eq!(d.code, Code::LOAD);
    #[cfg(feature = "render")]
    assert!(
        check_file("/nonexistent/x.json", false)
            .report
            .render_human(None)
            .contains("error[PG0000]")
    );
}

#[test]
fn collisions_and_unresolved_ids_come_from_the_partial_graph() {
    let mut doc = base();
    doc["nodes"]["root"] = serde_json::json!({"supervisor": "nobody"});
    let text = serde_json::to_string(&doc).unwrap();
    let p = write("collide.json", &text);
    let c = check_file(&p, true);
    assert!(c.graph.is_some());
    assert_eq!(c.report.with_code(Code::ID_COLLISION).count(), 1);
}
