//! Planning an agent session's steps: its first model call (the opening rendered from
//! the read view), and from [`Pending::Session`] its next model call or the tool calls
//! of its last reply. Arguments are checked here, so a mistake is answered without
//! running anything; valid calls of tool nodes that call something become one effect
//! that runs them at once.

use std::sync::Arc;
use std::time::Duration;

use super::reply::{arguments_of, error_content, exit_output};
use super::templates::opening;
use crate::model::{ChatMessage, Role as ChatRole, ToolCall, ToolChoice};
use crate::runtime::data::{Pending, Role, RunState, Session, Writes};
use crate::runtime::effects::{Call, CallIds, Effect, EffectKind, ModelCall, ToolInvocation};
use crate::runtime::machine::budgets::check_node;
use crate::runtime::machine::calls::{NodeCall, node_call};
use crate::runtime::machine::planner::Planner;
use crate::runtime::machine::step::{
    Awaiting, Level, NodeStep, Planned, SessionStep, SessionWork, Stage, Step, Then, ToolOutcome,
};
use crate::runtime::plan::NodeRun;
use crate::runtime::plan::agent::AgentPlan;

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
        let mut ss = Box::new(SessionStep {
            np,
            agent,
            dispatcher,
            kind,
            source,
            chain,
            owed: extra.map(|x| x.owed).unwrap_or_default(),
            after,
            session: None,
            opening: Vec::new(),
            work: SessionWork::Failed(String::new()),
        });
        // An advisors' primary: the advice's tagged blocks come first (brief 5.4).
        let tagged = np
            .contract(&self.plan.graph)
            .advisors
            .as_ref()
            .and_then(|a| run.level_state().get(&a.slice))
            .and_then(|advice| advice.get("tagged"))
            .and_then(serde_json::Value::as_str);
        match opening(&np.id, agent, view, tagged) {
            Ok(messages) => {
                let effect = self.model_effect(run, &np.id, agent, messages.clone(), 1);
                ss.opening = messages;
                ss.work = SessionWork::Model {
                    turn: 1,
                    result: None,
                    attempt: 1,
                    duration_us: 0,
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
        let ready = |step: &mut Step<'e>, then| {
            step.stage = Stage::Ready(Planned {
                level,
                decision: None,
                fallback: None,
                then,
            });
        };
        let Some(np) = self.plan.nodes.get(&**node) else {
            return ready(step, mismatch(self.unknown("node", node)));
        };
        let NodeRun::Agent(agent) = &np.run else {
            let msg = format!(
                "the run state holds a session of node `{node}`, which workflow `{}` does not run as an agent",
                self.plan.graph.workflow()
            );
            return ready(step, mismatch(msg));
        };
        let Some(conversation) = run.sessions.get(*session as usize) else {
            let msg = format!(
                "the run state names session {session} of node `{node}`, which it does not hold"
            );
            return ready(step, mismatch(msg));
        };
        let after = match self.after_node(level, np) {
            Ok(a) => a,
            Err(msg) => return ready(step, mismatch(msg)),
        };
        // Every model call and tool call is a step: within max_steps and the usage
        // budgets, checked before each (not max_visits: the visit began with the session).
        if let Err(g) = check_node(run, self.plan.graph.budgets(), &np.id, None) {
            return ready(step, Then::Guard(g, Some(Arc::clone(dispatcher))));
        }
        let mut ss = Box::new(SessionStep {
            np,
            agent,
            dispatcher: Arc::clone(dispatcher),
            kind: *kind,
            source: from.clone(),
            chain: chain.clone(),
            owed: owed.clone(),
            after,
            session: Some(*session),
            opening: Vec::new(),
            work: SessionWork::Failed(String::new()),
        });
        let (work, call, _) = self.session_next(run, agent, conversation, 0);
        ss.work = work;
        let effect = call.map(|call| Effect {
            kind: if matches!(call, Call::Model(_)) {
                EffectKind::Model
            } else {
                EffectKind::Tools
            },
            id: Arc::clone(&np.id),
            step: run.steps,
            limit: match call {
                Call::Model(_) => self.call_limit(run, None),
                _ => None,
            },
            delay: Duration::ZERO,
            call,
            role: Role::Plain,
        });
        let planned = Planned {
            level,
            decision: None,
            fallback: None,
            then: Then::Session(ss),
        };
        step.stage = match effect {
            Some(effect) => Stage::Waiting {
                effect: Some(Box::new(effect)),
                then: Awaiting::Session(planned),
            },
            None => Stage::Ready(planned),
        };
    }

    /// The effect of model call `turn` of node `node`'s session, sending `messages`: the
    /// exit tool and the tools offered, the exit tool forced on the last allowed turn.
    fn model_effect(
        &self,
        run: &RunState,
        node: &Arc<str>,
        agent: &AgentPlan,
        messages: Vec<ChatMessage>,
        turn: u32,
    ) -> Effect {
        Effect {
            kind: EffectKind::Model,
            id: Arc::clone(node),
            step: run.steps,
            limit: self.call_limit(run, None),
            delay: Duration::ZERO,
            call: model_call(run, agent, messages, turn >= agent.max_turns(), run.steps),
            role: Role::Plain,
        }
    }

    /// What a session under way does next, as the `offset`-th step of this one (steps
    /// taken before it in the same step, for a fork of sessions): the tool calls of its
    /// last reply when they are unanswered, else its next model call. Gives the work, the
    /// call to make (`None` when every tool call was answered while planning) and the
    /// steps it counts (1 for a model call, 1 per tool call).
    pub(crate) fn session_next(
        &self,
        run: &RunState,
        agent: &'e AgentPlan,
        conversation: &Session,
        offset: u32,
    ) -> (SessionWork, Option<Call>, u32) {
        let unanswered = conversation
            .messages
            .last()
            .filter(|m| m.role == ChatRole::Assistant && !m.tool_calls.is_empty());
        let step = run.steps.saturating_add(offset);
        match unanswered {
            Some(reply) => {
                let (outcomes, calls) = self.tool_work(run, agent, &reply.tool_calls, step);
                let n = u32::try_from(outcomes.len()).unwrap_or(u32::MAX);
                let call = (!calls.is_empty()).then_some(Call::Tools(calls));
                (SessionWork::Tools(outcomes), call, n)
            }
            None => {
                let turn = conversation.turns().saturating_add(1);
                let work = SessionWork::Model {
                    turn,
                    result: None,
                    attempt: 1,
                    duration_us: 0,
                };
                let force = turn >= agent.max_turns();
                let call = model_call(run, agent, conversation.messages.clone(), force, step);
                (work, Some(call), 1)
            }
        }
    }

    /// The outcome of each of a reply's tool calls, in its order, with those answered
    /// already (a mistake, a tool node that calls nothing), and the calls to run. Call `i`
    /// is step `step + i`.
    fn tool_work(
        &self,
        run: &RunState,
        agent: &AgentPlan,
        calls: &[ToolCall],
        step: u32,
    ) -> (Vec<ToolOutcome>, Vec<ToolInvocation>) {
        let mut outcomes = Vec::with_capacity(calls.len());
        let mut invocations = Vec::new();
        for (index, call) in calls.iter().enumerate() {
            let mut outcome = ToolOutcome {
                call_id: call.id.clone(),
                tool: call.name.as_str().into(),
                content: None,
                error: None,
                usage: None,
                duration_us: 0,
                cancelled: false,
            };
            match self.tool_call(run, agent, call, index, step) {
                Ok(Answer::Run(invocation)) => invocations.push(invocation),
                Ok(Answer::Now(content)) => outcome.content = Some(content),
                Err(error) => {
                    outcome.content = Some(error_content(&error));
                    outcome.error = Some(error);
                }
            }
            outcomes.push(outcome);
        }
        (outcomes, invocations)
    }

    /// One tool call: its arguments checked, then answered now or run.
    fn tool_call(
        &self,
        run: &RunState,
        agent: &AgentPlan,
        call: &ToolCall,
        index: usize,
        step: u32,
    ) -> Result<Answer, String> {
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
            step: step.saturating_add(u32::try_from(index).unwrap_or(u32::MAX)),
            attempt: 1,
        };
        match node_call(tp, run, ids, || arguments, None) {
            Some(NodeCall::Call(c)) => Ok(Answer::Run(ToolInvocation {
                index,
                limit: self.call_limit(run, tp.own_timeout_ms()),
                call: c,
            })),
            Some(NodeCall::Session(..)) => Err(format!(
                "tool `{}` is an agent, which cannot be called as a tool yet",
                call.name
            )),
            None => Ok(Answer::Now(
                serde_json::Value::Object(tp.constant_writes()).to_string(),
            )),
        }
    }
}

