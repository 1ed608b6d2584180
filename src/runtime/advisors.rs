//! Advisors (brief §5.4): before a primary node runs, its advisor nodes run concurrently
//! in one step, each on its own `reads` view; their outputs are not applied but become
//! reports, written with a prompt-ready tagged text to the primary's advice slice. The
//! primary runs in the next step.
//!
//! The three halves of the step (ADR 0009) stay apart: planning builds one [`Effect`]
//! whose call is the whole fork ([`Call::Fork`]), so any driver performs it as it
//! performs a node call; [`Executor::perform`] joins the members, each under its own time
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
use super::builder::{NodePlan, NodeRun};
use super::data::RunId;
use super::data::TerminationReason;
use super::data::TraceKind;
use super::data::Writes;
use super::data::{Control, Pending, RunState};
use super::data::{Role, Usage, accept_as};
use super::effects::{Call, CallIds, Effect, EffectKind, node_stdin};
use super::executor::Executor;
use super::guarded::Fault;
use super::handlers::NodeInput;
use super::step::ForkStep;
use super::transitions::{Tx, attach_usage};
use crate::contracts::Advisors;

/// One member of a fork, planned: its id, time limit and call.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) id: Arc<str>,
    pub(crate) limit: Option<Duration>,
    pub(crate) call: MemberCall,
    /// An advisor's call is a plain node's; a team member's may broadcast and exit.
    pub(crate) role: Role,
}

/// How a member is carried out.
#[derive(Debug, Clone)]
pub(crate) enum MemberCall {
    /// A handler or program.
    Call(Call),
    /// A `set` node (or one without behaviour): its report is its constants.
    Constant(Writes),
    /// It may not run (its `max_visits` is used up): a failure report, nothing run.
    Refused(String),
}

/// How a member's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReportStatus {
    Ok = 0,
    Failed = 1,
    Timeout = 2,
}

impl ReportStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReportStatus::Ok => "ok",
            ReportStatus::Failed => "failed",
            ReportStatus::Timeout => "timeout",
        }
    }
}

/// What one member gave.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) advisor: Arc<str>,
    pub(crate) status: ReportStatus,
    pub(crate) output: Option<Writes>,
    /// Team members: the `$broadcast` sent, and whether it sent `$exit: true`.
    pub(crate) broadcast: Option<Value>,
    pub(crate) exit: bool,
    pub(crate) usage: Option<Usage>,
    pub(crate) error: Option<String>,
    pub(crate) duration_us: u64,
    /// The run was cancelled while it ran.
    pub(crate) cancelled: bool,
}

impl Executor {
    /// Plans the members of `np`'s advisors as one fork effect, or the guard that stops
    /// the run first: the steps left must cover every member and the primary.
    pub(crate) fn fork_effect(
        &self,
        run: &RunState,
        np: &NodePlan,
        spec: &Advisors,
    ) -> Result<Effect, GuardStop> {
        let plan = &*self.plan;
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
        let plan = &*self.plan;
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
        let own = match &mp.run {
            NodeRun::Exec(spec) => spec.timeout_ms,
            _ => None,
        }
        .or(plan.graph.budgets().node_timeout_ms);
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
        let mut view = || {
            let mut view = self.view_and(run, &contract.reads, usize::from(team.is_some()));
            if let Some((slice, input)) = team.take() {
                view.insert(slice.to_string(), input);
            }
            view
        };
        let call = match &mp.run {
            NodeRun::Handler(h) => MemberCall::Call(Call::Node(
                h.clone(),
                NodeInput {
                    node: mp.id.to_string(),
                    view: view(),
                    depth: run.depth(),
                    subgraph: run.current_subgraph().map(str::to_string),
                    step,
                    run_id: run.run_id,
                    attempt: 1,
                    error: None,
                },
            )),
            NodeRun::Exec(spec) => {
                let stdin = node_stdin(&mp.id, view(), ids, None);
                MemberCall::Call(Call::Program(Arc::clone(spec), stdin, Some(ids)))
            }
            NodeRun::Set(Value::Object(m)) => MemberCall::Constant(m.clone()),
            _ => MemberCall::Constant(Map::new()),
        };
        Member {
            id: Arc::clone(&mp.id),
            limit: self.call_limit(run, own),
            call,
            role,
        }
    }

    /// Runs every member at once and waits for all of them. Never fails: an error, a
    /// panic, bad output or a time-out is that member's failure report.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops every member's call: handlers are aborted at their next
    /// await point and programs' process groups are killed.
    pub(crate) async fn join_members(&self, members: Vec<Member>) -> Vec<Report> {
        futures_util::future::join_all(members.into_iter().map(|m| self.run_member(m))).await
    }

    async fn run_member(&self, m: Member) -> Report {
        let t0 = self.timer();
        let result = match m.call {
            // Constants are read as the role's envelope (a team member's may broadcast).
            MemberCall::Constant(w) => accept_as(w.into(), m.role)
                .map_err(|e| Fault::InvalidOutput(format!("sent an invalid output: {e}"))),
            MemberCall::Refused(msg) => Err(Fault::Failed(msg)),
            // Boxed: the call's future is large (a time limit, the cancellation waiter),
            // and every member's future is moved into the join at its full size.
            MemberCall::Call(call) => Box::pin(self.call_node(m.limit, call, m.role)).await,
        };
        let duration_us = Self::elapsed(t0);
        let (mut broadcast, mut exit) = (None, false);
        let (status, output, usage, error, cancelled) = match result {
            Ok(out) => {
                broadcast = out.broadcast;
                exit = out.exit;
                (ReportStatus::Ok, Some(out.writes), out.usage, None, false)
            }
            Err(fault) => {
                let status = match fault {
                    Fault::Timeout(_) => ReportStatus::Timeout,
                    _ => ReportStatus::Failed,
                };
                let cancelled = fault == Fault::Cancelled;
                (
                    status,
                    None,
                    None,
                    Some(fault.describe().1.to_string()),
                    cancelled,
                )
            }
        };
        Report {
            advisor: m.id,
            status,
            output,
            broadcast,
            exit,
            usage,
            error,
            duration_us,
            cancelled,
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
        let contract = np.contract(&self.ex.plan.graph);
        let reads: Vec<String> = contract
            .reads
            .iter()
            .filter(|r| **r != spec.slice)
            .cloned()
            .collect();
        let request = self.ex.view(self.run, &reads);
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
