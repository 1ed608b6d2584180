//! The progress of a team under way ([`Pending::Team`](super::Pending::Team)): plain
//! serializable data, so a run saved between any two team steps resumes the team where it
//! was (see `machine/team/` for how it runs, ADR 0021).

use std::sync::{Arc, LazyLock};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::trace::{Chain, TraceKind};
use crate::contracts::Team;

/// A team under way: which team node, how it was reached, and its progress. The whole of
/// [`Pending::Team`](super::Pending::Team).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamRun {
    /// The team node.
    pub node: Arc<str>,
    /// The supervisor control returns to afterwards.
    pub dispatcher: Arc<str>,
    /// How the team node was reached: `dispatch` or `handoff`.
    pub kind: TraceKind,
    /// The trace item's `source` (the dispatching supervisor, or the node that handed
    /// off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Arc<str>>,
    /// Where it stands in a chain, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Chain>,
    /// Routers whose own `handoff` is owed (see [`Pending::Handoff`](super::Pending)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owed: Vec<Arc<str>>,
    /// The current cycle (1 for the first).
    pub cycle: u32,
    /// Who takes the next step.
    pub next: TeamPhase,
    /// Every broadcast so far, in `seq` order. Shared: planning a step copies the team's
    /// progress, not its transcript (commit appends to the one copy left).
    pub transcript: Arc<Vec<Broadcast>>,
    /// The members, in declaration order.
    pub members: IndexMap<String, MemberProgress>,
    /// Turns the lead has taken.
    pub lead_turns: u32,
    /// How much of the transcript the lead has been given.
    pub lead_seen: usize,
    /// A broadcast overflowed: the lead's next turn is final.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_next: bool,
    /// An agent lead's session (its index in the run's sessions), kept across cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_session: Option<u32>,
}

/// Who takes a team's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TeamPhase {
    /// The active members, one turn each, at once.
    Members,
    /// The lead.
    Lead,
}

/// One member's standing in its team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberProgress {
    /// Whether it is still in the team, and if not why.
    pub status: MemberStatus,
    /// Turns it has taken.
    pub turns: u32,
    /// How much of the transcript it has been given.
    pub seen: usize,
    /// An agent member's session (its index in the run's sessions), kept across cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u32>,
}

/// A member's status, as the team slice reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    /// Still in the team.
    Active,
    /// Left with `$exit: true`.
    Exited,
    /// Left after an error, a time-out, a refused output or its turns used up.
    Failed,
    /// Still in the team when the lead answered: it takes no more turns.
    Cancelled,
}

impl MemberStatus {
    /// Its name in JSON: `active`, `exited`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberStatus::Active => "active",
            MemberStatus::Exited => "exited",
            MemberStatus::Failed => "failed",
            MemberStatus::Cancelled => "cancelled",
        }
    }
}

/// One message of a team's transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broadcast {
    /// Its position in the transcript (1 for the first); within a cycle members'
    /// broadcasts follow their declaration order.
    pub seq: u32,
    /// The cycle it was sent in (a lead's broadcast: the cycle its turn closed).
    pub cycle: u32,
    /// The member or lead that sent it (for a failure or an overflow: whom it is about).
    pub from: String,
    /// What it is.
    #[serde(rename = "type")]
    pub kind: BroadcastKind,
    /// The message: any JSON value for an update, an exit or the lead's; a sentence for a
    /// failure or an overflow.
    pub message: Value,
}

impl Broadcast {
    /// Its JSON form, `{"seq", "cycle", "from", "type", "message"}` (as serde writes it,
    /// built directly: an inbox builds one per entry).
    pub fn to_json(&self) -> Value {
        static KEYS: LazyLock<Map<String, Value>> =
            LazyLock::new(|| keyed(["seq", "cycle", "from", "type", "message"]));
        filled(
            &KEYS,
            [
                self.seq.into(),
                self.cycle.into(),
                self.from.as_str().into(),
                self.kind.as_str().into(),
                self.message.clone(),
            ],
        )
    }
}

/// The type of a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BroadcastKind {
    /// A member's message.
    Update,
    /// A member's last message (`$exit: true`).
    Exit,
    /// The engine's: a member failed and left.
    Failure,
    /// The engine's: a broadcast was too large and was dropped.
    Overflow,
    /// The lead's message, starting the next cycle.
    Lead,
}

