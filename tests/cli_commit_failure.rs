//! A commit that fails says why: a run whose store fills up (a 4 MB tmpfs: the SQLite file
//! on it; a PostgreSQL tablespace on it) stops at once with the database's own error in
//! its outcome's `message` and on stderr (even with `--quiet`), `interrupted`; once space
//! is freed `runs resume` finishes it, every step run once but the one in flight.
//!
//! Needs to mount a tmpfs (root, as in CI's container); where it cannot, the test says so
//! and does nothing.
#![cfg(all(target_os = "linux", feature = "cli"))]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::cli::{Bench, TICK_PY, check_side};
use support::stores::{Backend, admin, backends, pg_url};

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_pactgraph");

/// Steps of the run: 60 KB each, 6 MB in all, on 4 MB.
const TICKS: u32 = 100;

/// A tmpfs of `size` mounted at `dir` (created), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).ok()?;
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0777"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(dir.to_path_buf()))
    }

    fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remounting {} with size {size}", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// What one half of the test set up, taken down in order even when it fails: the bench
/// (and its PostgreSQL schema, whose tables live in the tablespace), then the tablespace,
/// then the tmpfs under it (unmounted under a live tablespace, the server's checkpoints
/// would fail from then on).
struct Setup {
    bench: Option<Bench>,
    tablespace: Option<String>,
    tmpfs: Option<Tmpfs>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        drop(self.bench.take());
        if let (Some(name), Some(base)) = (self.tablespace.take(), pg_url()) {
            let sql = format!("DROP TABLESPACE IF EXISTS {name}");
            if std::panic::catch_unwind(|| admin(&base, &sql)).is_err() {
                eprintln!("tablespace {name} left behind");
            }
        }
        drop(self.tmpfs.take());
    }
}

/// The ticker of `TICKS` exec steps, each writing the 60 KB slice `blob`.
fn workflow() -> String {
    format!(
        r#"{{"workflow": "blobs",
 "slices": {{"n": {{}}, "done": {{}}, "blob": {{}}}},
 "budgets": {{"max_steps": {max}, "node_timeout_ms": 120000}},
 "entry": "boss",
 "supervisors": {{"boss": {{"allow": ["tick"], "default": {{"stop_global": {{"reason": "counted"}}}}}}}},
 "nodes": {{"tick": {{"supervisor": "boss", "reads": ["n"], "writes": ["n", "done", "blob"],
   "triggers": [{{"priority": 1, "when": {{"not": {{"path": "/done", "equals": true}}}}}}],
   "run": {{"exec": {{"argv": ["python3", "tick60.py"], "timeout_ms": 120000,
                      "env": {{"TICKS": "{TICKS}"}}}}}}}}}}}}"#,
        max = TICKS + 10
    )
}

/// Proves a full disk stops the run at once with the reason, and `runs resume` finishes
/// it (see the file's doc), on both stores.
#[test]
fn a_full_disk_stops_the_run_with_the_reason_and_resume_finishes_it() {
    for backend in backends() {
        // Outside the bench's folder: the bench (and its schema) goes first.
        let mnt = tempfile::tempdir().expect("a temp dir");
        let small = mnt.path().join("small");
        let Some(tmpfs) = Tmpfs::mount(&small, "4m") else {
            eprintln!("cannot mount a tmpfs here (not root?): the full-disk test is skipped");
            return;
        };
        let mut setup = Setup {
            bench: Some(Bench::on(BIN, backend)),
            tablespace: None,
            tmpfs: Some(tmpfs),
        };
        let b = setup.bench.as_mut().expect("the bench");
        match backend {
            Backend::Sqlite => {
                b.store = format!("sqlite:{}", small.join("store.db").display());
            }
            Backend::Postgres => {
                // The server runs as `postgres`: the tablespace's folder is its.
                let dir = small.join("pg");
                std::fs::create_dir_all(&dir).expect("the tablespace folder");
                let ok = Command::new("chown")
                    .args(["postgres:postgres"])
                    .arg(&dir)
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "chown of the tablespace folder");
                let name = format!("ts_{}", std::process::id());
                let base = pg_url().expect("PG_URL");
                admin(
                    &base,
                    &format!("CREATE TABLESPACE {name} LOCATION '{}'", dir.display()),
                );
                // Every table of the store's schema goes to the tablespace.
                b.store = format!("{}%20-c%20default_tablespace%3D{name}", b.store);
                setup.tablespace = Some(name);
            }
        }
        let b = setup.bench.as_ref().expect("the bench");
        let program = TICK_PY.replace(
            r#"print(json.dumps({"n": n + 1, "done": n + 1 >= int(os.environ["TICKS"])}))"#,
            // 60 KB that do not compress (PostgreSQL compresses large values).
            r#"import base64
print(json.dumps({"n": n + 1, "done": n + 1 >= int(os.environ["TICKS"]), "blob": base64.b64encode(os.urandom(45000)).decode()}))"#,
        );
        assert_ne!(program, TICK_PY, "the program writes its blob");
        b.file("tick60.py", &program);
        let wf = b.file("blobs.json", &workflow());

        let first = b.run(&["run", wf.to_str().expect("UTF-8"), "--quiet"]);
        assert_eq!(first.code, 130, "stopped as interrupted: {first:?}");
        let out = first.json();
        assert_eq!(out["status"], "interrupted", "{out}");
        let message = out["message"].as_str().unwrap_or_default();
        let full = |text: &str| text.contains("full") || text.contains("No space left");
        assert!(full(message), "the reason in the message: {out}");
        assert!(full(&first.err), "the reason on stderr: {}", first.err);
        let id = out["run_id"].as_str().expect("a run id").to_string();
        let steps = out["steps"].as_u64().expect("steps");
        assert!(steps < u64::from(TICKS), "stopped early, at {steps}");
        eprintln!("stopped at step {steps}: {message}");
        // Stopped at once: no step ran past the one whose commit failed.
        let ran = b.side();
        assert!(
            ran.iter().all(|(s, _)| u64::from(*s) <= steps),
            "no step after the failed commit: {ran:?}"
        );
        assert_eq!(b.status(&id), "interrupted");

        setup.tmpfs.as_ref().expect("the tmpfs").resize("64m");
        let resumed = b.run(&["runs", "resume", &id, "--quiet"]);
        assert_eq!(resumed.code, 0, "{resumed:?}");
        let done = resumed.json();
        assert_eq!(done["steps"], TICKS, "{done}");
        assert_eq!(done["status"], "completed");
        // Every step once, but the one whose commit failed (run again, attempt 2).
        let repeated = check_side(&b.side(), TICKS, 1);
        assert!(repeated <= 1);
        drop(setup);
        drop(mnt);
    }
}
