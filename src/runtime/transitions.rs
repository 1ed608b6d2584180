//! What decisions lead to: running a node, entering and leaving subgraphs, pausing and
//! ending the run.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::budgets::{GuardStop, check_call, check_node};
use super::builder::{NodePlan, NodeRun, check};
use super::callstack::{Frame, commit, pick, put};
use super::executor::Executor;
use super::guarded::{Fault, call_guarded, exec_program};
use super::handlers::NodeInput;
use super::run_state::{DECISION_TRACE, Pending, RunState};
use super::status::{RunStatus, TerminationReason};
use super::trace::TraceKind;
use crate::contracts::condition::json_kind;
use crate::contracts::{SYSTEM_SLICE, StopGlobal, StopLocal};

impl Executor {
    /// Runs node `id` (dispatched by, or handed off under, `dispatcher`).
    pub(super) async fn run_node(
        &self,
        run: &mut RunState,
        id: &str,
        dispatcher: Arc<str>,
        kind: TraceKind,
        source: Option<Arc<str>>,
    ) {
        let plan = &*self.plan;
        let budgets = plan.graph.budgets();
        let Some(np) = plan.nodes.get(id) else {
            let msg = format!("unknown node `{id}`");
            return self.fail(run, TerminationReason::NodeFailed, msg, Some(dispatcher));
        };
        let contract = np.contract(&plan.graph);
        if let Err(g) = check_node(run, budgets, id, contract.max_visits) {
            return self.guard_stop(run, g, Some(dispatcher));
        }
        run.steps += 1;
        match run.visits.get_mut(id) {
            Some(n) => *n += 1,
            None => {
                run.visits.insert(id.to_string(), 1);
            }
        }
        let t0 = match np.run {
            NodeRun::Nothing | NodeRun::Set(_) => None,
            _ => self.timer(),
        };
        let needs_view = !matches!(np.run, NodeRun::Nothing | NodeRun::Set(_));
        let view =
            (needs_view || np.input_schema.is_some()).then(|| self.view(run, &contract.reads));
        if let (Some(schema), Some(view)) = (&np.input_schema, &view) {
            let input = Value::Object(view.clone());
            if let Err(msg) = check(schema, &input) {
                let msg =
                    format!("the input of node `{id}` does not match its input_schema: {msg}");
                return self.fail(run, TerminationReason::NodeFailed, msg, Some(dispatcher));
            }
        }
        // Constant writes are checked and applied by reference; computed ones are moved.
        let writes: Cow<'_, Value> = match &np.run {
            NodeRun::Nothing => Cow::Owned(Value::Object(Map::new())),
            NodeRun::Set(m) => Cow::Borrowed(m),
            // Boxed so the common `set` step keeps a small future.
            NodeRun::Handler(_) | NodeRun::Exec(_) => {
                match Box::pin(self.call_node(run, id, np, view.unwrap_or_default())).await {
                    Ok(w) => Cow::Owned(Value::Object(w)),
                    Err(f) => return self.fault(run, id, "node", f),
                }
            }
        };
        if let Err((reason, msg)) = self.check_writes(run, np, &writes) {
            return self.fail(run, reason, msg, Some(dispatcher));
        }
        // All checks passed: apply the writes in one go.
        if let Value::Object(level) = run.level_state_mut() {
            match writes {
                Cow::Owned(Value::Object(w)) => {
                    for (slice, value) in w {
                        level.insert(slice, value);
                    }
                }
                Cow::Borrowed(Value::Object(w)) => {
                    for (slice, value) in w {
                        // A constant already in place is not copied again.
                        if level.get(slice) != Some(value) {
                            level.insert(slice.clone(), value.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        let mut item = self.item(run, kind, Some(Arc::clone(&dispatcher)));
        item.source = source;
        item.target = Some(Arc::clone(&np.id));
        item.duration_us = Self::elapsed(t0);
        run.trace.push(item);

        let exitpoint = run
            .stack
            .last()
            .and_then(|f| plan.subgraphs.get(&*f.subgraph_id))
            .is_some_and(|s| s.contract.exitpoints.iter().any(|e| e == id));
        if let Some(next) = &contract.handoff {
            let node = match plan.nodes.get(next) {
                Some(n) => Arc::clone(&n.id),
                None => Arc::from(next.as_str()),
            };
            run.pending = Pending::Handoff { node, dispatcher };
        } else if contract.terminal || exitpoint {
            let what = if contract.terminal {
                "terminal node"
            } else {
                "exitpoint"
            };
            let stop = StopLocal {
                reason: Some(format!("{what} `{id}`")),
                ..StopLocal::default()
            };
            self.end_level(run, dispatcher, stop, TerminationReason::Terminal);
        } else {
            let mut item = self.item(run, TraceKind::Return, Some(Arc::clone(&dispatcher)));
            item.source = Some(Arc::clone(&np.id));
            item.target = Some(Arc::clone(&dispatcher));
            run.trace.push(item);
            run.pending = Pending::Decide {
                supervisor: dispatcher,
            };
        }
    }

    /// Checks a node's writes (an object of slices) before any is applied: each slice
    /// inside the node's `writes` and the current subgraph's boundary, the node's
    /// `output_schema`, and each slice's schema.
    fn check_writes(
        &self,
        run: &RunState,
        np: &NodePlan,
        writes: &Value,
    ) -> Result<(), (TerminationReason, String)> {
        let plan = &*self.plan;
        let (id, contract) = (&np.id, np.contract(&plan.graph));
        let Value::Object(w) = writes else {
            return Ok(());
        };
        let boundary = run
            .stack
            .last()
            .and_then(|f| plan.subgraphs.get(&*f.subgraph_id))
            .map(|s| &s.contract.writes);
        for slice in w.keys() {
            let inside = slice != SYSTEM_SLICE
                && contract.writes.iter().any(|x| x == slice)
                && boundary.is_none_or(|b| b.iter().any(|x| x == slice));
            if !inside {
                let mut msg = format!(
                    "node `{id}` wrote slice `{slice}` outside its writes [{}]",
                    contract.writes.join(", ")
                );
                if let (Some(b), Some(g)) = (boundary, run.current_subgraph()) {
                    msg.push_str(&format!(
                        " or the boundary of subgraph `{g}` [{}]",
                        b.join(", ")
                    ));
                }
                return Err((TerminationReason::WriteBoundaryViolation, msg));
            }
        }
        if let Some(schema) = &np.output_schema
            && let Err(msg) = check(schema, writes)
        {
            let msg = format!("the output of node `{id}` does not match its output_schema: {msg}");
            return Err((TerminationReason::NodeFailed, msg));
        }
        for (slice, value) in w {
            if let Some(schema) = plan.slice_schemas.get(slice)
                && let Err(msg) = check(schema, value)
            {
                let msg = format!(
                    "node `{id}` wrote slice `{slice}` that does not match its schema: {msg}"
                );
                return Err((TerminationReason::NodeFailed, msg));
            }
        }
        Ok(())
    }

    /// Calls a handler or program node with its view.
    async fn call_node(
        &self,
        run: &RunState,
        id: &str,
        np: &NodePlan,
        view: Map<String, Value>,
    ) -> Result<Map<String, Value>, Fault> {
        let plan = &*self.plan;
        match &np.run {
            NodeRun::Handler(h) => {
                let input = NodeInput {
                    node: id.to_string(),
                    view,
                    depth: run.depth(),
                    subgraph: run.current_subgraph().map(str::to_string),
                    step: run.steps - 1,
                };
                let limit = self.call_limit(run, None);
                call_guarded(|| h.0.call(input), limit, &self.cancel).await
            }
            NodeRun::Exec(spec) => {
                let input = json!({"node": id, "input": view});
                let limit = self.call_limit(run, spec.timeout_ms);
                match exec_program(spec, &plan.base_dir, &input, limit, &self.cancel).await? {
                    Value::Object(m) => Ok(m),
                    other => Err(Fault::Failed(format!(
                        "printed {} instead of an object of slice writes",
                        json_kind(&other)
                    ))),
                }
            }
            NodeRun::Nothing | NodeRun::Set(_) => Ok(Map::new()),
        }
    }

    /// The read view of a node: its `reads` slices present at its level. `system` is
    /// built fresh from the run.
    fn view(&self, run: &RunState, reads: &[String]) -> Map<String, Value> {
        let mut view = pick(run.level_state(), reads);
        if reads.iter().any(|r| r == SYSTEM_SLICE) {
            view.insert(SYSTEM_SLICE.into(), self.system_value(run));
        }
        view
    }

    /// Enters subgraph `id` for `caller`.
    pub(super) fn call(&self, run: &mut RunState, id: &str, caller: Arc<str>) {
        let plan = &*self.plan;
        let Some(sp) = plan.subgraphs.get(id) else {
            let msg = format!("unknown subgraph `{id}`");
            return self.fail(run, TerminationReason::NodeFailed, msg, Some(caller));
        };
        if let Err(g) = check_call(run, plan.graph.budgets(), id, sp.contract.max_reentry) {
            return self.guard_stop(run, g, Some(caller));
        }
        run.steps += 1;
        match run.entries.get_mut(id) {
            Some(n) => *n += 1,
            None => {
                run.entries.insert(id.to_string(), 1);
            }
        }
        let level = run.level_state();
        let input = Value::Object(pick(level, &sp.contract.reads));
        let mut child = pick(level, &sp.contract.reads);
        for (k, v) in pick(level, &sp.contract.writes) {
            child.entry(k).or_insert(v);
        }
        let mut item = self.item(run, TraceKind::Call, Some(Arc::clone(&caller)));
        item.source = Some(Arc::clone(&caller));
        item.target = Some(Arc::clone(&sp.id));
        run.trace.push(item);
        if let Some(schema) = &sp.input_schema
            && let Err(msg) = check(schema, &input)
        {
            let msg =
                format!("the input of subgraph `{id}` does not match its input_schema: {msg}");
            return self.fail(
                run,
                TerminationReason::SubgraphInputInvalid,
                msg,
                Some(caller),
            );
        }
        let mut locals = Map::new();
        locals.insert("input".into(), input);
        run.stack.push(Frame {
            subgraph_id: Arc::clone(&sp.id),
            depth: run.depth() + 1,
            entry_step: run.steps,
            caller,
            locals,
            state: Value::Object(child),
        });
        run.pending = Pending::Decide {
            supervisor: Arc::clone(&sp.entrypoint),
        };
    }

    /// Ends the current level: at the root the run completes with `root_reason`; in a
    /// subgraph the output is validated, the child's writes committed, the output mapped
    /// to `result_slice`, and the caller decides again (or the run ends on `should_end`).
    pub(super) fn end_level(
        &self,
        run: &mut RunState,
        supervisor: Arc<str>,
        stop: StopLocal,
        root_reason: TerminationReason,
    ) {
        let plan = &*self.plan;
        let Some(frame) = run.stack.last() else {
            return self.finish(
                run,
                RunStatus::Completed,
                root_reason,
                stop.reason,
                Some(supervisor),
            );
        };
        let Some(sp) = plan.subgraphs.get(&*frame.subgraph_id) else {
            let msg = format!("unknown subgraph `{}`", frame.subgraph_id);
            return self.fail(run, TerminationReason::NodeFailed, msg, Some(supervisor));
        };
        let id = &sp.contract.id;
        let output = stop
            .output
            .unwrap_or_else(|| Value::Object(pick(&frame.state, &sp.contract.writes)));
        if let Some(schema) = &sp.output_schema
            && let Err(msg) = check(schema, &output)
        {
            let msg =
                format!("the output of subgraph `{id}` does not match its output_schema: {msg}");
            return self.fail(
                run,
                TerminationReason::SubgraphOutputInvalid,
                msg,
                Some(supervisor),
            );
        }
        if let Some(slice) = &sp.contract.result_slice
            && let Some(schema) = plan.slice_schemas.get(slice)
            && let Err(msg) = check(schema, &output)
        {
            let msg = format!(
                "the output of subgraph `{id}` does not match the schema of its result slice `{slice}`: {msg}"
            );
            return self.fail(
                run,
                TerminationReason::SubgraphOutputInvalid,
                msg,
                Some(supervisor),
            );
        }
        let frame = run.stack.pop().expect("checked above: a frame is open");
        let parent = run.level_state_mut();
        commit(parent, &frame.state, &sp.contract.writes);
        if let Some(slice) = &sp.contract.result_slice {
            put(parent, slice, output);
        }
        let mut item = self.item(run, TraceKind::Return, Some(Arc::clone(&frame.caller)));
        item.source = Some(Arc::clone(&frame.subgraph_id));
        item.target = Some(Arc::clone(&frame.caller));
        item.reason = stop.reason.map(Into::into);
        item.termination_reason = Some(root_reason);
        run.trace.push(item);
        let honor = plan
            .supervisors
            .get(&*frame.caller)
            .is_none_or(|s| s.contract.honor_should_end);
        if stop.should_end && honor {
            let why = format!(
                "subgraph `{}` asked to end the run (should_end)",
                frame.subgraph_id
            );
            return self.finish(
                run,
                RunStatus::Completed,
                TerminationReason::StopLocal,
                Some(why),
                Some(frame.caller),
            );
        }
        run.pending = Pending::Decide {
            supervisor: frame.caller,
        };
    }

    /// Ends the run from any depth, committing open frames innermost first.
    pub(super) fn stop_global(&self, run: &mut RunState, supervisor: Arc<str>, stop: StopGlobal) {
        let plan = &*self.plan;
        while let Some(frame) = run.stack.pop() {
            if let Some(sp) = plan.subgraphs.get(&*frame.subgraph_id) {
                commit(run.level_state_mut(), &frame.state, &sp.contract.writes);
            }
            let mut item = self.item(run, TraceKind::Return, Some(Arc::clone(&frame.caller)));
            item.source = Some(frame.subgraph_id);
            item.target = Some(frame.caller);
            item.termination_reason = Some(TerminationReason::StopGlobal);
            run.trace.push(item);
        }
        self.finish(
            run,
            RunStatus::Completed,
            TerminationReason::StopGlobal,
            stop.reason,
            Some(supervisor),
        );
    }

    /// Pauses for an answer; the same supervisor decides again after `resume`.
    pub(super) fn pause(&self, run: &mut RunState, supervisor: Arc<str>, question: String) {
        let mut item = self.item(run, TraceKind::Pause, Some(Arc::clone(&supervisor)));
        item.target = Some("ask_clarification".into());
        item.reason = Some(question.as_str().into());
        item.termination_reason = Some(TerminationReason::AwaitingInput);
        run.trace.push(item);
        run.status = RunStatus::AwaitingInput;
        run.termination_reason = Some(TerminationReason::AwaitingInput);
        run.question = Some(question);
        run.pending = Pending::Decide { supervisor };
        self.sync_system(run);
    }

    /// Maps a handler fault to the run's end.
    pub(super) fn fault(&self, run: &mut RunState, who: &str, what: &str, fault: Fault) {
        let sup = self.current_supervisor(run);
        match fault {
            Fault::Failed(m) => {
                let msg = format!("{what} `{who}` failed: {m}");
                self.fail(run, TerminationReason::NodeFailed, msg, sup);
            }
            Fault::Timeout(m) => {
                let g = GuardStop {
                    reason: TerminationReason::Timeout,
                    message: format!("{what} `{who}` {m}"),
                };
                self.guard_stop(run, g, sup);
            }
            Fault::Cancelled => {
                let g = GuardStop {
                    reason: TerminationReason::Cancelled,
                    message: format!("the run was cancelled while {what} `{who}` ran"),
                };
                self.guard_stop(run, g, sup);
            }
        }
    }

    fn current_supervisor(&self, run: &RunState) -> Option<Arc<str>> {
        run.trace.items.last().and_then(|i| i.supervisor.clone())
    }

    /// A guard stopped the run (status `stopped`).
    pub(super) fn guard_stop(
        &self,
        run: &mut RunState,
        g: GuardStop,
        supervisor: Option<Arc<str>>,
    ) {
        self.finish(
            run,
            RunStatus::Stopped,
            g.reason,
            Some(g.message),
            supervisor,
        );
    }

    /// The run failed (status `failed`).
    pub(super) fn fail(
        &self,
        run: &mut RunState,
        reason: TerminationReason,
        message: String,
        supervisor: Option<Arc<str>>,
    ) {
        self.finish(run, RunStatus::Failed, reason, Some(message), supervisor);
    }

    /// Ends the run. On a stop or failure open frames are reported, not merged.
    pub(super) fn finish(
        &self,
        run: &mut RunState,
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
        let mut item = self.item(run, kind, supervisor);
        item.target = Some(status.to_string().into());
        item.reason = message.as_deref().map(Into::into);
        item.termination_reason = Some(reason);
        run.trace.push(item);
        run.status = status;
        run.termination_reason = Some(reason);
        if status != RunStatus::Completed {
            run.message = message;
        }
        run.pending = Pending::Nothing;
        run.uncommitted.extend(run.stack.drain(..).map(Into::into));
        self.sync_system(run);
    }

    /// The `system` slice as nodes and policies read it: with `decision_trace` built fresh
    /// when the trace belongs in the state.
    pub(super) fn system_value(&self, run: &RunState) -> Value {
        let mut system = self.system_map(run);
        if self.plan.trace_in_state {
            system.insert(DECISION_TRACE.into(), json!(run.trace));
        }
        Value::Object(system)
    }

    /// The `system` slice as the root state keeps it: `budgets`, `call_stack` and `steps`,
    /// never `decision_trace` (a projection of `run.trace`, see `RunState::state`).
    fn system_map(&self, run: &RunState) -> Map<String, Value> {
        let stack: Vec<Value> = run
            .stack
            .iter()
            .map(|f| json!({"subgraph_id": f.subgraph_id, "depth": f.depth, "entry_step": f.entry_step, "caller": f.caller}))
            .collect();
        let mut system = match run.state.get(SYSTEM_SLICE) {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        system.insert("budgets".into(), json!(self.plan.graph.budgets()));
        system.insert("call_stack".into(), Value::Array(stack));
        system.insert("steps".into(), json!(run.steps));
        system.shift_remove(DECISION_TRACE);
        system
    }

    /// Writes `system` into the root state (at start, pause and end), and records whether
    /// the trace is projected into it when the run is serialized.
    pub(super) fn sync_system(&self, run: &mut RunState) {
        run.trace_in_state = self.plan.trace_in_state;
        let system = Value::Object(self.system_map(run));
        put(&mut run.state, SYSTEM_SLICE, system);
    }
}
