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
//! Cancel safety: dropping a statement's future mid-way leaves its connection with
//! answers still to read; sqlx reads them before the connection's next statement (and
//! rolls back a transaction dropped unfinished), so the next holder finds it idle.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::{Mutex, MutexGuard};

use crate::store::StoreError;

/// The slots and how to fill them.
#[derive(Debug)]
pub(super) struct Conns {
    slots: Box<[Mutex<Option<PgConnection>>]>,
    next: AtomicUsize,
    connect: PgConnectOptions,
    timeout: Duration,
}

/// One connection, held until dropped.
pub(super) struct Conn<'a>(MutexGuard<'a, Option<PgConnection>>);

impl Deref for Conn<'_> {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        self.0
            .as_ref()
            .expect("a handed-out slot is connected (Conns::get)")
    }
}

impl DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.0
            .as_mut()
            .expect("a handed-out slot is connected (Conns::get)")
    }
}

impl Conns {
    /// `n` slots (at least 1), the first filled with `first`.
    pub(super) fn new(
        n: u32,
        first: PgConnection,
        connect: PgConnectOptions,
        timeout: Duration,
    ) -> Self {
        let n = usize::try_from(n.max(1)).unwrap_or(1);
        let mut slots: Vec<Mutex<Option<PgConnection>>> =
            (0..n).map(|_| Mutex::new(None)).collect();
        slots[0] = Mutex::new(Some(first));
        Self {
            slots: slots.into_boxed_slice(),
            next: AtomicUsize::new(0),
            connect,
            timeout,
        }
    }

    /// A connection: a free slot's (connected slots first), else the next slot's once its
    /// holder lets it go. An empty slot is connected first (`Database` error "connecting"
    /// when the server does not answer within the open timeout or refuses).
    pub(super) async fn get(&self) -> Result<Conn<'_>, StoreError> {
        let mut free = None;
        for slot in self.slots.iter() {
            if let Ok(guard) = slot.try_lock() {
                if guard.is_some() {
                    free = Some(guard);
                    break;
                }
                if free.is_none() {
                    free = Some(guard);
                }
            }
        }
        let mut guard = match free {
            Some(guard) => guard,
            None => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
                self.slots[i].lock().await
            }
        };
        if guard.is_none() {
            let connect = tokio::time::timeout(self.timeout, self.connect.connect())
                .await
                .map_err(|_| StoreError::Database {
                    operation: "connecting",
                    run_id: None,
                    source: sqlx::Error::PoolTimedOut,
                })?
                .map_err(StoreError::db("connecting", None))?;
            *guard = Some(connect);
        }
        Ok(Conn(guard))
    }

    /// Drops every connection no one holds now (after one was lost: the server restarted
    /// or the network broke, and the others are likely gone too). They are opened again
    /// when next needed.
    pub(super) fn drop_idle(&self) {
        for slot in self.slots.iter() {
            if let Ok(mut guard) = slot.try_lock() {
                *guard = None;
            }
        }
    }

    /// Closes every connection (waiting for their holders).
    pub(super) async fn close(&self) {
        for slot in self.slots.iter() {
            if let Some(conn) = slot.lock().await.take() {
                let _ = sqlx::Connection::close(conn).await;
            }
        }
    }
}

/// Whether `e` leaves its connection unusable (the socket or the protocol broke).
pub(super) fn connection_lost(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Database {
            source: sqlx::Error::Io(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::WorkerCrashed,
            ..
        }
    )
}