/// How a valid tool call is answered.
// Made once per tool call and moved once: boxing the call would allocate for nothing.
#[allow(clippy::large_enum_variant)]
enum Answer {
    /// Its tool node calls something: run it.
    Run(ToolInvocation),
    /// Its tool node calls nothing: its constants are the result.
    Now(String),
}

/// A model call of a session of `agent`, sending `messages`, as step `step`: the exit
/// tools and the tools offered, the first exit tool forced when `force` (the last allowed
/// turn).
pub(super) fn model_call(
    run: &RunState,
    agent: &AgentPlan,
    messages: Vec<ChatMessage>,
    force: bool,
    step: u32,
) -> Call {
    let tool_choice = force.then(|| ToolChoice::Function(agent.exit().def.name.clone()));
    Call::Model(Box::new(ModelCall {
        model: agent.model.as_str().into(),
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

/// The fields of [`Pending::Session`] a session's step keeps, for the step after it.
pub(crate) fn pending_session(ss: &SessionStep<'_>, session: u32) -> Pending {
    Pending::Session {
        node: Arc::clone(&ss.np.id),
        dispatcher: Arc::clone(&ss.dispatcher),
        kind: ss.kind,
        from: ss.source.clone(),
        chain: ss.chain.clone(),
        owed: ss.owed.clone(),
        session,
    }
}
