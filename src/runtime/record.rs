//! The run record: one run as a self-contained value, the unit that `--state-out`
//! writes, `resume FILE` reads and a run store keeps: the format version, the run's id and
//! step sequence, the workflow document it runs (with its digest) and the [`RunState`].

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::data::{RunId, RunState};
use crate::contracts::WorkflowDocument;
use crate::graph::GraphBuilder;
use crate::validator::{Rejected, ValidGraph, Validator};

/// The version of the run-record format this pactgraph writes and reads.
pub const RUN_RECORD_FORMAT: u32 = 2;

/// One run, self-contained: everything needed to continue it anywhere, even if the
/// workflow file it came from changed or moved.
///
/// Serialized with the format version under `pactgraph_saved_run`; the trace is held
/// once (in `run.trace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    /// The format version ([`RUN_RECORD_FORMAT`]).
    #[serde(rename = "pactgraph_saved_run")]
    pub format: u32,
    /// The run's id.
    pub run_id: RunId,
    /// Step commits applied to the run since it was created (a checkpoint's sequence
    /// number); every [`Executor::step`](super::Executor::step) that committed counts one.
    pub seq: u64,
    /// The workflow file the run was started from, if any (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_file: Option<String>,
    /// The folder `exec` programs run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<String>,
    /// The workflow document the run runs.
    pub document: WorkflowDocument,
    /// `sha256:` and the hex SHA-256 of the document's canonical JSON (its serialization
    /// with fields in declaration order): names the workflow version the run belongs to.
    pub digest: String,
    /// The run.
    pub run: RunState,
}

/// A run record could not be read or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Not JSON, or not a run record.
    #[error("not a saved pactgraph run: {0}")]
    Malformed(String),
    /// A format this pactgraph does not read.
    #[error("saved-run format {found} is not supported (this pactgraph reads {RUN_RECORD_FORMAT})")]
    Format {
        /// The format found.
        found: u64,
    },
    /// The document does not match its digest (the record was edited or damaged).
    #[error(
        "the saved document does not match its digest (recorded {recorded}, computed {computed})"
    )]
    Digest {
        /// The digest in the record.
        recorded: String,
        /// The digest of the document as read.
        computed: String,
    },
    /// The saved document does not compile or the validator refuses it.
    #[error("the saved workflow is not valid: {0}")]
    Invalid(Box<Rejected>),
}

impl RunRecord {
    /// A new record for `run` of `document`, with the run's id and sequence 0.
    pub fn new(document: WorkflowDocument, run: RunState) -> Self {
        let digest = digest_of(&document);
        Self {
            format: RUN_RECORD_FORMAT,
            run_id: run.run_id,
            seq: 0,
            workflow_file: None,
            base_dir: None,
            document,
            digest,
            run,
        }
    }

    /// Reads a record from JSON text: the format version is checked first (so an older
    /// file gets that message, not a list of unknown fields), then the whole record (whose
    /// `run_id` must be its run's), then the document's digest.
    pub fn from_json(text: &str) -> Result<Self, RecordError> {
        #[derive(Deserialize)]
        struct Version {
            pactgraph_saved_run: Option<serde_json::Value>,
        }
        let version: Version =
            serde_json::from_str(text).map_err(|e| RecordError::Malformed(e.to_string()))?;
        match version.pactgraph_saved_run {
            Some(serde_json::Value::Number(n))
                if n.as_u64() == Some(u64::from(RUN_RECORD_FORMAT)) => {}
            Some(serde_json::Value::Number(n)) => {
                return Err(RecordError::Format {
                    found: n.as_u64().unwrap_or(0),
                });
            }
            _ => {
                return Err(RecordError::Malformed(
                    "no `pactgraph_saved_run` format version".into(),
                ));
            }
        }
        let mut record: RunRecord =
            serde_json::from_str(text).map_err(|e| RecordError::Malformed(e.to_string()))?;
        if record.run_id != record.run.run_id {
            return Err(RecordError::Malformed(format!(
                "the record's run_id {} differs from its run's run_id {}",
                record.run_id, record.run.run_id
            )));
        }
        record.document.fill_ids();
        let computed = digest_of(&record.document);
        if computed != record.digest {
            return Err(RecordError::Digest {
                recorded: record.digest,
                computed,
            });
        }
        Ok(record)
    }

