//! The store's format on both backends: the embedded migrations, refusing a database a
//! newer pactgraph wrote, and the option builders both backends' options share.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use super::StoreError;
use super::rows::STORE_FORMAT;

/// One embedded migration: its version, description and SQL.
pub(crate) type Step = (i64, &'static str, &'static str);

/// A backend's embedded migrations, in version order.
#[derive(Debug, Clone, Copy)]
struct Embedded(&'static [Step]);

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        Box::pin(async move {
            Ok(self
                .0
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// The migrator of `steps` (an `Open` error naming `url` if they do not read).
pub(crate) async fn migrator(steps: &'static [Step], url: &str) -> Result<Migrator, StoreError> {
    Migrator::new(Embedded(steps))
        .await
        .map_err(|e| open_error(url, format!("migrations: {e}")))
}

/// The `Open` error of the store at `url` (shown as given: redact it first).
pub(crate) fn open_error(url: &str, reason: String) -> StoreError {
    StoreError::Open {
        url: url.to_string(),
        reason,
    }
}

/// Refuses a database of format `found` when it is newer than [`STORE_FORMAT`].
pub(crate) fn refuse_newer(url: &str, found: i64) -> Result<(), StoreError> {
    if found > STORE_FORMAT {
        return Err(StoreError::NewerFormat {
            url: url.to_string(),
            found,
            supported: STORE_FORMAT,
        });
    }
    Ok(())
}

/// The builders every backend's options have: `durability`, `snapshot_every` and `clock`
/// (fields of those names).
macro_rules! shared_options {
    ($options:ty) => {
        impl $options {
            /// With `durability`.
            pub fn durability(mut self, durability: $crate::store::Durability) -> Self {
                self.durability = durability;
                self
            }
            /// A snapshot at least every `n` checkpoints (`n` at least 1).
            pub fn snapshot_every(mut self, n: u64) -> Self {
                self.snapshot_every = Some(n.max(1));
                self
            }
            /// Reading the time from `clock` (a test's manual clock, say).
            pub fn clock(mut self, clock: $crate::store::Clock) -> Self {
                self.clock = clock;
                self
            }
        }
    };
}
pub(crate) use shared_options;