impl BroadcastKind {
    /// Its name in JSON: `update`, `exit`, `failure`, `overflow` or `lead`.
    pub fn as_str(self) -> &'static str {
        match self {
            BroadcastKind::Update => "update",
            BroadcastKind::Exit => "exit",
            BroadcastKind::Failure => "failure",
            BroadcastKind::Overflow => "overflow",
            BroadcastKind::Lead => "lead",
        }
    }
}

impl TeamRun {
    /// A team starting its first cycle.
    /// `node` is the team node, reached for `dispatcher` as `kind` from `from`, at `chain`
    /// (if a chain stage), owing `owed` routers' handoffs.
    pub(crate) fn start(
        (node, dispatcher): (Arc<str>, Arc<str>),
        (kind, from, chain): (TraceKind, Option<Arc<str>>, Option<Chain>),
        owed: Vec<Arc<str>>,
        spec: &Team,
    ) -> Self {
        Self {
            node,
            dispatcher,
            kind,
            from,
            chain,
            owed,
            cycle: 1,
            next: TeamPhase::Members,
            transcript: Arc::default(),
            members: spec
                .members
                .iter()
                .map(|m| {
                    let p = MemberProgress {
                        status: MemberStatus::Active,
                        turns: 0,
                        seen: 0,
                        session: None,
                    };
                    (m.clone(), p)
                })
                .collect(),
            lead_turns: 0,
            lead_seen: 0,
            final_next: false,
            lead_session: None,
        }
    }

    /// Whether any member is still in the team.
    pub fn any_active(&self) -> bool {
        self.members
            .values()
            .any(|m| m.status == MemberStatus::Active)
    }

