//! Planning an agent session's steps: its first model call (the opening rendered from
//! the read view), and from [`Pending::Session`] its next model call or the tool calls
//! of its last reply. Arguments are checked here, so a mistake is answered without
//! running anything; valid calls of tool nodes that call something become one effect
//! that runs them at once.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use super::conversation::{in_reply_order, unanswered};
use super::reply::{arguments_of, error_content, exit_output};
use super::templates::opening;
use crate::model::{ChatMessage, ToolCall, ToolChoice};
use crate::runtime::data::{Pending, Role, RunState, Session, ToolCallStatus, Writes};
use crate::runtime::effects::{Call, CallIds, Effect, EffectKind, ModelCall, ToolInvocation};
use crate::runtime::machine::budgets::check_node;
use crate::runtime::machine::calls::{NodeCall, node_call};
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{
    Awaiting, Level, NodeStep, NodeVisit, Planned, SessionOwner, SessionStep, SessionWork, Stage,
    Step, Then, ToolOutcome, ready,
};
use crate::runtime::plan::agent::AgentPlan;
use crate::runtime::plan::{NodePlan, NodeRun};

impl<'e> Planner<'e> {
    /// Begins the session of agent node `ns.np` (its gates passed): the opening messages
    /// and the first model call's effect (`None` when a template fails: the step then
    /// fails the node).
    pub(crate) fn session_start(
        &self,
        run: &RunState,
        ns: NodeStep<'e>,
        agent: &'e AgentPlan,
        view: Writes,
    ) -> (Box<SessionStep<'e>>, Option<Effect>) {
        let NodeStep {
            np,
            dispatcher,
            kind,
            source,
            chain,
            after,
            extra,
            ..
        } = ns;
        let visit = NodeVisit {
            np,
            kind,
            source: source.map(Cow::into_owned),
            chain,
            owed: extra.map(|x| x.owed).unwrap_or_default(),
            after,
        };
        let id = Arc::clone(&np.id);
        let ss = new_session(
            (id, agent),
            dispatcher.into_owned(),
            SessionOwner::Node(visit),
            None,
            0,
        );
        // An advisors' primary: the advice's tagged blocks come first (brief 5.4).
        let tagged = np
            .contract(&self.plan.graph)
            .advisors
            .as_ref()
            .and_then(|a| run.level_state().get(&a.slice))
            .and_then(|advice| advice.get("tagged"))
            .and_then(serde_json::Value::as_str);
        self.open_session(
            run,
            ss,
            opening(&format!("agent node `{}`", np.id), agent, view, tagged),
        )
    }

    /// Begins session `ss` with `opened` (its opening messages, or why they could not be
    /// rendered): its first model call's effect.
    pub(crate) fn open_session(
        &self,
        run: &RunState,
        mut ss: Box<SessionStep<'e>>,
        opened: Result<Vec<ChatMessage>, String>,
    ) -> (Box<SessionStep<'e>>, Option<Effect>) {
        match opened {
            Ok(messages) => {
                let effect = self.model_effect(run, &ss, messages.clone(), 1);
                ss.opening = messages;
                ss.work = SessionWork::Model {
                    turn: 1,
                    result: None,
                    attempt: 1,
                    duration_us: 0,
                    failed: Vec::new(),
                };
                (ss, Some(effect))
            }
            Err(msg) => {
                ss.work = SessionWork::Failed(msg);
                (ss, None)
            }
        }
    }

    /// Plans the next step of a session under way (see [`Pending::Session`]): the tool
    /// calls of its last reply when they are unanswered, else its next model call.
    pub(crate) fn plan_pending_session(
        &self,
        run: &RunState,
        level: Level<'e>,
        pending: &Pending,
        step: &mut Step<'e>,
    ) {
        let Pending::Session {
            node,
            dispatcher,
            kind,
            from,
            chain,
            owed,
            session,
        } = pending
        else {
            return;
        };
        let mismatch = |msg: String| Then::Mismatch(msg, Some(Arc::clone(dispatcher)));
        let Some(np) = self.plan.nodes.get(&**node) else {
            return ready(step, level, None, mismatch(self.unknown("node", node)));
        };
        let NodeRun::Agent(agent) = &np.run else {
            let msg = format!(
                "the run state holds a session of node `{node}`, which workflow `{}` does not run as an agent",
                self.plan.graph.workflow()
            );
            return ready(step, level, None, mismatch(msg));
        };
        let after = match self.after_node(level, np) {
            Ok(a) => a,
            Err(msg) => return ready(step, level, None, mismatch(msg)),
        };
        // Every model call and tool call is a step: within max_steps and the usage
        // budgets, checked before each (not max_visits: the visit began with the session).
        if let Err(g) = check_node(run, self.plan.graph.budgets(), &np.id, None) {
            return ready(
                step,
                level,
                None,
                Then::Guard(g, Some(Arc::clone(dispatcher))),
            );
        }
        let visit = NodeVisit {
            np,
            kind: *kind,
            source: from.clone(),
            chain: chain.clone(),
            owed: owed.clone(),
            after,
        };
        let owner = SessionOwner::Node(visit);
        let id = Arc::clone(&np.id);
        let ss = new_session(
            (id, agent),
            Arc::clone(dispatcher),
            owner,
            Some(*session),
            0,
        );
        self.continue_session(run, level, ss, step);
    }

