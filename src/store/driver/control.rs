//! The driver's dealings with what is outside the steps: renewing the lease, a cancel
//! stored as one more checkpoint, a failed or stopped run reopened, the interrupt of
//! [`DriveOptions`](crate::store::DriveOptions), and the errors that stop a drive.

use super::Driver;
use crate::runtime::RunState;
use crate::store::delta::{Before, StepDelta};
use crate::store::rows::cancel_run;
use crate::store::{Checkpoint, RunInfo, RunStore, StoreError};

impl<S: RunStore> Driver<'_, S> {
    /// Renews the lease.
    pub(super) async fn renew(&mut self) -> Result<(), StoreError> {
        let lease = self
            .store
            .renew(self.id, self.owner, self.options.lease)
            .await?;
        self.lease_expires_ms = lease.expires_ms;
        Ok(())
    }

    /// Stops `run` (as of checkpoint `seq`) as cancelled, as one more checkpoint.
    pub(super) async fn cancel(&mut self, run: &mut RunState, seq: u64) -> Result<(), StoreError> {
        let before = Before::of(run);
        cancel_run(run, self.clock.now_ms()).map_err(|reason| self.cannot(reason))?;
        let delta = StepDelta::between(&before, run);
        self.checkpoint(Checkpoint::new(seq + 1, &delta, run))
            .await
            .map(drop)
    }

    /// The run before the step that ended it (checkpoint `seq`), running again.
    pub(super) async fn reopen(
        &self,
        info: &RunInfo,
        run: &RunState,
        seq: u64,
    ) -> Result<RunState, StoreError> {
        use crate::runtime::{RunStatus, TerminationReason};
        let reopenable = match run.status() {
            RunStatus::Failed => true,
            RunStatus::Stopped => run.termination_reason() != Some(TerminationReason::Cancelled),
            _ => false,
        };
        if !reopenable || seq == 0 {
            return Err(self.cannot(format!(
                "it is {} ({}), not ended by a failed or stopped step",
                info.status,
                run.termination_reason().map_or("running", |r| r.as_str())
            )));
        }
        let earlier = self.store.load_at(self.id, seq - 1).await?;
        let reopened = earlier.record.run;
        if !reopened.is_running() {
            return Err(self.cannot(format!(
                "the run before its last step was {}, not running",
                reopened.status()
            )));
        }
        Ok(reopened)
    }

    /// Whether [`DriveOptions::interrupt`](crate::store::DriveOptions::interrupt) was cancelled.
    pub(super) fn interrupted(&self) -> bool {
        self.options
            .interrupt
            .as_ref()
            .is_some_and(|t| t.is_cancelled())
    }

    /// Completes when [`DriveOptions::interrupt`](crate::store::DriveOptions::interrupt) is cancelled (never without one).
    pub(super) async fn interrupt(&self) {
        match &self.options.interrupt {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// The error of a drive interrupted (`in_flight`: an effect was dropped).
    pub(super) fn interruption(&self, in_flight: bool) -> StoreError {
        StoreError::Interrupted {
            run_id: self.id,
            in_flight,
        }
    }

    /// The error of a run this drive cannot go on with, and why.
    pub(super) fn cannot(&self, reason: String) -> StoreError {
        StoreError::CannotContinue {
            run_id: self.id,
            reason,
        }
    }
}
