//! The commit half of a team's steps (see `plan.rs`): a member cycle's reports become
//! steps, trace items and broadcasts; a lead turn starts the next cycle, ends the team as
//! the team node's run, or fails the run (`team_no_final`).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::super::agent::mid_turn;
use super::super::budgets::GuardStop;
use super::super::commit::{Tx, attach_usage};
use super::super::step::{
    After, Level, NodeResult, NodeStep, Ran, SeatStep, StageExtra, TeamStep, TeamStop, TeamTurn,
};
use crate::contracts::Team;
use crate::runtime::data::{
    BroadcastKind, Control, MemberStatus, NodeOutput, Pending, TeamPhase, TeamRun,
    TerminationReason, TraceKind, Usage,
};
use crate::runtime::effects::{Fault, Report, ReportStatus};
use crate::runtime::plan::NodePlan;

impl Tx<'_> {
    /// Commits a team step.
    pub(crate) fn team(&mut self, level: Level<'_>, ts: Box<TeamStep<'_>>) {
        let TeamStep {
            np,
            spec,
            run: team,
            turn,
        } = *ts;
        self.chain.clone_from(&team.chain);
        let dispatcher = Arc::clone(&team.dispatcher);
        if let Control::Running(Pending::Team(_)) = &self.run.control {
            // Drops the run's copy of the progress (every path below sets the control
            // again), so the planned copy owns the transcript and appends in place.
            self.run.control = Control::Running(Pending::Decide {
                supervisor: Arc::clone(&dispatcher),
            });
        }
        match turn {
            TeamTurn::Stop(TeamStop::Guard(g)) => self.guard_stop(g, Some(dispatcher)),
            TeamTurn::Stop(TeamStop::Mismatch(msg)) => {
                self.fail(TerminationReason::NodeFailed, msg, Some(dispatcher));
            }
            TeamTurn::Members {
                reports,
                seats,
                tools,
            } => self.team_cycle(np, spec, team, (reports, seats, tools)),
            TeamTurn::LeadSeat {
                lead,
                after,
                seat,
                tools,
            } => self.lead_seat(level, (np, spec), team, (lead, after, seat, tools)),
            TeamTurn::Lead {
                lead,
                final_turn,
                after,
                result,
                duration_us,
            } => {
                let result = result.unwrap_or_else(|| {
                    Err(Fault::Failed(
                        "was committed before its output arrived".into(),
                    ))
                });
                let turn = LeadTurn {
                    lead,
                    final_turn,
                    after,
                    result,
                    duration_us,
                };
                self.team_lead(level, np, spec, team, turn);
            }
        }
    }

    /// Records a `team_turn` item for `who`'s turn in team `np`.
    pub(super) fn turn_item(
        &mut self,
        np: &NodePlan,
        dispatcher: &Arc<str>,
        who: &Arc<str>,
        reason: String,
        duration_us: u64,
        usage: Option<Usage>,
    ) {
        let it = self.record(TraceKind::TeamTurn, dispatcher);
        it.set_source(&np.id);
        it.set_target(who);
        it.set_reason(reason);
        it.duration_us = duration_us;
        if let Some(u) = usage {
            attach_usage(it, u);
        }
    }

    /// Counts one turn of node `id`: a step and a visit, and what it cost.
    fn count_turn(&mut self, id: &str, usage: Option<&Usage>) {
        self.run.steps += 1;
        self.run.count_visit(id);
        if let Some(u) = usage {
            self.run.usage_total.add_all(u);
        }
    }

    /// Commits a member cycle: a `team_cycle` item, then per member (declaration order)
    /// its turn: a step, its broadcast or failure, and its `team_turn` item (an agent
    /// member's step is its model call, see `agents.rs`). A cycle's second round (the
    /// agent members' tool calls, `tools`) records those calls only. The lead is next
    /// once no agent member waits on its tool calls.
    fn team_cycle(
        &mut self,
        np: &NodePlan,
        spec: &Team,
        mut team: Box<TeamRun>,
        (reports, seats, tools): (Vec<Report>, Vec<SeatStep<'_>>, bool),
    ) {
        let dispatcher = Arc::clone(&team.dispatcher);
        // Every turn in declaration order: plain members' reports and agent members'
        // seats, by their place among the members.
        let mut turns: Vec<(usize, Turn<'_>)> = reports
            .into_iter()
            .map(|r| {
                let at = team.members.get_index_of(&*r.advisor).unwrap_or(usize::MAX);
                (at, Turn::Plain(r))
            })
            .chain(seats.into_iter().map(|s| (s.position, Turn::Seat(s))))
            .collect();
        turns.sort_by_key(|(at, _)| *at);
        if !tools {
            let names: Vec<&str> = turns
                .iter()
                .map(|(_, t)| match t {
                    Turn::Plain(r) => &*r.advisor,
                    Turn::Seat(s) => &*s.np.id,
                })
                .collect();
            let it = self.record(TraceKind::TeamCycle, &dispatcher);
            it.set_target(&np.id);
            it.set_reason(format!("cycle {}: {}", team.cycle, names.join(", ")));
        }
        let max = spec.max_broadcast_bytes;
        let mut cancelled = false;
        for (_, t) in turns {
            let r = match t {
                Turn::Seat(seat) => {
                    cancelled |= self.member_seat(np, spec, &mut team, seat, tools);
                    continue;
                }
                Turn::Plain(r) => r,
            };
            self.count_turn(&r.advisor, r.usage.as_ref());
            cancelled |= r.cancelled;
            let turn = match team.members.get_mut(&*r.advisor) {
                Some(m) => {
                    m.turns += 1;
                    m.turns
                }
                None => continue,
            };
            let id = &*r.advisor;
            let refused = r.output.as_ref().filter(|w| !w.is_empty()).map(|w| {
                let slices: Vec<&str> = w.keys().map(String::as_str).collect();
                format!(
                    "it wrote slice(s) `{}`; a team member only broadcasts",
                    slices.join("`, `")
                )
            });
            let failure = match (r.status, &r.error, refused) {
                (ReportStatus::Ok, _, None) => None,
                (ReportStatus::Ok, _, Some(why)) => Some(why),
                (ReportStatus::Timeout, e, _) => Some(format!(
                    "timed out: {}",
                    e.as_deref().unwrap_or("no answer")
                )),
                (ReportStatus::Failed, e, _) => {
                    Some(e.clone().unwrap_or_else(|| "it gave no output".into()))
                }
            };
            let outcome = match failure {
                Some(why) => {
                    team.fail_member(max, id, &why);
                    Cow::Owned(format!("failed: {why}"))
                }
                None => Cow::Borrowed(said(&mut team, max, id, r.broadcast, r.exit)),
            };
            let reason = format!("member turn {turn} of cycle {}: {outcome}", team.cycle);
            self.turn_item(np, &dispatcher, &r.advisor, reason, r.duration_us, r.usage);
        }
        if cancelled {
            let g = GuardStop {
                reason: TerminationReason::Cancelled,
                message: format!(
                    "the run was cancelled while the members of team `{}` ran",
                    np.id
                ),
            };
            return self.guard_stop(g, Some(dispatcher));
        }
        let waiting = team.members.values().any(|m| {
            m.status == MemberStatus::Active && m.session.is_some_and(|s| mid_turn(self.run, s))
        });
        team.next = if waiting {
            TeamPhase::Members
        } else {
            TeamPhase::Lead
        };
        self.run.control = Control::Running(Pending::Team(team));
    }

    /// The team ends with the lead's final answer: active members become `cancelled`,
    /// the team slice is written, and `result` (the lead's writes) is committed as the
    /// team node's run.
    pub(super) fn team_final(
        &mut self,
        level: Level<'_>,
        (np, spec): (&NodePlan, &Team),
        mut team: Box<TeamRun>,
        result: NodeResult,
        after: After<'_>,
    ) {
        for m in team.members.values_mut() {
            if m.status == MemberStatus::Active {
                m.status = MemberStatus::Cancelled;
            }
        }
        self.run
            .level_state_mut()
            .insert(spec.slice.clone(), team.summary());
        let TeamRun {
            dispatcher,
            kind,
            from,
            chain,
            owed,
            ..
        } = *team;
        let ns = NodeStep {
            np,
            dispatcher: Cow::Owned(dispatcher),
            kind,
            source: from.map(Cow::Owned),
            chain,
            result,
            after,
            extra: StageExtra::owing(&owed),
        };
        self.run_node(level, ns);
    }

    /// Commits the lead's turn.
    fn team_lead(
        &mut self,
        level: Level<'_>,
        np: &NodePlan,
        spec: &Team,
        mut team: Box<TeamRun>,
        turn: LeadTurn<'_>,
    ) {
        let LeadTurn {
            lead,
            final_turn,
            after,
            result,
            duration_us,
        } = turn;
        let dispatcher = Arc::clone(&team.dispatcher);
        team.lead_turns += 1;
        let n = team.lead_turns;
        let out = match result {
            Ok(out) => out,
            Err(fault) => {
                self.count_turn(&lead.id, None);
                let reason = format!("lead turn {n}: failed");
                self.turn_item(np, &dispatcher, &lead.id, reason, duration_us, None);
                return self.fault(&lead.id, "the lead of team", fault, Some(dispatcher));
            }
        };
        let NodeOutput {
            writes,
            usage,
            broadcast,
            is_final,
            ..
        } = out;
        if let Some(msg) = broadcast {
            team.push(spec.max_broadcast_bytes, &lead.id, BroadcastKind::Lead, msg);
        }
        if is_final {
            // The final turn is the team node's run: its step is counted (with a visit of
            // the team node) by `run_node`, the lead's visit and cost here.
            if let Some(u) = &usage {
                self.run.usage_total.add_all(u);
            }
            self.run.count_visit(&lead.id);
            let reason = format!("lead turn {n}: final");
            self.turn_item(np, &dispatcher, &lead.id, reason, duration_us, usage);
            let ran = Ran {
                result: Ok(NodeOutput::new(writes)),
                failed: Vec::new(),
            };
            let result = NodeResult::Ran(Box::new(ran), duration_us);
            return self.team_final(level, (np, spec), team, result, after);
        }
        self.count_turn(&lead.id, usage.as_ref());
        let said = if team.transcript.last().is_some_and(|b| {
            b.from == *lead.id && b.cycle == team.cycle && b.kind == BroadcastKind::Lead
        }) {
            "broadcast"
        } else if team.final_next {
            "overflow"
        } else {
            "no broadcast"
        };
        let reason = format!("lead turn {n}: {said}");
        self.turn_item(np, &dispatcher, &lead.id, reason, duration_us, usage);
        if !writes.is_empty() {
            let slices: Vec<&str> = writes.keys().map(String::as_str).collect();
            let msg = format!(
                "the lead `{}` of team `{}` wrote slice(s) `{}` without `$final: true` (its \
                 writes are the team's answer only on a final turn)",
                lead.id,
                np.id,
                slices.join("`, `")
            );
            return self.fail(TerminationReason::InvalidOutput, msg, Some(dispatcher));
        }
        if final_turn {
            let why = if !team.any_active() {
                "no member is active".to_string()
            } else if n >= spec.lead_max_turns {
                format!("its lead_max_turns ({}) is reached", spec.lead_max_turns)
            } else {
                "a broadcast overflowed".to_string()
            };
            let msg = format!(
                "the lead `{}` of team `{}` did not answer `$final: true` on its final turn \
                 (turn {n}: {why})",
                lead.id, np.id
            );
            return self.fail(TerminationReason::TeamNoFinal, msg, Some(dispatcher));
        }
        team.cycle += 1;
        team.next = TeamPhase::Members;
        self.run.control = Control::Running(Pending::Team(team));
    }
}

/// One member's turn in a cycle: a plain member's report, or an agent member's seat.
// Made once per turn and matched at once.
#[allow(clippy::large_enum_variant)]
enum Turn<'e> {
    Plain(Report),
    Seat(SeatStep<'e>),
}

/// A member's turn that did not fail: its broadcast (or, leaving without one, a notice)
/// added to the transcript, its status set when it leaves; says what it did
/// (`update`, `exit`, `overflow` or `silent`).
pub(super) fn said(
    team: &mut TeamRun,
    max: u64,
    id: &str,
    broadcast: Option<Value>,
    exit: bool,
) -> &'static str {
    let kind = if exit {
        BroadcastKind::Exit
    } else {
        BroadcastKind::Update
    };
    let over = match broadcast {
        Some(msg) => team.push(max, id, kind, msg),
        None if exit => {
            let msg = format!("member `{id}` left the team");
            team.push(max, id, kind, Value::String(msg))
        }
        None => false,
    };
    if exit && let Some(m) = team.members.get_mut(id) {
        m.status = MemberStatus::Exited;
    }
    match (exit, team.transcript.last()) {
        _ if over => "overflow",
        (true, _) => "exit",
        (false, Some(b)) if b.from == id && b.cycle == team.cycle => "update",
        _ => "silent",
    }
}

/// A lead's turn, performed.
struct LeadTurn<'e> {
    lead: &'e NodePlan,
    final_turn: bool,
    after: After<'e>,
    result: Result<NodeOutput, Fault>,
    duration_us: u64,
}
