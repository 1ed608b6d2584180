//! The store's format on both backends: the embedded migration, refusing a database of
//! another format (a newer pactgraph's, or a development build's), and the option
//! builders both backends' options share.

use std::borrow::Cow;

use futures_util::future::BoxFuture;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use super::StoreError;
use super::rows::STORE_FORMAT;

/// One embedded migration: its version, description and SQL.
pub(crate) type Step = (i64, &'static str, &'static str);

/// A backend's embedded migrations, in version order.
#[derive(Debug, Clone, Copy)]
struct Embedded(&'static [Step]);

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

/// Refuses a database of format `found` unless it is [`STORE_FORMAT`] (or 0: a new
/// database, nothing applied yet): a newer one (`NewerFormat`), or an older one, which only
/// a development build wrote (`OlderFormat`: the store is to be made again; nothing
/// upgrades it). `url` is shown as given: redact it first.
pub(crate) fn refuse_other(url: &str, found: i64) -> Result<(), StoreError> {
    let (url, supported) = (url.to_string(), STORE_FORMAT);
    match found {
        0 => Ok(()),
        _ if found == STORE_FORMAT => Ok(()),
        _ if found > STORE_FORMAT => Err(StoreError::NewerFormat {
            url,
            found,
            supported,
        }),
        _ => Err(StoreError::OlderFormat {
            url,
            found,
            supported,
        }),
    }
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
