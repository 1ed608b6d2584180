//! Advisors (brief §5.4): before a primary node runs, its advisor nodes run concurrently
//! in one step, each on its own `reads` view; their outputs are not applied but become
//! reports, written with a prompt-ready tagged text to the primary's advice slice. The
//! primary runs in the next step.
//!
//! The three halves of the step (ADR 0009) stay apart: planning builds one [`Effect`]
//! whose call is the whole fork (`Call::Fork`), so any driver performs it as it
//! performs a node call; [`Executor::perform`](crate::runtime::Executor::perform) joins the members, each under its own time
//! limit and the run's cancellation, and always completes; commit records the `fork`,
//! `advisor` and `join` items, counts a step and a visit per member and writes the slice.
//!
//! Complexity: a fork with m members costs O(m) effects and trace items, and the tagged
//! text is linear in the size of the views and outputs it quotes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::budgets::GuardStop;
use super::calls::{NodeCall, node_call};
use super::commit::{Tx, attach_usage};
use super::planner::Planner;
use super::step::ForkStep;
use crate::contracts::Advisors;
use crate::runtime::data::{Control, Pending, Role, RunId, RunState, TerminationReason, TraceKind};
use crate::runtime::effects::{
    Call, CallIds, Effect, EffectKind, Member, MemberCall, Report, ReportStatus,
};
use crate::runtime::plan::NodePlan;

impl<'e> Planner<'e> {
    /// Plans the members of `np`'s advisors as one fork effect, or the guard that stops
    /// the run first: the steps left must cover every member and the primary.
    pub(crate) fn fork_effect(
        &self,
        run: &RunState,
        np: &NodePlan,
        spec: &Advisors,
    ) -> Result<Effect, GuardStop> {
        let plan = self.plan;
        let budgets = plan.graph.budgets();
        let members = spec.members.len();
        let need = u64::try_from(members).unwrap_or(u64::MAX).saturating_add(1);
        let left = u64::from(budgets.max_steps.saturating_sub(run.steps));
        if need > left {
            return Err(GuardStop {
                reason: TerminationReason::MaxStepsExceeded,
                message: format!(
                    "node `{}` and its {members} advisor(s) need {need} steps but {left} are \
                     left of max_steps {}",
                    np.id, budgets.max_steps
                ),
            });
        }
        let mut planned = Vec::with_capacity(members);
        for (i, id) in spec.members.iter().enumerate() {
            let step = run
                .steps
                .saturating_add(u32::try_from(i).unwrap_or(u32::MAX));
            planned.push(self.member(run, id, step, spec.timeout_ms, None));
        }
        Ok(Effect {
            kind: EffectKind::Fork,
            id: Arc::clone(&np.id),
            step: run.steps,
            limit: None,
            delay: Duration::ZERO,
            call: Call::Fork(planned),
            role: Role::Plain,
        })
    }

