//! The `mdiag` binary: parse arguments, run, print the error chain, exit.
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = mdiag::cli::Cli::parse();
    mdiag::logging::init(cli.verbose);
    match mdiag::app::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `mdiag … | head`: the reader has what it wanted.
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            mdiag::messages::error(format_args!("{:#}", e.error));
            ExitCode::from(e.code)
        }
    }
}
