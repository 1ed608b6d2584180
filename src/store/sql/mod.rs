//! The run store, written once for both databases: [`Store`] over a [`Backend`]
//! (SQLite's or PostgreSQL's connections, or either chosen by URL). Every statement is
//! written once with `$N` placeholders; where the dialects differ, the store's
//! [`Dialect`] (`store/dialects.rs`) says how: the checkpoint
//! statement, the claim's lock, a named create's lock, the transactions' `BEGIN`,
//! `MAX`/`GREATEST`.
//!
//! `RunStore` for it is in `run_store.rs`; its longer operations in `create.rs`,
//! `load.rs`, `cancel.rs`, `list.rs` and `deps.rs`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

mod cancel;
mod checkpoint;
mod create;
mod deps;
mod events;
mod list;
mod load;
mod run_store;

use super::clock::Clock;
use super::db::{Backend, Dialect, sql};
use super::delta::StepDelta;
use super::rows::{Cols, chunk_of, delta_from_row, to_i64, to_u64};
use super::trace_once::put_back_trace;
use super::weights::Weights;
use super::{RunStore, StoreError};
use crate::runtime::{RunId, RunState};
use events::MAX_EVENT_BYTES;

/// A run store on backend `B`: [`SqliteStore`](super::SqliteStore),
/// [`PgStore`](super::PgStore), or [`AnyStore`](super::AnyStore) (either, chosen by URL).
#[derive(Debug, Clone)]
pub struct Store<B> {
    db: B,
    /// The statements in which the backend's database differs.
    dialect: &'static Dialect,
    snapshot_every: Option<u64>,
    weights: Arc<Weights>,
    clock: Clock,
    /// The database's clock minus this store's (milliseconds), measured when it opened:
    /// what [`Store::now`] adds to the local clock to show rows as the database sees them.
    clock_offset: Arc<AtomicI64>,
    /// The name of the events channel a checkpoint tells its run's followers on
    /// (`dialects::EVENTS_CHANNEL` as the database evaluated it once, at the open), bound
    /// to PostgreSQL's checkpoint statements (`$18`) rather than computed by each (ADR
    /// 0067); `None` on SQLite, which notifies nobody.
    events_channel: Option<Arc<str>>,
}

/// How long a call failing on a transient fault (a lost connection, a restarting server)
/// is tried again before its error is returned: well under half the default lease (the
/// driver renews at half), and the fenced statements refuse anyway once the lease lapsed.
const RIDE_OUT: Duration = Duration::from_secs(10);

/// The checkpoint of run `$1`'s kept snapshot, in SQL: the deltas after it are its step
/// rows.
macro_rules! after_snapshot {
    () => {
        "(SELECT COALESCE(MAX(seq), 0) FROM snapshots WHERE run_id = $1)"
    };
}

/// Run `$1`'s step rows (`seq`, `delta`), in SQL: those of the `steps` table (a snapshot
/// deletes those it covers) and the deltas kept in event chunks after its snapshot
/// (format 13, ADR 0079).
const DELTAS: &str = concat!(
    "SELECT seq, delta FROM steps WHERE run_id = $1 UNION ALL \
     SELECT seq, delta FROM event_chunks WHERE run_id = $1 AND delta IS NOT NULL \
     AND seq > ",
    after_snapshot!()
);

/// What a run takes in the store: its step rows and snapshots, in bytes of JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RunStorage {
    /// Step rows: the deltas a load replays on the kept snapshot, those of the `steps`
    /// table and those kept in event chunks (format 13, ADR 0079; the deltas of the
    /// chunks a snapshot covers stay with their events and are not counted).
    pub steps: u64,
    /// Bytes of their deltas.
    pub step_bytes: u64,
    /// Snapshots kept.
    pub snapshots: u64,
    /// Bytes of their run states.
    pub snapshot_bytes: u64,
    /// The checkpoint the kept snapshot is: the step rows are the checkpoints after it.
    pub snapshot_seq: u64,
}

impl<B: Backend> Store<B> {
    /// The store on `db` (whose database speaks `dialect`), a snapshot at least every
    /// `snapshot_every` checkpoints when set, reading the time from `clock`.
    pub(crate) fn on(
        db: B,
        dialect: &'static Dialect,
        snapshot_every: Option<u64>,
        clock: Clock,
    ) -> Self {
        Self {
            db,
            dialect,
            snapshot_every: snapshot_every.map(|n| n.max(1)),
            weights: Arc::default(),
            clock,
            clock_offset: Arc::default(),
            events_channel: None,
        }
    }

    /// This store with `name` as its events channel's (see [`Store::events_channel`]).
    pub(crate) fn with_events_channel(mut self, name: String) -> Self {
        self.events_channel = Some(name.into());
        self
    }

    /// The events channel's name bound to the checkpoint statements, if the dialect
    /// notifies (PostgreSQL).
    pub(crate) fn events_channel(&self) -> Option<&str> {
        self.events_channel.as_deref()
    }

