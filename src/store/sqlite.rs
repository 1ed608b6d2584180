//! The SQLite run store: one database file (WAL mode), opened by URL, tables created by
//! the embedded migrations in `migrations/sqlite`. Every write is one `BEGIN IMMEDIATE`
//! transaction whose first statement is a conditional update of the run's row: the
//! fencing (sequence number, lease) and the write are one atomic step.

use std::borrow::Cow;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};

use super::delta::{Before, StepDelta};
use super::{
    Checkpoint, CreateOptions, Lease, PruneFilter, RunFilter, RunInfo, RunStore, StoreError,
    StoredRun, StoredStatus, attempt_key, duration_ms, now_ms, owner_gone,
};
use crate::contracts::{SYSTEM_SLICE, WorkflowDocument};
use crate::runtime::{
    RunId, RunRecord, RunState, RunStatus, TerminationReason, TraceItem, TraceKind, digest_of,
};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous=NORMAL` (WAL): a commit survives the process dying; a power loss
    /// may lose the last commits (never corrupting the database).
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit reaches the disk before it returns.
    Full,
}

/// How a [`SqliteStore`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// `synchronous=NORMAL` or `FULL`.
    pub durability: Durability,
    /// A snapshot every this many checkpoints (besides creation, pauses and the end), so
    /// loading replays at most this many deltas. At least 1.
    pub snapshot_every: u64,
    /// How long a write waits for another connection's write lock.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Normal,
            snapshot_every: 50,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

impl SqliteOptions {
    /// With `durability`.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
    /// A snapshot every `n` checkpoints (`n` at least 1).
    pub fn snapshot_every(mut self, n: u64) -> Self {
        self.snapshot_every = n.max(1);
        self
    }
    /// Waiting up to `timeout` for a lock.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }
}

/// What a run takes in the store: its step rows and snapshots, in bytes of JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RunStorage {
    /// Step rows.
    pub steps: u64,
    /// Bytes of their deltas.
    pub step_bytes: u64,
    /// Snapshots kept.
    pub snapshots: u64,
    /// Bytes of their run states.
    pub snapshot_bytes: u64,
}

/// The run store in one SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    snapshot_every: u64,
}

/// The embedded migrations.
#[derive(Debug)]
struct Embedded;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        Box::pin(async {
            Ok(vec![
                Migration::new(
                    1,
                    Cow::Borrowed("run store"),
                    MigrationType::Simple,
                    Cow::Borrowed(include_str!("../../migrations/sqlite/0001_run_store.sql")),
                    false,
                ),
                Migration::new(
                    2,
                    Cow::Borrowed("attempts and cancel"),
                    MigrationType::Simple,
                    Cow::Borrowed(include_str!(
                        "../../migrations/sqlite/0002_attempts_and_cancel.sql"
                    )),
                    false,
                ),
            ])
        })
    }
}

/// The columns of a [`RunInfo`], in [`info_from_row`]'s order.
const INFO: &str = "id, name, workflow, digest, status, termination_reason, steps, seq, \
                    created_ms, updated_ms, expires_ms, owner, lease_expires_ms, \
                    attempt_key, attempt, cancel_requested";

/// The store format this pactgraph writes: the number of its migrations, also kept in
/// `PRAGMA user_version`. A database with a higher one is refused, untouched.
pub const STORE_FORMAT: i64 = 2;

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Writes the run's snapshot at `seq` and drops the older ones (a run keeps one), in the
/// caller's transaction.
async fn snapshot_at(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
    seq: u64,
    state: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO snapshots (run_id, seq, run_state) VALUES (?1, ?2, ?3)")
        .bind(key)
        .bind(to_i64(seq))
        .bind(state)
        .execute(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM snapshots WHERE run_id = ?1 AND seq < ?2")
        .bind(key)
        .bind(to_i64(seq))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Reads a row of [`INFO`] columns, deriving `interrupted` (running, no current lease)
/// and `running` (queued, claimed) at `now`.
fn info_from_row(row: &SqliteRow, now: u64) -> Result<RunInfo, StoreError> {
    let text: String = row
        .try_get("id")
        .map_err(StoreError::db("reading a run row", None))?;
    let id: RunId = text
        .parse()
        .map_err(|e: crate::runtime::RunIdError| StoreError::Database {
            operation: "reading a run row",
            run_id: None,
            source: sqlx::Error::Decode(Box::new(e)),
        })?;
    let db = StoreError::db("reading the run row", Some(id));
    let corrupt = |what: &str, reason: String| StoreError::Corrupt {
        run_id: id,
        what: what.to_string(),
        reason,
    };
    let status_text: String = row.try_get("status").map_err(&db)?;
    let stored = StoredStatus::parse(&status_text)
        .ok_or_else(|| corrupt("status", format!("`{status_text}` is not a status")))?;
    let reason: Option<String> = row.try_get("termination_reason").map_err(&db)?;
    let termination_reason = match reason {
        None => None,
        Some(r) => Some(
            serde_json::from_value::<TerminationReason>(serde_json::Value::String(r.clone()))
                .map_err(|_| corrupt("termination_reason", format!("`{r}` is not a reason")))?,
        ),
    };
    let owner: Option<String> = row.try_get("owner").map_err(&db)?;
    let lease: Option<i64> = row.try_get("lease_expires_ms").map_err(&db)?;
    let lease_expires_ms = lease.map(to_u64);
    let leased = owner.as_deref().is_some_and(|o| !owner_gone(o))
        && lease_expires_ms.is_some_and(|l| l > now);
    let status = match stored {
        StoredStatus::Running if !leased => StoredStatus::Interrupted,
        StoredStatus::Queued if leased => StoredStatus::Running,
        s => s,
    };
    Ok(RunInfo {
        id,
        name: row.try_get("name").map_err(&db)?,
        workflow: row.try_get("workflow").map_err(&db)?,
        digest: row.try_get("digest").map_err(&db)?,
        status,
        termination_reason,
        steps: u32::try_from(row.try_get::<i64, _>("steps").map_err(&db)?).unwrap_or(u32::MAX),
        seq: to_u64(row.try_get("seq").map_err(&db)?),
        created_ms: to_u64(row.try_get("created_ms").map_err(&db)?),
        updated_ms: to_u64(row.try_get("updated_ms").map_err(&db)?),
        expires_ms: row
            .try_get::<Option<i64>, _>("expires_ms")
            .map_err(&db)?
            .map(to_u64),
        owner,
        lease_expires_ms,
        attempt_key: row.try_get("attempt_key").map_err(&db)?,
        attempt: u32::try_from(row.try_get::<i64, _>("attempt").map_err(&db)?).unwrap_or(1),
        cancel_requested: row.try_get::<i64, _>("cancel_requested").map_err(&db)? != 0,
    })
}

/// The stored status of a run state: `queued` for a running run no step has touched.
fn stored_status(run: &RunState, seq: u64) -> StoredStatus {
    match StoredStatus::of(run.status()) {
        StoredStatus::Running if seq == 0 => StoredStatus::Queued,
        s => s,
    }
}

/// True when a database error is a uniqueness violation (a primary key taken).
fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

impl SqliteStore {
    /// Opens (creating it and its folder if missing) the store at `url`:
    /// `sqlite:PATH` (or `sqlite://PATH`), or `sqlite::memory:` for a private in-memory
    /// database. Default options: see [`SqliteOptions`].
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, SqliteOptions::default()).await
    }

    /// Opens the store at `url` with `options`.
    pub async fn open_with(url: &str, options: SqliteOptions) -> Result<Self, StoreError> {
        let bad = |reason: &str| StoreError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let open_err = |reason: String| StoreError::Open {
            url: url.to_string(),
            reason,
        };
        let rest = url
            .strip_prefix("sqlite:")
            .ok_or_else(|| bad("expected `sqlite:PATH` or `sqlite::memory:`"))?;
        let memory = rest == ":memory:";
        let base = SqliteConnectOptions::new()
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout)
            .synchronous(match options.durability {
                Durability::Normal => SqliteSynchronous::Normal,
                Durability::Full => SqliteSynchronous::Full,
            });
        let (connect, pool) = if memory {
            // One connection: each in-memory connection is a database of its own.
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
            (base.in_memory(true), pool)
        } else {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(bad("no file path after `sqlite:`"));
            }
            if path.contains('?') {
                return Err(bad("query parameters are not supported"));
            }
            let path = PathBuf::from(path);
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| {
                    open_err(format!(
                        "cannot create the folder {}: {e}",
                        parent.display()
                    ))
                })?;
            }
            let connect = base
                .filename(&path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal);
            // No ping before each acquire: a broken connection fails its statement anyway,
            // and the ping is one more round trip to SQLite's worker thread per write.
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false);
            (connect, pool)
        };
        let pool = pool
            .connect_with(connect)
            .await
            .map_err(|e| open_err(e.to_string()))?;
        check_format(&pool, url).await?;
        let migrator = Migrator::new(Embedded)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        migrator
            .run(&pool)
            .await
            .map_err(|e| open_err(format!("migrations: {e}")))?;
        sqlx::query(&format!("PRAGMA user_version = {STORE_FORMAT}"))
            .execute(&pool)
            .await
            .map_err(|e| open_err(format!("setting the format: {e}")))?;
        Ok(Self {
            pool,
            snapshot_every: options.snapshot_every.max(1),
        })
    }

    /// Closes the pool (waiting for open connections to finish).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// What run `id` takes: step rows and snapshots, in bytes of JSON.
    pub async fn storage(&self, id: RunId) -> Result<RunStorage, StoreError> {
        let db = StoreError::db("measuring storage", Some(id));
        let key = id.to_string();
        let row = sqlx::query(
            "SELECT \
               (SELECT COUNT(*) FROM steps WHERE run_id = ?1) AS steps, \
               (SELECT COALESCE(SUM(LENGTH(delta)), 0) FROM steps WHERE run_id = ?1) AS step_bytes, \
               (SELECT COUNT(*) FROM snapshots WHERE run_id = ?1) AS snapshots, \
               (SELECT COALESCE(SUM(LENGTH(run_state)), 0) FROM snapshots WHERE run_id = ?1) \
                 AS snapshot_bytes",
        )
        .bind(&key)
        .fetch_one(&self.pool)
        .await
        .map_err(&db)?;
        let get = |col: &str| row.try_get::<i64, _>(col).map(to_u64).map_err(&db);
        Ok(RunStorage {
            steps: get("steps")?,
            step_bytes: get("step_bytes")?,
            snapshots: get("snapshots")?,
            snapshot_bytes: get("snapshot_bytes")?,
        })
    }

    /// Run `id`'s step rows in sequence order: each checkpoint's number and delta.
    pub async fn deltas(&self, id: RunId) -> Result<Vec<(u64, StepDelta)>, StoreError> {
        let rows = sqlx::query("SELECT seq, delta FROM steps WHERE run_id = ?1 ORDER BY seq")
            .bind(id.to_string())
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::db("reading steps", Some(id)))?;
        rows.iter().map(|r| delta_from_row(id, r)).collect()
    }

    /// Why a fenced update touched no row: no such run, a lease not held, or a sequence
    /// number that is not the next.
    async fn refusal(&self, id: RunId, owner: &str, seq: u64, now: u64) -> StoreError {
        let info = match self.info(id).await {
            Ok(info) => info,
            Err(e) => return e,
        };
        let current = info.lease_expires_ms.is_some_and(|l| l > now);
        if info.owner.as_deref() != Some(owner) || !current {
            return StoreError::LeaseLost {
                run_id: id,
                owner: owner.to_string(),
                holder: info.owner.filter(|_| current),
            };
        }
        StoreError::SeqMismatch {
            run_id: id,
            expected: info.seq + 1,
            given: seq,
        }
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`: the write lock is taken at once,
    /// waiting up to the busy timeout, so two writers never deadlock on an upgrade).
    async fn write(
        &self,
        operation: &'static str,
        id: Option<RunId>,
    ) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::db(operation, id))
    }
}

/// Refuses a database written by a newer pactgraph (its `user_version`, or a migration
/// this one does not know) before any migration touches it. Reading the header also
/// fails early, and clearly, on a file that is not a database.
async fn check_format(pool: &SqlitePool, url: &str) -> Result<(), StoreError> {
    let open_err = |reason: String| StoreError::Open {
        url: url.to_string(),
        reason,
    };
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(pool)
        .await
        .map_err(|e| open_err(e.to_string()))?;
    let migrated: Option<i64> = sqlx::query_scalar(
        "SELECT MAX(version) FROM _sqlx_migrations \
         WHERE EXISTS (SELECT 1 FROM sqlite_master WHERE name = '_sqlx_migrations')",
    )
    .fetch_one(pool)
    .await
    .unwrap_or(None);
    let found = version.max(migrated.unwrap_or(0));
    if found > STORE_FORMAT {
        return Err(StoreError::NewerFormat {
            url: url.to_string(),
            found,
            supported: STORE_FORMAT,
        });
    }
    Ok(())
}

fn delta_from_row(id: RunId, row: &SqliteRow) -> Result<(u64, StepDelta), StoreError> {
    let db = StoreError::db("reading steps", Some(id));
    let seq = to_u64(row.try_get("seq").map_err(&db)?);
    let text: String = row.try_get("delta").map_err(&db)?;
    let delta = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        run_id: id,
        what: format!("step {seq}"),
        reason: e.to_string(),
    })?;
    Ok((seq, delta))
}

/// Stops `run` as cancelled: a `guard_stop` trace item, open frames reported as
/// uncommitted, `system.call_stack` emptied.
pub(crate) fn cancel_run(run: &mut RunState, at_ms: u64) -> Result<(), String> {
    let supervisor = run
        .pending()
        .map(|p| Arc::clone(p.supervisor()))
        .or_else(|| {
            run.trace
                .items
                .iter()
                .rev()
                .find_map(|i| i.supervisor.clone())
        });
    let mut item = TraceItem::new(TraceKind::GuardStop, run.steps, run.depth());
    item.supervisor = supervisor;
    item.subgraph = run.stack.last().map(|f| Arc::clone(&f.subgraph_id));
    item.target = Some(RunStatus::Stopped.to_string().into());
    let message = "the run was cancelled";
    item.reason = Some(message.into());
    item.termination_reason = Some(TerminationReason::Cancelled);
    item.at_ms = at_ms;
    run.trace.push(item);
    run.set_control(
        RunStatus::Stopped,
        Some(TerminationReason::Cancelled),
        Some(message.to_string()),
        None,
        None,
    )?;
    let open: Vec<_> = run.stack.drain(..).map(Into::into).collect();
    run.uncommitted.extend(open);
    if let Some(serde_json::Value::Object(system)) = run.state.get_mut(SYSTEM_SLICE)
        && system.contains_key("call_stack")
    {
        system.insert("call_stack".into(), serde_json::Value::Array(Vec::new()));
    }
    Ok(())
}

impl RunStore for SqliteStore {
    async fn create(
        &self,
        record: &RunRecord,
        options: &CreateOptions,
    ) -> Result<RunInfo, StoreError> {
        let id = record.run_id;
        let computed = digest_of(&record.document);
        if computed != record.digest {
            return Err(StoreError::Corrupt {
                run_id: id,
                what: "document".into(),
                reason: format!(
                    "its digest is {computed}, the record says {}",
                    record.digest
                ),
            });
        }
        let document = serde_json::to_string(&record.document).expect("a document is plain data");
        let run_state = serde_json::to_string(&record.run).expect("a run state is plain data");
        let now = now_ms();
        let db = StoreError::db("create", Some(id));
        let mut tx = self.write("create", Some(id)).await?;
        sqlx::query("INSERT OR IGNORE INTO documents (digest, document) VALUES (?1, ?2)")
            .bind(&record.digest)
            .bind(&document)
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        if let Some(name) = &options.name {
            let holder = sqlx::query(
                "SELECT id FROM runs WHERE name = ?1 \
                 AND (expires_ms IS NULL OR expires_ms > ?2) LIMIT 1",
            )
            .bind(name)
            .bind(to_i64(now))
            .fetch_optional(&mut *tx)
            .await
            .map_err(&db)?;
            if let Some(row) = holder {
                let text: String = row.try_get("id").map_err(&db)?;
                if let Ok(holder) = text.parse() {
                    return Err(StoreError::NameTaken {
                        name: name.clone(),
                        holder,
                    });
                }
            }
        }
        let status = stored_status(&record.run, record.seq);
        let inserted = sqlx::query(
            "INSERT INTO runs (id, name, workflow, digest, format, workflow_file, base_dir, \
             status, termination_reason, steps, seq, snapshot_seq, created_ms, updated_ms, \
             expires_ms, owner, lease_expires_ms, attempt_key, attempt) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, ?13, ?14, NULL, NULL, \
             ?15, 1)",
        )
        .bind(id.to_string())
        .bind(&options.name)
        .bind(&record.run.workflow)
        .bind(&record.digest)
        .bind(i64::from(record.format))
        .bind(&record.workflow_file)
        .bind(&record.base_dir)
        .bind(status.as_str())
        .bind(
            record
                .run
                .termination_reason()
                .map(TerminationReason::as_str),
        )
        .bind(i64::from(record.run.steps))
        .bind(to_i64(record.seq))
        .bind(to_i64(id.created_ms()))
        .bind(to_i64(now))
        .bind(options.expires_ms.map(to_i64))
        .bind(attempt_key(&record.run))
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => return Err(StoreError::Exists { run_id: id }),
            other => other.map_err(&db)?,
        };
        sqlx::query("INSERT INTO snapshots (run_id, seq, run_state) VALUES (?1, ?2, ?3)")
            .bind(id.to_string())
            .bind(to_i64(record.seq))
            .bind(&run_state)
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        self.info(id).await
    }

    async fn checkpoint(
        &self,
        id: RunId,
        owner: &str,
        checkpoint: Checkpoint<'_>,
    ) -> Result<RunInfo, StoreError> {
        let Checkpoint {
            seq,
            delta,
            run,
            next_attempt,
            document,
        } = checkpoint;
        let now = now_ms();
        let running = run.is_running();
        let next_key = attempt_key(run);
        // A run ended `failed` or `stopped` may be reopened as it was before this step
        // (`load_at(seq - 1)`): no snapshot is written, so the one before stays.
        let reopenable = matches!(run.status(), RunStatus::Failed | RunStatus::Stopped);
        let delta = serde_json::to_string(delta).expect("a delta is plain data");
        let status = StoredStatus::of(run.status());
        let snapshot = (!reopenable
            && (seq % self.snapshot_every == 0 || status != StoredStatus::Running))
            .then(|| serde_json::to_string(run).expect("a run state is plain data"));
        let db = StoreError::db("checkpoint", Some(id));
        let key = id.to_string();
        let mut tx = self.write("checkpoint", Some(id)).await?;
        if let Some((doc, digest)) = document {
            let text = serde_json::to_string(doc).expect("a document is plain data");
            sqlx::query("INSERT OR IGNORE INTO documents (digest, document) VALUES (?1, ?2)")
                .bind(digest)
                .bind(&text)
                .execute(&mut *tx)
                .await
                .map_err(&db)?;
        }
        // The attempt counter moves to the next step only while the run runs: an ended
        // or paused run keeps its last step's attempt, which a reopened step continues.
        // The fenced update returns the row: one statement fences, writes and reads it.
        let updated = sqlx::query(&format!(
            "UPDATE runs SET seq = ?1, steps = ?2, status = ?3, termination_reason = ?4, \
             updated_ms = ?5, snapshot_seq = CASE WHEN ?6 THEN ?1 ELSE snapshot_seq END, \
             digest = COALESCE(?9, digest), \
             attempt_key = CASE WHEN ?10 THEN ?11 ELSE attempt_key END, \
             attempt = CASE WHEN ?10 THEN ?12 ELSE attempt END \
             WHERE id = ?7 AND seq = ?1 - 1 AND owner = ?8 AND lease_expires_ms > ?5 \
             RETURNING {INFO}"
        ))
        .bind(to_i64(seq))
        .bind(i64::from(run.steps))
        .bind(status.as_str())
        .bind(run.termination_reason().map(TerminationReason::as_str))
        .bind(to_i64(now))
        .bind(snapshot.is_some())
        .bind(&key)
        .bind(owner)
        .bind(document.map(|(_, d)| d))
        .bind(running)
        .bind(&next_key)
        .bind(i64::from(next_attempt))
        .fetch_optional(&mut *tx)
        .await
        .map_err(&db)?;
        let Some(row) = updated else {
            tx.rollback().await.map_err(&db)?;
            return Err(self.refusal(id, owner, seq, now).await);
        };
        sqlx::query("INSERT INTO steps (run_id, seq, delta, created_ms) VALUES (?1, ?2, ?3, ?4)")
            .bind(&key)
            .bind(to_i64(seq))
            .bind(&delta)
            .bind(to_i64(now))
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        if let Some(state) = &snapshot {
            snapshot_at(&mut tx, &key, seq, state).await.map_err(&db)?;
        }
        tx.commit().await.map_err(&db)?;
        info_from_row(&row, now)
    }

    async fn load(&self, id: RunId) -> Result<StoredRun, StoreError> {
        self.load_upto(id, None).await
    }

    async fn load_at(&self, id: RunId, seq: u64) -> Result<StoredRun, StoreError> {
        self.load_upto(id, Some(seq)).await
    }

    async fn info(&self, id: RunId) -> Result<RunInfo, StoreError> {
        let row = sqlx::query(&format!("SELECT {INFO} FROM runs WHERE id = ?1"))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::db("info", Some(id)))?
            .ok_or_else(|| StoreError::NotFound {
                key: id.to_string(),
            })?;
        info_from_row(&row, now_ms())
    }
    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let now = now_ms();
        // The stored status narrows the rows in SQL; `running`, `interrupted` and `queued`
        // are derived from the lease when read, so they select both live statuses.
        let (exact, live) = match filter.status {
            None => (None, false),
            Some(StoredStatus::Running | StoredStatus::Interrupted | StoredStatus::Queued) => {
                (None, true)
            }
            Some(s) => (Some(s.as_str()), false),
        };
        // Pages, newest first, until `limit` rows match (the derived status is checked
        // in Rust, so a page may match fewer than it holds).
        let page = filter.limit.map_or(-1, |l| to_i64(l.max(128) as u64 * 2));
        let mut out = Vec::new();
        let mut before: Option<String> = None;
        loop {
            let rows = sqlx::query(&format!(
                "SELECT {INFO} FROM runs WHERE (?1 IS NULL OR workflow = ?1) \
                 AND (?2 OR expires_ms IS NULL OR expires_ms > ?3) \
                 AND (?4 IS NULL OR id < ?4) AND (?5 IS NULL OR status = ?5) \
                 AND (NOT ?6 OR status IN ('running', 'queued')) \
                 ORDER BY id DESC LIMIT ?7"
            ))
            .bind(&filter.workflow)
            .bind(filter.include_expired)
            .bind(to_i64(now))
            .bind(&before)
            .bind(exact)
            .bind(live)
            .bind(page)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::db("list", None))?;
            for row in &rows {
                let info = info_from_row(row, now)?;
                if filter.status.is_none_or(|s| s == info.status) {
                    out.push(info);
                    if filter.limit.is_some_and(|l| out.len() >= l) {
                        return Ok(out);
                    }
                }
            }
            match rows.last() {
                Some(last) if page >= 0 && rows.len() as i64 == page => {
                    before = Some(last.try_get("id").map_err(StoreError::db("list", None))?);
                }
                _ => return Ok(out),
            }
        }
    }

    async fn claim(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        let now = now_ms();
        let expires_ms = now.saturating_add(duration_ms(lease));
        // A holder that is a gone process of this host is taken over like a lapsed lease.
        let before = self.info(id).await?;
        let gone = before.owner.clone().filter(|o| owner_gone(o));
        // Taking a run from another owner that did not let it go (it died, or its lease
        // lapsed) means its step in flight may have started: that step's next attempt is
        // one more. A queued run claimed is running.
        let updated = sqlx::query(
            "UPDATE runs SET \
               attempt = CASE WHEN owner IS NOT NULL AND owner <> ?1 AND status IN \
                 ('running', 'queued') THEN attempt + 1 ELSE attempt END, \
               status = CASE WHEN status = 'queued' THEN 'running' ELSE status END, \
               owner = ?1, lease_expires_ms = ?2 WHERE id = ?3 \
             AND (owner IS NULL OR owner = ?1 OR lease_expires_ms IS NULL \
                  OR lease_expires_ms <= ?4 OR owner = ?5)",
        )
        .bind(owner)
        .bind(to_i64(expires_ms))
        .bind(id.to_string())
        .bind(to_i64(now))
        .bind(gone)
        .execute(&self.pool)
        .await
        .map_err(StoreError::db("claim", Some(id)))?
        .rows_affected();
        if updated == 0 {
            let info = self.info(id).await?;
            return Err(StoreError::LeaseHeld {
                run_id: id,
                holder: info.owner.unwrap_or_default(),
                lease_expires_ms: info.lease_expires_ms.unwrap_or(0),
            });
        }
        Ok(Lease {
            run_id: id,
            owner: owner.to_string(),
            expires_ms,
        })
    }

    async fn renew(&self, id: RunId, owner: &str, lease: Duration) -> Result<Lease, StoreError> {
        let now = now_ms();
        let expires_ms = now.saturating_add(duration_ms(lease));
        let updated = sqlx::query(
            "UPDATE runs SET lease_expires_ms = ?1 WHERE id = ?2 AND owner = ?3 \
             AND lease_expires_ms > ?4",
        )
        .bind(to_i64(expires_ms))
        .bind(id.to_string())
        .bind(owner)
        .bind(to_i64(now))
        .execute(&self.pool)
        .await
        .map_err(StoreError::db("renew", Some(id)))?
        .rows_affected();
        if updated == 0 {
            let info = self.info(id).await?;
            let current = info.lease_expires_ms.is_some_and(|l| l > now);
            return Err(StoreError::LeaseLost {
                run_id: id,
                owner: owner.to_string(),
                holder: info.owner.filter(|_| current),
            });
        }
        Ok(Lease {
            run_id: id,
            owner: owner.to_string(),
            expires_ms,
        })
    }

    async fn release(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        let updated = sqlx::query(
            "UPDATE runs SET owner = NULL, lease_expires_ms = NULL WHERE id = ?1 AND owner = ?2",
        )
        .bind(id.to_string())
        .bind(owner)
        .execute(&self.pool)
        .await
        .map_err(StoreError::db("release", Some(id)))?
        .rows_affected();
        if updated == 0 {
            let info = self.info(id).await?;
            let current = info.lease_expires_ms.is_some_and(|l| l > now_ms());
            return Err(StoreError::LeaseLost {
                run_id: id,
                owner: owner.to_string(),
                holder: info.owner.filter(|_| current),
            });
        }
        Ok(())
    }

    async fn interrupt(&self, id: RunId, owner: &str) -> Result<(), StoreError> {
        let updated = sqlx::query(
            "UPDATE runs SET owner = NULL, lease_expires_ms = NULL, \
             attempt = CASE WHEN status IN ('running', 'queued') THEN attempt + 1 \
               ELSE attempt END, \
             status = CASE WHEN status = 'queued' THEN 'running' ELSE status END \
             WHERE id = ?1 AND owner = ?2",
        )
        .bind(id.to_string())
        .bind(owner)
        .execute(&self.pool)
        .await
        .map_err(StoreError::db("interrupt", Some(id)))?
        .rows_affected();
        if updated == 0 {
            let info = self.info(id).await?;
            let current = info.lease_expires_ms.is_some_and(|l| l > now_ms());
            return Err(StoreError::LeaseLost {
                run_id: id,
                owner: owner.to_string(),
                holder: info.owner.filter(|_| current),
            });
        }
        Ok(())
    }

    async fn cancel(&self, id: RunId) -> Result<RunInfo, StoreError> {
        let stored = self.load(id).await?;
        let status = stored.info.status;
        if status == StoredStatus::Running {
            // Its driver stops it at its next step (it reads the flag with every
            // checkpoint and while an effect runs).
            sqlx::query("UPDATE runs SET cancel_requested = 1 WHERE id = ?1")
                .bind(id.to_string())
                .execute(&self.pool)
                .await
                .map_err(StoreError::db("cancel", Some(id)))?;
            return self.info(id).await;
        }
        let wrong = |status| StoreError::WrongStatus {
            run_id: id,
            status,
            operation: "cancel",
        };
        if !matches!(
            status,
            StoredStatus::Queued
                | StoredStatus::Waiting
                | StoredStatus::AwaitingInput
                | StoredStatus::Interrupted
        ) {
            return Err(wrong(status));
        }
        let now = now_ms();
        let mut run = stored.record.run;
        let before = Before::of(&run);
        cancel_run(&mut run, now).map_err(|reason| StoreError::Corrupt {
            run_id: id,
            what: "run state".into(),
            reason,
        })?;
        let delta = serde_json::to_string(&StepDelta::between(&before, &run))
            .expect("a delta is plain data");
        let state = serde_json::to_string(&run).expect("a run state is plain data");
        let seq = stored.info.seq + 1;
        let key = id.to_string();
        let db = StoreError::db("cancel", Some(id));
        let mut tx = self.write("cancel", Some(id)).await?;
        // Fenced: the run has not moved since it was loaded and nobody holds a lease.
        let updated = sqlx::query(
            "UPDATE runs SET seq = ?1, steps = ?2, status = 'stopped', \
             termination_reason = 'cancelled', updated_ms = ?3, snapshot_seq = ?1, \
             owner = NULL, lease_expires_ms = NULL \
             WHERE id = ?4 AND seq = ?1 - 1 \
             AND (owner IS NULL OR lease_expires_ms IS NULL OR lease_expires_ms <= ?3 \
                  OR owner = ?5)",
        )
        .bind(to_i64(seq))
        .bind(i64::from(run.steps))
        .bind(to_i64(now))
        .bind(&key)
        .bind(stored.info.owner.clone().filter(|o| owner_gone(o)))
        .execute(&mut *tx)
        .await
        .map_err(&db)?
        .rows_affected();
        if updated == 0 {
            tx.rollback().await.map_err(&db)?;
            let info = self.info(id).await?;
            return Err(wrong(info.status));
        }
        sqlx::query("INSERT INTO steps (run_id, seq, delta, created_ms) VALUES (?1, ?2, ?3, ?4)")
            .bind(&key)
            .bind(to_i64(seq))
            .bind(&delta)
            .bind(to_i64(now))
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        snapshot_at(&mut tx, &key, seq, &state).await.map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        self.info(id).await
    }

    async fn prune(&self, filter: &PruneFilter) -> Result<u64, StoreError> {
        if !filter.expired && filter.older_than.is_none() && filter.status.is_none() {
            return Err(StoreError::NoPruneFilter);
        }
        let now = now_ms();
        let all = self.list(&RunFilter::default().include_expired()).await?;
        let cutoff = filter
            .older_than
            .map(|age| now.saturating_sub(duration_ms(age)));
        let doomed: Vec<RunId> = all
            .iter()
            .filter(|r| !filter.expired || r.is_expired(now))
            .filter(|r| cutoff.is_none_or(|c| r.updated_ms < c))
            .filter(|r| filter.status.is_none_or(|s| s == r.status))
            // A run under a current lease is being stepped: never deleted under its owner.
            .filter(|r| r.status != StoredStatus::Running)
            .map(|r| r.id)
            .collect();
        let count = u64::try_from(doomed.len()).unwrap_or(u64::MAX);
        if filter.dry_run || doomed.is_empty() {
            return Ok(count);
        }
        let db = StoreError::db("prune", None);
        let mut tx = self.write("prune", None).await?;
        for id in &doomed {
            // Steps and snapshots go with the run (ON DELETE CASCADE).
            sqlx::query("DELETE FROM runs WHERE id = ?1")
                .bind(id.to_string())
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("prune", Some(*id)))?;
        }
        sqlx::query("DELETE FROM documents WHERE digest NOT IN (SELECT digest FROM runs)")
            .execute(&mut *tx)
            .await
            .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        Ok(count)
    }

    async fn find(&self, key: &str) -> Result<RunId, StoreError> {
        let db = StoreError::db("find", None);
        if let Ok(id) = key.parse::<RunId>() {
            return self.info(id).await.map(|i| i.id);
        }
        if key.len() >= 6 && key.chars().all(|c| c.is_ascii_alphanumeric()) {
            let rows =
                sqlx::query("SELECT id FROM runs WHERE id LIKE ?1 ORDER BY id DESC LIMIT 20")
                    .bind(format!("{}%", key.to_ascii_uppercase()))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(&db)?;
            let mut ids = Vec::with_capacity(rows.len());
            for row in &rows {
                let text: String = row.try_get("id").map_err(&db)?;
                if let Ok(id) = text.parse::<RunId>() {
                    ids.push(id);
                }
            }
            match ids.len() {
                0 => {}
                1 => return Ok(ids[0]),
                _ => {
                    return Err(StoreError::Ambiguous {
                        prefix: key.to_string(),
                        candidates: ids,
                    });
                }
            }
        }
        let row = sqlx::query(
            "SELECT id FROM runs WHERE name = ?1 AND (expires_ms IS NULL OR expires_ms > ?2) \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(key)
        .bind(to_i64(now_ms()))
        .fetch_optional(&self.pool)
        .await
        .map_err(&db)?;
        match row {
            Some(row) => {
                let text: String = row.try_get("id").map_err(&db)?;
                text.parse().map_err(|_| StoreError::NotFound {
                    key: key.to_string(),
                })
            }
            None => Err(StoreError::NotFound {
                key: key.to_string(),
            }),
        }
    }
}

impl SqliteStore {
    /// Loads run `id` as of its checkpoint `upto` (its last when `None`).
    async fn load_upto(&self, id: RunId, upto: Option<u64>) -> Result<StoredRun, StoreError> {
        let now = now_ms();
        let db = StoreError::db("load", Some(id));
        let key = id.to_string();
        let corrupt = |what: String, reason: String| StoreError::Corrupt {
            run_id: id,
            what,
            reason,
        };
        // One read transaction: the row, snapshot and deltas of one moment.
        let mut tx = self.pool.begin().await.map_err(&db)?;
        let row = sqlx::query(&format!(
            "SELECT {INFO}, format, workflow_file, base_dir, snapshot_seq FROM runs WHERE id = ?1"
        ))
        .bind(&key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(&db)?
        .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        let info = info_from_row(&row, now)?;
        let at = upto.map_or(info.seq, |u| u.min(info.seq));
        let format: i64 = row.try_get("format").map_err(&db)?;
        let workflow_file: Option<String> = row.try_get("workflow_file").map_err(&db)?;
        let base_dir: Option<String> = row.try_get("base_dir").map_err(&db)?;
        let doc_row = sqlx::query("SELECT document FROM documents WHERE digest = ?1")
            .bind(&info.digest)
            .fetch_optional(&mut *tx)
            .await
            .map_err(&db)?
            .ok_or_else(|| corrupt("document".into(), format!("{} is missing", info.digest)))?;
        let doc_text: String = doc_row.try_get("document").map_err(&db)?;
        let mut document: WorkflowDocument = serde_json::from_str(&doc_text)
            .map_err(|e| corrupt("document".into(), e.to_string()))?;
        document.fill_ids();
        let snap = sqlx::query(
            "SELECT seq, run_state FROM snapshots WHERE run_id = ?1 AND seq <= ?2 \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(&key)
        .bind(to_i64(at))
        .fetch_optional(&mut *tx)
        .await
        .map_err(&db)?
        .ok_or_else(|| corrupt("snapshot".into(), "no snapshot is stored".into()))?;
        let snap_seq = to_u64(snap.try_get("seq").map_err(&db)?);
        let snap_text: String = snap.try_get("run_state").map_err(&db)?;
        let mut run: RunState = serde_json::from_str(&snap_text)
            .map_err(|e| corrupt(format!("snapshot {snap_seq}"), e.to_string()))?;
        let rows = sqlx::query(
            "SELECT seq, delta FROM steps WHERE run_id = ?1 AND seq > ?2 AND seq <= ?3 \
             ORDER BY seq",
        )
        .bind(&key)
        .bind(to_i64(snap_seq))
        .bind(to_i64(at))
        .fetch_all(&mut *tx)
        .await
        .map_err(&db)?;
        tx.commit().await.map_err(&db)?;
        let mut expected = snap_seq + 1;
        for row in &rows {
            let (seq, delta) = delta_from_row(id, row)?;
            if seq != expected {
                return Err(corrupt(
                    format!("step {expected}"),
                    format!("is missing (the next stored step is {seq})"),
                ));
            }
            delta
                .apply(&mut run)
                .map_err(|e| corrupt(format!("step {seq}"), e))?;
            expected += 1;
        }
        if expected != at + 1 {
            return Err(corrupt(
                format!("step {expected}"),
                format!("is missing (the run is at {at})"),
            ));
        }
        let record = RunRecord {
            format: u32::try_from(format).unwrap_or(0),
            run_id: id,
            seq: at,
            workflow_file,
            base_dir,
            document,
            digest: info.digest.clone(),
            run,
        };
        Ok(StoredRun { info, record })
    }
}
