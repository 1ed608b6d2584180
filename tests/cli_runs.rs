//! `pactgraph run` with a store and `pactgraph runs ...`: every command and status, real
//! processes against a real SQLite file in a temporary folder (never the checkout's
//! `.pactgraph/`).
#![cfg(all(unix, feature = "cli"))]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::cli::{Bench, check_side, check_trace, untimed};

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

fn examples(name: &str) -> String {
    format!("{}/examples/workflows/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `run` keeps the run and prints its id after `workflow`; `runs list` (table and JSON)
/// and `runs show` (human and JSON, trace and state) read it back.
#[test]
fn run_prints_run_id_and_runs_list_and_show_read_it() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(3, 20));
        let r = b.run(&[
            "run",
            wf.to_str().unwrap(),
            "--quiet",
            "--full",
            "--name",
            "three",
        ]);
        assert_eq!(r.code, 0, "{}", r.err);
        let out = r.json();
        let keys: Vec<&str> = out
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys[..6],
            [
                "workflow",
                "run_id",
                "status",
                "termination_reason",
                "steps",
                "state"
            ]
        );
        let id = out["run_id"].as_str().unwrap().to_string();
        assert_eq!(id.len(), 26);

        let list = b.run(&["runs", "list", "--format", "json"]).json();
        assert_eq!(list[0]["run_id"], id.as_str());
        assert_eq!(list[0]["name"], "three");
        assert_eq!(list[0]["status"], "completed");
        assert_eq!(list[0]["steps"], 3);
        let keys: Vec<&str> = list[0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "run_id",
                "name",
                "workflow",
                "status",
                "termination_reason",
                "steps",
                "created_ms",
                "updated_ms",
                "expires_ms",
                "waits_on"
            ]
        );
        let table = b.run(&["runs", "list"]);
        assert_eq!(table.code, 0);
        assert!(table.out.contains("WORKFLOW"), "{}", table.out);
        assert!(
            table.out.contains(&id) && table.out.contains("just now"),
            "{}",
            table.out
        );

        // By id, by a 6+ character prefix, by name: the same run.
        for key in [id.as_str(), &id[..8], "three"] {
            let shown = b.show(key);
            assert_eq!(shown["run"]["run_id"], id.as_str(), "{key}");
        }
        let shown = b.show("three");
        assert_eq!(shown["state"]["n"], 3);
        check_trace(&shown["trace"], 3);
        assert_eq!(untimed(&shown["state"]), untimed(&out["state"]));
        // Accounting: three runs of `tick`, with their wall time (no `$usage` reported).
        assert_eq!(
            shown["accounting"]["by_node"]["tick"]
                .as_object()
                .map(|u| u.keys().map(String::as_str).collect::<Vec<_>>()),
            Some(vec!["wall_ms"])
        );
        assert_eq!(
            shown["accounting"]["by_owner"]["tick"],
            shown["accounting"]["total"]
        );
        assert_eq!(shown["accounting"]["by_subgraph"], serde_json::json!({}));
        let human = b.run(&["runs", "show", "three", "--trace"]);
        assert_eq!(human.code, 0);
        for needle in [
            "status       completed",
            "dispatch",
            "dependencies none",
            "accounting",
            "WALL_MS",
            "owner  tick",
        ] {
            assert!(human.out.contains(needle), "{needle} in {}", human.out);
        }
        // The name is taken while the run has not expired.
        let again = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--name", "three"]);
        assert_eq!(again.code, 1);
        assert!(again.err.contains("taken by run"), "{}", again.err);
    }
}

/// A paused run is `awaiting_input`; `runs export` prints the saved run that
/// `pactgraph resume FILE` reads; `runs resume --answer` finishes it, and a second resume
/// of the completed run is refused (exit 1).
#[test]
fn awaiting_input_is_resumed_with_an_answer_and_exported_for_resume_file() {
    for b in Bench::each(BIN.as_ref()) {
        let r = b.run(&["run", &examples("clarification.json"), "--name", "ask"]);
        assert_eq!(r.code, 4, "{}", r.err);
        assert!(r.err.contains("runs resume"), "{}", r.err);
        assert_eq!(b.status("ask"), "awaiting_input");
        let listed = b.run(&[
            "runs",
            "list",
            "--status",
            "awaiting_input",
            "--format",
            "json",
        ]);
        assert_eq!(listed.json()[0]["waits_on"], "an answer");

        let missing = b.run(&["runs", "resume", "ask"]);
        assert_eq!(missing.code, 2, "{}", missing.err);
        assert!(missing.err.contains("--answer"), "{}", missing.err);

        // Export, and resume the file with the store off: the import/export path.
        let export = b.run(&["runs", "export", "ask"]);
        assert_eq!(export.code, 0);
        let file = b.file("saved.json", &export.out);
        let plain = b.run(&[
            "resume",
            file.to_str().unwrap(),
            "--answer",
            "M",
            "--store",
            "none",
            "--quiet",
        ]);
        assert_eq!(plain.code, 0, "{}", plain.err);
        assert_eq!(b.status("ask"), "awaiting_input", "the store is untouched");

        let done = b.run(&["runs", "resume", "ask", "--answer", "M"]);
        assert_eq!(done.code, 0, "{}", done.err);
        assert_eq!(done.json()["status"], "completed");
        assert_eq!(
            untimed(&done.json()["state"]),
            untimed(&plain.json()["state"])
        );
        assert_eq!(b.status("ask"), "completed");
        let twice = b.run(&["runs", "resume", "ask", "--answer", "M"]);
        assert_eq!(twice.code, 1);
        assert!(twice.err.contains("is completed"), "{}", twice.err);
    }
}

