//! Bad input to the run store's commands gets a clear error and an exit code, never a
//! panic and never a silently new, empty store: unknown and ambiguous run ids, a store
//! path that cannot be created, a store of a newer format or of a development build's, a
//! corrupt database file, an unsupported URL; a PostgreSQL server that does not answer,
//! wrong credentials, a newer PostgreSQL schema.
#![cfg(all(unix, feature = "cli"))]

mod support;

use std::process::Command;

use support::cli::Bench;

fn bench() -> Bench {
    Bench::new(env!("CARGO_BIN_EXE_pactgraph"))
}

fn python(code: &str) {
    let ok = Command::new("python3")
        .args(["-c", code])
        .status()
        .expect("python3 runs")
        .success();
    assert!(ok, "python3 -c {code}");
}

#[test]
fn unknown_and_ambiguous_run_ids_exit_1_listing_the_candidates() {
    for b in Bench::each(env!("CARGO_BIN_EXE_pactgraph").as_ref()) {
        let wf = b.file("wf.json", &support::cli::ticker_json(1, 5));
        let mut ids = Vec::new();
        // ULIDs made seconds apart share their leading (time) characters.
        while ids.len() < 2 {
            let r = b.run(&["run", wf.to_str().unwrap(), "--quiet"]);
            assert_eq!(r.code, 0, "{}", r.err);
            ids.push(r.json()["run_id"].as_str().unwrap().to_string());
            let common = ids[0]
                .chars()
                .zip(ids.last().unwrap().chars())
                .take_while(|(a, z)| a == z)
                .count();
            if ids.len() == 2 && common < 6 {
                ids.remove(0); // crossed a time boundary: try again
            }
        }
        let common = ids[0]
            .chars()
            .zip(ids[1].chars())
            .take_while(|(a, z)| a == z)
            .count();
        let prefix = &ids[0][..common.min(9)];
        let r = b.run(&["runs", "show", prefix]);
        assert_eq!(r.code, 1, "{}", r.err);
        assert!(r.err.contains("matches 2 runs"), "{}", r.err);
        assert!(
            r.err.contains(&ids[0]) && r.err.contains(&ids[1]),
            "{}",
            r.err
        );
        // Lower case is the same prefix (ULIDs are case-insensitive).
        let lower = b.run(&["runs", "show", &prefix.to_lowercase()]);
        assert_eq!(lower.code, 1);

        for key in ["01ZZZZZZZZZZZZZZZZZZZZZZZZ", "nosuchname", "01ZZZZ"] {
            let r = b.run(&["runs", "show", key]);
            assert_eq!(r.code, 1, "{key}: {}", r.err);
            assert!(r.err.contains(&format!("no run `{key}`")), "{}", r.err);
        }
        // `--limit`: the newest first (the default is 100; 0 lists all).
        let one = b.run(&["runs", "list", "--limit", "1", "--format", "json"]);
        assert_eq!(one.json().as_array().unwrap().len(), 1);
        assert_eq!(one.json()[0]["run_id"], ids[1].as_str());
        assert!(one.err.contains("--limit 0"), "{}", one.err);
        let one = b.run(&[
            "runs",
            "list",
            "--limit",
            "1",
            "--status",
            "completed",
            "--format",
            "json",
        ]);
        assert_eq!(one.json()[0]["run_id"], ids[1].as_str());
        let all = b.run(&["runs", "list", "--limit", "0", "--format", "json"]);
        assert!(all.json().as_array().unwrap().len() >= 2);
        let r = b.run(&["runs", "resume", "nosuchname"]);
        assert_eq!(r.code, 1);
        let r = b.run(&["runs", "cancel", "nosuchname"]);
        assert_eq!(r.code, 1);
    }
}

