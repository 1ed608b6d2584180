//! Every store test runs on both run stores: SQLite (a file in a temporary folder) and
//! PostgreSQL (a schema of its own in the database `PG_URL` names, dropped afterwards).
//!
//! Without `PG_URL` the PostgreSQL half is skipped with a line on stderr, unless `CI` is
//! `true`: then a missing `PG_URL` fails the test (CI must test both stores).
#![allow(dead_code)]

use std::fmt;
use std::ops::Deref;

use pactgraph::store::{
    AnyStore, Clock, Durability, PgOptions, PgStore, SqliteOptions, SqliteStore,
};
use sqlx::Connection;

/// Which store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite,
    /// A fresh schema in the PostgreSQL database `PG_URL` names.
    Postgres,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        })
    }
}

/// The PostgreSQL server's URL (`PG_URL`), if set.
pub fn pg_url() -> Option<String> {
    std::env::var("PG_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// A new schema on `PG_URL`'s server for a PostgreSQL-only test, or `None` (said) when
/// `PG_URL` is not set; with `CI=true` and no `PG_URL`, panics.
pub fn pg_schema_or_skip() -> Option<Schema> {
    if pg_url().is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but PG_URL is not set"
        );
        eprintln!("PG_URL is not set: skipped");
        return None;
    }
    Some(Schema::new())
}

/// The stores to run a test on: SQLite, and PostgreSQL when `PG_URL` is set. With
/// `CI=true` and no `PG_URL`, panics.
pub fn backends() -> Vec<Backend> {
    if pg_url().is_some() {
        return vec![Backend::Sqlite, Backend::Postgres];
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but PG_URL is not set: the store tests must also run on PostgreSQL");
    }
    eprintln!("PG_URL is not set: the PostgreSQL half of this test is skipped");
    vec![Backend::Sqlite]
}

/// A store for one test, with what keeps it alive (a temp folder) or cleans it up (a
/// schema dropped on drop).
pub struct TestStore {
    /// The store.
    pub store: AnyStore,
    /// The URL it was opened with (give it to the binary, or open it again).
    pub url: String,
    /// Which backend.
    pub backend: Backend,
    _place: Place,
}

impl Deref for TestStore {
    type Target = AnyStore;
    fn deref(&self) -> &AnyStore {
        &self.store
    }
}

/// Where a test's store lives.
pub enum Place {
    /// A temporary folder holding the SQLite file.
    Dir(tempfile::TempDir),
    /// A PostgreSQL schema, dropped with the place.
    Schema(Schema),
}

/// A PostgreSQL schema of one test's own.
pub struct Schema {
    /// Its name.
    pub name: String,
    /// The URL that opens the store in it (`search_path` set to it).
    pub url: String,
}

impl Schema {
    /// A new empty schema in `PG_URL`'s database.
    pub fn new() -> Self {
        let base = pg_url().expect("PG_URL is set for a PostgreSQL test");
        let name = format!(
            "t_{}",
            pactgraph::runtime::RunId::new()
                .to_string()
                .to_ascii_lowercase()
        );
        admin(&base, &format!("CREATE SCHEMA {name}"));
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{name}");
        Self { name, url }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        // Never a panic here (a failed test unwinds through it): a schema that cannot be
        // dropped now (a worker process still holds its locks) is left, said on stderr.
        if let Some(base) = pg_url() {
            let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
            if std::panic::catch_unwind(|| admin(&base, &sql)).is_err() {
                eprintln!("schema {} left behind", self.name);
            }
        }
    }
}

/// Runs one statement on `url` on a runtime of its own (usable from sync and async code:
/// a thread of its own).
pub fn admin(url: &str, sql: &str) {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        rt.block_on(async {
            let mut c = sqlx::PgConnection::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("connecting to PG_URL: {e}"));
            sqlx::raw_sql(&sql)
                .execute(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        });
    })
    .join()
    .expect("the admin statement ran");
}

/// A fresh place for a store on `backend`: its URL and what keeps it.
pub fn place(backend: Backend) -> (String, Place) {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("a temp dir");
            let url = format!("sqlite:{}", dir.path().join("store.db").display());
            (url, Place::Dir(dir))
        }
        Backend::Postgres => {
            let schema = Schema::new();
            (schema.url.clone(), Place::Schema(schema))
        }
    }
}

/// A fresh, empty store on `backend` (default options).
pub async fn open(backend: Backend) -> TestStore {
    open_with(backend, None).await
}

