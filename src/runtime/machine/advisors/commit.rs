//! Committing advisors: a round's calls (plain members' reports in the first round, each
//! agent member's call in every round), and once every report is in, the join: the
//! advice slice written and the primary pending.

use std::sync::Arc;

use super::{advice, status_str};
use crate::contracts::Advisors;
use crate::runtime::data::{
    AdvisingRun, Control, Pending, Seat, SeatReport, SeatState, SeatStatus, TerminationReason,
    TraceKind, Usage,
};
use crate::runtime::effects::{Report, ReportStatus};
use crate::runtime::machine::agent::SeatEnd;
use crate::runtime::machine::budgets::GuardStop;
use crate::runtime::machine::commit::{Tx, attach_usage};
use crate::runtime::machine::step::{ForkStep, SeatStep};
use crate::runtime::plan::NodePlan;

impl Tx<'_> {
    /// Commits a round of a fork. Its first round records the `fork` item and each
    /// plain member's report (an `advisor` item, a step and a visit each); every round
    /// commits its agent members' calls (see `agent/seats.rs`), an agent member's
    /// `advisor` item and visit coming when its session ends. Once every report is in:
    /// the `join` item, the advice slice, and the primary pending; until then the fork
    /// is pending ([`Pending::Advising`]). A fork cut short by cancellation stops the run
    /// (`cancelled`) after its items.
    pub(crate) fn fork(&mut self, fs: ForkStep<'_>) {
        let ForkStep {
            np,
            spec,
            dispatcher,
            kind,
            source,
            chain,
            reports,
            owed,
            seats,
            round,
        } = fs;
        self.chain.clone_from(&chain);
        let mut cancelled = false;
        let adv = match round {
            Some(mut adv) => {
                for seat in seats {
                    let position = seat.position;
                    let state = self.seat_state(&dispatcher, &np.id, seat, &mut cancelled);
                    if let Some(s) = adv.seats.get_mut(position) {
                        s.state = state;
                    }
                }
                adv
            }
            None => {
                let it = self.record(TraceKind::Fork, &dispatcher);
                it.set_source(&source);
                it.set_target(&np.id);
                it.set_reason(format!("advisors: {}", spec.members.join(", ")));
                let mut adv = Box::new(AdvisingRun {
                    node: Arc::clone(&np.id),
                    dispatcher: Arc::clone(&dispatcher),
                    kind,
                    from: source,
                    chain,
                    owed,
                    base: self.run.steps,
                    seats: Vec::with_capacity(spec.members.len()),
                });
                let mut plain = reports.into_iter();
                let mut agents = seats.into_iter().peekable();
                for (i, id) in spec.members.iter().enumerate() {
                    // The member's id as its report or seat holds it (no copy made).
                    let (advisor, state) = match agents.next_if(|s| s.position == i) {
                        Some(seat) => {
                            let advisor = Arc::clone(&seat.np.id);
                            (
                                advisor,
                                self.seat_state(&dispatcher, &np.id, seat, &mut cancelled),
                            )
                        }
                        None => match plain.next() {
                            Some(r) => {
                                cancelled |= r.cancelled;
                                let advisor = Arc::clone(&r.advisor);
                                let report = self.plain_report(&dispatcher, &np.id, r);
                                (advisor, SeatState::Reported(report))
                            }
                            None => {
                                let report = SeatReport {
                                    status: SeatStatus::Failed,
                                    output: None,
                                    error: Some("the fork gave no report for it".into()),
                                    duration_us: 0,
                                };
                                (Arc::from(id.as_str()), SeatState::Reported(report))
                            }
                        },
                    };
                    adv.seats.push(Seat { advisor, state });
                }
                adv
            }
        };
        if cancelled {
            // The fork's items are recorded, the join's too, then the run stops.
            self.join_item(&dispatcher, np, &adv.seats);
            let g = GuardStop {
                reason: TerminationReason::Cancelled,
                message: format!(
                    "the run was cancelled while the advisors of `{}` ran",
                    np.id
                ),
            };
            return self.guard_stop(g, Some(dispatcher));
        }
        if adv.live().next().is_some() {
            self.run.control = Control::Running(Pending::Advising(adv));
            return;
        }
        self.join(np, spec, *adv);
    }

    /// Records a plain member's report: a step, a visit, its usage and its `advisor`
    /// item.
    fn plain_report(&mut self, sup: &Arc<str>, primary: &Arc<str>, r: Report) -> SeatReport {
        let status = match r.status {
            ReportStatus::Ok => SeatStatus::Ok,
            ReportStatus::Failed => SeatStatus::Failed,
            ReportStatus::Timeout => SeatStatus::Timeout,
        };
        let report = SeatReport {
            status,
            output: r.output,
            error: r.error,
            duration_us: r.duration_us,
        };
        self.run.steps += 1;
        if let Some(u) = &r.usage {
            self.run.usage_total.add_all(u);
        }
        self.advisor_item(sup, primary, &r.advisor, &report, r.usage);
        report
    }

    /// Commits an agent member's call; when its session ends, its visit and `advisor`
    /// item (with its session's usage, counted already call by call).
    fn seat_state(
        &mut self,
        sup: &Arc<str>,
        primary: &Arc<str>,
        seat: SeatStep<'_>,
        cancelled: &mut bool,
    ) -> SeatState {
        let advisor = Arc::clone(&seat.np.id);
        let (report, usage) = match self.seat(sup, seat) {
            SeatEnd::Going(session) => return SeatState::Live { session },
            SeatEnd::Cancelled => {
                *cancelled = true;
                let report = SeatReport {
                    status: SeatStatus::Failed,
                    output: None,
                    error: Some("the run was cancelled".into()),
                    duration_us: 0,
                };
                return SeatState::Reported(report);
            }
            SeatEnd::Exit {
                output,
                duration_us,
                usage,
                ..
            } => (
                SeatReport {
                    status: SeatStatus::Ok,
                    output: Some(output.writes),
                    error: None,
                    duration_us,
                },
                usage,
            ),
            SeatEnd::Failed {
                timeout,
                message,
                duration_us,
                usage,
                ..
            } => (
                SeatReport {
                    status: if timeout {
                        SeatStatus::Timeout
                    } else {
                        SeatStatus::Failed
                    },
                    output: None,
                    error: Some(message),
                    duration_us,
                },
                usage,
            ),
        };
        self.advisor_item(sup, primary, &advisor, &report, usage);
        SeatState::Reported(report)
    }

    /// Counts a visit of `advisor` and records its `advisor` item.
    fn advisor_item(
        &mut self,
        sup: &Arc<str>,
        primary: &Arc<str>,
        advisor: &Arc<str>,
        report: &SeatReport,
        usage: Option<Usage>,
    ) {
        self.run.count_visit(advisor);
        let it = self.record(TraceKind::Advisor, sup);
        it.set_source(primary);
        it.set_target(advisor);
        it.duration_us = report.duration_us;
        let status = status_str(report.status);
        it.set_reason(match &report.error {
            Some(e) => format!("{status}: {e}"),
            None => status.to_string(),
        });
        if let Some(u) = usage {
            attach_usage(it, u);
        }
    }

    /// Records the fork's `join` item: how many reports, and how they ended.
    fn join_item(&mut self, sup: &Arc<str>, np: &NodePlan, seats: &[Seat]) {
        let mut tally = [0usize; 3];
        for s in seats {
            if let SeatState::Reported(r) = &s.state {
                tally[r.status as usize] += 1;
            }
        }
        let it = self.record(TraceKind::Join, sup);
        it.set_target(&np.id);
        it.set_reason(format!(
            "{} report(s): {} ok, {} failed, {} timeout",
            seats.len(),
            tally[SeatStatus::Ok as usize],
            tally[SeatStatus::Failed as usize],
            tally[SeatStatus::Timeout as usize]
        ));
    }

    /// Every report is in: the `join` item, the advice slice, and the primary pending.
    fn join(&mut self, np: &NodePlan, spec: &Advisors, adv: AdvisingRun) {
        let AdvisingRun {
            dispatcher,
            kind,
            from,
            chain,
            owed,
            base,
            seats,
            ..
        } = adv;
        self.join_item(&dispatcher, np, &seats);
        let contract = np.contract(&self.plan.graph);
        let reads: Vec<String> = contract
            .reads
            .iter()
            .filter(|r| **r != spec.slice)
            .cloned()
            .collect();
        let request = self.plan.view(self.run, &reads);
        let value = advice(self.run.run_id, base, &np.id, &request, seats);
        self.run.level_state_mut().insert(spec.slice.clone(), value);
        self.run.control = Control::Running(Pending::Advised {
            node: Arc::clone(&np.id),
            dispatcher,
            kind,
            from,
            chain,
            owed,
        });
    }
}
