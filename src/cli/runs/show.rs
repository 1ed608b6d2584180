//! `pactgraph runs show`.

use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use crate::runtime::{Accounting, COST_USD, INPUT_TOKENS, OUTPUT_TOKENS, RunId, TraceItem};
use crate::store::{RunStore, StoredRun};
use clap::ValueEnum;
use comfy_table::{Table, presets};
use serde_json::json;

use super::accounting::accounting_table;
use super::list::{expires_text, pactgraph_now_ms, status_text};
use crate::cli::exit;
use crate::cli::outcome::write_json;
use crate::cli::store::{self, StoreArgs, ago};
use crate::serve::views::{Links, links, show_json, waits_on};

/// The arguments of `pactgraph runs show`.
#[derive(clap::Args, Debug, Clone)]
pub struct ShowArgs {
    /// The run: id, unique id prefix (6+ characters) or name.
    pub run: String,
    /// The decision trace.
    #[arg(long)]
    pub trace: bool,
    /// The last committed state.
    #[arg(long)]
    pub state: bool,
    /// Each agent session's conversation.
    #[arg(long)]
    pub messages: bool,
    /// Text for people, or one JSON object.
    #[arg(long, value_enum, default_value = "human")]
    pub format: ShowFormat,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `runs show --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// Text for people.
    Human,
    /// One JSON object.
    Json,
}

/// `runs show`: the run's summary, and its trace and state when asked.
pub async fn run(args: ShowArgs) -> ExitCode {
    let (store, id) = match super::opened(&args.store, &args.run).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let (trace, state, format) = (args.trace, args.state, args.format);
    let messages = args.messages;
    let stored = match store.load(id).await {
        Ok(s) => s,
        Err(e) => return store::error(&e),
    };
    let links = match links(&store, id).await {
        Ok(l) => l,
        Err(e) => return store::error(&e),
    };
    match format {
        ShowFormat::Json => {
            let mut value = show_json(&stored, trace, state);
            value["dependencies"] = links.to_json();
            if messages {
                value["sessions"] = json!(stored.record.run.sessions());
            }
            match write_json(Ok(std::io::stdout().lock()), &value, "\n") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => exit::failed(&format!("cannot write the run: {e}")),
            }
        }
        ShowFormat::Human => {
            print!("{}", show_human(&stored, &links, trace, state));
            if messages {
                print!("{}", sessions_human(stored.record.run.sessions()));
            }
            ExitCode::SUCCESS
        }
    }
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

fn show_human(stored: &StoredRun, links: &Links, trace: bool, state: bool) -> String {
    let info = &stored.info;
    let run = &stored.record.run;
    let now = pactgraph_now_ms();
    let mut lines: Vec<(&str, String)> = vec![
        ("run", info.id.to_string()),
        ("name", info.name.clone().unwrap_or_else(|| "-".into())),
        ("workflow", info.workflow.clone()),
        ("status", status_text(info)),
        (
            "steps",
            format!(
                "{} (checkpoint {}, attempt {})",
                info.steps, info.seq, info.attempt
            ),
        ),
        (
            "created",
            format!(
                "{} ({})",
                ago(info.created_ms, now),
                rfc3339(info.created_ms)
            ),
        ),
        (
            "updated",
            format!(
                "{} ({})",
                ago(info.updated_ms, now),
                rfc3339(info.updated_ms)
            ),
        ),
        ("expires", expires_text(info.expires_ms, now)),
    ];
    if let Some(w) = waits_on(info) {
        lines.push(("waits on", w));
    }
    if info.cancel_requested {
        lines.push(("cancel", "asked: it stops at its next step".into()));
    }
    if let Some(q) = run.question() {
        lines.push(("question", q.to_string()));
    }
    if let Some(m) = run.message() {
        lines.push(("message", m.to_string()));
    }
    let usage = serde_json::to_string(&run.usage_total()).unwrap_or_default();
    lines.push((
        "usage",
        if run.usage_total().is_empty() {
            "none reported".into()
        } else {
            usage
        },
    ));
    let brief = |id: &RunId, info: Option<&crate::store::RunInfo>| match info {
        Some(i) => format!("{id} ({}, {})", i.workflow, status_text(i)),
        None => format!("{id} (pruned)"),
    };
    lines.push((
        "dependencies",
        match &links.spec {
            None => "none".into(),
            Some(spec) => format!(
                "{} (on failure: {}{})",
                links
                    .dependencies
                    .iter()
                    .map(|(id, i)| brief(id, i.as_ref()))
                    .collect::<Vec<_>>()
                    .join(", "),
                spec.on_failure.as_str(),
                spec.result_slice
                    .as_ref()
                    .map_or(String::new(), |s| format!(", results in `{s}`"))
            ),
        },
    ));
    lines.push((
        "dependents",
        if links.dependents.is_empty() {
            "none".into()
        } else {
            links
                .dependents
                .iter()
                .map(|i| brief(&i.id, Some(i)))
                .collect::<Vec<_>>()
                .join(", ")
        },
    ));
    let mut out = String::new();
    for (k, v) in lines {
        out.push_str(&format!("{k:<13}{v}\n"));
    }
    let acct = Accounting::from_trace(run.trace());
    if !acct.is_empty() {
        out.push_str(&format!("\naccounting\n{}\n", accounting_table(&acct)));
    }
    if trace {
        let mut table = Table::new();
        table.load_preset(presets::NOTHING).set_header([
            "STEP",
            "DEPTH",
            "KIND",
            "SUPERVISOR",
            "TARGET",
            "REASON",
        ]);
        for item in run.trace().iter() {
            let kind = serde_json::to_value(item.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let opt = |v: Option<&str>| v.unwrap_or("-").to_string();
            table.add_row([
                item.step.to_string(),
                item.depth.to_string(),
                kind,
                opt(item.supervisor()),
                opt(item.target()),
                call_words(item).unwrap_or_else(|| opt(item.reason())),
            ]);
        }
        out.push_str(&format!("\ntrace\n{table}\n"));
    }
    if state {
        let text = serde_json::to_string_pretty(&run.state_json()).unwrap_or_default();
        out.push_str(&format!("\nstate\n{text}\n"));
    }
    out
}

/// A `model_call` or `tool_call` item's fields in words, for the trace's REASON column
/// (`None` for other items, and for call items stored before they had fields: their
/// `reason` says it).
fn call_words(item: &TraceItem) -> Option<String> {
    let took = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    if let Some(m) = item.model_call() {
        let mut out = format!("turn {}, attempt {}", m.turn, m.attempt);
        if !m.failed_attempts.is_empty() {
            let failed: Vec<&str> = m.failed_attempts.iter().map(|a| a.error.as_str()).collect();
            out.push_str(&format!(
                " (after {} failed: {})",
                failed.len(),
                failed.join("; ")
            ));
        }
        match &m.error {
            Some(e) => out.push_str(&format!(", failed: {e}")),
            None => out.push_str(&format!(
                ", finish_reason {}",
                m.finish_reason.as_deref().unwrap_or("none")
            )),
        }
        let usage = item.usage();
        let count = |k: &str| usage.and_then(|u| u.get(k)).map(ToString::to_string);
        if !m.usage_known {
            out.push_str(", usage unknown");
        } else if let (Some(i), Some(o)) = (count(INPUT_TOKENS), count(OUTPUT_TOKENS)) {
            out.push_str(&format!(", {i} in / {o} out tokens"));
            if let Some(c) = count(COST_USD) {
                out.push_str(&format!(", {c} USD"));
            }
        }
        out.push_str(&format!(", {}", took(item.duration_us)));
        return Some(out);
    }
    let t = item.tool_call()?;
    let mut out = format!("call {} (#{}): {}", t.call_id, t.index, t.status.as_str());
    if let Some(e) = &t.error {
        out.push_str(&format!(": {e}"));
    }
    out.push_str(&format!(", {}", took(item.duration_us)));
    Some(out)
}

/// `runs show --messages`: each session's conversation, message by message.
fn sessions_human(sessions: &[crate::runtime::Session]) -> String {
    let mut out = String::new();
    if sessions.is_empty() {
        out.push_str("\nsessions     none\n");
    }
    for (i, s) in sessions.iter().enumerate() {
        // An agent tool's session says which call it answers.
        let called = s.caller.as_ref().map_or(String::new(), |c| {
            format!(", tool call {} of session {}", c.call, c.session)
        });
        out.push_str(&format!(
            "\nsession {i}: node `{}` (visit {}, model `{}`, {} message(s){called})\n",
            s.node,
            s.visit,
            s.model,
            s.messages.len()
        ));
        for m in &s.messages {
            let mut head = m.role.as_str().to_string();
            if let Some(id) = &m.tool_call_id {
                head.push_str(&format!(" [{id}]"));
            }
            out.push_str(&format!(
                "  {head}: {}\n",
                m.content.as_deref().unwrap_or("")
            ));
            for c in &m.tool_calls {
                out.push_str(&format!("    -> {} [{}] {}\n", c.name, c.id, c.arguments));
            }
        }
    }
    out
}
