//! The commit half of a step: synchronous transitions that apply a planned step to the
//! run (a node's writes, pausing and ending; entering and leaving a subgraph's level are
//! in `levels.rs`). Nothing is awaited here and every id is already resolved by planning.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::budgets::GuardStop;
use super::step::{
    After, Decided, Level, NodeResult, NodeStep, Planned, StageExtra, Then, next_stage,
};
use super::writes::{verdict_at, writes_verdict};
use crate::contracts::lookup::same;
use crate::contracts::{StopGlobal, StopLocal};
use crate::runtime::data::{
    Candidates, Chain, ChainTrigger, Control, IntoId, Pending, RunState, RunStatus,
    TerminationReason, TraceItem, TraceKind, Usage, commit, trace_depth,
};
use crate::runtime::effects::Fault;
use crate::runtime::plan::{NodePlan, NodeRun, Plan, SubgraphPlan, Verdict};

/// A router's run, its output read: what `Tx::commit_router` needs besides the writes.
pub(crate) struct RouterRun<'p> {
    pub(crate) np: &'p NodePlan,
    pub(crate) dispatcher: Arc<str>,
    pub(crate) kind: TraceKind,
    pub(crate) source: Option<Arc<str>>,
    pub(crate) extra: Option<Box<StageExtra>>,
    pub(crate) duration_us: u64,
    pub(crate) usage: Option<Usage>,
}

/// A commit in progress: the run being changed and the step's timestamp.
pub(crate) struct Tx<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) run: &'a mut RunState,
    pub(crate) at_ms: u64,
    /// The chain stage the step runs, if any: every item recorded from the node run on
    /// carries it.
    pub(crate) chain: Option<Chain>,
}

