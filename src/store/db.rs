//! The seam between the one store ([`super::sql::Store`]) and its backends: a statement
//! and its binds ([`Sql`]), running it on a connection or a transaction ([`Exec`]), a
//! backend's connections and transactions ([`Backend`]) and the statements in which the
//! dialects differ ([`Dialect`], the table in docs/spec/store.md).
//!
//! Statements are written once with `$N` placeholders (sqlx binds them by number on
//! SQLite too) and bound with a few typed values (text, 64-bit integers, booleans: the
//! types every column has on both databases; and bytes, a checkpoint's event texts).

use std::borrow::Cow;
use std::future::Future;
use std::ops::DerefMut;

use super::StoreError;
use super::packed::ChunkValue;
use super::rows::Cols;

/// A value bound to a placeholder.
#[derive(Debug, Clone)]
pub enum Arg<'a> {
    /// Text, or `NULL`.
    Text(Option<Cow<'a, str>>),
    /// A 64-bit integer, or `NULL`.
    Int(Option<i64>),
    /// A boolean.
    Bool(bool),
    /// Bytes (SQLite's `BLOB`, PostgreSQL's `BYTEA`).
    Bytes(&'a [u8]),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Some(Cow::Borrowed(v)))
    }
}
impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(Some(Cow::Borrowed(v)))
    }
}
impl From<String> for Arg<'_> {
    fn from(v: String) -> Self {
        Arg::Text(Some(Cow::Owned(v)))
    }
}
impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::Text(v.map(Cow::Borrowed))
    }
}
impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Arg::Text(v.as_deref().map(Cow::Borrowed))
    }
}
impl From<Option<String>> for Arg<'_> {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v.map(Cow::Owned))
    }
}
impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(v: &'a [u8]) -> Self {
        Arg::Bytes(v)
    }
}
/// A chunk's events bound: bytes when packed (SQLite's `BLOB`, PostgreSQL's `BYTEA`),
/// else text.
impl<'a> From<&'a ChunkValue> for Arg<'a> {
    fn from(v: &'a ChunkValue) -> Self {
        match v {
            ChunkValue::Text(text) => Arg::from(text.as_str()),
            ChunkValue::Packed(bytes) => Arg::Bytes(bytes),
        }
    }
}
impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

/// A statement and the values bound to its placeholders, in order (`$1`, `$2`, ...).
#[derive(Debug, Clone)]
pub struct Sql<'a> {
    text: &'a str,
    args: Vec<Arg<'a>>,
}

/// The statement `text`, nothing bound yet.
pub fn sql(text: &str) -> Sql<'_> {
    Sql {
        text,
        args: Vec::new(),
    }
}

impl<'a> Sql<'a> {
    /// Binds the next placeholder to `value`.
    pub fn bind(mut self, value: impl Into<Arg<'a>>) -> Self {
        self.args.push(value.into());
        self
    }

    /// Runs it on `on`: every row.
    pub async fn fetch_all<E: Exec>(self, on: &mut E) -> Result<Vec<E::Row>, sqlx::Error> {
        on.fetch_all(self).await
    }

    /// Runs it on `on`: the first row, if any.
    pub async fn fetch_optional<E: Exec>(self, on: &mut E) -> Result<Option<E::Row>, sqlx::Error> {
        on.fetch_optional(self).await
    }

    /// Runs it on `on`: its one row (`RowNotFound` if none).
    pub async fn fetch_one<E: Exec>(self, on: &mut E) -> Result<E::Row, sqlx::Error> {
        on.fetch_optional(self)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }

    /// Runs it on `on`: how many rows it changed.
    pub async fn execute<E: Exec>(self, on: &mut E) -> Result<u64, sqlx::Error> {
        on.execute(self).await
    }
}

