//! Reading rows: listing runs (newest first, in pages) and finding a run by id, id
//! prefix or name.

use super::Store;
use crate::runtime::RunId;
use crate::store::db::{Backend, sql};
use crate::store::rows::{Cols, INFO, info_from_row, to_i64};
use crate::store::{RunFilter, RunInfo, RunStore, StoreError, StoredStatus};

impl<B: Backend> Store<B> {
    /// Runs matching `filter`, newest first (see [`RunStore::list`]).
    pub(super) async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunInfo>, StoreError> {
        let now = self.now();
        // The stored status narrows the rows in SQL; `running`, `interrupted` and `queued`
        // are derived from the lease when read, so they select both live statuses.
        let (exact, live) = match filter.status {
            None => (None, false),
            Some(StoredStatus::Running | StoredStatus::Interrupted | StoredStatus::Queued) => {
                (None, true)
            }
            Some(s) => (Some(s.as_str()), false),
        };
        // Pages, newest first, until `limit` rows match (the derived status is checked
        // in Rust, so a page may match fewer than it holds); without a limit, one page.
        let page = filter.limit.map(|l| to_i64(l.max(128) as u64 * 2));
        let mut out = Vec::new();
        let mut before: Option<String> = filter.before.map(|id| id.to_string());
        loop {
            let statement = list_statement(
                filter.workflow.is_some(),
                before.is_some(),
                exact.is_some(),
                live,
            );
            let mut query = sql(&statement)
                .bind(filter.include_expired)
                .bind(to_i64(now));
            if let Some(workflow) = &filter.workflow {
                query = query.bind(workflow);
            }
            if let Some(before) = &before {
                query = query.bind(before);
            }
            if let Some(exact) = exact {
                query = query.bind(exact);
            }
            let rows = query
                .bind(page.unwrap_or(i64::MAX))
                .fetch_all(&mut self.db.read().await?)
                .await
                .map_err(StoreError::db("list", None))?;
            for row in &rows {
                let info = info_from_row(row, now)?;
                if filter.status.is_none_or(|s| s == info.status) {
                    out.push(info);
                    if filter.limit.is_some_and(|l| out.len() >= l) {
                        return Ok(out);
                    }
                }
            }
            match rows.last() {
                Some(last) if page.is_some_and(|p| rows.len() as i64 == p) => {
                    before = Some(last.text("id").map_err(StoreError::db("list", None))?);
                }
                _ => return Ok(out),
            }
        }
    }

    /// The run `key` names (see [`RunStore::find`]).
    pub(super) async fn find_run(&self, key: &str) -> Result<RunId, StoreError> {
        let db = StoreError::db("find", None);
        if let Ok(id) = key.parse::<RunId>() {
            return self.info(id).await.map(|i| i.id);
        }
        if key.len() >= 6 && key.chars().all(|c| c.is_ascii_alphanumeric()) {
            // The ids from the prefix up to it followed by `~` (after every letter and
            // digit in byte order, both stores' order of ids): a range of the primary key
            // whatever the plan (a `LIKE` pattern bound as a value uses no index in a
            // generic plan, ADR 0060).
            let prefix = key.to_ascii_uppercase();
            let rows = sql("SELECT id FROM runs WHERE id >= $1 AND id < $2 \
                 ORDER BY id DESC LIMIT 20")
            .bind(prefix.as_str())
            .bind(format!("{prefix}~"))
            .fetch_all(&mut self.db.read().await?)
            .await
            .map_err(&db)?;
            let mut ids = Vec::with_capacity(rows.len());
            for row in &rows {
                if let Ok(id) = row.text("id").map_err(&db)?.parse::<RunId>() {
                    ids.push(id);
                }
            }
            match ids.len() {
                0 => {}
                1 => return Ok(ids[0]),
                _ => {
                    return Err(StoreError::Ambiguous {
                        prefix: key.to_string(),
                        candidates: ids,
                    });
                }
            }
        }
        let row = sql(
            "SELECT id FROM runs WHERE name = $1 AND (expires_ms IS NULL OR expires_ms > $2) \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(key)
        .bind(to_i64(self.now()))
        .fetch_optional(&mut self.db.read().await?)
        .await
        .map_err(&db)?;
        let not_found = || StoreError::NotFound {
            key: key.to_string(),
        };
        match row {
            Some(row) => row
                .text("id")
                .map_err(&db)?
                .parse()
                .map_err(|_| not_found()),
            None => Err(not_found()),
        }
    }
}

/// The list statement of the filters given (the expiry's always: its flag and the time),
/// newest first, its page's size the last placeholder. Only the filters given are
/// clauses, each its own placeholder: PostgreSQL's store plans a statement once per
/// connection for any values (generic plans, ADR 0060), and a clause that a value
/// switches off (`$1 IS NULL OR workflow = $1`) would keep the planner from the index
/// the filter names. `live`: the stored statuses of running, interrupted and queued runs.
fn list_statement(workflow: bool, before: bool, exact: bool, live: bool) -> String {
    let mut clauses = vec!["($1 OR expires_ms IS NULL OR expires_ms > $2)".to_string()];
    let mut n = 2;
    for (given, clause) in [
        (workflow, "workflow = "),
        (before, "id < "),
        (exact, "status = "),
    ] {
        if given {
            n += 1;
            clauses.push(format!("{clause}${n}"));
        }
    }
    if live {
        clauses.push("status IN ('running', 'queued')".into());
    }
    format!(
        "SELECT {INFO} FROM runs WHERE {} ORDER BY id DESC LIMIT ${}",
        clauses.join(" AND "),
        n + 1
    )
}

#[cfg(test)]
mod tests {
    use super::list_statement;

    /// Proves, for every combination of filters, that the list statement has a clause for
    /// each filter given and none for the others, no clause a bound value could switch
    /// off (`$N IS NULL OR`: a generic plan could not use the filter's index, ADR 0060),
    /// and its placeholders numbered 1, 2, ... in the order the store binds them
    /// (include-expired flag, time, workflow, page bound, status, page size).
    #[test]
    fn each_filter_given_is_one_clause_and_placeholders_follow() {
        for bits in 0..16u8 {
            let (workflow, before, exact, live) =
                (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
            let s = list_statement(workflow, before, exact, live);
            assert_eq!(s.contains("workflow = $"), workflow, "{s}");
            assert_eq!(s.contains("id < $"), before, "{s}");
            assert_eq!(s.contains("status = $"), exact, "{s}");
            assert_eq!(s.contains("status IN ("), live, "{s}");
            let binds = 3 + usize::from(workflow) + usize::from(before) + usize::from(exact);
            for n in 1..=binds {
                assert!(s.contains(&format!("${n}")), "${n} in {s}");
                assert!(!s.contains(&format!("${n} IS NULL")), "{s}");
            }
            assert!(!s.contains(&format!("${}", binds + 1)), "{s}");
            assert!(s.ends_with(&format!("LIMIT ${binds}")), "{s}");
        }
    }
}