    /// Measures how far the database's clock is from this store's (one round trip):
    /// nothing to do on a manual clock, whose time the statements take instead.
    pub(crate) async fn sync_clock(&self) -> Result<(), StoreError> {
        if self.clock.fixed_ms().is_some() {
            return Ok(());
        }
        let db = StoreError::db("reading the database's clock", None);
        let sent = self.clock.now_ms();
        let row = sql(&format!("SELECT {} AS now_ms", self.dialect.now_ms))
            .fetch_one(&mut self.db.read().await?)
            .await
            .map_err(&db)?;
        let back = self.clock.now_ms();
        let theirs = row.int("now_ms").map_err(&db)?;
        self.clock_read(sent, back, theirs);
        Ok(())
    }

    /// Takes the database's clock as `theirs` (milliseconds since the Unix epoch), read by
    /// a statement sent at `sent` and answered at `back` on this store's clock (what
    /// [`Store::sync_clock`] measures, or a statement that read it on the way, as
    /// PostgreSQL's open does); nothing to do on a manual clock.
    pub(crate) fn clock_read(&self, sent: u64, back: u64, theirs: i64) {
        if self.clock.fixed_ms().is_some() {
            return;
        }
        // The database read its clock about halfway through the round trip.
        let ours = to_i64(sent / 2 + back / 2);
        self.clock_offset
            .store(theirs.saturating_sub(ours), Ordering::Relaxed);
    }

    /// The same store on another backend type (`B` wrapped, say, in `AnyDb`).
    pub(crate) fn map<C>(self, f: impl FnOnce(B) -> C) -> Store<C> {
        Store {
            db: f(self.db),
            dialect: self.dialect,
            snapshot_every: self.snapshot_every,
            weights: self.weights,
            clock: self.clock,
            clock_offset: self.clock_offset,
            events_channel: self.events_channel,
        }
    }

    /// Its backend.
    pub(crate) fn db(&self) -> &B {
        &self.db
    }

    /// Closes its connections (waiting for their holders).
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// What run `id` takes: step rows and snapshots, in bytes of JSON.
    pub async fn storage(&self, id: RunId) -> Result<RunStorage, StoreError> {
        let db = StoreError::db("measuring storage", Some(id));
        let key = id.to_string();
        let row = sql(&format!(
            "WITH d AS ({DELTAS}) SELECT \
               (SELECT COUNT(*) FROM d) AS steps, \
               (SELECT CAST(COALESCE(SUM(LENGTH(delta)), 0) AS BIGINT) FROM d) AS step_bytes, \
               (SELECT COUNT(*) FROM snapshots WHERE run_id = $1) AS snapshots, \
               (SELECT CAST(COALESCE(SUM(LENGTH(run_state)), 0) AS BIGINT) FROM snapshots \
                 WHERE run_id = $1) AS snapshot_bytes, \
               {} AS snapshot_seq",
            after_snapshot!()
        ))
        .bind(&key)
        .fetch_one(&mut self.db.read().await?)
        .await
        .map_err(&db)?;
        let get = |col: &str| row.int(col).map(to_u64).map_err(&db);
        Ok(RunStorage {
            steps: get("steps")?,
            step_bytes: get("step_bytes")?,
            snapshots: get("snapshots")?,
            snapshot_bytes: get("snapshot_bytes")?,
            snapshot_seq: get("snapshot_seq")?,
        })
    }

