//! Step deltas: what one committed transition changed in a [`RunState`], computed by
//! comparing the run before and after it, and applied to the run before to give the run
//! after, exactly (`==`, key order included).
//!
//! A delta holds the slices that changed at every level (root state and open frames, key
//! by key, JSON values compared with `==`), the frames popped and pushed, the counters
//! that moved, the trace items appended, the new control (status, pending, question,
//! reason, message) and the uncommitted frames when they changed. A large slice no step
//! writes appears in no delta.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::map_delta::MapDelta;
use crate::model::ChatMessage;
use crate::runtime::{
    Frame, KeptChild, Pending, RunState, RunStatus, Session, State, TerminationReason, TraceItem,
    UncommittedFrame, Usage,
};

/// What a run looked like before a transition: the parts a [`StepDelta`] compares. Take it
/// with [`Before::of`] right before the step commits (or before a resume).
///
/// [`Before::of`] copies the run's slices (root and frames) to compare them afterwards;
/// the executor's own steps use a tracking `Before` instead, which copies no slice and
/// asks the run which slices its commit wrote.
#[derive(Debug, Clone)]
pub struct Before {
    state: State,
    /// The frames, with their child states when not tracking (empty when tracking).
    stack: Vec<Frame>,
    visits: IndexMap<String, u32>,
    entries: IndexMap<String, u32>,
    trace_len: usize,
    uncommitted: Vec<UncommittedFrame>,
    started_at_ms: u64,
    usage_total: Usage,
    kept: Vec<KeptChild>,
    /// The number of messages of each agent session.
    sessions: Vec<usize>,
    /// True when the slices are not copied: the run's change log says what was written.
    tracking: bool,
    /// In debug builds, the copying `Before` too, to check the log against a comparison.
    #[cfg(debug_assertions)]
    copied: Option<Box<Before>>,
}

impl Before {
    /// Records the parts of `run` a delta compares (the trace only by its length).
    pub fn of(run: &RunState) -> Self {
        Self {
            state: run.state.clone(),
            stack: run.stack.clone(),
            tracking: false,
            #[cfg(debug_assertions)]
            copied: None,
            ..Self::counters_of(run)
        }
    }

    /// Records the parts of `run` a delta compares, but for its slices: it starts the run's
    /// change log instead, and [`StepDelta::since`] reads the slices the transitions wrote
    /// from it. Costs nothing for slices no step writes.
    pub(crate) fn tracking(run: &mut RunState) -> Self {
        run.track_changes();
        Self {
            stack: run.stack.iter().map(frame_head).collect(),
            tracking: true,
            #[cfg(debug_assertions)]
            copied: Some(Box::new(Self::of(run))),
            ..Self::counters_of(run)
        }
    }

    /// Everything but the slices.
    fn counters_of(run: &RunState) -> Self {
        Self {
            state: State::new(),
            stack: Vec::new(),
            visits: run.visits.clone(),
            entries: run.entries.clone(),
            trace_len: run.trace.len(),
            uncommitted: run.uncommitted.clone(),
            started_at_ms: run.started_at_ms,
            usage_total: run.usage_total.clone(),
            kept: run.kept.clone(),
            sessions: run.sessions().iter().map(|s| s.messages.len()).collect(),
            tracking: false,
            #[cfg(debug_assertions)]
            copied: None,
        }
    }
}

/// A frame without its child state: what tells two frames are the same call.
fn frame_head(f: &Frame) -> Frame {
    Frame {
        subgraph_id: std::sync::Arc::clone(&f.subgraph_id),
        depth: f.depth,
        entry_step: f.entry_step,
        caller: std::sync::Arc::clone(&f.caller),
        state: State::new(),
        owed: None,
    }
}

/// A frame's change: its index in the stack and the slices that changed in its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameDelta {
    /// The frame's index (0 is the outermost).
    pub index: usize,
    /// Its state's change.
    pub state: MapDelta<Value>,
}

/// The new control of the run: the fields the run state serializes for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlDelta {
    /// The status after the transition.
    pub status: RunStatus,
    /// Why it ended or paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_reason: Option<TerminationReason>,
    /// The error or guard message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The question, when paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// What happens next (running), or who asked (paused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

/// The messages a transition added to one agent session (a session begun by the
/// transition comes with its head): only the new messages, never the conversation again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionDelta {
    /// The session's index in the run's sessions.
    pub index: usize,
    /// A session begun by the transition: its node, visit, model and first step (its
    /// messages are `messages`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<Session>,
    /// How many messages the session held before (they are kept).
    pub from: usize,
    /// The messages added.
    pub messages: Vec<ChatMessage>,
}

