//! Pattern: agent sessions (brief 10.2, 10.3). An agent node's run is a conversation
//! with a model whose only exit is a tool call: each model call is a step, and the tool
//! calls of one reply are a step that counts one per call. The conversation lives in the
//! run's sessions; what is pending between steps is [`Pending::Session`].
//!
//! - `plan.rs`: planning the session's first call (with its opening messages), its next
//!   model call or the tool calls of its last reply;
//! - `conversation.rs`: reading a conversation: the calls of the last reply not answered
//!   yet, and the messages in the order a request sends them;
//! - `reply.rs`: reading a reply (a valid exit, tool calls, or text) and checking
//!   arguments, as plain functions;
//! - `policy.rs`: a supervisor's policy agent: its session begun, and its `route` read
//!   as the decision;
//! - `tool.rs`: agents called as tools: a reply's agent tools' sessions advanced together
//!   as a fork of sessions (ADR 0046), each exit answering its caller's call;
//! - `resolve.rs`: an effect's output (a reply, tool results) fed to the step's work;
//! - `seats.rs`: forks of sessions (ADR 0040): several sessions advanced together, one
//!   call each per step, as members of one fork effect (agent advisors, team members and leads);
//! - `commit.rs`: committing a model call or the tool calls: the conversation grows, the
//!   usage is counted, and the session goes on, ends the node, or fails it.
//!
//! [`Pending::Session`]: crate::runtime::Pending::Session

mod commit;
mod conversation;
mod plan;
mod policy;
mod reply;
mod resolve;
mod seat_commit;
mod seats;
mod templates;
mod tool;

pub(crate) use policy::Routed;
pub(crate) use reply::error_content;
pub(crate) use resolve::resolve_session;
pub(crate) use seats::{SeatEnd, feed_own, feed_seats, mid_turn};