/// Runs statements: a connection, or a transaction open on one.
pub trait Exec: Send {
    /// A row it returns.
    type Row: Cols + Send;
    /// Every row of `sql`.
    fn fetch_all(
        &mut self,
        sql: Sql<'_>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send;
    /// The first row of `sql`, if any.
    fn fetch_optional(
        &mut self,
        sql: Sql<'_>,
    ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send;
    /// Runs `sql`; how many rows it changed.
    fn execute(&mut self, sql: Sql<'_>) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;
}

/// A sqlx connection type statements run on (SQLite's or PostgreSQL's).
pub trait Raw: Send {
    /// Its row type.
    type Row: Cols + Send;
    /// Every row of `sql`.
    fn fetch_all(
        &mut self,
        sql: Sql<'_>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send;
    /// The first row of `sql`, if any.
    fn fetch_optional(
        &mut self,
        sql: Sql<'_>,
    ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send;
    /// Runs `sql`; how many rows it changed.
    fn execute(&mut self, sql: Sql<'_>) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;
}

/// `Raw` for a sqlx connection type: binds each [`Arg`] with its sqlx type (`TEXT`,
/// `BIGINT`, `BOOLEAN`), the types PostgreSQL's planner is given today.
macro_rules! raw {
    ($db:ty, $conn:ty, $row:ty) => {
        impl Raw for $conn {
            type Row = $row;
            async fn fetch_all(&mut self, sql: Sql<'_>) -> Result<Vec<$row>, sqlx::Error> {
                query::<$db>(sql).fetch_all(self).await
            }
            async fn fetch_optional(&mut self, sql: Sql<'_>) -> Result<Option<$row>, sqlx::Error> {
                query::<$db>(sql).fetch_optional(self).await
            }
            async fn execute(&mut self, sql: Sql<'_>) -> Result<u64, sqlx::Error> {
                Ok(query::<$db>(sql).execute(self).await?.rows_affected())
            }
        }
    };
}
raw!(
    sqlx::Sqlite,
    sqlx::SqliteConnection,
    sqlx::sqlite::SqliteRow
);
raw!(sqlx::Postgres, sqlx::PgConnection, sqlx::postgres::PgRow);

/// The sqlx query for `sql` on database `DB`, its values bound: an owned text moved into
/// it (a large one, a run's state, is not copied when the query is sent; ADR 0070).
fn query<'q, DB>(sql: Sql<'q>) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>>
where
    DB: sqlx::Database,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q [u8]: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut q = sqlx::query::<DB>(sql.text);
    for arg in sql.args {
        q = match arg {
            Arg::Text(Some(Cow::Owned(t))) => q.bind(Some(t)),
            Arg::Text(Some(Cow::Borrowed(t))) => q.bind(Some(t)),
            Arg::Text(None) => q.bind(None::<&str>),
            Arg::Int(i) => q.bind(i),
            Arg::Bool(b) => q.bind(b),
            Arg::Bytes(b) => q.bind(b),
        };
    }
    q
}

impl<T> Exec for T
where
    T: DerefMut + Send,
    T::Target: Raw,
{
    type Row = <T::Target as Raw>::Row;
    fn fetch_all(
        &mut self,
        sql: Sql<'_>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send {
        (**self).fetch_all(sql)
    }
    fn fetch_optional(
        &mut self,
        sql: Sql<'_>,
    ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send {
        (**self).fetch_optional(sql)
    }
    fn execute(&mut self, sql: Sql<'_>) -> impl Future<Output = Result<u64, sqlx::Error>> + Send {
        (**self).execute(sql)
    }
}

/// What a transaction is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// Writes: SQLite takes its write lock at once (`BEGIN IMMEDIATE`).
    Write,
    /// Reads of one moment: PostgreSQL's `REPEATABLE READ, READ ONLY`.
    Read,
    /// A create's writes: as [`Begin::Write`], and PostgreSQL takes the documents lock
    /// shared in the same round trip (`BEGIN` and the lock one simple query, so that a
    /// prune never deletes the document of a run being created).
    Create,
}

/// The statements in which the dialects differ (docs/spec/store.md, "the dialect table");
/// every other statement is written once.
#[derive(Debug)]
pub struct Dialect {
    /// The checkpoint and its events in one statement, so no transaction stays open
    /// across round trips (PostgreSQL: data-modifying `WITH` clauses; SQLite: an insert
    /// into the `checkpoint_events_in` view, whose trigger inserts into
    /// `checkpoint_in`): 16 binds (`run_id, seq, steps, status, termination_reason,
    /// now_ms, owner, running, next_key, next_attempt, digest, document, delta,
    /// snapshot`, a `NULL` `now_ms` being the database's clock, then the events as a JSON
    /// array of their texts and the first one's `seq`, docs/spec/events.md), returning
    /// the run row's [`super::rows::INFO`] columns. A refused fence writes nothing:
    /// SQLite's trigger raises `pactgraph: checkpoint refused`, PostgreSQL's statement
    /// returns no row. A checkpoint leaving the run not running (ended, waiting, paused)
    /// also tells listening workers that runs may have become runnable (PostgreSQL: in the
    /// same statement, sent at its commit; SQLite's workers poll). The statement of a
    /// checkpoint without a snapshot (`$14` `NULL`). PostgreSQL's statements take one bind
    /// more, `$18`: the name of the schema's events channel its followers are told on,
    /// read once at the store's open (`Store::events_channel`, ADR 0067).
    pub checkpoint: String,
    /// [`Dialect::checkpoint`]'s statement for a checkpoint carrying a snapshot (`$14`
    /// set): the same binds, the same answer (SQLite: the same statement; PostgreSQL: one
    /// of its own, so that each is planned once, ADR 0050).
    pub checkpoint_snapshot: String,
    /// What a claim's `SELECT` of the run row ends with (PostgreSQL's
    /// `FOR UPDATE SKIP LOCKED`: a worker never waits on a run another is claiming).
    pub claim_lock: &'static str,
    /// The larger of two integers (`MAX` or `GREATEST`).
    pub greatest: &'static str,
    /// Taken in a create's transaction before a name is looked up, bound to the name
    /// (PostgreSQL's advisory lock; SQLite's `BEGIN IMMEDIATE` already has one writer).
    pub name_lock: Option<&'static str>,
    /// How a write transaction begins.
    pub begin_write: &'static str,
    /// How a read transaction begins.
    pub begin_read: &'static str,
    /// The database's clock, in milliseconds since the Unix epoch (an SQL expression):
    /// what leases are fenced on.
    pub now_ms: &'static str,
    /// What follows an integer placeholder that the database cannot type by itself
    /// (`::BIGINT` on PostgreSQL).
    pub int_param: &'static str,
    /// Taken (exclusive) in a prune's transaction before documents no run uses are
    /// deleted (PostgreSQL's advisory lock; SQLite has one writer).
    pub documents_lock: Option<&'static str>,
    /// How a create's transaction begins ([`Begin::Create`]): PostgreSQL's `BEGIN` and its
    /// shared documents lock, taken before the document is written, in one round trip.
    pub begin_create: &'static str,
    /// A create's insert of the run row ([`super::rows::insert_run`] on this dialect's
    /// clock).
    pub insert_run: String,
    /// A create's writes in one statement (binds as [`Dialect::insert_run`]'s, then
    /// the document's text and the first snapshot), answering the run row's
    /// [`super::rows::INFO`] and telling listening workers a run may be runnable:
    /// PostgreSQL's data-modifying `WITH` clauses, one round trip and one statement to
    /// plan instead of three (ADR 0060); `None` on SQLite, whose statements cost no round
    /// trip.
    pub create_run: Option<String>,
    /// Tells listening workers that a run may have become runnable (PostgreSQL's
    /// `pg_notify`); none on SQLite, whose workers poll.
    pub notify_runnable: Option<&'static str>,
    /// The column of `event_chunks` a checkpoint writes its event chunk to, packed in the
    /// client (lz4, `store/packed.rs`) and bound as bytes: `events` on SQLite (a `BLOB`
    /// value of the text column, format 11, ADR 0059: chunks of older formats are text
    /// values of the same column), `packed` on PostgreSQL (a `BYTEA` column stored
    /// without the server's compression, format 12, ADR 0063: the text chunks of older
    /// formats stay in `events`). Readers select [`Dialect::packed_read`] beside `events`.
    pub packed_column: &'static str,
}

impl Dialect {
    /// `statement` (a data-modifying statement on the run row or a run's rows) telling
    /// listening workers, when it commits, that a run may have become runnable, in the
    /// same round trip (PostgreSQL: the statement in a `WITH` clause, `pg_notify` once per
    /// row it changed); `statement` itself on SQLite. Run with `execute`, it counts the
    /// rows `statement` changed either way.
    pub fn notifying<'s>(&self, statement: &'s str) -> Cow<'s, str> {
        match self.notify_runnable {
            Some(notify) => Cow::Owned(format!(
                "WITH changed AS ({statement} RETURNING 1) {notify} FROM changed"
            )),
            None => Cow::Borrowed(statement),
        }
    }

    /// What a reader of event chunks selects as column `packed` beside `events`
    /// ([`super::rows::Cols::chunk`]): [`Dialect::packed_column`] where it is a column of
    /// its own (PostgreSQL), else `NULL` (SQLite, whose packed chunks are `BLOB` values of
    /// `events`).
    pub fn packed_read(&self) -> &'static str {
        if self.packed_column == "events" {
            "NULL"
        } else {
            self.packed_column
        }
    }

    /// The statement beginning a transaction for `how`.
    pub fn begin(&self, how: Begin) -> &'static str {
        match how {
            Begin::Write => self.begin_write,
            Begin::Read => self.begin_read,
            Begin::Create => self.begin_create,
        }
    }
}

