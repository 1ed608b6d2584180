//! Advisors (brief §5.4): before a primary node runs, its advisor nodes run concurrently
//! in one step, each on its own `reads` view; their outputs are not applied but become
//! reports, written with a prompt-ready tagged text to the primary's advice slice. The
//! primary runs in the next step.
//!
//! The three halves of the step (ADR 0009) stay apart: planning builds one [`Effect`](crate::runtime::Effect)
//! whose call is the whole fork (`Call::Fork`), so any driver performs it as it
//! performs a node call; [`Executor::perform`](crate::runtime::Executor::perform) joins the members, each under its own time
//! limit and the run's cancellation, and always completes; commit records the `fork`,
//! `advisor` and `join` items, counts a step and a visit per member and writes the slice.
//!
//! - `plan.rs`: the first round (every member's call, an agent member's session begun)
//!   and, while agent members' sessions go on, each next round (ADR 0040);
//! - `commit.rs`: a round's commit, and once every report is in, the join.
//!
//! Complexity: a fork with m members costs O(m) effects and trace items, and the tagged
//! text is linear in the size of the views and outputs it quotes.

mod commit;
mod plan;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::runtime::data::{RunId, Seat, SeatReport, SeatState, SeatStatus};

/// A nonce of 12 lowercase hex digits for block `position` of the tagged text written at
/// step `step` of run `run_id`: the same on a replay of the run, different across runs.
pub(crate) fn nonce(run_id: RunId, step: u32, position: usize) -> String {
    let digest = Sha256::digest(format!("pactgraph-advice/{run_id}/{step}/{position}"));
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// The advice slice's value: `{"primary", "reports", "tagged"}` (brief §5.4). `request` is
/// the primary's read view without the advice slice. The reports' outputs move into it
/// (a seat whose report is not in reads as a failure).
pub(crate) fn advice(
    run_id: RunId,
    step: u32,
    primary: &str,
    request: &Map<String, Value>,
    seats: Vec<Seat>,
) -> Value {
    use std::fmt::Write as _;
    let compact = |m: &Map<String, Value>| serde_json::to_string(m).expect("JSON values serialize");
    let n0 = nonce(run_id, step, 0);
    let mut tagged = format!(
        "<original_user_request__{n0}>\n{}\n</original_user_request__{n0}>",
        compact(request)
    );
    let mut listed = Vec::with_capacity(seats.len());
    for (i, seat) in seats.into_iter().enumerate() {
        let r = match seat.state {
            SeatState::Reported(r) => r,
            SeatState::Live { .. } => SeatReport {
                status: SeatStatus::Failed,
                output: None,
                error: Some("its session had not ended".into()),
                duration_us: 0,
            },
        };
        let n = nonce(run_id, step, i + 1);
        let agent = &*seat.advisor;
        let _ = write!(tagged, "\n<advisory__{n} agent=\"{agent}\">\n");
        match (&r.output, &r.error) {
            (Some(out), _) => tagged.push_str(&compact(out)),
            (None, error) => {
                let why = error.as_deref().unwrap_or("it gave no output");
                let _ = write!(
                    tagged,
                    "Advisor `{agent}` failed: {}. No advice is available from it.",
                    why.trim_end_matches('.')
                );
            }
        }
        let _ = write!(tagged, "\n</advisory__{n}>");
        let mut report = Map::with_capacity(5);
        report.insert("advisor".into(), agent.into());
        report.insert("status".into(), status_str(r.status).into());
        report.insert("output".into(), r.output.map_or(Value::Null, Value::Object));
        if let Some(e) = r.error {
            report.insert("error".into(), e.into());
        }
        report.insert("duration_ms".into(), (r.duration_us / 1000).into());
        listed.push(Value::Object(report));
    }
    let mut out = Map::with_capacity(3);
    out.insert("primary".into(), primary.into());
    out.insert("reports".into(), Value::Array(listed));
    out.insert("tagged".into(), tagged.into());
    Value::Object(out)
}

/// A report's status as the advice and the trace say it.
pub(super) fn status_str(status: SeatStatus) -> &'static str {
    match status {
        SeatStatus::Ok => "ok",
        SeatStatus::Failed => "failed",
        SeatStatus::Timeout => "timeout",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_12_hex_digits_stable_and_distinct() {
        let run = RunId::new();
        let other = RunId::new();
        let a: Vec<String> = (0..5).map(|p| nonce(run, 7, p)).collect();
        assert!(a.iter().all(|n| {
            n.len() == 12
                && n.chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        }));
        let mut unique = a.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 5, "distinct per block");
        assert_eq!(a, (0..5).map(|p| nonce(run, 7, p)).collect::<Vec<_>>());
        assert_ne!(nonce(run, 7, 0), nonce(other, 7, 0), "differs across runs");
        assert_ne!(nonce(run, 7, 0), nonce(run, 8, 0), "differs across steps");
    }
}
