//! The shape of state: a [`State`] (slice name to value) and a node's [`Writes`]. A leaf:
//! every other room names these.

use serde_json::{Map, Value};

/// A state: slice name to value. The root state and every frame's child state are one.
pub type State = Map<String, Value>;

/// The writes a node returns: slice name to its new value (each slice replaced whole).
pub type Writes = Map<String, Value>;

/// The key of the trace's projection in the `system` slice.
pub(crate) const DECISION_TRACE: &str = "decision_trace";