/// Whether `e` is the checkpoint statement refusing a checkpoint (its fence failed):
/// SQLite's trigger raises this message (PostgreSQL's statement returns no row instead).
pub fn is_refusal(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.message().contains("pactgraph: checkpoint refused"))
}

/// A held connection that begins transactions.
pub trait Conn: Exec {
    /// A transaction open on it (rolled back if dropped unfinished).
    type Tx<'c>: Tx<Row = Self::Row>
    where
        Self: 'c;
    /// Begins a transaction for `how` (the statement the backend's dialect says).
    fn begin(
        &mut self,
        how: Begin,
    ) -> impl Future<Output = Result<Self::Tx<'_>, sqlx::Error>> + Send;
}

/// An open transaction.
pub trait Tx: Exec + Sized {
    /// Commits it.
    fn commit(self) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// Rolls it back.
    fn rollback(self) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
}

/// A database the store runs on: its connections (its dialect is the store's).
pub trait Backend: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// A row of its.
    #[doc(hidden)]
    type Row: Cols + Send;
    /// A connection held for one statement or one transaction.
    #[doc(hidden)]
    type Conn<'a>: Conn<Row = Self::Row>
    where
        Self: 'a;

    /// A connection to read on.
    #[doc(hidden)]
    fn read(&self) -> impl Future<Output = Result<Self::Conn<'_>, StoreError>> + Send;

    /// A connection to write on: one to read on, unless the backend writes on a
    /// connection of its own (SQLite: its one writer, waiting for this store's other
    /// writes to end).
    #[doc(hidden)]
    fn write(&self) -> impl Future<Output = Result<Self::Conn<'_>, StoreError>> + Send {
        self.read()
    }

    /// Closes its connections (waiting for their holders).
    #[doc(hidden)]
    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Wakeups when runs become runnable, if the database sends them (PostgreSQL's
    /// `LISTEN`); `None`: workers poll only.
    #[doc(hidden)]
    fn wakeups(&self) -> impl Future<Output = Option<super::Wakeups>> + Send {
        async { None }
    }

    /// Wakeups when run `id` has new kept events, if the database sends them
    /// (PostgreSQL's `LISTEN`); `None`: followers poll only.
    #[doc(hidden)]
    fn event_wakeups(
        &self,
        id: crate::runtime::RunId,
    ) -> impl Future<Output = Option<super::Wakeups>> + Send {
        let _ = id;
        async { None }
    }
}
