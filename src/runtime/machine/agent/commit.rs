//! Committing an agent session's step: the model call or tool calls recorded (one
//! `model_call` or `tool_call` item and one step each), their messages appended to the
//! session, their usage counted, and then the session goes on, ends the node with its
//! exit's writes (a policy's `route` is planned as its decision in the next step), or
//! fails it (`model_error`, `agent_no_exit`).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Number;

use super::plan::pending_session;
use super::reply::{Verdict, ask_for_exit, judge};
use crate::contracts::Price;
use crate::model::ChatMessage;
use crate::runtime::data::{
    COST_USD, CallRecord, Control, HttpAttempt, INPUT_TOKENS, ModelCallItem, OUTPUT_TOKENS,
    RunState, Session, TerminationReason, TraceKind, Usage,
};
use crate::runtime::effects::{Fault, ModelReply};
use crate::runtime::machine::commit::{Tx, attach_usage};
use crate::runtime::machine::step::{
    Level, NodeResult, NodeStep, NodeVisit, Ran, SessionOwner, SessionStep, SessionWork,
    StageExtra, ToolOutcome,
};

/// The usage name counting model calls whose server sent no usage: their tokens are
/// unknown (never guessed), so a sum with it is incomplete.
pub(crate) const USAGE_UNKNOWN: &str = "usage_unknown";

/// The usage name of cached input tokens.
const CACHED_INPUT_TOKENS: &str = "cached_input_tokens";

