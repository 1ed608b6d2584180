//! Committing a subgraph's level: entering it (the call, its input checked against
//! `input_schema`, a frame pushed) and ending it (at the root the run completes; in a
//! subgraph the output validated, the child's writes committed, the caller deciding
//! again).

use std::sync::Arc;

use serde_json::Value;

use super::budgets::check_call;
use super::commit::Tx;
use super::step::{Level, RoutedCall};
use crate::contracts::StopLocal;
use crate::runtime::data::{
    Control, Frame, Pending, RunStatus, TerminationReason, TraceKind, commit, pick,
};
use crate::runtime::plan::{SubgraphPlan, check};

impl Tx<'_> {
    /// Enters subgraph `sg` for `caller` (as a router's destination when `routed`).
    pub(crate) fn call(
        &mut self,
        sg: &SubgraphPlan,
        caller: Arc<str>,
        routed: Option<Box<RoutedCall>>,
    ) {
        let plan = self.plan;
        let (source, owed) = match routed {
            Some(r) => {
                self.chain = Some(r.owed.chain.clone());
                (r.router, (!r.owed.routers.is_empty()).then_some(r.owed))
            }
            None => (Arc::clone(&caller), None),
        };
        let id = &*sg.id;
        if let Err(g) = check_call(self.run, plan.graph.budgets(), id, sg.contract.max_reentry) {
            return self.guard_stop(g, Some(caller));
        }
        self.run.steps += 1;
        match self.run.entries.get_mut(id) {
            Some(n) => *n += 1,
            None => {
                self.run.entries.insert(id.to_string(), 1);
            }
        }
        let level = self.run.level_state();
        let input = pick(level, &sg.contract.reads);
        let mut child = input.clone();
        for (k, v) in pick(level, &sg.contract.writes) {
            child.entry(k).or_insert(v);
        }
        let it = self.record(TraceKind::Call, &caller);
        it.set_source(source);
        it.set_target(&sg.id);
        if let Some(schema) = &sg.input_schema
            && let Err(msg) = check(schema, &Value::Object(input))
        {
            let msg =
                format!("the input of subgraph `{id}` does not match its input_schema: {msg}");
            return self.fail(TerminationReason::SubgraphInputInvalid, msg, Some(caller));
        }
        self.run.push_frame(Frame {
            subgraph_id: Arc::clone(&sg.id),
            depth: self.run.depth() + 1,
            entry_step: self.run.steps,
            caller,
            state: child,
            owed,
        });
        self.run.control = Control::Running(Pending::Decide {
            supervisor: Arc::clone(&sg.entrypoint),
        });
    }

    /// Ends the current level: at the root the run completes with `root_reason`; in a
    /// subgraph the output is validated, the child's writes committed, the output mapped
    /// to `result_slice`, and the caller decides again (or the run ends on `should_end`).
    pub(crate) fn end_level(
        &mut self,
        level: Level<'_>,
        supervisor: Arc<str>,
        stop: StopLocal,
        root_reason: TerminationReason,
    ) {
        let plan = self.plan;
        let (Some((sg, caller)), Some(frame)) = (level.frame, self.run.stack.last()) else {
            return self.finish(
                RunStatus::Completed,
                root_reason,
                stop.reason,
                Some(supervisor),
            );
        };
        let id = &sg.contract.id;
        let output = stop
            .output
            .unwrap_or_else(|| Value::Object(pick(&frame.state, &sg.contract.writes)));
        if let Some(schema) = &sg.output_schema
            && let Err(msg) = check(schema, &output)
        {
            let msg =
                format!("the output of subgraph `{id}` does not match its output_schema: {msg}");
            return self.fail(
                TerminationReason::SubgraphOutputInvalid,
                msg,
                Some(supervisor),
            );
        }
        if let Some(slice) = &sg.contract.result_slice
            && let Some(schema) = plan.slice_schemas.get(slice)
            && let Err(msg) = check(schema, &output)
        {
            let msg = format!(
                "the output of subgraph `{id}` does not match the schema of its result slice `{slice}`: {msg}"
            );
            return self.fail(
                TerminationReason::SubgraphOutputInvalid,
                msg,
                Some(supervisor),
            );
        }
        let Some(frame) = self.run.pop_frame() else {
            return;
        };
        self.level_ended(frame.depth);
        if sg.contract.chat {
            self.keep_child(sg, &frame);
        }
        let mut parent = self.run.level_state_mut();
        commit(&mut parent, &frame.state, &sg.contract.writes);
        if let Some(slice) = &sg.contract.result_slice {
            parent.insert(slice.clone(), output);
        }
        let it = self.record(TraceKind::Return, &frame.caller);
        it.set_source(&frame.subgraph_id);
        it.set_target(&frame.caller);
        it.set_reason(stop.reason);
        it.termination_reason = Some(root_reason);
        if stop.should_end && caller.contract.honor_should_end {
            let why = format!(
                "subgraph `{}` asked to end the run (should_end)",
                frame.subgraph_id
            );
            return self.finish(
                RunStatus::Completed,
                TerminationReason::StopLocal,
                Some(why),
                Some(frame.caller),
            );
        }
        if let Some(owed) = frame.owed {
            // A routed subgraph returned: the handoffs its routers owe run first.
            self.chain = Some(owed.chain);
            return self.pay_owed(frame.caller, owed.routers);
        }
        self.run.control = Control::Running(Pending::Decide {
            supervisor: frame.caller,
        });
    }
}