/// `resume FILE` with a store imports the saved run (written by `--state-out` with the
/// store off) and continues it through the store.
#[test]
fn resume_file_imports_into_the_store() {
    for b in Bench::each(BIN.as_ref()) {
        let saved = b.dir.join("paused.json");
        let r = b.run(&[
            "run",
            &examples("clarification.json"),
            "--store",
            "none",
            "--state-out",
            saved.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 4);
        let id = r.json()["run_id"].as_str().unwrap().to_string();
        let done = b.run(&[
            "resume",
            saved.to_str().unwrap(),
            "--answer",
            "L",
            "--quiet",
        ]);
        assert_eq!(done.code, 0, "{}", done.err);
        assert_eq!(done.json()["run_id"], id.as_str());
        assert_eq!(b.status(&id), "completed");
    }
}

/// Cancelling a paused (`awaiting_input`) run stops it at once (`stopped`, `cancelled`);
/// it cannot be resumed, nor cancelled again.
#[test]
fn a_cancelled_waiting_run_is_stopped_and_not_resumable() {
    for b in Bench::each(BIN.as_ref()) {
        let r = b.run(&[
            "run",
            &examples("clarification.json"),
            "--name",
            "w",
            "--quiet",
        ]);
        assert_eq!(r.code, 4);
        let c = b.run(&["runs", "cancel", "w"]);
        assert_eq!(c.code, 0, "{}", c.err);
        assert!(c.out.contains("cancelled"));
        let shown = b.show("w");
        assert_eq!(shown["run"]["status"], "stopped");
        assert_eq!(shown["run"]["termination_reason"], "cancelled");
        let last = shown["trace"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["kind"], "guard_stop");
        let again = b.run(&["runs", "resume", "w", "--answer", "x"]);
        assert_eq!(again.code, 1);
        assert!(again.err.contains("cancelled"), "{}", again.err);
        let twice = b.run(&["runs", "cancel", "w"]);
        assert_eq!(twice.code, 1);
        assert!(twice.err.contains("cannot cancel"), "{}", twice.err);
    }
}

/// A run stopped by `max_steps_exceeded` resumes only with a higher `--max-steps`, and
/// ends with the state and trace of a run that had the budget from the start.
#[test]
fn a_max_steps_stop_resumes_with_a_higher_budget() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(6, 40));
        let full = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--name", "full"]);
        assert_eq!(full.code, 0, "{}", full.err);
        b.remove("side.txt");
        let r = b.run(&[
            "run",
            wf.to_str().unwrap(),
            "--max-steps",
            "3",
            "--name",
            "short",
        ]);
        assert_eq!(r.code, 3, "{}", r.err);
        assert_eq!(r.json()["termination_reason"], "max_steps_exceeded");
        let same = b.run(&["runs", "resume", "short", "--max-steps", "3"]);
        assert_eq!(same.code, 1);
        assert!(same.err.contains("higher --max-steps"), "{}", same.err);
        let more = b.run(&["runs", "resume", "short", "--max-steps", "40", "--quiet"]);
        assert_eq!(more.code, 0, "{}", more.err);
        assert_eq!(more.json()["status"], "completed");
        let (a, z) = (b.show("full"), b.show("short"));
        assert_eq!(untimed(&a["trace"]), untimed(&z["trace"]));
        assert_eq!(untimed(&a["accounting"]), untimed(&z["accounting"]));
        assert_eq!(untimed(&a["state"]["n"]), untimed(&z["state"]["n"]));
        check_trace(&z["trace"], 6);
        // The stored budget is the new one (a later resume keeps it).
        let export: Value = serde_json::from_str(&b.run(&["runs", "export", "short"]).out).unwrap();
        assert_eq!(export["document"]["budgets"]["max_steps"], 40);
        check_side(&b.side(), 6, 0);
    }
}

