//! [`DynStore`]: a run store behind `dyn`, each call a boxed `Send` future.
//!
//! [`RunStore`] is generic (its futures are `impl Future + Send`), so it is not object
//! safe, and proving its futures `Send` again for one concrete store inside an async
//! block that must itself be `Send` (an axum handler, a spawned task) trips a known limit
//! of the compiler ("`Send` is not general enough", rust-lang/rust#100013). `DynStore`
//! is implemented once for every `RunStore`, where the trait's own bound is what is
//! checked: `Arc<dyn DynStore>` is a store that code can hold, share and spawn with
//! without naming its backend (the server's handlers do).

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{
    Continue, CreateOptions, DependencySpec, DriveOptions, Lease, RunFilter, RunInfo, RunStore,
    StoreError, StoredRun,
};
use crate::runtime::{Executor, RunEvent, RunId, RunRecord, RunState, TerminationReason};

/// The calls of a [`RunStore`] that a server makes, object safe (see the module docs).
/// Each does what the `RunStore` method (or store function) of its name does, as a boxed
/// `Send` future (`futures_util`'s `BoxFuture`).
pub trait DynStore: Send + Sync {
    /// [`RunStore::list`].
    fn list<'a>(&'a self, filter: &'a RunFilter)
    -> BoxFuture<'a, Result<Vec<RunInfo>, StoreError>>;
    /// [`RunStore::find`].
    fn find<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<RunId, StoreError>>;
    /// [`RunStore::load`].
    fn load(&self, id: RunId) -> BoxFuture<'_, Result<StoredRun, StoreError>>;
    /// [`RunStore::info`].
    fn info(&self, id: RunId) -> BoxFuture<'_, Result<RunInfo, StoreError>>;
    /// [`RunStore::dependency_spec`].
    fn dependency_spec(
        &self,
        id: RunId,
    ) -> BoxFuture<'_, Result<Option<DependencySpec>, StoreError>>;
    /// [`RunStore::dependents`].
    fn dependents(&self, id: RunId) -> BoxFuture<'_, Result<Vec<RunInfo>, StoreError>>;
    /// [`RunStore::create`].
    fn create<'a>(
        &'a self,
        record: &'a RunRecord,
        options: &'a CreateOptions,
    ) -> BoxFuture<'a, Result<RunInfo, StoreError>>;
    /// [`RunStore::claim`].
    fn claim<'a>(
        &'a self,
        id: RunId,
        owner: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Lease, StoreError>>;
    /// [`RunStore::cancel`].
    fn cancel(&self, id: RunId) -> BoxFuture<'_, Result<RunInfo, StoreError>>;
    /// [`RunStore::interrupt`].
    fn interrupt<'a>(&'a self, id: RunId, owner: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    /// [`RunStore::events`].
    fn events(
        &self,
        id: RunId,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<RunEvent>, StoreError>>;
    /// [`settle_dependents`](super::settle_dependents).
    fn settle_dependents<'a>(
        &'a self,
        id: RunId,
        owner: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<(RunId, TerminationReason)>, StoreError>>;
    /// [`drive()`](super::drive()) on this store.
    fn drive<'a>(
        &'a self,
        executor: &'a Executor,
        id: RunId,
        owner: &'a str,
        options: &'a DriveOptions,
        how: Continue,
    ) -> BoxFuture<'a, Result<RunState, StoreError>>;
}

impl<S: RunStore> DynStore for S {
    fn list<'a>(
        &'a self,
        filter: &'a RunFilter,
    ) -> BoxFuture<'a, Result<Vec<RunInfo>, StoreError>> {
        Box::pin(RunStore::list(self, filter))
    }
    fn find<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<RunId, StoreError>> {
        Box::pin(RunStore::find(self, key))
    }
    fn load(&self, id: RunId) -> BoxFuture<'_, Result<StoredRun, StoreError>> {
        Box::pin(RunStore::load(self, id))
    }
    fn info(&self, id: RunId) -> BoxFuture<'_, Result<RunInfo, StoreError>> {
        Box::pin(RunStore::info(self, id))
    }
    fn dependency_spec(
        &self,
        id: RunId,
    ) -> BoxFuture<'_, Result<Option<DependencySpec>, StoreError>> {
        Box::pin(RunStore::dependency_spec(self, id))
    }
    fn dependents(&self, id: RunId) -> BoxFuture<'_, Result<Vec<RunInfo>, StoreError>> {
        Box::pin(RunStore::dependents(self, id))
    }
    fn create<'a>(
        &'a self,
        record: &'a RunRecord,
        options: &'a CreateOptions,
    ) -> BoxFuture<'a, Result<RunInfo, StoreError>> {
        Box::pin(RunStore::create(self, record, options))
    }
    fn claim<'a>(
        &'a self,
        id: RunId,
        owner: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        Box::pin(RunStore::claim(self, id, owner, lease))
    }
    fn cancel(&self, id: RunId) -> BoxFuture<'_, Result<RunInfo, StoreError>> {
        Box::pin(RunStore::cancel(self, id))
    }
    fn interrupt<'a>(&'a self, id: RunId, owner: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(RunStore::interrupt(self, id, owner))
    }
    fn events(
        &self,
        id: RunId,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<RunEvent>, StoreError>> {
        Box::pin(RunStore::events(self, id, after, limit))
    }
    fn settle_dependents<'a>(
        &'a self,
        id: RunId,
        owner: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<(RunId, TerminationReason)>, StoreError>> {
        Box::pin(super::settle_dependents(self, id, owner, lease))
    }
    fn drive<'a>(
        &'a self,
        executor: &'a Executor,
        id: RunId,
        owner: &'a str,
        options: &'a DriveOptions,
        how: Continue,
    ) -> BoxFuture<'a, Result<RunState, StoreError>> {
        Box::pin(super::drive(executor, self, id, owner, options, how))
    }
}
