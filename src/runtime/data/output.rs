//! The node output envelope: what a node's handler returns or its program prints.
//!
//! A node's output is one JSON object. Its keys are the slices it writes, plus optional
//! reserved keys beginning with `$`. This module is the one place the envelope is read:
//! [`accept_as`] takes the raw output apart into the slice writes and the parts the runtime
//! understands, and refuses what it does not.
//!
//! | key | who may send it | today |
//! | --- | --- | --- |
//! | `$usage` | any node | kept: on the node's trace item and summed per run |
//! | `$route`, `$message` | router nodes | kept for the router's commit (see `machine/chains.rs`); refused from other nodes |
//! | `$broadcast`, `$exit` | team members | kept for the team's commit (see `machine/team/`) |
//! | `$broadcast`, `$final` | a team's lead | kept for the team's commit |
//! | any other `$` key | nobody | refused |
//!
//! A refused output fails the step with `invalid_output` and applies nothing.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::slices::Writes;
use crate::contracts::condition::json_kind;

/// The reserved key a node reports its cost under.
pub const USAGE_KEY: &str = "$usage";

/// The usage name of a node's input tokens (counted by `max_tokens`).
pub const INPUT_TOKENS: &str = "input_tokens";

/// The usage name of a node's output tokens (counted by `max_tokens`).
pub const OUTPUT_TOKENS: &str = "output_tokens";

/// The usage name of what a node's step cost in US dollars (counted by `max_cost_usd`).
pub const COST_USD: &str = "cost_usd";

/// The usage name of a node run's wall time in milliseconds: measured by the engine (from
/// the trace item's `duration_us`), never sent by a node.
pub const WALL_MS: &str = "wall_ms";

/// The reserved key a router names its destination under.
pub const ROUTE_KEY: &str = "$route";

/// The reserved key a router sends a note for its destination under.
pub const MESSAGE_KEY: &str = "$message";

/// The reserved key a team member or lead sends a message to the team under.
pub const BROADCAST_KEY: &str = "$broadcast";

/// The reserved key a team member leaves the team with (`true`).
pub const EXIT_KEY: &str = "$exit";

/// The reserved key a team's lead gives the team's answer with (`true`).
pub const FINAL_KEY: &str = "$final";

/// Which role a node call plays: it decides which reserved keys its output may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// An ordinary node: `$usage` only.
    Plain,
    /// A router: `$route` and `$message` too.
    Router,
    /// A team member's turn: `$broadcast` and `$exit` too.
    Member,
    /// A team lead's turn: `$broadcast` and `$final` too.
    Lead,
}

impl Role {
    /// Whether this role may send `key`.
    fn may_send(self, key: &str) -> bool {
        match self {
            Role::Plain => false,
            Role::Router => key == ROUTE_KEY || key == MESSAGE_KEY,
            Role::Member => key == BROADCAST_KEY || key == EXIT_KEY,
            Role::Lead => key == BROADCAST_KEY || key == FINAL_KEY,
        }
    }

    /// The reserved keys this role may send, for messages.
    fn allowed(self) -> &'static str {
        match self {
            Role::Plain => "`$usage`",
            Role::Router => "`$usage`, `$route` and `$message`",
            Role::Member => "`$usage`, `$broadcast` and `$exit`",
            Role::Lead => "`$usage`, `$broadcast` and `$final`",
        }
    }
}

/// What a step cost: name to amount (`input_tokens`, `output_tokens`, `cost_usd`, or
/// any other name), each a non-negative JSON number. Integers stay integers when summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Usage(IndexMap<String, Number>);

impl Usage {
    /// No usage.
    pub fn new() -> Self {
        Self::default()
    }

    /// This usage with `amount` added to `name` (see [`Usage::add`]). Integers convert
    /// directly; a fraction is `Number::from_f64(0.25)`.
    pub fn with(mut self, name: impl Into<String>, amount: impl Into<Number>) -> Self {
        self.add(name, amount.into());
        self
    }

    /// Adds `amount` to `name`: integers add as integers (falling back to floating point
    /// past `u64::MAX`), anything else as `f64`.
    pub fn add(&mut self, name: impl Into<String>, amount: Number) {
        let name = name.into();
        let sum = match self.0.get(&name) {
            None => amount,
            Some(have) => add_numbers(have, &amount),
        };
        self.0.insert(name, sum);
    }

    /// Adds every amount of `other`.
    pub fn add_all(&mut self, other: &Usage) {
        for (name, amount) in &other.0 {
            match self.0.get_mut(name) {
                Some(have) => *have = add_numbers(have, amount),
                None => {
                    self.0.insert(name.clone(), amount.clone());
                }
            }
        }
    }

    /// The amount recorded under `name`.
    pub fn get(&self, name: &str) -> Option<&Number> {
        self.0.get(name)
    }

