//! `SqliteOptions::reads_on_writer` (ADR 0059): a store whose reads go through its write
//! connection when it is free opens no second connection to the database file, and reads
//! that find the writer busy still complete on the pool. Real SQLite files; connections
//! counted as the process's open descriptors of the database file.
#![cfg(feature = "store")]

use std::path::Path;

use pactgraph::runtime::RunId;
use pactgraph::store::{RunFilter, RunStore, SqliteOptions, SqliteStore, StoreError};

/// How many descriptors this process holds open on `db` itself (not its WAL or shared
/// memory): one a SQLite connection.
fn connections_to(db: &Path) -> usize {
    let db = db.canonicalize().expect("the database file");
    std::fs::read_dir("/proc/self/fd")
        .expect("the process's descriptors")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| *target == db)
        .count()
}

/// Reads of every kind the one-shot commands make: a missing run's row, the list.
async fn read(store: &SqliteStore) {
    let missing = store.info(RunId::new()).await;
    assert!(
        matches!(missing, Err(StoreError::NotFound { .. })),
        "{missing:?}"
    );
    store.list(&RunFilter::default()).await.expect("lists");
}

/// Proves that with `reads_on_writer` reads open no second connection (one descriptor on
/// the database file, against two or more for a store with its read pool), and that many reads
/// at once, most finding the writer taken, all complete (on the pool, which connects
/// then): a read never waits for the writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_on_the_writer_open_no_second_connection() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let one = dir.path().join("one.db");
    let store = SqliteStore::open_with(
        &format!("sqlite:{}", one.display()),
        SqliteOptions::default().reads_on_writer(true),
    )
    .await
    .expect("opens");
    read(&store).await;
    assert_eq!(connections_to(&one), 1, "reads on the writer");

    let pooled = dir.path().join("pooled.db");
    let other = SqliteStore::open_with(
        &format!("sqlite:{}", pooled.display()),
        SqliteOptions::default(),
    )
    .await
    .expect("opens");
    read(&other).await;
    let n = connections_to(&pooled);
    assert!(n >= 2, "a writer and its readers: {n}");

    let reads = (0..32).map(|_| {
        let store = store.clone();
        tokio::spawn(async move { read(&store).await })
    });
    for r in futures_util::future::join_all(reads).await {
        r.expect("a read completes");
    }
    let n = connections_to(&one);
    assert!(
        (1..=5).contains(&n),
        "the writer and at most 4 readers: {n}"
    );
}