/// A failed exec step is tried again by `runs resume`, with attempt 2 (on stdin and in
/// `PACTGRAPH_ATTEMPT`, which the program checks agree); the run then completes.
#[test]
fn a_failed_exec_step_is_retried_by_runs_resume() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(4, 40));
        b.file("fail_step", "2");
        let r = b.run(&["run", wf.to_str().unwrap(), "--name", "f"]);
        assert_eq!(r.code, 1, "{}", r.err);
        assert_eq!(r.json()["status"], "failed");
        assert!(r.err.contains("failing step 2 on purpose"), "{}", r.err);
        assert_eq!(b.status("f"), "failed");
        let retried = b.run(&["runs", "resume", "f", "--quiet"]);
        assert_eq!(retried.code, 0, "{}", retried.err);
        assert_eq!(retried.json()["state"]["n"], 4);
        assert_eq!(
            b.side(),
            vec![(0, 1), (1, 1), (2, 1), (2, 2), (3, 1)],
            "step 2 failed on attempt 1 and ran again as attempt 2"
        );
        check_trace(&b.show("f")["trace"], 4);
    }
}

/// `--ttl` and the document's `retention` set the expiry; an expired run is hidden
/// (shown with `--all`), and `prune --expired` deletes it (`--dry-run` only counts).
#[test]
fn an_expired_run_is_hidden_and_pruned() {
    for b in Bench::each(BIN.as_ref()) {
        let mut doc: Value = serde_json::from_str(&support::cli::ticker_json(1, 10)).unwrap();
        doc["retention"] = "2h".into();
        let wf = b.file("wf.json", &doc.to_string());
        let kept = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--name", "kept"]);
        assert_eq!(kept.code, 0, "{}", kept.err);
        let brief = b.run(&[
            "run",
            wf.to_str().unwrap(),
            "--quiet",
            "--ttl",
            "1s",
            "--name",
            "x",
        ]);
        assert_eq!(brief.code, 0, "{}", brief.err);
        let shown = b.show("kept")["run"].clone();
        let left = shown["expires_ms"].as_u64().unwrap() - shown["created_ms"].as_u64().unwrap();
        assert!(
            (7_100_000..7_300_000).contains(&left),
            "retention 2h: {left} ms"
        );
        std::thread::sleep(Duration::from_millis(1100));
        let visible = b.run(&["runs", "list", "--format", "json"]).json();
        assert_eq!(visible.as_array().unwrap().len(), 1, "{visible}");
        let all = b.run(&["runs", "list", "--all", "--format", "json"]).json();
        assert_eq!(all.as_array().unwrap().len(), 2);
        let dry = b.run(&["runs", "prune", "--expired", "--dry-run"]);
        assert_eq!(
            dry.out.trim(),
            "1 run would be pruned (dry run: nothing deleted)"
        );
        let pruned = b.run(&["runs", "prune", "--expired"]);
        assert_eq!(pruned.out.trim(), "pruned 1 run");
        let all = b.run(&["runs", "list", "--all", "--format", "json"]).json();
        assert_eq!(all.as_array().unwrap().len(), 1);
        assert_eq!(all[0]["name"], "kept");
        // A bad duration is a usage error, before anything runs.
        let bad = b.run(&["run", wf.to_str().unwrap(), "--ttl", "soon"]);
        assert_eq!(bad.code, 2, "{}", bad.err);
        let none = b.run(&["runs", "prune"]);
        assert_eq!(none.code, 2, "{}", none.err);
        let by_status = b.run(&[
            "runs",
            "prune",
            "--status",
            "completed",
            "--older-than",
            "0s",
        ]);
        assert_eq!(by_status.out.trim(), "pruned 1 run");
    }
}

/// `--durability full` runs the same; `--store none` keeps nothing and `runs` refuses it.
#[test]
fn durability_full_and_store_none() {
    for b in Bench::each(BIN.as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(2, 10));
        let full = b.run(&[
            "run",
            wf.to_str().unwrap(),
            "--quiet",
            "--durability",
            "full",
        ]);
        assert_eq!(full.code, 0, "{}", full.err);
        let none = b.run(&["run", wf.to_str().unwrap(), "--quiet", "--store", "none"]);
        assert_eq!(none.code, 0, "{}", none.err);
        assert_eq!(none.json()["run_id"].as_str().unwrap().len(), 26);
        let list = b.run(&["runs", "list", "--format", "json"]).json();
        assert_eq!(list.as_array().unwrap().len(), 1, "only the stored run");
        let refused = b.run(&["runs", "list", "--store", "none"]);
        assert_eq!(refused.code, 2);
    }
}