    /// Plans session `ss`'s next step, its conversation in the run: the tool calls of
    /// its last reply when they are unanswered, else its next model call.
    pub(crate) fn continue_session(
        &self,
        run: &RunState,
        level: Level<'e>,
        mut ss: Box<SessionStep<'e>>,
        step: &mut Step<'e>,
    ) {
        let index = ss.session.unwrap_or(u32::MAX);
        let Some(conversation) = run.sessions.get(index as usize) else {
            let msg = format!(
                "the run state names session {index} of `{}`, which it does not hold",
                ss.id
            );
            let sup = Some(Arc::clone(&ss.dispatcher));
            return ready(step, level, None, Then::Mismatch(msg, sup));
        };
        let effect = match unanswered(conversation) {
            Some((_, calls)) => {
                let work = self.tool_work(run, ss.agent, &calls, run.steps);
                if !work.agents.is_empty() {
                    // Agent tools answer some calls: their sessions run with the others.
                    let turn = conversation.turns();
                    return self.agent_tools_step(run, level, (ss, index, turn), work, step);
                }
                ss.work = SessionWork::Tools(work.outcomes);
                let calls = work.invocations;
                (!calls.is_empty()).then(|| Effect {
                    kind: EffectKind::Tools,
                    id: Arc::clone(&ss.id),
                    step: run.steps,
                    limit: None,
                    delay: Duration::ZERO,
                    call: Call::Tools(calls),
                    role: Role::Plain,
                })
            }
            None => {
                let turn = conversation.turns().saturating_add(1);
                ss.work = SessionWork::Model {
                    turn,
                    result: None,
                    attempt: 1,
                    duration_us: 0,
                    failed: Vec::new(),
                };
                let messages = conversation.messages.clone();
                Some(self.model_effect(run, &ss, messages, turn))
            }
        };
        step.stage = session_stage(level, ss, effect);
    }