impl Tx<'_> {
    /// Commits an agent session's step.
    pub(crate) fn session(&mut self, level: Level<'_>, mut ss: Box<SessionStep<'_>>) {
        if let SessionOwner::Node(v) = &ss.owner {
            self.chain = v.chain.clone();
        }
        if ss.agent_tools.is_some() {
            // A reply's agent tools under way (ADR 0046): its session is committed.
            let index = ss.session.unwrap_or(u32::MAX);
            return self.agent_tools(ss, index);
        }
        let work = std::mem::replace(&mut ss.work, SessionWork::Failed(String::new()));
        if let SessionWork::Failed(msg) = work {
            let id = Arc::clone(&ss.id);
            return self.session_failed(&ss, TerminationReason::NodeFailed, msg, (&id, 0), None);
        }
        if let SessionWork::Model {
            result: Some(Err(fault @ (Fault::Cancelled | Fault::Timeout(_)))),
            ..
        } = &work
        {
            // Nothing of the call is kept: the run stops (cancelled, or out of time).
            let (id, sup) = (Arc::clone(&ss.id), Arc::clone(&ss.dispatcher));
            return self.fault(&id, ss.what(), fault.clone(), Some(sup));
        }
        let index = match ss.session {
            Some(i) => i,
            None => {
                let visit = match &ss.owner {
                    SessionOwner::Node(v) => self.run.visits.get(&*v.np.id).copied(),
                    // A policy's sessions are its decisions, an agent tool's its calls:
                    // this is the next one.
                    SessionOwner::Policy(_) => {
                        let n = self.run.sessions.iter().filter(|s| s.node == ss.id).count();
                        u32::try_from(n).ok()
                    }
                };
                self.run.sessions.push(Session {
                    node: Arc::clone(&ss.id),
                    visit: visit.unwrap_or(0).saturating_add(1),
                    model: ss.agent.model.clone(),
                    step: self.run.steps,
                    messages: std::mem::take(&mut ss.opening),
                    caller: None,
                });
                u32::try_from(self.run.sessions.len() - 1).unwrap_or(u32::MAX)
            }
        };
        match work {
            SessionWork::Model {
                turn,
                result,
                attempt,
                duration_us,
                failed,
            } => {
                let result = result
                    .unwrap_or_else(|| {
                        Err(Fault::Failed(
                            "was committed before its reply arrived".into(),
                        ))
                    })
                    .map_err(|fault| (fault, failed));
                self.model_turn(level, ss, index, (turn, attempt, duration_us), result);
            }
            SessionWork::Tools(outcomes) => self.tool_results(ss, index, outcomes),
            SessionWork::Failed(_) => {}
        }
    }

    /// Commits model call `turn` (attempt `attempt`, `duration_us` long) and reads its
    /// reply.
    fn model_turn(
        &mut self,
        level: Level<'_>,
        ss: Box<SessionStep<'_>>,
        index: u32,
        (turn, attempt, duration_us): (u32, u32, u64),
        result: Result<ModelReply, (Fault, Vec<HttpAttempt>)>,
    ) {
        let id = Arc::clone(&ss.id);
        let sup = Arc::clone(&ss.dispatcher);
        let reply = match result {
            Ok(reply) => reply,
            Err((fault, failed_attempts)) => {
                let msg = fault.describe().1.to_string();
                self.run.steps += 1;
                let model: Arc<str> = ss.agent.model.as_str().into();
                let it = self.record(TraceKind::ModelCall, &sup);
                it.set_source(&id);
                it.set_target(&model);
                it.set_reason(format!("turn {turn}, attempt {attempt}: failed: {msg}"));
                it.duration_us = duration_us;
                it.set_call(Some(CallRecord::Model(ModelCallItem {
                    node: Arc::clone(&id),
                    model,
                    turn,
                    attempt,
                    failed_attempts,
                    finish_reason: None,
                    usage_known: false,
                    error: Some(msg.clone()),
                })));
                let (total_us, usage) = self.session_totals(index);
                let msg = format!("{} `{id}` (model `{}`): {msg}", ss.what(), ss.agent.model);
                return self.session_failed(
                    &ss,
                    TerminationReason::ModelError,
                    msg,
                    (&id, total_us),
                    usage,
                );
            }
        };
        let ModelReply {
            message,
            finish_reason,
            usage,
            failed_attempts,
        } = reply;
        let usage = call_usage(ss.agent.price.as_ref(), usage.as_ref());
        self.run.usage_total.add_all(&usage);
        self.run.steps += 1;
        let usage_known = usage.get(USAGE_UNKNOWN).is_none();
        let reason = model_call_reason(
            (turn, attempt),
            &failed_attempts,
            finish_reason.as_deref(),
            usage_known,
        );
        let model: Arc<str> = ss.agent.model.as_str().into();
        let it = self.record(TraceKind::ModelCall, &sup);
        it.set_source(&id);
        it.set_target(&model);
        it.set_reason(reason);
        it.duration_us = duration_us;
        attach_usage(it, usage);
        it.set_call(Some(CallRecord::Model(ModelCallItem {
            node: Arc::clone(&id),
            model,
            turn,
            attempt,
            failed_attempts,
            finish_reason,
            usage_known,
            error: None,
        })));
        let verdict = judge(self.plan, ss.agent, &message);
        self.push_messages(index, [message]);
        let last = ss.is_last(turn);
        match verdict {
            Verdict::Exit(output) => match ss.owner {
                SessionOwner::Node(visit) => {
                    let (total_us, usage) = self.session_totals(index);
                    let NodeVisit {
                        np,
                        kind,
                        source,
                        chain,
                        owed,
                        after,
                    } = visit;
                    let ran = Ran {
                        result: Ok(output),
                        failed: Vec::new(),
                    };
                    let ns = NodeStep {
                        np,
                        dispatcher: Cow::Owned(ss.dispatcher),
                        kind,
                        source: source.map(Cow::Owned),
                        chain,
                        result: NodeResult::Session(Box::new(ran), total_us, usage),
                        after,
                        extra: StageExtra::owing(&owed),
                    };
                    self.run_node(level, ns);
                }
                // The decision is planned in the next step, from the committed reply.
                SessionOwner::Policy(_) => self.go_on(&ss, index),
            },
            Verdict::Calls | Verdict::Text if last => {
                let (total_us, usage) = self.session_totals(index);
                let msg = format!(
                    "{} `{id}` made {} model call(s), its max_turns, without a valid `{}` call",
                    ss.what(),
                    turn.saturating_sub(ss.earlier),
                    ss.agent.exit().def.name
                );
                self.session_failed(
                    &ss,
                    TerminationReason::AgentNoExit,
                    msg,
                    (&id, total_us),
                    usage,
                );
            }
            Verdict::Calls => self.go_on(&ss, index),
            Verdict::Text => {
                self.push_messages(index, [ChatMessage::user(ask_for_exit(ss.agent))]);
                self.go_on(&ss, index);
            }
        }
    }

    /// Commits the tool calls of a reply: one `tool_call` item and one step each, their
    /// results appended in the reply's order; the session's next model call is next.
    fn tool_results(&mut self, ss: Box<SessionStep<'_>>, index: u32, outcomes: Vec<ToolOutcome>) {
        let sup = Arc::clone(&ss.dispatcher);
        if outcomes.iter().any(|o| o.cancelled) {
            return self.fault(&ss.id, ss.what(), Fault::Cancelled, Some(sup));
        }
        // One item and one step each, as a fork's sessions record theirs (none cancelled:
        // checked above).
        self.tools_committed((&sup, &ss.id), index, outcomes);
        self.go_on(&ss, index);
    }

    /// Session `ss` fails the run: for a node, the failure's item stands for the node
    /// run (its time and usage, see [`Tx::fail_after_run`]); for a policy, its calls'
    /// items are its records already, so the failure's item is plain.
    fn session_failed(
        &mut self,
        ss: &SessionStep<'_>,
        reason: TerminationReason,
        msg: String,
        ran: (&Arc<str>, u64),
        usage: Option<Usage>,
    ) {
        let sup = Arc::clone(&ss.dispatcher);
        match ss.owner {
            SessionOwner::Policy(_) => self.fail(reason, msg, Some(sup)),
            _ => self.fail_after_run(reason, msg, sup, ran, usage),
        }
    }

    /// Session `index` goes on: its next call is pending.
    fn go_on(&mut self, ss: &SessionStep<'_>, index: u32) {
        self.run.control = Control::Running(pending_session(ss, index));
    }

    /// Appends messages to session `index`.
    pub(crate) fn push_messages(
        &mut self,
        index: u32,
        messages: impl IntoIterator<Item = ChatMessage>,
    ) {
        if let Some(s) = self.run.sessions.get_mut(index as usize) {
            s.messages.extend(messages);
        }
    }

    /// What session `index`'s calls took so far (see [`session_totals`]).
    pub(crate) fn session_totals(&self, index: u32) -> (u64, Option<Usage>) {
        session_totals(self.run, index)
    }
}

