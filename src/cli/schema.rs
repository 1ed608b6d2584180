//! `pactgraph schema`.

use std::process::ExitCode;

pub fn run() -> ExitCode {
    let schema = crate::contracts::document_schema();
    println!(
        "{}",
        serde_json::to_string_pretty(&schema).expect("a schema is plain JSON")
    );
    ExitCode::SUCCESS
}
