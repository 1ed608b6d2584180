//! The executor's plan: the compiled workflow as planning reads it (per-id tables of
//! nodes, supervisors and subgraphs with their handlers and compiled schemas, and the
//! rule tables of rule-based supervisors). Built once by the executor's builder; below the
//! state machine, above plain data and the effects (a plan holds the handlers it calls).

pub(crate) mod agent;
mod rules;
mod schema;
mod tables;

pub(crate) use rules::{RuleEntry, RuleTable};
pub(crate) use schema::{check, check_at};
pub use tables::TraceView;
pub(crate) use tables::{
    IdMap, NodeMap, NodePlan, NodeRun, Plan, PolicyRun, Schema, SubgraphPlan, SupervisorMap,
    SupervisorPlan, Verdict,
};
