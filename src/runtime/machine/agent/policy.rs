//! A supervisor's policy agent (brief 10.2): one session per decision, whose exit tool
//! `route` gives one routing decision. Its model calls and tool calls are steps exactly
//! as an agent node's (see `plan.rs`, `commit.rs`); the reply holding a valid `route`
//! call is committed first, and the decision is planned from it in the next step (see
//! [`Pending::Deciding`]), so a crash after the call never repeats it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::commit::session_totals;
use super::plan::{new_session, session_stage};
use super::reply::{error_content, exit_output};
use super::templates::opening;
use crate::contracts::{RoutingDecision, SYSTEM_SLICE, StopLocal, SupervisorOutput};
use crate::graph::{ContractKind, Registry};
use crate::model::{ChatMessage, Role as ChatRole};
use crate::runtime::data::{Pending, RunState};
use crate::runtime::machine::budgets::check_policy;
use crate::runtime::machine::commit::Tx;
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{Level, SessionOwner, Step, Then, ready};
use crate::runtime::plan::agent::{ASK_CLARIFICATION, AgentPlan, ROUTE, STOP_GLOBAL, STOP_LOCAL};
use crate::runtime::plan::{PolicyRun, SupervisorPlan};

/// A policy agent's decision, read from its `route` call: what planning resolves
/// against the allowlist, as a handler's decision is.
pub(crate) struct Routed<'e> {
    pub(crate) sp: &'e SupervisorPlan,
    pub(crate) output: SupervisorOutput,
    /// The model's `reason`, for the decision item.
    pub(crate) reason: String,
    /// The microseconds the session's calls took.
    pub(crate) duration_us: u64,
}

impl<'e> Planner<'e> {
    /// Begins supervisor `sp`'s decision with its policy agent: a new session, its
    /// templates rendered over the slices visible at its level, `system` and `allow`,
    /// and its first model call as the step's effect.
    pub(crate) fn policy_session_start(
        &self,
        run: &RunState,
        level: Level<'e>,
        sp: &'e SupervisorPlan,
        agent: &'e AgentPlan,
        step: &mut Step<'e>,
    ) {
        if let Err(g) = check_policy(run, self.plan.graph.budgets(), &sp.id) {
            return ready(step, level, None, Then::Guard(g, Some(Arc::clone(&sp.id))));
        }
        let mut view = self.plan.policy_view(run);
        if !view.contains_key(SYSTEM_SLICE) {
            view.insert(SYSTEM_SLICE.into(), self.plan.system_value(run));
        }
        view.insert("allow".into(), json!(sp.contract.allow));
        let owner = SessionOwner::Policy(sp);
        let ss = new_session(
            (Arc::clone(&sp.id), agent),
            Arc::clone(&sp.id),
            owner,
            None,
            0,
        );
        let (ss, effect) = self.open_session(
            run,
            ss,
            opening(
                &format!("the agent policy of supervisor `{}`", sp.id),
                agent,
                view,
                None,
            ),
        );
        step.stage = session_stage(level, ss, effect);
    }

    /// Plans from [`Pending::Deciding`]: when the session's last reply holds a valid
    /// `route` call, the decision it makes (for planning to resolve); otherwise the
    /// session's next call, planned into `step`, and `None`.
    pub(crate) fn plan_deciding(
        &self,
        run: &RunState,
        level: Level<'e>,
        pending: &Pending,
        step: &mut Step<'e>,
    ) -> Option<Routed<'e>> {
        let Pending::Deciding {
            supervisor,
            session,
            earlier,
        } = pending
        else {
            return None;
        };
        let mismatch = |step: &mut Step<'e>, msg: String| {
            ready(
                step,
                level,
                None,
                Then::Mismatch(msg, Some(Arc::clone(supervisor))),
            );
        };
        let Some(sp) = self.plan.supervisors.get(&**supervisor) else {
            mismatch(step, self.unknown("supervisor", supervisor));
            return None;
        };
        let PolicyRun::Agent(agent) = &sp.policy else {
            let msg = format!(
                "the run state holds a decision session of supervisor `{supervisor}`, whose \
                 policy in workflow `{}` is not an agent",
                self.plan.graph.workflow()
            );
            mismatch(step, msg);
            return None;
        };
        let Some(conversation) = run.sessions.get(*session as usize) else {
            let msg = format!(
                "the run state names session {session} of supervisor `{supervisor}`, which it \
                 does not hold"
            );
            mismatch(step, msg);
            return None;
        };
        let decided = conversation
            .messages
            .last()
            .filter(|m| m.role == ChatRole::Assistant)
            .and_then(|m| decision_of(agent, m, self.plan.graph.registry()));
        if let Some((output, reason)) = decided {
            return Some(Routed {
                sp,
                output,
                reason,
                duration_us: session_totals(run, *session).0,
            });
        }
        if let Err(g) = check_policy(run, self.plan.graph.budgets(), &sp.id) {
            ready(step, level, None, Then::Guard(g, Some(Arc::clone(&sp.id))));
            return None;
        }
        let owner = SessionOwner::Policy(sp);
        let id = Arc::clone(&sp.id);
        let ss = new_session(
            (id, agent),
            Arc::clone(&sp.id),
            owner,
            Some(*session),
            *earlier,
        );
        self.continue_session(run, level, ss, step);
        None
    }
}

impl Tx<'_> {
    /// Reopens session `index` (an entrypoint's last decision, continued by a
    /// clarification) with the user message `message`: the tool calls of its last reply
    /// are answered first (`route` with `{"ok": true}`, any other with an error: it was
    /// not run), as the wire protocol wants every call answered. Returns the model calls
    /// the session made so far.
    pub(crate) fn reopen_session(&mut self, index: u32, message: String) -> u32 {
        let Some(session) = self.run.sessions.get(index as usize) else {
            return 0;
        };
        let earlier = session.turns();
        let unanswered: Vec<ChatMessage> = session
            .messages
            .last()
            .filter(|m| m.role == ChatRole::Assistant)
            .map(|m| {
                m.tool_calls
                    .iter()
                    .map(|c| {
                        let content = if c.name == ROUTE {
                            json!({"ok": true}).to_string()
                        } else {
                            error_content(&format!(
                                "`{}` was not run: `route` ended the decision",
                                c.name
                            ))
                        };
                        ChatMessage::tool(c.id.clone(), content)
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.push_messages(index, unanswered);
        self.push_messages(index, [ChatMessage::user(message)]);
        earlier
    }
}

/// The decision a reply's valid `route` call makes, and the reason it gives: an `allow`
/// id is a `node` or `subgraph` decision by its kind.
fn decision_of(
    agent: &AgentPlan,
    reply: &ChatMessage,
    registry: &Registry,
) -> Option<(SupervisorOutput, String)> {
    let args = reply
        .tool_calls
        .iter()
        .find_map(|c| exit_output(agent, &c.name, &c.arguments)?.ok())?
        .writes;
    let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
    let decision = text("decision")?;
    let reason = text("reason").unwrap_or_default();
    let d = match decision.as_str() {
        STOP_LOCAL => RoutingDecision::StopLocal(StopLocal {
            reason: Some(reason.clone()),
            ..StopLocal::default()
        }),
        STOP_GLOBAL => RoutingDecision::stop_global(reason.clone()),
        ASK_CLARIFICATION => RoutingDecision::ask(text("question").unwrap_or_default()),
        id => match registry.kind_of(id) {
            Some(ContractKind::Subgraph) => RoutingDecision::subgraph(id),
            _ => RoutingDecision::node(id),
        },
    };
    Some((SupervisorOutput::Decision(d), reason))
}