    /// The amounts, in the order their names first appeared.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Number)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// This usage without `name`.
    pub fn without(mut self, name: &str) -> Self {
        self.0.shift_remove(name);
        self
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Reads a `$usage` value: an object of `name: number`, every number finite and not
    /// negative. The error says what is wrong, in words.
    pub fn from_value(value: Value) -> Result<Self, String> {
        let Value::Object(map) = value else {
            return Err(format!(
                "must be an object of `name: number`, not {}",
                json_kind(&value)
            ));
        };
        let mut usage = IndexMap::with_capacity(map.len());
        for (name, amount) in map {
            match amount {
                Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0) => {
                    usage.insert(name, n);
                }
                Value::Number(n) => {
                    return Err(format!("`{name}` is {n}; an amount cannot be negative"));
                }
                other => {
                    return Err(format!(
                        "`{name}` must be a number, not {}",
                        json_kind(&other)
                    ));
                }
            }
        }
        Ok(Self(usage))
    }
}

impl FromIterator<(String, Number)> for Usage {
    fn from_iter<I: IntoIterator<Item = (String, Number)>>(iter: I) -> Self {
        let mut usage = Usage::new();
        for (name, amount) in iter {
            usage.add(name, amount);
        }
        usage
    }
}

/// `a + b`: as `u64` when both are and the sum fits, else as `f64` (capped at
/// `f64::MAX`, so the sum stays a JSON number).
fn add_numbers(a: &Number, b: &Number) -> Number {
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64())
        && let Some(s) = x.checked_add(y)
    {
        return Number::from(s);
    }
    let s = a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0);
    Number::from_f64(s.min(f64::MAX)).unwrap_or_else(|| Number::from(0u64))
}

/// What a node returns: its slice writes and, optionally, what the step cost and (routers)
/// where to go next.
///
/// A Rust handler may return a `NodeOutput` or a plain [`Writes`] map (converted with
/// `From`). Reserved `$` keys left in `writes` are read the same way as in a program's
/// output (a `$usage` entry becomes [`NodeOutput::usage`]), so both ways of saying it are
/// accepted, but not both at once.
///
/// ```
/// use pactgraph::runtime::{NodeOutput, Usage};
/// use serde_json::{Map, json};
///
/// let mut writes = Map::new();
/// writes.insert("answer".into(), json!("hi"));
/// let out = NodeOutput::new(writes).with_usage(Usage::new().with("output_tokens", 12));
/// assert_eq!(out.usage.as_ref().and_then(|u| u.get("output_tokens")), Some(&12.into()));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct NodeOutput {
    /// Slice name to its new value (each slice replaced whole).
    pub writes: Writes,
    /// What the step cost (`$usage`).
    pub usage: Option<Usage>,
    /// Routers: the `$route` sent, as sent (`None` when absent, `Some(Value::Null)` for
    /// `$route: null`). The runtime checks it against the router's destinations.
    pub route: Option<Value>,
    /// Routers: the `$message` sent, as sent (a string is expected).
    pub message: Option<Value>,
    /// Team members and leads: the `$broadcast` sent, as sent (any JSON value).
    pub broadcast: Option<Value>,
    /// Team members: `$exit: true`, the member leaves the team after this turn.
    pub exit: bool,
    /// Team leads: `$final: true`, the writes are the team's answer.
    pub is_final: bool,
}

impl NodeOutput {
    /// An output of these writes, with no usage and no route.
    pub fn new(writes: Writes) -> Self {
        Self {
            writes,
            usage: None,
            route: None,
            message: None,
            broadcast: None,
            exit: false,
            is_final: false,
        }
    }

    /// This output broadcasting `message` to the team (`$broadcast`; team members and
    /// leads only).
    pub fn with_broadcast(mut self, message: impl Into<Value>) -> Self {
        self.broadcast = Some(message.into());
        self
    }

    /// This output leaving the team (`$exit: true`; team members only).
    pub fn exiting(mut self) -> Self {
        self.exit = true;
        self
    }

    /// This output as the team's answer (`$final: true`; team leads only).
    pub fn finalized(mut self) -> Self {
        self.is_final = true;
        self
    }

    /// This output with `usage`.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// This output routed to `destination` (`$route`; routers only).
    pub fn with_route(mut self, destination: impl Into<String>) -> Self {
        self.route = Some(Value::String(destination.into()));
        self
    }

    /// This output with `$route: null`: the router answers itself (routers with
    /// `may_answer` only).
    pub fn answered(mut self) -> Self {
        self.route = Some(Value::Null);
        self
    }

    /// This output with a note for the destination (`$message`; routers only).
    pub fn with_message(mut self, text: impl Into<String>) -> Self {
        self.message = Some(Value::String(text.into()));
        self
    }
}

impl From<Writes> for NodeOutput {
    fn from(writes: Writes) -> Self {
        Self::new(writes)
    }
}

