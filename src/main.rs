//! The `pactgraph` binary. The command line itself is the library's `pactgraph::cli` (the
//! `cli` feature): compiled there once, the generic code it uses (the stores, the driver,
//! serde for the run's types) is not compiled a second time for the binary (ADR 0065).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    pactgraph::cli::main()
}