    /// Appends a broadcast of `kind` from `from` in the current cycle. A message larger
    /// than `max_bytes` (as JSON) is replaced by an `overflow` broadcast, and the lead's
    /// next turn becomes final; returns whether it overflowed.
    pub(crate) fn push(
        &mut self,
        max_bytes: u64,
        from: &str,
        kind: BroadcastKind,
        message: Value,
    ) -> bool {
        let bytes = json_len(&message);
        // The engine's own notices are never dropped.
        let over = bytes > max_bytes && kind != BroadcastKind::Failure;
        let (kind, message) = if over {
            self.final_next = true;
            let what = match kind {
                BroadcastKind::Lead => "lead",
                _ => "member",
            };
            let msg = format!(
                "the broadcast of {what} `{from}` ({bytes} bytes) was dropped: it exceeds \
                 max_broadcast_bytes ({max_bytes}); the lead's next turn is final"
            );
            (BroadcastKind::Overflow, Value::String(msg))
        } else {
            (kind, message)
        };
        let seq = u32::try_from(self.transcript.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        Arc::make_mut(&mut self.transcript).push(Broadcast {
            seq,
            cycle: self.cycle,
            from: from.to_string(),
            kind,
            message,
        });
        over
    }

    /// Member `id` fails and leaves, with a `failure` broadcast giving `reason`.
    pub(crate) fn fail_member(&mut self, max_bytes: u64, id: &str, reason: &str) {
        if let Some(m) = self.members.get_mut(id) {
            m.status = MemberStatus::Failed;
        }
        let msg = format!(
            "member `{id}` failed and is no longer in the team. Reason: {}",
            reason.trim_end()
        );
        self.push(max_bytes, id, BroadcastKind::Failure, Value::String(msg));
    }

    /// The broadcasts from `seen` on that `me` did not send, as JSON (the engine's
    /// `failure` and `overflow` notices about `me` are included).
    pub(crate) fn inbox(&self, seen: usize, me: &str) -> Value {
        let items = self.transcript.get(seen..).unwrap_or_default();
        Value::Array(
            items
                .iter()
                // The engine's notices about `me` (a failure, an overflow) are not its own.
                .filter(|b| {
                    b.from != me
                        || matches!(b.kind, BroadcastKind::Failure | BroadcastKind::Overflow)
                })
                .map(Broadcast::to_json)
                .collect(),
        )
    }

    /// The team slice's value once the team has ended: `{"transcript", "members",
    /// "lead_turns"}` (built directly, as serde would write it).
    pub(crate) fn summary(&self) -> Value {
        static KEYS: LazyLock<Map<String, Value>> = LazyLock::new(|| keyed(["status", "turns"]));
        let members: Map<String, Value> = self
            .members
            .iter()
            .map(|(id, m)| {
                let v = filled(&KEYS, [m.status.as_str().into(), m.turns.into()]);
                (id.clone(), v)
            })
            .collect();
        let transcript = self.transcript.iter().map(Broadcast::to_json).collect();
        let mut out = Map::with_capacity(3);
        out.insert("transcript".into(), Value::Array(transcript));
        out.insert("members".into(), Value::Object(members));
        out.insert("lead_turns".into(), self.lead_turns.into());
        Value::Object(out)
    }
}

/// A turn's team input, `{"me", "turn", "inbox", "final_turn"}` (built directly: the
/// inbox moves in instead of being serialized again).
pub(crate) fn turn_input(me: &str, turn: u32, inbox: Value, final_turn: bool) -> Value {
    static KEYS: LazyLock<Map<String, Value>> =
        LazyLock::new(|| keyed(["me", "turn", "inbox", "final_turn"]));
    filled(&KEYS, [me.into(), turn.into(), inbox, final_turn.into()])
}

/// An object with these keys (in this order), every value `null`: a template for
/// [`filled`].
fn keyed<const N: usize>(keys: [&str; N]) -> Map<String, Value> {
    keys.into_iter()
        .map(|k| (k.to_string(), Value::Null))
        .collect()
}

/// A copy of `template` with its values replaced, in order, by `values`. Cloning a map
/// copies its hash table as it is, so the keys are not hashed again as inserting them
/// would (the objects of team inputs and inboxes are built many times a cycle).
fn filled<const N: usize>(template: &Map<String, Value>, values: [Value; N]) -> Value {
    let mut m = template.clone();
    debug_assert_eq!(m.len(), N, "one value per key of the template");
    for (slot, v) in m.values_mut().zip(values) {
        *slot = v;
    }
    Value::Object(m)
}

/// The length in bytes of `value` serialized as compact JSON, counted without building it.
fn json_len(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self
                .0
                .saturating_add(u64::try_from(buf.len()).unwrap_or(u64::MAX));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing a JSON value to a counter cannot fail.
    let _ = serde_json::to_writer(&mut n, value);
    n.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The hand-built summary and turn input are what `json!` and serde build.
    #[test]
    fn summary_and_turn_input_match_serde() {
        let mut run = TeamRun {
            node: "t".into(),
            dispatcher: "s".into(),
            kind: TraceKind::Dispatch,
            from: None,
            chain: None,
            owed: Vec::new(),
            cycle: 2,
            next: TeamPhase::Lead,
            transcript: Arc::default(),
            members: IndexMap::new(),
            lead_turns: 3,
            lead_seen: 0,
            final_next: false,
            lead_session: None,
        };
        for (i, status) in [
            MemberStatus::Active,
            MemberStatus::Exited,
            MemberStatus::Failed,
            MemberStatus::Cancelled,
        ]
        .into_iter()
        .enumerate()
        {
            let p = MemberProgress {
                status,
                turns: 7,
                seen: 1,
                session: None,
            };
            run.members.insert(format!("m{i}"), p);
        }
        run.push(100, "m0", BroadcastKind::Update, json!({"a": 1}));
        run.fail_member(100, "m2", "it broke");
        let members: Map<String, Value> = run
            .members
            .iter()
            .map(|(id, m)| (id.clone(), json!({"status": m.status, "turns": m.turns})))
            .collect();
        let expected = json!({
            "transcript": run.transcript.iter().map(Broadcast::to_json).collect::<Vec<_>>(),
            "members": members,
            "lead_turns": run.lead_turns,
        });
        assert_eq!(run.summary(), expected);
        let inbox = run.inbox(0, "m1");
        assert_eq!(
            turn_input("m1", 4, inbox.clone(), true),
            json!({"me": "m1", "turn": 4u32, "inbox": inbox, "final_turn": true})
        );
    }

    /// The hand-built JSON form of a broadcast is exactly what serde writes.
    #[test]
    fn to_json_matches_serde() {
        for kind in [
            BroadcastKind::Update,
            BroadcastKind::Exit,
            BroadcastKind::Failure,
            BroadcastKind::Overflow,
            BroadcastKind::Lead,
        ] {
            let b = Broadcast {
                seq: 3,
                cycle: 2,
                from: "m".into(),
                kind,
                message: json!({"x": [1, "y"]}),
            };
            assert_eq!(b.to_json(), serde_json::to_value(&b).expect("plain data"));
        }
    }
}