    /// Run `id`'s step rows in sequence order: each checkpoint's number and delta. The
    /// rows kept are those from the run's snapshot on (a snapshot replaces the rows it
    /// covers).
    pub async fn deltas(&self, id: RunId) -> Result<Vec<(u64, StepDelta)>, StoreError> {
        let db = StoreError::db("reading steps", Some(id));
        let mut c = self.db.read().await?;
        let rows = sql(&format!("{DELTAS} ORDER BY seq"))
            .bind(id.to_string())
            .fetch_all(&mut c)
            .await
            .map_err(&db)?;
        // Their trace items, kept in their checkpoints' events (format 8, ADR 0053).
        let chunks = sql(&format!(
            "SELECT seq, events, {} AS packed FROM event_chunks WHERE run_id = $1 \
             AND seq > {} ORDER BY seq",
            self.dialect.packed_read(),
            after_snapshot!()
        ))
        .bind(id.to_string())
        .fetch_all(&mut c)
        .await
        .map_err(&db)?
        .iter()
        .map(|r| {
            let seq = to_u64(r.int("seq").map_err(&db)?);
            let texts = r
                .chunk("events", "packed")
                .map_err(&db)?
                .texts(MAX_EVENT_BYTES);
            let texts = texts.map_err(|reason| StoreError::Corrupt {
                run_id: id,
                what: events::chunk_name(seq),
                reason,
            })?;
            Ok((seq, texts))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
        drop(c);
        rows.iter()
            .map(|r| {
                let (seq, mut delta, _) = delta_from_row(id, r)?;
                put_back_trace(&mut delta, chunk_of(&chunks, seq)).map_err(|reason| {
                    StoreError::Corrupt {
                        run_id: id,
                        what: format!("step {seq}"),
                        reason,
                    }
                })?;
                Ok((seq, delta))
            })
            .collect()
    }

    /// The time now as the database sees it (milliseconds since the Unix epoch): a
    /// manual clock's time, else this store's clock plus the offset measured when it
    /// opened. What rows are shown by (a lease current or lapsed) and times written
    /// (`updated_ms`); never what a lease is fenced on (see [`Store::now_sql`]).
    fn now(&self) -> u64 {
        match self.clock.fixed_ms() {
            Some(ms) => ms,
            None => self
                .clock
                .now_ms()
                .saturating_add_signed(self.clock_offset.load(Ordering::Relaxed)),
        }
    }

    /// What placeholder `$n` of a fenced statement is bound to: a manual clock's time, or
    /// `NULL` for the database's clock (see [`Store::now_sql`]).
    fn bound_now(&self) -> Option<i64> {
        self.clock.fixed_ms().map(to_i64)
    }

    /// The time a lease is fenced on, as SQL reading placeholder `$n` (bound to
    /// [`Store::bound_now`]): the database's clock when it is `NULL`, read inside the
    /// statement, so that workers whose clocks disagree never both hold a run.
    fn now_sql(&self, n: u8) -> String {
        format!(
            "COALESCE(${n}{}, {})",
            self.dialect.int_param, self.dialect.now_ms
        )
    }

    /// Whether checkpoint `seq` of run `id`, leaving `run` and a delta of `delta_bytes`,
    /// carries a snapshot.
    fn wants_snapshot(&self, id: RunId, seq: u64, run: &RunState, delta_bytes: usize) -> bool {
        self.weights
            .wants_snapshot(self.snapshot_every, id, seq, run, delta_bytes)
    }

    /// The error of a lease-fenced update that touched no row: `LeaseLost`, naming the
    /// holder if its lease is current at `now` (or the error reading the run).
    async fn lease_lost(&self, id: RunId, owner: &str, now: u64) -> StoreError {
        match self.info(id).await {
            Ok(info) => {
                let current = info.lease_expires_ms.is_some_and(|l| l > now);
                StoreError::LeaseLost {
                    run_id: id,
                    owner: owner.to_string(),
                    holder: info.owner.filter(|_| current),
                }
            }
            Err(e) => e,
        }
    }

    /// Gives `owner`'s lease on run `id` up with `statement` (an update of the run row
    /// bound to `$1` id, `$2` owner and, when `fenced`, `$3` the fence's time,
    /// [`Store::bound_now`]): `LeaseLost` if `owner` does not hold it.
    async fn let_go(
        &self,
        id: RunId,
        owner: &str,
        operation: &'static str,
        (statement, fenced): (&str, bool),
    ) -> Result<(), StoreError> {
        // Let go unfinished, it is runnable: listening workers are told in the same
        // round trip (`Dialect::notifying`).
        let statement = self.dialect.notifying(statement);
        let statement = statement.as_ref();
        let updated = self
            .ride_out(operation, |_| async move {
                let q = sql(statement).bind(id.to_string()).bind(owner);
                let q = if fenced { q.bind(self.bound_now()) } else { q };
                q.execute(&mut self.db.write().await?)
                    .await
                    .map_err(StoreError::db(operation, Some(id)))
            })
            .await?;
        if updated == 0 {
            return Err(self.lease_lost(id, owner, self.now()).await);
        }
        Ok(())
    }

    /// Runs `call` (given how many times it was tried before) until it succeeds, fails
    /// on something else than a transient fault, or faults for longer than [`RIDE_OUT`]:
    /// a database restarting mid-run is ridden out, reconnecting with a backoff (50 ms,
    /// doubling up to 1 s).
    async fn ride_out<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, StoreError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let started = Instant::now();
        let mut wait = Duration::from_millis(50);
        let mut tried = 0u32;
        loop {
            match call(tried).await {
                Err(e) if e.is_transient() && started.elapsed() < RIDE_OUT => {
                    tracing::warn!("{what}: {e}; trying again in {} ms", wait.as_millis());
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                    tried = tried.saturating_add(1);
                }
                result => return result,
            }
        }
    }

    /// Tells listening workers that a run may have become runnable (PostgreSQL's
    /// `pg_notify`, after the transition committed; nothing on SQLite). A failure is
    /// only logged: workers poll too.
    async fn notify_runnable(&self) {
        let Some(notify) = self.dialect.notify_runnable else {
            return;
        };
        let sent = match self.db.read().await {
            Ok(mut c) => sql(notify).execute(&mut c).await.map(drop),
            Err(e) => {
                tracing::debug!("not telling workers: {e}");
                return;
            }
        };
        if let Err(e) = sent {
            tracing::debug!("not telling workers: {e}");
        }
    }

    /// Why a fenced checkpoint was refused: no such run, a lease not held, or a sequence
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
}
