//! Writing a prepared checkpoint ([`Store::checkpoint_once`]): one fenced statement on
//! the store's connection; and what its answer says ([`Store::answered`]).

use super::Store;
use crate::runtime::TerminationReason;
use crate::store::db::{Backend, is_refusal, sql};
use crate::store::rows::{Cols, info_from_row, to_i64};
use crate::store::{PreparedCheckpoint, RunInfo, RunStore, StoreError};

impl<B: Backend> Store<B> {
    /// One try of writing checkpoint `prepared`; `again` when an earlier try failed on a
    /// transient fault (it may have committed before its answer was lost: found
    /// committed, it is).
    pub(super) async fn checkpoint_once(
        &self,
        prepared: &PreparedCheckpoint,
        again: bool,
    ) -> Result<RunInfo, StoreError> {
        let PreparedCheckpoint {
            id,
            ref owner,
            seq,
            steps,
            status,
            termination_reason,
            running,
            let_go,
            ref next_key,
            next_attempt,
            ref document,
            ref delta,
            ref snapshot,
            events: ref event_texts,
            first_event,
            last_event,
            now: _,
        } = *prepared;
        let owner = owner.as_str();
        // One statement (SQLite's `checkpoint_in` trigger, PostgreSQL's data-modifying
        // `WITH`): fenced, atomic, one round trip, the events with it; the run row as it
        // is after it comes back.
        // The binds, converted once for either connection.
        let id_text = id.to_string();
        let (seq_i, steps_i, attempt_i) = (to_i64(seq), i64::from(steps), i64::from(next_attempt));
        let (first_i, last_i) = (to_i64(first_event), to_i64(last_event));
        let reason = termination_reason.map(TerminationReason::as_str);
        let now_bound = self.bound_now();
        let digest = document.as_ref().map(|(_, digest)| digest.as_str());
        let document = document.as_ref().map(|(text, _)| text.as_str());
        let snapshot = snapshot.as_deref();
        let statement = match snapshot {
            Some(_) => &self.dialect.checkpoint_snapshot,
            None => &self.dialect.checkpoint,
        };
        let query = sql(statement)
            .bind(id_text)
            .bind(seq_i)
            .bind(steps_i)
            .bind(status.as_str())
            .bind(reason)
            .bind(now_bound)
            .bind(owner)
            .bind(running)
            .bind(next_key)
            .bind(attempt_i)
            .bind(digest)
            .bind(document)
            .bind(delta)
            .bind(snapshot)
            .bind(event_texts.as_slice())
            .bind(first_i)
            .bind(last_i);
        // PostgreSQL's names the events channel as bound, read once at the open (ADR 0067),
        // and gives the lease up with the checkpoint that stops the run when asked (ADR
        // 0071: no release after it).
        let query = match self.events_channel() {
            Some(channel) => query.bind(channel).bind(let_go),
            None => query,
        };
        // Every row read, not the first: SQLite commits the statement's implicit
        // transaction when it runs to its end, and only then says a commit failed (a full
        // disk); a statement dropped after its first row lost that error.
        let row = query
            .fetch_all(&mut self.db.write().await?)
            .await
            .map(|rows| rows.into_iter().next());
        self.answered(prepared, row, again).await
    }

    /// What the checkpoint statement's answer `row` says of checkpoint `prepared`: the
    /// run row after it, or why it was refused; `again` as [`Store::checkpoint_once`]'s.
    async fn answered<R: Cols>(
        &self,
        prepared: &PreparedCheckpoint,
        row: Result<Option<R>, sqlx::Error>,
        again: bool,
    ) -> Result<RunInfo, StoreError> {
        let PreparedCheckpoint {
            id,
            ref owner,
            seq,
            now,
            ..
        } = *prepared;
        let owner = owner.as_str();
        let row = match row {
            Ok(Some(row)) => row,
            Err(e) if !is_refusal(&e) => return Err(StoreError::db("checkpoint", Some(id))(e)),
            // Refused: SQLite's trigger raises, PostgreSQL's statement returns no row.
            Ok(None) | Err(_) => {
                if again
                    && let Ok(info) = self.info(id).await
                    && info.seq == seq
                    && info.owner.as_deref() == Some(owner)
                {
                    // The earlier try committed; its answer was lost with the connection.
                    self.weights.forget(id);
                    return Ok(info);
                }
                return Err(self.refusal(id, owner, seq, now).await);
            }
        };
        // Not running any more, runs waiting on this one may be runnable now: the
        // checkpoint statement told the listening workers (`Dialect::checkpoint`).
        info_from_row(&row, now)
    }
}