/// What session `index`'s calls took so far: their microseconds, and their usage summed
/// (`None` when none reported any).
pub(crate) fn session_totals(run: &RunState, index: u32) -> (u64, Option<Usage>) {
    let Some(session) = run.sessions.get(index as usize) else {
        return (0, None);
    };
    let mut usage = Usage::new();
    let mut total_us = 0u64;
    for it in run.trace.iter().rev() {
        if it.step <= session.step {
            break;
        }
        let ours = matches!(it.kind, TraceKind::ModelCall | TraceKind::ToolCall)
            && it.source() == Some(&*session.node);
        if ours {
            total_us = total_us.saturating_add(it.duration_us);
            if let Some(u) = it.usage() {
                usage.add_all(u);
            }
        }
    }
    (total_us, (!usage.is_empty()).then_some(usage))
}

/// A model call's usage record: its tokens (and cached input tokens), and its cost when
/// the model has prices; unknown usage is counted as such, never guessed.
pub(crate) fn call_usage(price: Option<&Price>, usage: Option<&crate::model::Usage>) -> Usage {
    let Some(u) = usage else {
        return Usage::new().with(USAGE_UNKNOWN, 1);
    };
    let mut out = Usage::new()
        .with(INPUT_TOKENS, u.input_tokens)
        .with(OUTPUT_TOKENS, u.output_tokens);
    if let Some(c) = u.cached_input_tokens {
        out.add(CACHED_INPUT_TOKENS, Number::from(c));
    }
    if let Some(p) = price {
        let cost = u.input_tokens as f64 * p.input_per_mtok / 1e6
            + u.output_tokens as f64 * p.output_per_mtok / 1e6;
        if let Some(n) = Number::from_f64(cost) {
            out.add(COST_USD, n);
        }
    }
    out
}

/// One failed HTTP attempt in words, for the item's `reason`: its error (which names
/// the HTTP status). Its timings are fields of the item only, so the words are the same
/// on every run of the same script.
fn attempt_words(a: &HttpAttempt) -> String {
    match a.status {
        Some(s) if !a.error.contains(&format!("HTTP {s}")) => format!("HTTP {s}: {}", a.error),
        _ => a.error.clone(),
    }
}

/// A `model_call` item's reason in words: its turn and attempt, the failed attempts before
/// it, its finish reason, and whether the server sent its usage (the same words for an agent
/// node's session and a fork's).
pub(super) fn model_call_reason(
    (turn, attempt): (u32, u32),
    failed_attempts: &[HttpAttempt],
    finish_reason: Option<&str>,
    usage_known: bool,
) -> String {
    let mut reason = format!("turn {turn}, attempt {attempt}");
    if !failed_attempts.is_empty() {
        let words: Vec<String> = failed_attempts.iter().map(attempt_words).collect();
        reason.push_str(&format!(" (after {})", words.join("; ")));
    }
    reason.push_str(&format!(
        ", finish_reason {}",
        finish_reason.unwrap_or("none")
    ));
    if !usage_known {
        reason.push_str(", usage unknown (the server sent none)");
    }
    reason
}
