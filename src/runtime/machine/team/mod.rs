//! Teams (brief §5.5): running a node with a `team` field runs its members in cycles and
//! its lead after each cycle, until the lead answers `$final: true`. Planning is in
//! `plan.rs`, the commit in `commit.rs`, what agent members and leads add in `agents.rs`; the team's progress is run data
//! ([`TeamRun`](crate::runtime::TeamRun)), a team step's planned part is step data.

mod agents;
mod commit;
mod plan;
