//! Clarifying a finished child (spec 5.6): a `chat` subgraph's final child state is kept
//! at the level that called it; that level's supervisor may then decide `clarify`, and the
//! child resumes from its kept state with `{"question", "from"}` in its `clarification`
//! slice, its entrypoint deciding, and returns like a call.
//!
//! Kept children live in [`RunState::kept`], tagged with the depth of their calling
//! level: a return of a `chat` subgraph replaces the one kept for it there, and a level
//! that ends drops every child kept at it (the run's end drops them all).

use std::sync::Arc;

use serde_json::{Value, json};

use super::budgets::check_clarify;
use super::commit::Tx;
use super::planner::Planner;
use crate::contracts::CLARIFICATION_SLICE;
use crate::runtime::data::{
    Control, Frame, KeptChild, Pending, RunState, TerminationReason, TraceKind,
};
use crate::runtime::plan::{PolicyRun, SubgraphPlan};

impl<'e> Planner<'e> {
    /// The plan of subgraph `id` when the run's current level may clarify it: it is
    /// `chat` and has returned at this level. Otherwise why not, in words (the reason of
    /// the `clarify_unavailable` fallback).
    pub(crate) fn clarifiable(&self, run: &RunState, id: &str) -> Result<&'e SubgraphPlan, String> {
        let Some(sg) = self.plan.subgraphs.get(id) else {
            return Err(format!("clarify_unavailable: `{id}` names no subgraph"));
        };
        if !sg.contract.chat {
            return Err(format!(
                "clarify_unavailable: subgraph `{id}` is not `chat`, so nothing of it is kept"
            ));
        }
        if kept_at(run, run.depth(), id).is_none() {
            return Err(format!(
                "clarify_unavailable: subgraph `{id}` has not returned at this level"
            ));
        }
        Ok(sg)
    }
}

/// The index of the child of subgraph `id` kept at level `depth`.
fn kept_at(run: &RunState, depth: u32, id: &str) -> Option<usize> {
    run.kept
        .iter()
        .position(|k| k.depth == depth && &*k.subgraph_id == id)
}

impl Tx<'_> {
    /// Resumes the child of `sg` kept at the current level for `caller`'s follow-up: one
    /// step (not an entry), a `clarify` item, a frame holding the kept state with
    /// `{"question", "from": caller}` in its `clarification` slice, and the subgraph's
    /// entrypoint deciding (a policy agent continuing its last session with the
    /// question).
    pub(crate) fn clarify(&mut self, sg: &SubgraphPlan, caller: Arc<str>, question: String) {
        let id = &*sg.id;
        if let Err(g) = check_clarify(self.run, self.plan.graph.budgets(), id) {
            return self.guard_stop(g, Some(caller));
        }
        let Some(at) = kept_at(self.run, self.run.depth(), id) else {
            // Planning found it; nothing between planning and commit removes it.
            let msg = format!("subgraph `{id}` was to be clarified but is no longer kept");
            return self.fail(TerminationReason::NodeFailed, msg, Some(caller));
        };
        let kept = self.run.kept.remove(at);
        self.run.steps += 1;
        let it = self.record(TraceKind::Clarify, &caller);
        it.set_source(&caller);
        it.set_target(&sg.id);
        it.set_reason(question.as_str());
        let mut state = kept.state;
        let from_caller = format!("Clarification from {caller}: {question}");
        state.insert(
            CLARIFICATION_SLICE.to_string(),
            json!({"question": Value::String(question), "from": &*caller}),
        );
        self.run.push_frame(Frame {
            subgraph_id: Arc::clone(&sg.id),
            depth: self.run.depth() + 1,
            entry_step: self.run.steps,
            caller,
            state,
            owed: None,
        });
        self.run.control = Control::Running(match kept.session {
            // The entrypoint's policy agent goes on with its last session (brief 10.3).
            Some(session) => {
                let earlier = self.reopen_session(session, from_caller);
                Pending::Deciding {
                    supervisor: Arc::clone(&sg.entrypoint),
                    session,
                    earlier,
                }
            }
            None => Pending::Decide {
                supervisor: Arc::clone(&sg.entrypoint),
            },
        });
    }

    /// The level at `depth` ended: the children kept there (and deeper) are dropped.
    pub(crate) fn level_ended(&mut self, depth: u32) {
        if !self.run.kept.is_empty() {
            self.run.kept.retain(|k| k.depth < depth);
        }
    }

    /// A `chat` subgraph's frame returned: its final state is kept at the calling level,
    /// replacing what was kept for it there, with its entrypoint policy agent's last
    /// session.
    pub(crate) fn keep_child(&mut self, sg: &SubgraphPlan, frame: &Frame) {
        let depth = frame.depth.saturating_sub(1);
        let agent_entrypoint = self
            .plan
            .supervisors
            .get(&*sg.entrypoint)
            .is_some_and(|sp| matches!(sp.policy, PolicyRun::Agent(_)));
        let session = agent_entrypoint
            .then(|| {
                let at = self
                    .run
                    .sessions
                    .iter()
                    .rposition(|s| s.node == sg.entrypoint)?;
                u32::try_from(at).ok()
            })
            .flatten();
        let kept = KeptChild {
            depth,
            subgraph_id: Arc::clone(&frame.subgraph_id),
            state: frame.state.clone(),
            session,
        };
        match kept_at(self.run, depth, &frame.subgraph_id) {
            Some(at) => self.run.kept[at] = kept,
            None => self.run.kept.push(kept),
        }
    }
}