    /// The record as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a run record is plain data")
    }

    /// Compiles and validates the saved document (non-strict): the graph to build the
    /// executor that continues the run.
    pub fn graph(&self) -> Result<ValidGraph, RecordError> {
        let graph = match GraphBuilder::from_document(self.document.clone()).build() {
            Ok(g) => g,
            Err(failure) => failure.into_partial(),
        };
        Validator::new()
            .accept(graph)
            .map_err(|r| RecordError::Invalid(Box::new(r)))
    }
}

/// `sha256:<hex>` of a document's canonical JSON.
pub fn digest_of(document: &WorkflowDocument) -> String {
    let bytes = serde_json::to_vec(document).expect("a workflow document is plain data");
    let hash = Sha256::digest(&bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record() -> RunRecord {
        let (doc, ex) = crate::runtime::testing::reply_workflow();
        RunRecord::new(doc, ex.start(json!({})).expect("starts"))
    }

    #[test]
    fn a_record_round_trips_and_keeps_its_digest() {
        let r = record();
        assert!(
            r.digest.starts_with("sha256:") && r.digest.len() == 71,
            "{}",
            r.digest
        );
        let back = RunRecord::from_json(&r.to_json_pretty()).expect("reads back");
        assert_eq!(back, r);
        assert!(back.graph().is_ok());
    }

    #[test]
    fn an_edited_document_is_refused_by_its_digest() {
        let r = record();
        let text = r.to_json_pretty().replace("\"hi\"", "\"bye\"");
        match RunRecord::from_json(&text) {
            Err(RecordError::Digest { recorded, computed }) => assert_ne!(recorded, computed),
            other => panic!("expected a digest error, got {other:?}"),
        }
    }

    #[test]
    fn other_formats_and_garbage_are_named() {
        let mut v: serde_json::Value = serde_json::from_str(&record().to_json_pretty()).unwrap();
        v["pactgraph_saved_run"] = json!(1);
        let e = RunRecord::from_json(&v.to_string()).expect_err("format 1");
        assert!(e.to_string().contains("format 1 is not supported"), "{e}");
        let e = RunRecord::from_json("[1, 2]").expect_err("not a record");
        assert!(matches!(e, RecordError::Malformed(_)), "{e}");
        let e = RunRecord::from_json("{}").expect_err("no version");
        assert!(e.to_string().contains("pactgraph_saved_run"), "{e}");
    }

    #[test]
    fn the_record_carries_its_runs_id_and_refuses_another() {
        let r = record();
        assert_eq!(r.run_id, r.run.run_id);
        let mut v: serde_json::Value = serde_json::from_str(&r.to_json_pretty()).unwrap();
        assert_eq!(v["run"]["run_id"], json!(r.run_id.to_string()));
        v["run_id"] = json!(RunId::new().to_string());
        let e = RunRecord::from_json(&v.to_string()).expect_err("two ids");
        assert!(
            e.to_string().contains("differs from its run's run_id"),
            "{e}"
        );
    }

    #[test]
    fn run_ids_are_ulids_in_creation_order() {
        let a = RunId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = RunId::new();
        assert!(a < b && a.to_string() < b.to_string());
        assert_eq!(a.to_string().parse::<RunId>().expect("parses"), a);
        assert!("not-a-ulid".parse::<RunId>().is_err());
    }

    #[test]
    fn run_ids_made_in_one_millisecond_still_sort_in_making_order() {
        let ids: Vec<RunId> = (0..2_000).map(|_| RunId::new()).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids made one after another sort as they were made"
        );
        let same_ms = ids
            .windows(2)
            .filter(|w| w[0].created_ms() == w[1].created_ms())
            .count();
        assert!(
            same_ms > 0,
            "some ids shared a millisecond (the case proved)"
        );
    }
}