    /// Member `id`, as step `step` of the run. `team`: a team member's turn, given this
    /// team input in this slice (besides its `reads` view).
    pub(crate) fn member(
        &self,
        run: &RunState,
        id: &str,
        step: u32,
        cap: Option<u64>,
        team: Option<(&str, Value)>,
    ) -> Member {
        let role = if team.is_some() {
            Role::Member
        } else {
            Role::Plain
        };
        let plan = self.plan;
        let Some(mp) = plan.nodes.get(id) else {
            // A validated graph has every member; a run state from elsewhere may not.
            return Member {
                id: Arc::from(id),
                limit: None,
                call: MemberCall::Refused(format!("the workflow has no node `{id}`")),
                role,
            };
        };
        let contract = mp.contract(&plan.graph);
        let done = run.visits.get(id).copied().unwrap_or(0);
        if let Some(max) = contract.max_visits.filter(|m| done >= *m) {
            return Member {
                id: Arc::clone(&mp.id),
                limit: None,
                call: MemberCall::Refused(format!(
                    "it already ran {done} time(s); its max_visits is {max}"
                )),
                role,
            };
        }
        let own = mp.own_timeout_ms().or(plan.graph.budgets().node_timeout_ms);
        let own = match (own, cap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let ids = CallIds {
            run_id: run.run_id,
            step,
            attempt: 1,
        };
        let mut team = team;
        // Called once, by the branch that calls the member: the team input is moved in.
        let view = || {
            let room = usize::from(team.is_some());
            let mut view = self.plan.view_and(run, &contract.reads, room);
            if let Some((slice, input)) = team.take() {
                view.insert(slice.to_string(), input);
            }
            view
        };
        let call = match node_call(mp, run, ids, view, None).map(NodeCall::into_call) {
            Some(Ok(call)) => MemberCall::Call(call),
            Some(Err(msg)) => MemberCall::Refused(msg),
            None => MemberCall::Constant(mp.constant_writes()),
        };
        Member {
            id: Arc::clone(&mp.id),
            limit: self.call_limit(run, own),
            call,
            role,
        }
    }
}

/// A nonce of 12 lowercase hex digits for block `position` of the tagged text written at
/// step `step` of run `run_id`: the same on a replay of the run, different across runs.
pub(crate) fn nonce(run_id: RunId, step: u32, position: usize) -> String {
    let digest = Sha256::digest(format!("pactgraph-advice/{run_id}/{step}/{position}"));
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// The advice slice's value: `{"primary", "reports", "tagged"}` (brief §5.4). `request` is
/// the primary's read view without the advice slice. The reports' outputs move into it.
pub(crate) fn advice(
    run_id: RunId,
    step: u32,
    primary: &str,
    request: &Map<String, Value>,
    reports: Vec<Report>,
) -> Value {
    use std::fmt::Write as _;
    let compact = |m: &Map<String, Value>| serde_json::to_string(m).expect("JSON values serialize");
    let n0 = nonce(run_id, step, 0);
    let mut tagged = format!(
        "<original_user_request__{n0}>\n{}\n</original_user_request__{n0}>",
        compact(request)
    );
    let mut listed = Vec::with_capacity(reports.len());
    for (i, r) in reports.into_iter().enumerate() {
        let n = nonce(run_id, step, i + 1);
        let agent = &*r.advisor;
        let _ = write!(tagged, "\n<advisory__{n} agent=\"{agent}\">\n");
        match (&r.output, &r.error) {
            (Some(out), _) => tagged.push_str(&compact(out)),
            (None, error) => {
                let why = error.as_deref().unwrap_or("it gave no output");
                let _ = write!(
                    tagged,
                    "Advisor `{agent}` failed: {}. No advice is available from it.",
                    why.trim_end_matches('.')
                );
            }
        }
        let _ = write!(tagged, "\n</advisory__{n}>");
        let mut report = Map::with_capacity(5);
        report.insert("advisor".into(), agent.into());
        report.insert("status".into(), r.status.as_str().into());
        report.insert("output".into(), r.output.map_or(Value::Null, Value::Object));
        if let Some(e) = r.error {
            report.insert("error".into(), e.into());
        }
        report.insert("duration_ms".into(), (r.duration_us / 1000).into());
        listed.push(Value::Object(report));
    }
    let mut out = Map::with_capacity(3);
    out.insert("primary".into(), primary.into());
    out.insert("reports".into(), Value::Array(listed));
    out.insert("tagged".into(), tagged.into());
    Value::Object(out)
}

impl Tx<'_> {
    /// Commits a fork: the `fork` item, one `advisor` item per report (each a step and a
    /// visit of its member), the `join` item, the advice slice, and the primary pending.
    /// A fork cut short by cancellation stops the run (`cancelled`) after its items.
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
        } = fs;
        self.chain.clone_from(&chain);
        let base = self.run.steps;
        let it = self.record(TraceKind::Fork, Some(Arc::clone(&dispatcher)));
        it.source.clone_from(&source);
        it.target = Some(Arc::clone(&np.id));
        it.reason = Some(format!("advisors: {}", spec.members.join(", ")).into());
        let mut tally = [0usize; 3];
        let mut cancelled = false;
        for r in &reports {
            self.run.steps += 1;
            match self.run.visits.get_mut(&*r.advisor) {
                Some(n) => *n += 1,
                None => {
                    self.run.visits.insert(r.advisor.to_string(), 1);
                }
            }
            if let Some(u) = &r.usage {
                self.run.usage_total.add_all(u);
            }
            tally[r.status as usize] += 1;
            cancelled |= r.cancelled;
            let it = self.record(TraceKind::Advisor, Some(Arc::clone(&dispatcher)));
            it.source = Some(Arc::clone(&np.id));
            it.target = Some(Arc::clone(&r.advisor));
            it.duration_us = r.duration_us;
            it.reason = Some(match &r.error {
                Some(e) => format!("{}: {e}", r.status.as_str()).into(),
                None => r.status.as_str().into(),
            });
            if let Some(u) = r.usage.clone() {
                attach_usage(it, u);
            }
        }
        let it = self.record(TraceKind::Join, Some(Arc::clone(&dispatcher)));
        it.target = Some(Arc::clone(&np.id));
        it.reason = Some(
            format!(
                "{} report(s): {} ok, {} failed, {} timeout",
                reports.len(),
                tally[ReportStatus::Ok as usize],
                tally[ReportStatus::Failed as usize],
                tally[ReportStatus::Timeout as usize]
            )
            .into(),
        );
        if cancelled {
            let g = GuardStop {
                reason: TerminationReason::Cancelled,
                message: format!(
                    "the run was cancelled while the advisors of `{}` ran",
                    np.id
                ),
            };
            return self.guard_stop(g, Some(dispatcher));
        }
        let contract = np.contract(&self.plan.graph);
        let reads: Vec<String> = contract
            .reads
            .iter()
            .filter(|r| **r != spec.slice)
            .cloned()
            .collect();
        let request = self.plan.view(self.run, &reads);
        let value = advice(self.run.run_id, base, &np.id, &request, reports);
        self.run.level_state_mut().insert(spec.slice.clone(), value);
        self.run.control = Control::Running(Pending::Advised {
            node: Arc::clone(&np.id),
            dispatcher,
            kind,
            from: source,
            chain,
            owed,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_12_hex_digits_stable_and_distinct() {
        let run = RunId::new();
        let other = RunId::new();
        let a: Vec<String> = (0..5).map(|p| nonce(run, 7, p)).collect();
        assert!(a.iter().all(|n| {
            n.len() == 12
                && n.chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        }));
        let mut unique = a.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 5, "distinct per block");
        assert_eq!(a, (0..5).map(|p| nonce(run, 7, p)).collect::<Vec<_>>());
        assert_ne!(nonce(run, 7, 0), nonce(other, 7, 0), "differs across runs");
        assert_ne!(nonce(run, 7, 0), nonce(run, 8, 0), "differs across steps");
    }
}