impl Tx<'_> {
    /// Appends an item of `kind` at the run's current step, depth and level (carrying the
    /// step's chain stage) and hands it back to be filled in.
    pub(crate) fn record(&mut self, kind: TraceKind, supervisor: impl IntoId) -> &mut TraceItem {
        let run = &mut *self.run;
        let supervisor = supervisor.into_id();
        let subgraph = run.stack.last().map(|f| Arc::clone(&f.subgraph_id));
        let it = run.trace.push_item(TraceItem {
            step: run.steps,
            depth: trace_depth(run.depth()),
            supervisor,
            subgraph,
            kind,
            source: None,
            target: None,
            reason: None,
            termination_reason: None,
            candidates: Candidates::none(),
            at_ms: self.at_ms,
            duration_us: 0,
            detail: None,
        });
        if let Some(chain) = &self.chain {
            it.set_chain(Some(chain.clone()));
        }
        it
    }

    /// Applies a planned step, read where planning left it: by reference, so the step
    /// is not moved out of its stage (ADR 0061). Inlined into the executor's step (with
    /// the node run of the common step), not copied from frame to frame (ADR 0051). The
    /// step is spent: what commit needed was taken out of it.
    #[inline(always)]
    pub(crate) fn commit(mut self, planned: &mut Planned<'_>) {
        let level = planned.level;
        match &planned.decision {
            Some(Decided::Rules {
                supervisor,
                target,
                reason,
                candidates,
            }) => {
                let it = self.record(TraceKind::Decision, *supervisor);
                it.set_target(*target);
                it.set_reason(*reason);
                it.set_candidates(candidates);
            }
            Some(Decided::Policy(d)) => {
                let it = self.record(TraceKind::Decision, d.supervisor);
                it.set_target(&d.target);
                it.set_reason(&d.reason);
                it.duration_us = d.duration_us;
            }
            None => {}
        }
        if let Some(it) = planned.fallback.take() {
            self.run.trace.push(*it);
        }
        if let Then::Node(ns) = &mut planned.then {
            // The common step: its node run read in place.
            return self.run_node_inline(level, ns);
        }
        // The others taken out (a placeholder that allocates nothing left behind).
        let then = std::mem::replace(&mut planned.then, Then::Mismatch(String::new(), None));
        match then {
            Then::Guard(g, sup) => self.guard_stop(g, sup),
            Then::Mismatch(msg, sup) => self.fail(TerminationReason::NodeFailed, msg, sup),
            Then::PolicyFault { sup, fault } => {
                let who = Arc::clone(&sup);
                self.fault(&who, "the policy of supervisor", fault, Some(sup));
            }
            Then::Node(mut ns) => self.run_node_inline(level, &mut ns),
            Then::Fork(fs) => self.fork(fs),
            Then::Team(ts) => self.team(level, ts),
            Then::Session(ss) => self.session(level, ss),
            Then::Call { caller, sg, routed } => self.call(sg, caller, routed),
            Then::EndLevel { sup, stop, reason } => self.end_level(level, sup, stop, reason),
            Then::StopGlobal { sup, stop, frames } => self.stop_global(sup, stop, &frames),
            Then::Ask { sup, question } => self.pause(sup, question),
            Then::Clarify {
                caller,
                sg,
                question,
            } => self.clarify(sg, caller, question),
        }
    }

    /// Counts a node run: one step, one visit.
    fn count_visit(&mut self, np: &NodePlan) {
        self.run.steps += 1;
        self.run.count_visit(&np.id);
    }

    /// Runs a planned node: counts the step, checks every write, applies them in one go
    /// and moves control on.
    pub(crate) fn run_node(&mut self, level: Level<'_>, mut ns: NodeStep<'_>) {
        self.run_node_inline(level, &mut ns);
    }

    /// [`Tx::run_node`], inlined where it is called: in [`Tx::commit`], so the common
    /// step's node is not copied into another frame. Its parts are taken out of `ns`
    /// where planning left them (the node step is not moved whole, ADR 0061); the
    /// dispatcher's place is left holding the node's own id, lent by the plan.
    #[inline(always)]
    fn run_node_inline(&mut self, level: Level<'_>, ns: &mut NodeStep<'_>) {
        let (np, kind, after) = (ns.np, ns.kind, ns.after);
        let dispatcher = std::mem::replace(&mut ns.dispatcher, Cow::Borrowed(&np.id));
        let source = ns.source.take();
        let extra = ns.extra.take();
        let result = std::mem::replace(&mut ns.result, NodeResult::Constant);
        self.chain = ns.chain.take();
        let result = match result {
            NodeResult::Refused(g) => return self.guard_stop(g, Some(dispatcher.into_owned())),
            counted => counted,
        };
        if let NodeResult::Session(..) = result {
            // A session counted its steps call by call: only the visit is left.
            self.count_visit(np);
            self.run.steps -= 1;
        } else {
            self.count_visit(np);
        }
        let mut usage = None;
        // A `set` node's constant writes, shared with its `step` event (`note_writes`).
        let mut constant = None;
        // A router's `$route` and `$message`, taken out of its output.
        let mut routed = None;
        let (writes, duration_us): (Cow<'_, Value>, u64) = match result {
            NodeResult::Refused(_) => return,
            NodeResult::InputInvalid(msg) => {
                return self.fail(
                    TerminationReason::NodeFailed,
                    msg,
                    Some(dispatcher.into_owned()),
                );
            }
            NodeResult::ChainPayloadInvalid(msg) => {
                return self.fail(
                    TerminationReason::InvalidChainPayload,
                    msg,
                    Some(dispatcher.into_owned()),
                );
            }
            NodeResult::Awaiting => {
                // Planning fills the result in before a step is ready; total all the same.
                let fault = Fault::Failed("was committed before its output arrived".into());
                return self.fault(&np.id, "node", fault, Some(dispatcher.into_owned()));
            }
            NodeResult::Ran(ran, d) => match self.retried(*ran, np, &dispatcher) {
                Err(fault) => {
                    return self.fault(&np.id, "node", fault, Some(dispatcher.into_owned()));
                }
                Ok(out) => {
                    // The cost was spent whether or not the writes pass their checks.
                    if let Some(u) = out.usage {
                        self.run.usage_total.add_all(&u);
                        usage = Some(u);
                    }
                    if matches!(after, After::Route) {
                        routed = Some((out.route, out.message));
                    }
                    (Cow::Owned(Value::Object(out.writes)), d)
                }
            },
            NodeResult::Session(ran, d, spent) => match self.retried(*ran, np, &dispatcher) {
                Err(fault) => {
                    return self.fault(&np.id, "node", fault, Some(dispatcher.into_owned()));
                }
                Ok(out) => {
                    // Counted in `usage_total` as each call was committed.
                    usage = spent;
                    if matches!(after, After::Route) {
                        routed = Some((out.route, out.message));
                    }
                    (Cow::Owned(Value::Object(out.writes)), d)
                }
            },
            // Constant writes are checked and applied by reference.
            // Bound, so `result` is moved on every arm: a variant that owns nothing,
            // forgotten rather than handed to an out-of-line drop (ADR 0064).
            c @ NodeResult::Constant => {
                std::mem::forget(c);
                match &np.run {
                    NodeRun::Set(m) => {
                        constant = Some(m);
                        (Cow::Borrowed(&**m), 0)
                    }
                    _ => (Cow::Owned(Value::Object(Map::new())), 0),
                }
            }
        };
        if let After::Route = after {
            // Off the common path (see `chains.rs`).
            let run = RouterRun {
                np,
                dispatcher: dispatcher.into_owned(),
                kind,
                source: source.map(Cow::into_owned),
                extra,
                duration_us,
                usage,
            };
            return self.commit_router(level, run, writes, routed);
        }
        // Only a router's output sets it, and a router's run was committed above.
        spent_none(routed);
        // A `set` node's constant at the root: checked when the plan was built (ADR 0064).
        let verdict = verdict_at(self.plan, level, np, &writes, constant.is_some());
        if let Err((reason, msg)) = verdict {
            let dispatcher = dispatcher.into_owned();
            return self.fail_after_run(reason, msg, dispatcher, (&np.id, duration_us), usage);
        }
        // All checks passed: apply the writes in one go.
        self.note_writes(&writes, constant);
        self.apply_writes(writes);
        let it = self.record(kind, &*dispatcher);
        it.set_source(source);
        it.set_target(&np.id);
        it.duration_us = duration_us;
        if let Some(u) = usage {
            attach_usage(it, u);
        }
        match after {
            // Committed by `commit_router` above.
            After::Route => {}
            After::Handoff(next) => {
                let chain = next_stage(self.chain.as_ref(), &np.id, ChainTrigger::Handoff);
                self.run.control = Control::Running(Pending::Handoff {
                    node: Arc::clone(&next.id),
                    dispatcher: dispatcher.into_owned(),
                    from: Arc::clone(&np.id),
                    chain,
                    owed: extra.map(|x| x.owed).unwrap_or_default(),
                });
            }
            // A routed chain that completes pays the routers' handoffs it owes first (a
            // node that is not a router has an `extra` only when something is owed).
            After::EndLevel(_) | After::Return if extra.is_some() => {
                self.pay_owed(
                    dispatcher.into_owned(),
                    extra.map(|x| x.owed).unwrap_or_default(),
                );
            }
            After::EndLevel(what) => {
                // Taken by the arm above when something is owed.
                spent_none(extra);
                let stop = StopLocal {
                    reason: Some(format!("{what} `{}`", np.id)),
                    ..StopLocal::default()
                };
                self.end_level(
                    level,
                    dispatcher.into_owned(),
                    stop,
                    TerminationReason::Terminal,
                );
            }
            After::Return => {
                // A loop's step: control is already back with its dispatcher (the same
                // shared id), so it is left as it is: the item names the id by address,
                // and a dispatcher the plan lent (a rule dispatch) is never counted
                // (ADR 0051, ADR 0061).
                spent_none(extra);
                let unchanged = matches!(
                    &self.run.control,
                    Control::Running(Pending::Decide { supervisor })
                        if Arc::ptr_eq(supervisor, &*dispatcher)
                );
                let it = self.record(TraceKind::Return, &*dispatcher);
                it.set_source(&np.id);
                if unchanged {
                    it.set_target(dispatcher);
                } else {
                    it.set_target(&*dispatcher);
                    self.run.control = Control::Running(Pending::Decide {
                        supervisor: dispatcher.into_owned(),
                    });
                }
            }
        }
    }

    /// Records what the node run whose trace item comes next wrote, when the run's events
    /// carry it (`RunState::record_values`); one branch otherwise. `shared` is the same
    /// value held shared (a `set` node's constant): the event shares it, not a copy.
    #[inline(always)]
    pub(crate) fn note_writes(&mut self, writes: &Value, shared: Option<&Arc<Value>>) {
        if self.run.changes.recording_values() {
            let index = self.run.trace.len();
            let writes = shared.map_or_else(|| Arc::new(writes.clone()), Arc::clone);
            self.run.changes.wrote(index, writes);
        }
    }

    /// Applies checked writes to the current level: each slice replaced whole; a constant
    /// already in place is not copied again.
    #[inline(always)]
    pub(crate) fn apply_writes(&mut self, writes: Cow<'_, Value>) {
        // The node's `step` event carries them (`note_writes`).
        let mut state = self.run.level_state_mut().node_output();
        match writes {
            Cow::Owned(Value::Object(w)) => {
                for (slice, value) in w {
                    state.insert(slice, value);
                }
            }
            Cow::Borrowed(Value::Object(w)) => {
                for (slice, value) in w {
                    // In place already (a loop's constant, every turn): compared in key
                    // order first, without hashing (see `contracts::lookup`).
                    if !state.get(slice).is_some_and(|v| same(v, value)) {
                        state.insert(slice.clone(), value.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// Checks a node's writes (an object of slices) before any is applied: each slice
    /// inside the node's `writes` and the current subgraph's boundary, the node's
    /// `output_schema`, and each slice's schema (see [`writes_verdict`]).
    #[inline(always)]
    pub(crate) fn check_writes(&self, level: Level<'_>, np: &NodePlan, writes: &Value) -> Verdict {
        writes_verdict(self.plan, level, np, writes)
    }

    /// Ends the run from any depth, committing open frames innermost first (`frames`
    /// holds their plans in that order).
    fn stop_global(&mut self, supervisor: Arc<str>, stop: StopGlobal, frames: &[&SubgraphPlan]) {
        for sg in frames {
            let Some(frame) = self.run.pop_frame() else {
                break;
            };
            commit(
                &mut self.run.level_state_mut(),
                &frame.state,
                &sg.contract.writes,
            );
            let it = self.record(TraceKind::Return, &frame.caller);
            it.set_source(frame.subgraph_id);
            it.set_target(frame.caller);
            it.termination_reason = Some(TerminationReason::StopGlobal);
        }
        self.finish(
            RunStatus::Completed,
            TerminationReason::StopGlobal,
            stop.reason,
            Some(supervisor),
        );
    }

    /// Pauses for an answer; the same supervisor decides again after `resume`.
    fn pause(&mut self, supervisor: Arc<str>, question: String) {
        let it = self.record(TraceKind::Pause, &supervisor);
        it.set_target("ask_clarification");
        it.set_reason(question.as_str());
        it.termination_reason = Some(TerminationReason::AwaitingInput);
        self.run.control = Control::AwaitingInput {
            question,
            supervisor,
        };
        self.plan.sync_system(self.run);
    }

    /// A guard stopped the run (status `stopped`).
    pub(crate) fn guard_stop(&mut self, g: GuardStop, supervisor: Option<Arc<str>>) {
        self.finish(RunStatus::Stopped, g.reason, Some(g.message), supervisor);
    }

    /// The run failed (status `failed`).
    pub(crate) fn fail(
        &mut self,
        reason: TerminationReason,
        message: String,
        supervisor: Option<Arc<str>>,
    ) {
        self.finish(RunStatus::Failed, reason, Some(message), supervisor);
    }

    /// Ends the run. On a stop or failure open frames are reported, not merged.
    pub(crate) fn finish(
        &mut self,
        status: RunStatus,
        reason: TerminationReason,
        message: Option<String>,
        supervisor: Option<Arc<str>>,
    ) {
        let kind = if reason.is_guard() {
            TraceKind::GuardStop
        } else {
            TraceKind::End
        };
        let it = self.record(kind, supervisor);
        it.set_target(status.to_string());
        it.set_reason(message.as_deref());
        it.termination_reason = Some(reason);
        self.run.control = Control::Ended {
            status,
            reason,
            message: (status != RunStatus::Completed)
                .then_some(message)
                .flatten(),
        };
        self.run.forget_decision();
        let open = self.run.stack.drain(..).map(Into::into);
        self.run.uncommitted.extend(open);
        // Every level has ended.
        self.run.kept.clear();
        self.plan.sync_system(self.run);
    }
}

/// Lets go of an `Option` known to be `None` where it is called, without the out-of-line
/// drop call that would find nothing to free (ADR 0064). Were it `Some`, its value would
/// leak, nothing worse (a debug build asserts it is not).
#[inline(always)]
fn spent_none<T>(empty: Option<T>) {
    debug_assert!(empty.is_none(), "an Option thought empty held a value");
    std::mem::forget(empty);
}

/// Records what a node run cost on its item (off the common path).
#[cold]
#[inline(never)]
pub(crate) fn attach_usage(item: &mut TraceItem, usage: Usage) {
    item.set_usage(Some(usage));
}