/// What one committed transition changed: the row a run store writes per step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDelta {
    /// The root state's change.
    #[serde(
        default = "MapDelta::empty",
        skip_serializing_if = "MapDelta::is_empty"
    )]
    pub root: MapDelta<Value>,
    /// Frames kept from before (the stack is cut to this length, then `pushed` appended).
    pub frames_kept: usize,
    /// Changes of kept frames.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<FrameDelta>,
    /// Frames pushed (whole: entering a subgraph copies its boundary slices).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pushed: Vec<Frame>,
    /// Steps taken after the transition.
    pub steps: u32,
    /// Node visit counts that changed.
    #[serde(
        default = "MapDelta::empty",
        skip_serializing_if = "MapDelta::is_empty"
    )]
    pub visits: MapDelta<u32>,
    /// Subgraph entry counts that changed.
    #[serde(
        default = "MapDelta::empty",
        skip_serializing_if = "MapDelta::is_empty"
    )]
    pub entries: MapDelta<u32>,
    /// The trace length the items are appended at.
    pub trace_from: usize,
    /// Trace items appended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<TraceItem>,
    /// As stored (format 8, ADR 0053): the trace items appended, this many, are kept only
    /// in the checkpoint's `step` events, not in `trace` (a load puts them back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_in_events: Option<usize>,
    /// The control after the transition.
    pub control: ControlDelta,
    /// The uncommitted frames, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncommitted: Option<Vec<UncommittedFrame>>,
    /// The run's (deadline) start, when it changed (a resume restarts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    /// The run's summed `$usage`, when a node reported some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_total: Option<Usage>,
    /// The kept children of `chat` subgraphs, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<Vec<KeptChild>>,
    /// The messages agent sessions gained (only the new ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionDelta>,
}

/// What the agent sessions gained between `before` and `after`: sessions only grow, and
/// new ones are appended.
fn session_deltas(before: &Before, after: &RunState) -> Vec<SessionDelta> {
    after
        .sessions()
        .iter()
        .enumerate()
        .filter_map(|(index, s)| {
            let from = before.sessions.get(index).copied();
            let kept = from.unwrap_or(0).min(s.messages.len());
            if from.is_some() && kept == s.messages.len() {
                return None;
            }
            Some(SessionDelta {
                index,
                head: from.is_none().then(|| Session {
                    messages: Vec::new(),
                    ..s.clone_head()
                }),
                from: kept,
                messages: s.messages[kept..].to_vec(),
            })
        })
        .collect()
}

/// How many of the frames before are still open after (the same calls, outermost first).
fn frames_kept(before: &Before, after: &RunState) -> usize {
    before
        .stack
        .iter()
        .zip(&after.stack)
        .take_while(|(a, b)| same_call(a, b))
        .count()
}

/// Frames are the same call when everything but their state matches.
fn same_call(a: &Frame, b: &Frame) -> bool {
    a.subgraph_id == b.subgraph_id
        && a.depth == b.depth
        && a.entry_step == b.entry_step
        && a.caller == b.caller
}

impl StepDelta {
    /// The change from `before` to `after`.
    pub fn between(before: &Before, after: &RunState) -> Self {
        assert!(
            !before.tracking,
            "a tracking Before is read with StepDelta::since, which takes the run's change log"
        );
        let frames_kept = frames_kept(before, after);
        let frames = before.stack[..frames_kept]
            .iter()
            .zip(&after.stack[..frames_kept])
            .enumerate()
            .filter_map(|(index, (a, b))| {
                let state = MapDelta::states(&a.state, &b.state);
                (!state.is_empty()).then_some(FrameDelta { index, state })
            })
            .collect();
        let root = MapDelta::states(&before.state, &after.state);
        Self::with_slices(before, after, root, frames_kept, frames, true)
    }

    /// The change from `before` to `after`, the slices read from `after`'s change log (when
    /// `before` is [`Before::tracking`]; otherwise as [`StepDelta::between`]). Ends the log.
    pub(crate) fn since(before: &Before, after: &mut RunState) -> Self {
        if !before.tracking {
            return Self::between(before, after);
        }
        let written = after.changes.take();
        let frames_kept = frames_kept(before, after);
        let on_level = |level: usize| {
            written
                .iter()
                .filter(move |(l, _)| *l == level)
                .map(|(_, k)| k.as_str())
        };
        let root = MapDelta::written(&after.state, on_level(0));
        let frames = after.stack[..frames_kept]
            .iter()
            .enumerate()
            .filter_map(|(index, f)| {
                let state = MapDelta::written(&f.state, on_level(index + 1));
                (!state.is_empty()).then_some(FrameDelta { index, state })
            })
            .collect();
        // The driver's delta (the only caller): its trace items are written by the
        // checkpoint's `step` events, straight from the run, and not with the delta
        // (format 8): counted, not copied (ADR 0056).
        let delta = Self::with_slices(before, after, root, frames_kept, frames, false);
        #[cfg(debug_assertions)]
        if let Some(copied) = &before.copied {
            delta.check_against(copied, after);
        }
        delta
    }