    /// What a session under way in a fork (ADR 0040) does next, as the `offset`-th step
    /// of this one: the tool calls of its last reply when they are unanswered, else its
    /// next model call (the first exit forced on its last turn). Gives the work, the call
    /// to make (`None` when every tool call was answered while planning), the steps it
    /// counts, and the agent tools its reply called (their sessions answer them, ADR
    /// 0046).
    pub(crate) fn session_next(
        &self,
        run: &RunState,
        (id, agent): (&Arc<str>, &'e AgentPlan),
        conversation: &Session,
        offset: u32,
    ) -> (SessionWork, Option<Call>, u32, Vec<AgentCall<'e>>) {
        let step = run.steps.saturating_add(offset);
        match unanswered(conversation) {
            Some((_, calls)) => {
                let work = self.tool_work(run, agent, &calls, step);
                let n = u32::try_from(work.outcomes.len()).unwrap_or(u32::MAX);
                let invocations = work.invocations;
                let call = (!invocations.is_empty()).then_some(Call::Tools(invocations));
                (SessionWork::Tools(work.outcomes), call, n, work.agents)
            }
            None => {
                let turn = conversation.turns().saturating_add(1);
                let work = SessionWork::Model {
                    turn,
                    result: None,
                    attempt: 1,
                    duration_us: 0,
                    failed: Vec::new(),
                };
                let force = turn >= agent.max_turns();
                let messages = conversation.messages.clone();
                let call = model_call(run, (id, agent), (messages, turn), force, step);
                (work, Some(call), 1, Vec::new())
            }
        }
    }

    /// The effect of model call `turn` of session `ss`, sending `messages`: the exit
    /// tools and the tools offered, the exit tool forced on the last allowed turn.
    fn model_effect(
        &self,
        run: &RunState,
        ss: &SessionStep<'_>,
        messages: Vec<ChatMessage>,
        turn: u32,
    ) -> Effect {
        let agent = ss.agent;
        let tool_choice = ss
            .is_last(turn)
            .then(|| ToolChoice::Function(agent.exit().def.name.clone()));
        let messages = in_reply_order(messages);
        Effect {
            kind: EffectKind::Model,
            id: Arc::clone(&ss.id),
            step: run.steps,
            limit: self.call_limit(run, None),
            delay: Duration::ZERO,
            call: Call::Model(Box::new(ModelCall {
                model: agent.model.as_str().into(),
                node: Arc::clone(&ss.id),
                turn,
                #[cfg(feature = "agents")]
                client: Arc::clone(&agent.client),
                messages,
                tools: agent.defs(),
                tool_choice,
                ids: CallIds {
                    run_id: run.run_id,
                    step: run.steps,
                    attempt: 1,
                },
            })),
            role: Role::Plain,
        }
    }

    /// The outcome of each of a reply's unanswered tool calls `calls` but agent tools'
    /// (in its order): those answered already (a mistake, a tool node that calls nothing,
    /// a call past `max_steps`) and the calls to run; and the agent tools' calls, whose
    /// sessions answer them (ADR 0046). The `i`-th outcome is step `base + i`: every call
    /// counts against `max_steps` before it starts, so the calls with no step left are
    /// `skipped`, not run (ADR 0042; the run then stops at its next step with
    /// `max_steps_exceeded`).
    pub(super) fn tool_work(
        &self,
        run: &RunState,
        agent: &AgentPlan,
        calls: &[&ToolCall],
        base: u32,
    ) -> ToolWork<'e> {
        let max_steps = self.plan.graph.budgets().max_steps;
        let room = usize::try_from(max_steps.saturating_sub(base)).unwrap_or(usize::MAX);
        let mut work = ToolWork {
            outcomes: Vec::with_capacity(calls.len()),
            invocations: Vec::new(),
            agents: Vec::new(),
        };
        for call in calls {
            let index = work.outcomes.len();
            let mut outcome = ToolOutcome {
                call_id: call.id.clone(),
                tool: call.name.as_str().into(),
                status: ToolCallStatus::Ok,
                content: None,
                error: None,
                usage: None,
                duration_us: 0,
                cancelled: false,
            };
            let answer = if index >= room {
                outcome.status = ToolCallStatus::Skipped;
                Err(format!(
                    "not run: the run's max_steps ({max_steps}) left no step for this call \
                     ({} of the reply's {} tool calls fit)",
                    room,
                    calls.len()
                ))
            } else {
                self.tool_call(run, agent, call, index, base)
            };
            match answer {
                Ok(Answer::Run(invocation)) => work.invocations.push(invocation),
                Ok(Answer::Now(content)) => outcome.content = Some(content),
                Ok(Answer::Agent(called)) => {
                    work.agents.push(called);
                    continue;
                }
                Err(error) => {
                    if outcome.status == ToolCallStatus::Ok {
                        outcome.status = ToolCallStatus::Invalid;
                    }
                    outcome.content = Some(error_content(&error));
                    outcome.error = Some(error);
                }
            }
            work.outcomes.push(outcome);
        }
        work
    }

    /// One tool call: its arguments checked, then answered now or run.
    fn tool_call(
        &self,
        run: &RunState,
        agent: &AgentPlan,
        call: &ToolCall,
        index: usize,
        base: u32,
    ) -> Result<Answer<'e>, String> {
        if let Some(exit) = exit_output(agent, &call.name, &call.arguments) {
            // A valid exit ends the session when the reply is read: this one has a mistake.
            return Err(match exit {
                Err(e) => e,
                Ok(_) => format!(
                    "`{}` was called with other tools; call it alone to finish",
                    call.name
                ),
            });
        }
        let Some(tool) = agent.tool(&call.name) else {
            let offered: Vec<&str> = agent.offered().map(|t| t.def.name.as_str()).collect();
            return Err(format!(
                "there is no tool `{}`; the tools are: {}",
                call.name,
                offered.join(", ")
            ));
        };
        let arguments = arguments_of(tool, &call.arguments)?;
        let serde_json::Value::Object(arguments) = arguments else {
            return Err(format!(
                "the arguments of `{}` must be a JSON object",
                call.name
            ));
        };
        let Some(tp) = self.plan.nodes.get(&*tool.node) else {
            return Err(format!(
                "tool `{}` is not a node of this workflow",
                call.name
            ));
        };
        let ids = CallIds {
            run_id: run.run_id,
            step: base.saturating_add(u32::try_from(index).unwrap_or(u32::MAX)),
            attempt: 1,
        };
        match node_call(tp, run, ids, || arguments, None) {
            Some(NodeCall::Call(c)) => Ok(Answer::Run(ToolInvocation {
                index,
                limit: self.call_limit(run, tp.own_timeout_ms()),
                call: c,
            })),
            Some(NodeCall::Session(agent, arguments)) => Ok(Answer::Agent(AgentCall {
                id: Arc::clone(&tp.id),
                np: tp,
                agent,
                call_id: call.id.clone(),
                arguments,
            })),
            None => Ok(Answer::Now(
                serde_json::Value::Object(tp.constant_writes()).to_string(),
            )),
        }
    }
}

