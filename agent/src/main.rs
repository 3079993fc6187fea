//! The `mdiag` binary: parse arguments, run, print the error chain, exit.
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = mdiag::cli::Cli::parse();
    mdiag::logging::init(cli.verbose);
    match mdiag::app::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mdiag: error: {:#}", e.error);
            ExitCode::from(e.code)
        }
    }
}
