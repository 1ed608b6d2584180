//! The store's calls as boxed `Send` futures, for axum's handlers and spawned tasks.
//!
//! The store is generic over its backend: its futures are `Send` for every backend
//! (`RunStore` says so), but proving it again for the concrete [`AnyStore`] inside an
//! async handler trips a known limit of the compiler ("`Send` is not general enough",
//! rust-lang/rust#100013). Each call is boxed here, in a function generic over the store,
//! where the trait's `Send` bound is what is checked.
//!
//! [`AnyStore`]: crate::store::AnyStore

use std::pin::Pin;
use std::time::Duration;

use crate::runtime::{Executor, RunId, RunRecord, RunState, TerminationReason};
use crate::store::{
    Continue, CreateOptions, DependencySpec, DriveOptions, Lease, RunFilter, RunInfo, RunStore,
    StoreError, StoredRun, settle_dependents,
};

/// A boxed `Send` future.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`RunStore::list`].
pub fn list<'a, S: RunStore>(
    s: &'a S,
    f: &'a RunFilter,
) -> BoxFut<'a, Result<Vec<RunInfo>, StoreError>> {
    Box::pin(s.list(f))
}

/// [`RunStore::find`].
pub fn find<'a, S: RunStore>(s: &'a S, key: &'a str) -> BoxFut<'a, Result<RunId, StoreError>> {
    Box::pin(s.find(key))
}

/// [`RunStore::load`].
pub fn load<S: RunStore>(s: &S, id: RunId) -> BoxFut<'_, Result<StoredRun, StoreError>> {
    Box::pin(s.load(id))
}

/// [`RunStore::info`].
pub fn info<S: RunStore>(s: &S, id: RunId) -> BoxFut<'_, Result<RunInfo, StoreError>> {
    Box::pin(s.info(id))
}

/// [`RunStore::dependency_spec`].
pub fn dependency_spec<S: RunStore>(
    s: &S,
    id: RunId,
) -> BoxFut<'_, Result<Option<DependencySpec>, StoreError>> {
    Box::pin(s.dependency_spec(id))
}

/// [`RunStore::dependents`].
pub fn dependents<S: RunStore>(s: &S, id: RunId) -> BoxFut<'_, Result<Vec<RunInfo>, StoreError>> {
    Box::pin(s.dependents(id))
}

/// [`RunStore::create`].
pub fn create<'a, S: RunStore>(
    s: &'a S,
    record: &'a RunRecord,
    options: &'a CreateOptions,
) -> BoxFut<'a, Result<RunInfo, StoreError>> {
    Box::pin(s.create(record, options))
}

/// [`RunStore::claim`].
pub fn claim<'a, S: RunStore>(
    s: &'a S,
    id: RunId,
    owner: &'a str,
    lease: Duration,
) -> BoxFut<'a, Result<Lease, StoreError>> {
    Box::pin(s.claim(id, owner, lease))
}

/// [`RunStore::cancel`].
pub fn cancel<S: RunStore>(s: &S, id: RunId) -> BoxFut<'_, Result<RunInfo, StoreError>> {
    Box::pin(s.cancel(id))
}

/// [`RunStore::interrupt`].
pub fn interrupt<'a, S: RunStore>(
    s: &'a S,
    id: RunId,
    owner: &'a str,
) -> BoxFut<'a, Result<(), StoreError>> {
    Box::pin(s.interrupt(id, owner))
}

/// [`settle_dependents`].
pub fn settle<'a, S: RunStore>(
    s: &'a S,
    id: RunId,
    owner: &'a str,
    lease: Duration,
) -> BoxFut<'a, Result<Vec<(RunId, TerminationReason)>, StoreError>> {
    Box::pin(settle_dependents(s, id, owner, lease))
}

/// [`drive()`](crate::store::drive).
pub fn drive<'a, S: RunStore>(
    executor: &'a Executor,
    s: &'a S,
    id: RunId,
    owner: &'a str,
    options: &'a DriveOptions,
    how: Continue,
) -> BoxFut<'a, Result<RunState, StoreError>> {
    Box::pin(crate::store::drive(executor, s, id, owner, options, how))
}

/// [`RunStore::events`].
pub fn events<S: RunStore>(
    s: &S,
    id: RunId,
    after: u64,
    limit: usize,
) -> BoxFut<'_, Result<Vec<crate::runtime::RunEvent>, StoreError>> {
    Box::pin(s.events(id, after, limit))
}