/// The roles that may send the reserved keys a node without that role may not.
fn reserved_for(key: &str) -> Option<&'static str> {
    match key {
        ROUTE_KEY | MESSAGE_KEY => Some("a router node"),
        BROADCAST_KEY => Some("a team member or a team's lead"),
        EXIT_KEY => Some("a team member"),
        FINAL_KEY => Some("a team's lead"),
        _ => None,
    }
}

/// Reads a node's raw output: takes the reserved `$` keys out of its writes and checks
/// them against what `role` may send (a router `$route` and `$message`, kept as sent for
/// its commit to judge; a team member `$broadcast` and `$exit`; a team's lead
/// `$broadcast` and `$final`; `$exit` and `$final` must be booleans); `$usage` is accepted
/// from any node. The error names the key and what is wrong with it.
///
/// The common output has no `$` key: then the writes are handed back as they are, and
/// nothing is allocated.
pub(crate) fn accept_as(output: NodeOutput, role: Role) -> Result<NodeOutput, String> {
    let NodeOutput {
        mut writes,
        usage,
        mut route,
        mut message,
        mut broadcast,
        mut exit,
        mut is_final,
    } = output;
    if let Some(u) = &usage {
        check_usage(u).map_err(|e| format!("usage {e}"))?;
    }
    let typed = [
        (ROUTE_KEY, route.is_some()),
        (MESSAGE_KEY, message.is_some()),
        (BROADCAST_KEY, broadcast.is_some()),
        (EXIT_KEY, exit),
        (FINAL_KEY, is_final),
    ];
    if let Some((key, _)) = typed.iter().find(|(k, set)| *set && !role.may_send(k)) {
        let who = reserved_for(key).unwrap_or("nobody");
        return Err(format!(
            "`{key}` may be sent only by {who}, and this node is not one"
        ));
    }
    if !writes.keys().any(|k| k.starts_with('$')) {
        return Ok(NodeOutput {
            writes,
            usage,
            route,
            message,
            broadcast,
            exit,
            is_final,
        });
    }
    let mut usage = usage.map(Ok);
    // Sized for the slice writes only: an output of reserved keys alone allocates none.
    let mut rest = Map::with_capacity(writes.keys().filter(|k| !k.starts_with('$')).count());
    for (key, value) in std::mem::take(&mut writes) {
        if !key.starts_with('$') {
            rest.insert(key, value);
        } else if key == USAGE_KEY {
            if usage.is_some() {
                return Err(format!(
                    "`{USAGE_KEY}` is given twice (as NodeOutput::usage and as a `{USAGE_KEY}` key)"
                ));
            }
            usage = Some(Usage::from_value(value).map_err(|e| format!("`{USAGE_KEY}` {e}")));
        } else if role.may_send(&key) {
            let twice =
                || format!("`{key}` is given twice (as a NodeOutput field and as a `{key}` key)");
            match key.as_str() {
                ROUTE_KEY | MESSAGE_KEY | BROADCAST_KEY => {
                    let slot = match key.as_str() {
                        ROUTE_KEY => &mut route,
                        MESSAGE_KEY => &mut message,
                        _ => &mut broadcast,
                    };
                    if slot.is_some() {
                        return Err(twice());
                    }
                    *slot = Some(value);
                }
                _ => {
                    let flag = if key == EXIT_KEY {
                        &mut exit
                    } else {
                        &mut is_final
                    };
                    if *flag {
                        return Err(twice());
                    }
                    *flag = match value {
                        Value::Bool(b) => b,
                        other => {
                            return Err(format!(
                                "`{key}` must be a boolean, not {}",
                                json_kind(&other)
                            ));
                        }
                    };
                }
            }
        } else if let Some(who) = reserved_for(&key) {
            return Err(format!(
                "`{key}` may be sent only by {who}, and this node is not one"
            ));
        } else {
            return Err(format!(
                "`{key}` is not a reserved key (keys beginning with `$` are reserved; this \
                 node may send only {})",
                role.allowed()
            ));
        }
    }
    let usage = usage.transpose()?;
    if let Some(u) = &usage {
        check_usage(u).map_err(|e| format!("`{USAGE_KEY}` {e}"))?;
    }
    Ok(NodeOutput {
        writes: rest,
        usage,
        route,
        message,
        broadcast,
        exit,
        is_final,
    })
}

/// Every amount finite and not negative, and no `wall_ms` (the engine measures it).
fn check_usage(u: &Usage) -> Result<(), String> {
    if let Some((name, n)) = u.iter().find(|(_, n)| n.as_f64().is_none_or(|f| f < 0.0)) {
        return Err(format!("`{name}` is {n}; an amount cannot be negative"));
    }
    if u.get(WALL_MS).is_some() {
        return Err(format!(
            "names `{WALL_MS}`, which the engine measures itself; report the time under \
             another name"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