/// How a valid tool call is answered.
// Made once per tool call and moved once: boxing the call would allocate for nothing.
#[allow(clippy::large_enum_variant)]
enum Answer<'e> {
    /// Its tool node calls something: run it.
    Run(ToolInvocation),
    /// Its tool node calls nothing: its constants are the result.
    Now(String),
    /// Its tool node is an agent: its session answers.
    Agent(AgentCall<'e>),
}

/// What a reply's unanswered tool calls need (see [`Planner::tool_work`]).
pub(super) struct ToolWork<'e> {
    /// One per call answered in this step (every call but agent tools'), in order.
    pub(super) outcomes: Vec<ToolOutcome>,
    /// The tool node calls to run.
    pub(super) invocations: Vec<ToolInvocation>,
    /// The agent tools' calls, in the reply's order.
    pub(super) agents: Vec<AgentCall<'e>>,
}

/// A call of an agent tool, its arguments checked.
pub(crate) struct AgentCall<'e> {
    /// The tool node.
    pub(crate) id: Arc<str>,
    pub(crate) np: &'e NodePlan,
    pub(crate) agent: &'e AgentPlan,
    pub(crate) call_id: String,
    /// Its input: what its templates see.
    pub(crate) arguments: Writes,
}

/// A session step of agent `id` (`agent`) for `owner` (its work set when it is
/// planned).
pub(crate) fn new_session<'e>(
    (id, agent): (Arc<str>, &'e AgentPlan),
    dispatcher: Arc<str>,
    owner: SessionOwner<'e>,
    session: Option<u32>,
    earlier: u32,
) -> Box<SessionStep<'e>> {
    Box::new(SessionStep {
        id,
        agent,
        dispatcher,
        owner,
        session,
        opening: Vec::new(),
        earlier,
        work: SessionWork::Failed(String::new()),
        agent_tools: None,
    })
}

/// The stage of a session step: waiting on `effect`, or ready (every tool call was
/// answered while planning, or the session could not begin).
pub(crate) fn session_stage<'e>(
    level: Level<'e>,
    ss: Box<SessionStep<'e>>,
    effect: Option<Effect>,
) -> Stage<'e> {
    let planned = Planned {
        level,
        decision: None,
        fallback: None,
        then: Then::Session(ss),
    };
    match effect {
        Some(effect) => Stage::Waiting {
            effect: Some(Box::new(effect)),
            then: Awaiting::Session(planned),
        },
        None => Stage::Ready(planned),
    }
}

/// What is pending after a session's step that did not end it: its next call (an agent
/// tool's session is planned from its caller's, which stays pending).
pub(crate) fn pending_session(ss: &SessionStep<'_>, session: u32) -> Pending {
    match &ss.owner {
        SessionOwner::Node(v) => Pending::Session {
            node: Arc::clone(&v.np.id),
            dispatcher: Arc::clone(&ss.dispatcher),
            kind: v.kind,
            from: v.source.clone(),
            chain: v.chain.clone(),
            owed: v.owed.clone(),
            session,
        },
        SessionOwner::Policy(sp) => Pending::Deciding {
            supervisor: Arc::clone(&sp.id),
            session,
            earlier: ss.earlier,
        },
    }
}

/// Model call `turn` of a session of `agent` (node `id`), sending `messages`, as step
/// `step`: the exit tools and the tools offered, the first exit tool forced when `force`
/// (a last turn).
pub(crate) fn model_call(
    run: &RunState,
    (id, agent): (&Arc<str>, &AgentPlan),
    (messages, turn): (Vec<ChatMessage>, u32),
    force: bool,
    step: u32,
) -> Call {
    let tool_choice = force.then(|| ToolChoice::Function(agent.exit().def.name.clone()));
    let messages = in_reply_order(messages);
    Call::Model(Box::new(ModelCall {
        model: agent.model.as_str().into(),
        node: Arc::clone(id),
        turn,
        #[cfg(feature = "agents")]
        client: Arc::clone(&agent.client),
        messages,
        tools: agent.defs(),
        tool_choice,
        ids: CallIds {
            run_id: run.run_id,
            step,
            attempt: 1,
        },
    }))
}
