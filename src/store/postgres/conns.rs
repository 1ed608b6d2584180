//! The PostgreSQL store's connections: a fixed set of slots, each one connection opened
//! when first needed (and again after it was lost), handed out one statement or one
//! transaction at a time.
//!
//! Not sqlx's pool: it pings every connection given back (one more round trip to the
//! server per statement, which was a third of a durable step's time), and below its
//! maximum it opens a new connection whenever the last one has not been given back yet
//! (sqlx gives connections back from a task of its own), a handshake that stalled steps
//! 100 to 150 ms on a loaded machine. Here a connection is free again as soon as its
//! guard drops.
//!
//! A statement that lost its connection (I/O, protocol: the server restarted, the network
//! broke) drops the idle connections at once and its own when it is given back; the next
//! statements open new ones.
//!
//! Cancel safety: dropping a statement's future mid-way leaves its connection with
//! answers still to read; sqlx reads them before the connection's next statement (and
//! rolls back a transaction dropped unfinished), so the next holder finds it idle.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgRow};
use sqlx::{ConnectOptions, Connection, Postgres, Transaction};
use tokio::sync::{Mutex, MutexGuard};

use crate::store::StoreError;
use crate::store::db::{self, Begin, Exec, Raw, Sql, Tx};
use crate::store::dialects;

/// One slot: a connection (or none yet) and whether its holder found it lost.
#[derive(Debug, Default)]
struct Slot {
    conn: Mutex<Option<PgConnection>>,
    lost: AtomicBool,
}

/// The slots and how to fill them.
pub(super) struct Conns {
    slots: Box<[Slot]>,
    next: AtomicUsize,
    connect: PgConnectOptions,
    timeout: Duration,
}

/// Shown without the connect options, which hold the password.
impl std::fmt::Debug for Conns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conns")
            .field("slots", &self.slots)
            .field("host", &self.connect.get_host())
            .field("port", &self.connect.get_port())
            .field("database", &self.connect.get_database())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// One connection, held until dropped (then dropped too if a statement found it lost).
#[doc(hidden)]
pub struct Conn<'a> {
    guard: MutexGuard<'a, Option<PgConnection>>,
    watch: Watch<'a>,
}

/// A transaction open on a held connection (rolled back if dropped unfinished).
#[doc(hidden)]
pub struct PgTx<'c> {
    tx: Transaction<'c, Postgres>,
    watch: Watch<'c>,
}

/// What a statement's error tells the slots: a lost connection marks its slot and drops
/// the idle ones.
#[derive(Debug, Clone, Copy)]
struct Watch<'a> {
    slot: &'a Slot,
    conns: &'a Conns,
}

impl Watch<'_> {
    fn check<T>(self, result: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        if let Err(e) = &result
            && connection_lost(e)
        {
            self.slot.lost.store(true, Ordering::SeqCst);
            self.conns.drop_idle();
        }
        result
    }
}

impl Conn<'_> {
    fn raw(&mut self) -> &mut PgConnection {
        self.guard
            .as_mut()
            .expect("a handed-out slot is connected (Conns::get)")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if self.watch.slot.lost.swap(false, Ordering::SeqCst) {
            *self.guard = None;
        }
    }
}

impl db::Conn for Conn<'_> {
    type Tx<'c>
        = PgTx<'c>
    where
        Self: 'c;

    async fn begin(&mut self, how: Begin) -> Result<PgTx<'_>, sqlx::Error> {
        let watch = self.watch;
        let tx = watch.check(self.raw().begin_with(dialects::POSTGRES.begin(how)).await)?;
        Ok(PgTx { tx, watch })
    }
}

impl Tx for PgTx<'_> {
    async fn commit(self) -> Result<(), sqlx::Error> {
        let watch = self.watch;
        watch.check(self.tx.commit().await)
    }

    async fn rollback(self) -> Result<(), sqlx::Error> {
        let watch = self.watch;
        watch.check(self.tx.rollback().await)
    }
}