    /// Debug builds: the delta read from the change log leaves the slices exactly as the
    /// delta found by comparing does (a write the log missed would differ).
    #[cfg(debug_assertions)]
    fn check_against(&self, copied: &Before, after: &RunState) {
        let compared = Self::between(copied, after);
        assert_eq!(self.frames_kept, compared.frames_kept, "frames kept");
        let apply = |d: &Self| {
            let mut root = copied.state.clone();
            d.root.apply(&mut root);
            let mut frames: Vec<State> = copied.stack[..d.frames_kept]
                .iter()
                .map(|f| f.state.clone())
                .collect();
            for f in &d.frames {
                f.state.apply(&mut frames[f.index]);
            }
            let keys = |m: &State| m.keys().cloned().collect::<Vec<_>>();
            let order = (keys(&root), frames.iter().map(keys).collect::<Vec<_>>());
            (root, frames, order)
        };
        assert!(
            apply(self) == apply(&compared),
            "the change log missed a write: logged {:?}, compared {:?}",
            (&self.root, &self.frames),
            (&compared.root, &compared.frames)
        );
    }

    /// How many trace items it appends: those it carries and those only counted.
    pub(crate) fn trace_appended(&self) -> usize {
        self.trace.len() + self.trace_in_events.unwrap_or(0)
    }

    /// The delta with its slice changes given, the rest compared; the trace items
    /// appended copied into `trace`, or only counted in `trace_in_events` (as stored).
    fn with_slices(
        before: &Before,
        after: &RunState,
        root: MapDelta<Value>,
        frames_kept: usize,
        frames: Vec<FrameDelta>,
        copy_trace: bool,
    ) -> Self {
        let trace_from = before.trace_len.min(after.trace.len());
        let (status, termination_reason, message, question, pending) = after.control_parts();
        Self {
            root,
            frames_kept,
            frames,
            pushed: after.stack[frames_kept..].to_vec(),
            steps: after.steps,
            visits: MapDelta::counters(&before.visits, &after.visits),
            entries: MapDelta::counters(&before.entries, &after.entries),
            trace_from,
            trace: if copy_trace {
                after.trace.items_from(trace_from)
            } else {
                Vec::new()
            },
            trace_in_events: (!copy_trace).then(|| after.trace.len() - trace_from),
            control: ControlDelta {
                status,
                termination_reason,
                message: message.map(str::to_string),
                question: question.map(str::to_string),
                pending,
            },
            uncommitted: (before.uncommitted != after.uncommitted)
                .then(|| after.uncommitted.clone()),
            started_at_ms: (before.started_at_ms != after.started_at_ms)
                .then_some(after.started_at_ms),
            usage_total: (before.usage_total != after.usage_total)
                .then(|| after.usage_total.clone()),
            kept: (before.kept != after.kept).then(|| after.kept.clone()),
            sessions: session_deltas(before, after),
        }
    }

    /// Applies the delta to the run it was computed from, giving the run after it.
    /// Refuses (naming the mismatch) a run the delta does not fit: fewer frames or trace
    /// items than it keeps, or a control whose parts contradict each other.
    pub fn apply(&self, run: &mut RunState) -> Result<(), String> {
        if run.stack.len() < self.frames_kept {
            return Err(format!(
                "the delta keeps {} frames, the run has {}",
                self.frames_kept,
                run.stack.len()
            ));
        }
        if run.trace.len() < self.trace_from {
            return Err(format!(
                "the delta appends trace items at {}, the trace has {}",
                self.trace_from,
                run.trace.len()
            ));
        }
        let c = &self.control;
        let control = RunState::control_from_parts(
            c.status,
            c.termination_reason,
            c.message.clone(),
            c.question.clone(),
            c.pending.clone(),
        )?;
        run.forget_decision();
        self.root.apply(&mut run.state);
        run.stack.truncate(self.frames_kept);
        for f in &self.frames {
            let frame = run
                .stack
                .get_mut(f.index)
                .ok_or_else(|| format!("the delta changes frame {}, which is not kept", f.index))?;
            f.state.apply(&mut frame.state);
        }
        run.stack.extend(self.pushed.iter().cloned());
        run.steps = self.steps;
        self.visits.apply(&mut run.visits);
        self.entries.apply(&mut run.entries);
        run.trace.truncate(self.trace_from);
        run.trace.extend(self.trace.iter().cloned());
        run.control = control;
        if let Some(u) = &self.uncommitted {
            run.uncommitted.clone_from(u);
        }
        if let Some(t) = self.started_at_ms {
            run.started_at_ms = t;
        }
        if let Some(u) = &self.usage_total {
            run.usage_total.clone_from(u);
        }
        if let Some(k) = &self.kept {
            run.kept.clone_from(k);
        }
        for d in &self.sessions {
            run.apply_session_delta(d.index, d.head.as_ref(), d.from, &d.messages)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;