/// A fresh store on `backend` taking a snapshot at least every `every` checkpoints.
pub async fn open_with(backend: Backend, every: Option<u64>) -> TestStore {
    eprintln!("== on {backend}");
    let (url, place) = place(backend);
    let store = reopen(backend, &url, every).await;
    TestStore {
        store,
        url,
        backend,
        _place: place,
    }
}

/// A fresh store on `backend` reading the time from `clock` (a manual clock: leases that
/// lapse only when the test moves it, whatever the machine's load).
pub async fn open_clocked(backend: Backend, clock: Clock) -> TestStore {
    eprintln!("== on {backend}");
    let (url, place) = place(backend);
    let store = match backend {
        Backend::Sqlite => SqliteStore::open_with(&url, SqliteOptions::default().clock(clock))
            .await
            .expect("opens")
            .into(),
        Backend::Postgres => PgStore::open_with(&url, PgOptions::default().clock(clock))
            .await
            .expect("opens")
            .into(),
    };
    TestStore {
        store,
        url,
        backend,
        _place: place,
    }
}

/// Opens the store at `url` (on `backend`) again, as another process would.
pub async fn reopen(backend: Backend, url: &str, every: Option<u64>) -> AnyStore {
    match backend {
        Backend::Sqlite => {
            let mut o = SqliteOptions::default();
            if let Some(n) = every {
                o = o.snapshot_every(n);
            }
            SqliteStore::open_with(url, o).await.expect("opens").into()
        }
        Backend::Postgres => {
            let mut o = PgOptions::default().durability(Durability::Normal);
            if let Some(n) = every {
                o = o.snapshot_every(n);
            }
            PgStore::open_with(url, o).await.expect("opens").into()
        }
    }
}

/// Counts the snapshots written to the store at `url` (on `backend`) from now on: a
/// trigger on the `snapshots` table adds each insert and its bytes to a row of
/// `snapshot_writes` (read by [`snapshot_writes`]).
pub async fn count_snapshot_writes(backend: Backend, url: &str) {
    add_counter(
        backend,
        url,
        "CREATE TABLE snapshot_writes (n INTEGER NOT NULL, bytes INTEGER NOT NULL); \
         INSERT INTO snapshot_writes VALUES (0, 0); \
         CREATE TRIGGER snapshot_written AFTER INSERT ON snapshots BEGIN \
           UPDATE snapshot_writes SET n = n + 1, bytes = bytes + length(NEW.run_state); \
         END;",
        "CREATE TABLE snapshot_writes (n BIGINT NOT NULL, bytes BIGINT NOT NULL); \
         INSERT INTO snapshot_writes VALUES (0, 0); \
         CREATE FUNCTION snapshot_written() RETURNS trigger LANGUAGE plpgsql AS $$ \
           BEGIN UPDATE snapshot_writes SET n = n + 1, \
             bytes = bytes + length(NEW.run_state); RETURN NULL; END $$; \
         CREATE TRIGGER snapshot_written AFTER INSERT ON snapshots \
           FOR EACH ROW EXECUTE FUNCTION snapshot_written();",
    )
    .await;
}

/// Runs the statements that add a counting trigger to the store at `url`: `sqlite`'s on
/// SQLite, `postgres`'s on PostgreSQL (read back with [`two_counts`]).
pub async fn add_counter(backend: Backend, url: &str, sqlite: &str, postgres: &str) {
    match backend {
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url)
                .await
                .expect("connects");
            sqlx::raw_sql(sqlite)
                .execute(&mut c)
                .await
                .expect("adds the counting trigger");
        }
        Backend::Postgres => admin(url, postgres),
    }
}

/// The snapshots written since [`count_snapshot_writes`]: how many, and their bytes.
pub async fn snapshot_writes(backend: Backend, url: &str) -> (i64, i64) {
    two_counts(backend, url, "SELECT n, bytes FROM snapshot_writes").await
}

/// The one row of two integers query `q` reads on the store at `url` (on `backend`):
/// what a counting trigger added up.
pub async fn two_counts(backend: Backend, url: &str, q: &str) -> (i64, i64) {
    match backend {
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url)
                .await
                .expect("connects");
            sqlx::query_as(q).fetch_one(&mut c).await.expect("reads")
        }
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.expect("connects");
            sqlx::query_as(q).fetch_one(&mut c).await.expect("reads")
        }
    }
}
