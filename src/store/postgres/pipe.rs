//! PostgreSQL's checkpoints without a snapshot, two at a time on one connection (ADR 0080).
//!
//! A driver sends checkpoint N + 1 while N's answer is still to come (pipelining): the
//! server runs N + 1 as soon as N has committed, without waiting for the client's round
//! trip. N + 1's fence (`seq = N`) refuses it unless N committed, so it can never commit
//! alone, and the two commit in order. sqlx reads every answer before it sends the next
//! statement, so these statements go through a connection of tokio-postgres, which sends
//! each request when its future is first polled and matches the answers in order.
//!
//! The connection is opened when first needed, with the settings of the store's own
//! (`synchronous_commit` for the durability, generic plans), and again after it was
//! lost. A checkpoint sent behind another ([`Pipe::checkpoint`]'s `behind`) never opens
//! it: if the connection its predecessor went on is lost, its first try fails as the
//! predecessor's did, and it is tried again only once the predecessor is settled (the
//! driver waits for the older first).
//!
//! Cancel safety: dropping a checkpoint's future after its first poll leaves the request
//! sent; the connection's task reads and drops its answer.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Mutex;
use tokio_postgres::error::DbError;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, Row, Statement};

use crate::store::error::transient;
use crate::store::packed::ChunkValue;
use crate::store::rows::Cols;

/// The connection checkpoints are pipelined on, and how to open it.
#[derive(Debug)]
pub struct Pipe {
    config: tokio_postgres::Config,
    /// The statements: the one answering the run row, the one answering what changed.
    texts: [&'static str; 2],
    open: Mutex<Option<Arc<Piped>>>,
    /// Set when the pipe could not be opened for a reason other than a passing fault (a
    /// password tokio-postgres is not given, a setting it refuses): the store then writes
    /// every checkpoint one at a time, as before.
    broken: AtomicBool,
}

/// An open pipe: its client (its connection's task spawned) and statements.
#[derive(Debug)]
struct Piped {
    client: Client,
    statements: [Statement; 2],
}

/// Its connection's `application_name` (the store's other connections are `pactgraph`).
pub const APPLICATION: &str = "pactgraph checkpoints";

/// The types of the checkpoint statements' parameters, `$1` to `$19` (`Dialect::checkpoint`'s
/// binds): declared, since the statement without a snapshot leaves `$11`, `$12` and `$14`
/// unused and the server could not infer them.
const PARAMS: [Type; 19] = [
    Type::TEXT,  // $1 run id
    Type::INT8,  // $2 seq
    Type::INT8,  // $3 steps
    Type::TEXT,  // $4 status
    Type::TEXT,  // $5 termination reason
    Type::INT8,  // $6 the bound time (a manual clock's), else NULL
    Type::TEXT,  // $7 owner
    Type::BOOL,  // $8 running
    Type::TEXT,  // $9 the next attempt key
    Type::INT8,  // $10 the next attempt
    Type::TEXT,  // $11 document digest
    Type::TEXT,  // $12 document
    Type::TEXT,  // $13 delta
    Type::TEXT,  // $14 snapshot
    Type::BYTEA, // $15 packed events
    Type::INT8,  // $16 first event
    Type::INT8,  // $17 last event
    Type::TEXT,  // $18 events channel
    Type::BOOL,  // $19 let go
];

impl Pipe {
    /// The pipe of a store opened at `url` (its parts sqlx read, `connect`, filling what
    /// the URL leaves to the environment), with `settings` (the `-c` options of the
    /// store's sessions) and the checkpoint statements (the one answering the run row, the
    /// one answering what changed); `None` when
    /// tokio-postgres reads the URL otherwise than sqlx did (the store then writes every
    /// checkpoint one at a time, as before).
    pub(super) fn new(
        url: &str,
        connect: &sqlx::postgres::PgConnectOptions,
        settings: &[(&str, &str)],
        timeout: std::time::Duration,
        texts: [&'static str; 2],
    ) -> Option<Self> {
        let mut config: tokio_postgres::Config = match url.parse() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("checkpoints one at a time: the URL reads otherwise here: {e}");
                return None;
            }
        };
        // What sqlx took from the environment (`PGUSER`, `PGDATABASE`, `PGPASSWORD`)
        // where the URL says nothing.
        if config.get_user().is_none() {
            config.user(connect.get_username());
        }
        if config.get_dbname().is_none()
            && let Some(db) = connect.get_database()
        {
            config.dbname(db);
        }
        if config.get_password().is_none()
            && let Ok(password) = std::env::var("PGPASSWORD")
        {
            config.password(password);
        }
        let mut options = config.get_options().unwrap_or_default().to_string();
        for (name, value) in settings {
            options.push_str(&format!(" -c {name}={value}"));
        }
        config
            .options(options.trim())
            .application_name(APPLICATION)
            .connect_timeout(timeout);
        Some(Self {
            config,
            texts,
            open: Mutex::new(None),
            broken: AtomicBool::new(false),
        })
    }

