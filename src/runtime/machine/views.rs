//! The views of a run that nodes and policies read (the `system` slice built fresh, a
//! node's `reads`, a policy's level), and the `system` slice the root state keeps. Split
//! from `commit.rs`, which writes it at start, pause and end.

use serde_json::{Map, Value, json};

use crate::contracts::SYSTEM_SLICE;
use crate::runtime::data::{DECISION_TRACE, RunState, pick_with_room};
use crate::runtime::plan::Plan;

impl Plan {
    /// The `system` slice as nodes and policies read it: with `decision_trace` built fresh
    /// when the trace belongs in the state, holding the items the executor's
    /// [`TraceView`](crate::runtime::TraceView) shows (the recent ones by default).
    pub(crate) fn system_value(&self, run: &RunState) -> Value {
        let mut system = self.system_map(run);
        if self.trace_in_state {
            let items: Vec<_> = run
                .trace
                .iter_from(self.trace_view.first(run.trace.len()))
                .collect();
            system.insert(DECISION_TRACE.into(), json!(items));
        }
        Value::Object(system)
    }

    /// The `system` slice as the root state keeps it: `budgets`, `call_stack` and `steps`,
    /// never `decision_trace` (a projection of `run.trace`).
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
        system.insert("budgets".into(), json!(self.graph.budgets()));
        system.insert("call_stack".into(), Value::Array(stack));
        system.insert("steps".into(), json!(run.steps));
        system.shift_remove(DECISION_TRACE);
        system
    }

    /// Writes `system` into the root state (at start, pause and end), and records whether
    /// the trace is projected into it.
    pub(crate) fn sync_system(&self, run: &mut RunState) {
        run.trace_in_state = self.trace_in_state;
        let system = Value::Object(self.system_map(run));
        run.root_state_mut().insert(SYSTEM_SLICE.into(), system);
    }

    /// The read view of a node: its `reads` slices present at its level. `system` is
    /// built fresh from the run.
    pub(crate) fn view(&self, run: &RunState, reads: &[String]) -> Map<String, Value> {
        self.view_and(run, reads, 0)
    }

    /// The read view of a node, with room for `extra` more slices (a team turn adds its
    /// team input) so that adding them does not grow the map.
    pub(crate) fn view_and(
        &self,
        run: &RunState,
        reads: &[String],
        extra: usize,
    ) -> Map<String, Value> {
        let mut view = pick_with_room(run.level_state(), reads, extra);
        if reads.iter().any(|r| r == SYSTEM_SLICE) {
            view.insert(SYSTEM_SLICE.into(), self.system_value(run));
        }
        view
    }

    /// The state a policy sees: the current level's slices, with `system` fresh at the root.
    pub(crate) fn policy_view(&self, run: &RunState) -> Map<String, Value> {
        let mut view = run.level_state().clone();
        if run.stack.is_empty() && view.contains_key(SYSTEM_SLICE) {
            view.insert(SYSTEM_SLICE.into(), self.system_value(run));
        }
        view
    }
}