impl Exec for Conn<'_> {
    type Row = PgRow;
    async fn fetch_all(&mut self, sql: Sql<'_>) -> Result<Vec<PgRow>, sqlx::Error> {
        let watch = self.watch;
        watch.check(self.raw().fetch_all(sql).await)
    }
    async fn fetch_optional(&mut self, sql: Sql<'_>) -> Result<Option<PgRow>, sqlx::Error> {
        let watch = self.watch;
        watch.check(self.raw().fetch_optional(sql).await)
    }
    async fn execute(&mut self, sql: Sql<'_>) -> Result<u64, sqlx::Error> {
        let watch = self.watch;
        watch.check(self.raw().execute(sql).await)
    }
}

impl Exec for PgTx<'_> {
    type Row = PgRow;
    async fn fetch_all(&mut self, sql: Sql<'_>) -> Result<Vec<PgRow>, sqlx::Error> {
        self.watch.check(Raw::fetch_all(&mut *self.tx, sql).await)
    }
    async fn fetch_optional(&mut self, sql: Sql<'_>) -> Result<Option<PgRow>, sqlx::Error> {
        self.watch
            .check(Raw::fetch_optional(&mut *self.tx, sql).await)
    }
    async fn execute(&mut self, sql: Sql<'_>) -> Result<u64, sqlx::Error> {
        self.watch.check(Raw::execute(&mut *self.tx, sql).await)
    }
}

impl Conns {
    /// How its connections are opened.
    pub(super) fn options(&self) -> &PgConnectOptions {
        &self.connect
    }

    /// `n` slots (at least 1), the first filled with `first`.
    pub(super) fn new(
        n: u32,
        first: PgConnection,
        connect: PgConnectOptions,
        timeout: Duration,
    ) -> Self {
        let n = usize::try_from(n.max(1)).unwrap_or(1);
        let slots: Vec<Slot> = (0..n).map(|_| Slot::default()).collect();
        *slots[0].conn.try_lock().expect("a new slot is free") = Some(first);
        Self {
            slots: slots.into_boxed_slice(),
            next: AtomicUsize::new(0),
            connect,
            timeout,
        }
    }

    /// A connection: a free slot's (connected slots first), else the next slot's once its
    /// holder lets it go. An empty slot is connected first (`Database` error "connecting"
    /// when the server does not answer within the open timeout or refuses; the idle
    /// connections are dropped then, as after a lost one).
    pub(super) async fn get(&self) -> Result<Conn<'_>, StoreError> {
        let mut free = None;
        for slot in self.slots.iter() {
            if let Ok(guard) = slot.conn.try_lock() {
                if guard.is_some() {
                    free = Some((slot, guard));
                    break;
                }
                if free.is_none() {
                    free = Some((slot, guard));
                }
            }
        }
        let (slot, mut guard) = match free {
            Some(found) => found,
            None => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
                let slot = &self.slots[i];
                (slot, slot.conn.lock().await)
            }
        };
        if guard.is_none() {
            let connected = match tokio::time::timeout(self.timeout, self.connect.connect()).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(e)) => {
                    drop(guard);
                    self.drop_idle();
                    return Err(StoreError::db("connecting", None)(e));
                }
                Err(_) => {
                    drop(guard);
                    self.drop_idle();
                    return Err(StoreError::Database {
                        operation: "connecting",
                        run_id: None,
                        source: sqlx::Error::PoolTimedOut,
                    });
                }
            };
            *guard = Some(connected);
        }
        Ok(Conn {
            guard,
            watch: Watch { slot, conns: self },
        })
    }

    /// Drops every connection no one holds now (after one was lost: the server restarted
    /// or the network broke, and the others are likely gone too). They are opened again
    /// when next needed.
    fn drop_idle(&self) {
        for slot in self.slots.iter() {
            if let Ok(mut guard) = slot.conn.try_lock() {
                *guard = None;
            }
        }
    }

    /// Closes every connection (waiting for their holders).
    pub(super) async fn close(&self) {
        for slot in self.slots.iter() {
            if let Some(conn) = slot.conn.lock().await.take() {
                let _ = conn.close().await;
            }
        }
    }
}

/// Whether `e` leaves its connection unusable (the socket or the protocol broke).
fn connection_lost(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::WorkerCrashed
    )
}