    /// Another pipe like this one, not opened yet (the URL read once for all of a
    /// store's).
    pub(super) fn another(&self) -> Self {
        Self {
            config: self.config.clone(),
            texts: self.texts,
            open: Mutex::new(None),
            broken: AtomicBool::new(false),
        }
    }

    /// Whether checkpoints may go through it: false once it could not be opened for a
    /// reason other than a passing fault.
    pub(crate) fn usable(&self) -> bool {
        !self.broken.load(Ordering::Relaxed)
    }

    /// The open pipe, opening it if it is not (unless `behind`: see the module's doc);
    /// `None` when it cannot be opened for a reason other than a passing fault.
    async fn piped(&self, behind: bool) -> Result<Option<Arc<Piped>>, sqlx::Error> {
        let mut open = self.open.lock().await;
        if let Some(piped) = open.as_ref().filter(|p| !p.client.is_closed()) {
            return Ok(Some(Arc::clone(piped)));
        }
        if behind {
            return Err(sqlx::Error::Io(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the connection of the checkpoint before it was lost",
            )));
        }
        *open = None;
        let (client, connection) = match self.config.connect(NoTls).await {
            Ok(opened) => opened,
            Err(e) => {
                // A passing fault (the server restarting) is ridden out as any other;
                // anything else leaves the pipe unusable.
                let e = to_sqlx(e);
                if transient(&e) {
                    return Err(e);
                }
                tracing::warn!("checkpoints one at a time: opening their connection: {e}");
                self.broken.store(true, Ordering::Relaxed);
                return Ok(None);
            }
        };
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("the checkpoints' connection ended: {e}");
            }
        });
        let info = client
            .prepare_typed(self.texts[0], &PARAMS)
            .await
            .map_err(to_sqlx)?;
        let changes = client
            .prepare_typed(self.texts[1], &PARAMS)
            .await
            .map_err(to_sqlx)?;
        let piped = Arc::new(Piped {
            client,
            statements: [info, changes],
        });
        *open = Some(Arc::clone(&piped));
        Ok(Some(piped))
    }

    /// Runs the checkpoint statement (`changes`: the one answering what changed) with
    /// `params` (`$1` to `$19`): the run row it returns, `None` when its fence refused
    /// it. `behind`: sent while another checkpoint of the run is in flight. `None` when
    /// the pipe turned out unusable, nothing sent: the store writes it on its own
    /// connections.
    pub(crate) async fn checkpoint(
        &self,
        changes: bool,
        behind: bool,
        params: &[&(dyn ToSql + Sync); 19],
    ) -> Option<Result<Option<Row>, sqlx::Error>> {
        let piped = match self.piped(behind).await {
            Ok(Some(piped)) => piped,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let statement = &piped.statements[usize::from(changes)];
        let rows = piped.client.query(statement, params).await.map_err(to_sqlx);
        Some(rows.map(|rows| rows.into_iter().next()))
    }

    /// Closes the connection (its task ends).
    pub(super) async fn close(&self) {
        self.open.lock().await.take();
    }
}

/// A tokio-postgres error as the store's others: the server's own (its SQLSTATE kept, so
/// that a restarting server's is ridden out), or the connection's (I/O: transient).
fn to_sqlx(e: tokio_postgres::Error) -> sqlx::Error {
    match e.as_db_error() {
        Some(db) => sqlx::Error::Database(Box::new(PipeDbError(db.clone()))),
        None => sqlx::Error::Io(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            e.to_string(),
        )),
    }
}

/// The server's error on the pipe's connection.
#[derive(Debug)]
struct PipeDbError(DbError);

impl std::fmt::Display for PipeDbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for PipeDbError {}

impl sqlx::error::DatabaseError for PipeDbError {
    fn message(&self) -> &str {
        self.0.message()
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.0.code().code()))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::Other
    }
}

/// A column of the answer that would not decode.
fn decode(col: &str, e: tokio_postgres::Error) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_string(),
        source: Box::new(e),
    }
}

impl Cols for Row {
    fn text(&self, col: &str) -> Result<String, sqlx::Error> {
        self.try_get(col).map_err(|e| decode(col, e))
    }

    fn opt_text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        self.try_get(col).map_err(|e| decode(col, e))
    }

    fn int(&self, col: &str) -> Result<i64, sqlx::Error> {
        self.try_get(col).map_err(|e| decode(col, e))
    }

    fn opt_int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(col).map_err(|e| decode(col, e))
    }

    fn chunk(&self, col: &str, _packed: &str) -> Result<ChunkValue, sqlx::Error> {
        Err(sqlx::Error::ColumnNotFound(format!(
            "{col}: a checkpoint's answer holds no event chunk"
        )))
    }
}