#[test]
fn a_store_path_that_cannot_be_created_is_an_error() {
    let b = bench();
    b.file("plainfile", "not a folder");
    let url = format!("sqlite:{}/store.db", b.dir.join("plainfile").display());
    let r = b.run(&["runs", "list", "--store", &url]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("cannot open the run store"), "{}", r.err);
    assert!(r.err.contains("cannot create the folder"), "{}", r.err);
    let wf = b.file("wf.json", &support::cli::ticker_json(1, 5));
    let r = b.run(&["run", wf.to_str().unwrap(), "--store", &url]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(!b.dir.join("side.txt").exists(), "nothing ran");
}

#[test]
fn a_store_of_a_newer_format_is_refused_untouched() {
    let b = bench();
    assert_eq!(b.run(&["runs", "list"]).code, 0, "creates the store");
    let db = b.dir.join("store.db");
    python(&format!(
        "import sqlite3; c = sqlite3.connect({:?}); c.execute('PRAGMA user_version = 99'); \
         c.commit()",
        db.display().to_string()
    ));
    let r = b.run(&["runs", "list"]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("has format 99, newer than"), "{}", r.err);
    python(&format!(
        "import sqlite3; c = sqlite3.connect({:?}); \
         v = c.execute('PRAGMA user_version').fetchone()[0]; assert v == 99, v",
        db.display().to_string()
    ));
}

/// Proves that a store of a format development builds wrote (13 here: its migrations
/// recorded up to version 13, its `user_version` 13) is refused with exit 1 and a message
/// naming the store and saying to recreate it, and that its file is left byte for byte
/// as it was (no migration, no mark).
#[test]
fn a_store_of_a_development_format_is_refused_untouched_saying_to_recreate_it() {
    let b = bench();
    let db = b.dir.join("dev.db");
    let url = format!("sqlite:{}", db.display());
    let made = b.run(&["runs", "list", "--store", &url]);
    assert_eq!(made.code, 0, "creates the store: {}", made.err);
    python(&format!(
        "import sqlite3; c = sqlite3.connect({:?}); \
         c.execute('UPDATE _sqlx_migrations SET version = 13'); \
         c.execute('PRAGMA user_version = 13'); c.commit(); c.close()",
        db.display().to_string()
    ));
    let before = std::fs::read(&db).expect("reads the store");
    let r = b.run(&["runs", "list", "--store", &url]);
    assert_eq!(r.code, 1, "{}", r.err);
    let said = format!(
        "cannot open the run store `{url}`: format 13 was written by a development build of \
         pactgraph; this one reads format {} only: recreate the store (a new SQLite file, or \
         an empty PostgreSQL database or schema) and run again",
        pactgraph::store::STORE_FORMAT
    );
    assert!(r.err.contains(&said), "{}", r.err);
    assert_eq!(
        std::fs::read(&db).expect("reads the store"),
        before,
        "untouched"
    );
    python(&format!(
        "import sqlite3; c = sqlite3.connect({:?}); \
         v = c.execute('PRAGMA user_version').fetchone()[0]; assert v == 13, v; \
         m = c.execute('SELECT MAX(version) FROM _sqlx_migrations').fetchone()[0]; \
         assert m == 13, m",
        db.display().to_string()
    ));
}

#[test]
fn a_corrupt_database_file_is_an_error_and_is_not_replaced() {
    let b = bench();
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(b.dir.join("store.db"), &garbage).unwrap();
    for args in [
        &["runs", "list"][..],
        &["runs", "show", "anything"][..],
        &["runs", "prune", "--expired"][..],
    ] {
        let r = b.run(args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.err);
        assert!(r.err.contains("cannot open the run store"), "{}", r.err);
        assert!(r.err.contains("not a database"), "{}", r.err);
    }
    assert_eq!(std::fs::read(b.dir.join("store.db")).unwrap(), garbage);
}

#[test]
fn unsupported_store_urls_are_usage_errors() {
    let b = bench();
    let r = b.run(&["runs", "list", "--store", "mysql://x"]);
    assert_eq!(r.code, 2);
    assert!(
        r.err.contains("expected `sqlite:PATH`, `postgres://"),
        "{}",
        r.err
    );
    let wf = b.file("wf.json", &support::cli::ticker_json(1, 5));
    let r = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .current_dir(&b.dir)
        .env("PACTGRAPH_STORE", "redis://localhost/runs")
        .args(["run", wf.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2), "the environment variable is read");
    assert!(!b.dir.join("side.txt").exists(), "nothing ran");
}

#[test]
fn the_default_store_is_created_under_the_working_directory() {
    let b = bench();
    let wf = b.file("wf.json", &support::cli::ticker_json(1, 5));
    let r = Command::new(env!("CARGO_BIN_EXE_pactgraph"))
        .current_dir(&b.dir)
        .env_remove("PACTGRAPH_STORE")
        .args(["run", wf.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0));
    assert!(b.dir.join(".pactgraph/store.db").is_file());
}

/// Proves bad PostgreSQL stores are clear errors with exit 1, never a panic, and never
/// print the password: a server that does not answer (a loopback port nothing listens
/// on), wrong credentials, and a database whose schema a newer pactgraph wrote (left
/// untouched: refused again on the next open).
#[test]
fn bad_postgres_stores_exit_1_with_a_clear_error() {
    use support::stores::{Backend, Place, admin, backends, place};
    let b = bench();
    let check = |r: &support::cli::Ran, what: &str| {
        assert_eq!(r.code, 1, "{what}: {}", r.err);
        assert!(r.err.contains("cannot open the run store") || r.err.contains("newer than"));
        assert!(!r.err.contains("panicked"), "{what}: {}", r.err);
        assert!(
            !r.err.contains("s3cret"),
            "{what}: the password is not printed: {}",
            r.err
        );
    };
    let r = b.run(&[
        "runs",
        "list",
        "--store",
        "postgres://me:s3cret@127.0.0.1:1/runs",
    ]);
    check(&r, "unreachable");
    assert!(
        r.err.contains("postgres://me:***@127.0.0.1:1/runs"),
        "{}",
        r.err
    );
    assert!(r.err.contains("Connection refused"), "{}", r.err);
    let wf = b.file("wf.json", &support::cli::ticker_json(1, 5));
    let r = b.run(&[
        "run",
        wf.to_str().unwrap(),
        "--store",
        "postgres://me:s3cret@127.0.0.1:1/runs",
    ]);
    check(&r, "run, unreachable");
    assert!(!b.dir.join("side.txt").exists(), "nothing ran");

    if !backends().contains(&Backend::Postgres) {
        return;
    }
    let (url, place) = place(Backend::Postgres);
    let Place::Schema(schema) = &place else {
        unreachable!("a PostgreSQL place is a schema")
    };
    // Wrong credentials: the same server, another password.
    let (head, tail) = url.split_once('@').expect("PG_URL has credentials");
    let user = head.rsplit_once(':').map_or(head, |(u, _)| u);
    let wrong = format!("{user}:s3cret@{tail}");
    let r = b.run(&["runs", "list", "--store", &wrong]);
    check(&r, "wrong credentials");
    assert!(
        r.err.contains("password authentication failed"),
        "{}",
        r.err
    );

    // A newer schema: the store made, then a migration this pactgraph does not know.
    assert_eq!(b.run(&["runs", "list", "--store", &url]).code, 0);
    admin(
        &support::stores::pg_url().expect("PG_URL"),
        &format!(
            "INSERT INTO {}._sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (99, 'from the future', true, '\\x00', 0)",
            schema.name
        ),
    );
    for _ in 0..2 {
        let r = b.run(&["runs", "list", "--store", &url]);
        check(&r, "newer schema");
        assert!(r.err.contains("has format 99, newer than"), "{}", r.err);
    }
}

/// Proves `run` opens its store while it loads the workflow without changing what a
/// refused command reports or leaves (ADR 0068): a workflow that is not valid is reported
/// (exit 1, its diagnostics) before a PostgreSQL server that does not answer, an input
/// that is not JSON is a usage error (exit 2) before it, and neither leaves a SQLite
/// store behind where none was (a new file is only made once the run is to start).
#[test]
fn a_refused_workflow_is_reported_before_the_store_and_leaves_no_store() {
    let b = bench();
    let bad = b.file("bad.json", r#"{"workflow": "w", "entry": "nobody"}"#);
    let good = b.file("wf.json", &support::cli::ticker_json(1, 5));
    let dead = "postgres://me:s3cret@127.0.0.1:1/runs";
    let r = b.run(&["run", bad.to_str().unwrap(), "--store", dead]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("is not a valid workflow"), "{}", r.err);
    assert!(!r.err.contains("cannot open the run store"), "{}", r.err);
    let r = b.run(&[
        "run",
        good.to_str().unwrap(),
        "--input",
        "{no",
        "--store",
        dead,
    ]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("--input"), "{}", r.err);
    assert!(!r.err.contains("cannot open the run store"), "{}", r.err);
    // A SQLite store still to be made is made only for a run that starts.
    let db = b.dir.join("fresh/store.db");
    let url = format!("sqlite:{}", db.display());
    let r = b.run(&["run", bad.to_str().unwrap(), "--store", &url]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(!db.exists(), "a refused workflow made a store");
    // An existing store (opened while the workflow loads) and a valid run.
    let r = b.run(&["run", good.to_str().unwrap(), "--quiet", "--store", &url]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(db.is_file());
    let r = b.run(&["run", bad.to_str().unwrap(), "--store", &url]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("is not a valid workflow"), "{}", r.err);
    let r = b.run(&["run", good.to_str().unwrap(), "--quiet", "--store", &url]);
    assert_eq!(r.code, 0, "{}", r.err);
    let r = b.run(&["runs", "list", "--store", &url]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out.lines().count(), 3, "a header and two runs: {}", r.out);
}
