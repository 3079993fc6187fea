//! From parsed arguments to an exit code: resolve a plan, run it, print.
//!
//! Exit codes: 0 success, 1 failure while running, 2 bad input or missing
//! privileges (the user can fix it by changing the command or the host).

use std::io::{IsTerminal, Write};

use crate::{
    cli::{Cli, ColorChoice, Command, ExplainArgs, ExportArgs, Format, RecordArgs},
    record,
};

/// An error on its way to `main`, with the exit code it maps to.
#[derive(Debug)]
pub struct AppError {
    pub code: u8,
    pub error: anyhow::Error,
}

impl AppError {
    fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }
    fn failure(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 1,
            error: error.into(),
        }
    }
}

impl AppError {
    /// The reader of standard output went away (`mdiag explain | head`):
    /// not a failure of mdiag, which then exits 0 quietly, as ripgrep does.
    pub fn is_broken_pipe(&self) -> bool {
        self.error.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        })
    }
}

/// Writes `text` to standard output and flushes it; errors (a closed pipe
/// among them) go back to `main`, never to a panic as `print!` would.
fn out(text: &str) -> Result<(), AppError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| AppError::failure(anyhow::Error::new(e).context("writing to standard output")))
}

pub fn run(cli: Cli) -> Result<(), AppError> {
    match cli.command {
        Command::Record(args) => record_cmd(&args),
        Command::Explain(args) => explain_cmd(&args),
        Command::Compare(args) => compare_cmd(&args),
        Command::Export(args) => export_cmd(&args),
        Command::Fleet(args) => fleet_cmd(&args),
        Command::CheckConfig(args) => {
            let path = args
                .file
                .unwrap_or_else(|| crate::mongo::conn::DEFAULT_CONFIG.into());
            let checked = crate::check_config::check(&path).map_err(AppError::usage)?;
            out(&crate::check_config::render(&checked))
        }
        Command::Completions(args) => out(&String::from_utf8_lossy(&crate::cli_gen::completions(
            args.shell,
        ))),
        Command::Man(args) => {
            let written = crate::cli_gen::write_man(&args.out).map_err(AppError::failure)?;
            out(&format!(
                "{} man pages written to {}\n",
                written.len(),
                args.out.display()
            ))
        }
        Command::Runbooks(args) => runbooks_cmd(&args),
        Command::Alerts(args) => {
            let url = &args.docs_url;
            out(&match args.format {
                crate::cli::AlertsFormat::Rules => crate::alerts::rules(url),
                crate::cli::AlertsFormat::PrometheusRule => crate::alerts::prometheus_rule(url),
            })
        }
        Command::Agent(args) => crate::agent::run(&args).map_err(|e| {
            if e.is_usage() {
                AppError::usage(e)
            } else {
                AppError::failure(e)
            }
        }),
    }
}

fn runbooks_cmd(args: &crate::cli::RunbooksArgs) -> Result<(), AppError> {
    let rules = match &args.rules {
        Some(dir) => crate::rules::RuleSet::load_dir(dir),
        None => crate::rules::RuleSet::builtin(),
    }
    .map_err(AppError::usage)?;
    let written = crate::runbook::write(&rules, &args.out).map_err(AppError::failure)?;
    out(&format!(
        "{} pages written to {}\n",
        written.len(),
        args.out.display()
    ))
}

fn fleet_cmd(args: &crate::cli::FleetArgs) -> Result<(), AppError> {
    let classify = |e: crate::fleet::cmd::FleetError| {
        if e.is_usage() {
            AppError::usage(e)
        } else {
            AppError::failure(e)
        }
    };
    let view = crate::fleet::cmd::view(args).map_err(classify)?;
    let text = crate::fleet::cmd::render(&view, args.format).map_err(classify)?;
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| AppError::usage(anyhow::anyhow!("cannot write {}: {e}", path.display()))),
        None => out(&text),
    }
}

fn record_cmd(args: &RecordArgs) -> Result<(), AppError> {
    let tty = std::io::stdout().is_terminal();
    let plan = record::plan(args, tty).map_err(AppError::usage)?;
    let outcome = record::run::run(&plan).map_err(|e| {
        if e.is_usage() {
            AppError::usage(e)
        } else {
            AppError::failure(e)
        }
    })?;
    if let Some(why) = &outcome.fallback_reason {
        crate::messages::note(format_args!(
            "{why}; the recording was saved to {} instead",
            outcome.path.display()
        ));
    }
    // The recording is on disk by now: a closed pipe only loses this summary.
    let rec = &outcome.recording;
    let mut text = format!(
        "Recorded {:.1}s ({}) to {}\n",
        (rec.ended_at - rec.started_at).num_milliseconds() as f64 / 1000.0,
        rec.stop_reason,
        outcome.path.display()
    );
    for line in crate::explain::summary_for(rec) {
        text.push_str(&format!("  {line}\n"));
    }
    text.push_str(&format!(
        "Full report: mdiag explain {}\n",
        outcome.path.display()
    ));
    out(&text)
}

fn compare_cmd(args: &crate::cli::CompareArgs) -> Result<(), AppError> {
    let before = read_noting(&args.before)?;
    let after = read_noting(&args.after)?;
    let rules = match &args.rules {
        Some(dir) => crate::rules::RuleSet::load_dir(dir).map_err(AppError::usage)?,
        None => crate::rules::RuleSet::builtin().map_err(AppError::failure)?,
    };
    let sources = (
        args.before.display().to_string(),
        args.after.display().to_string(),
    );
    let comparison = crate::compare::compare(
        &before,
        &after,
        (&sources.0, &sources.1),
        &rules,
        args.arch.as_deref(),
    )
    .map_err(AppError::usage)?;
    match args.format {
        crate::cli::CompareFormat::Text => out(&crate::compare::render_text(&comparison)),
        crate::cli::CompareFormat::Json => {
            let json = serde_json::to_string_pretty(&comparison)
                .map_err(|e| AppError::failure(anyhow::anyhow!("writing JSON: {e}")))?;
            out(&format!("{json}\n"))
        }
        crate::cli::CompareFormat::Html => {
            out(&crate::compare::render_html(&comparison, &before, &after))
        }
    }
}

/// Reads a recording, telling the user what the reader noticed (it ended
/// early, its slices were merged to bound memory).
fn read_noting(path: &std::path::Path) -> Result<crate::recording::Recording, AppError> {
    let opened = crate::recording::open(path).map_err(AppError::usage)?;
    for note in &opened.notes {
        crate::messages::note(note);
    }
    Ok(opened.recording)
}

fn explain_cmd(args: &ExplainArgs) -> Result<(), AppError> {
    let (recording, source) = match (&args.file, &args.ftdc) {
        // FTDC alone: its samples become a recording of their own.
        (None, Some(dir)) => {
            let window = args.from.is_some() || args.to.is_some();
            let mut read =
                crate::mongo::ftdc::read(dir, args.from, args.to, crate::mongo::ftdc::MAX_KEEP)
                    .map_err(AppError::usage)?;
            for note in read.notes() {
                crate::messages::note(note);
            }
            if read.samples.is_empty() {
                return Err(AppError::usage(anyhow::anyhow!(
                    "{}: no serverStatus samples{}; check the directory, or widen --from/--to",
                    dir.display(),
                    if window {
                        " in the chosen time window"
                    } else {
                        ""
                    }
                )));
            }
            if read.dropped > 0 {
                crate::messages::note(format_args!(
                    "explaining the newest {} FTDC samples ({} older ones left out: at most one day at a time; choose others with --from/--to)",
                    read.samples.len(),
                    read.dropped
                ));
            }
            if let Some(trimmed) =
                crate::mongo::ftdc_window::keep_newest_run(&mut read.samples, !window)
            {
                read.dropped += trimmed.dropped;
                crate::messages::note(trimmed.describe());
            }
            (
                crate::mongo::ftdc::recording_from_ftdc(&read),
                format!("FTDC {}", dir.display()),
            )
        }
        (file, ftdc) => {
            let path = match file {
                Some(p) => p.clone(),
                None => crate::recording::newest_in_dir(std::path::Path::new("."))
                    .map_err(AppError::usage)?,
            };
            let mut recording = read_noting(&path)?;
            if let Some(dir) = ftdc {
                // Only the recording's time range is read (one second of slack each side).
                let slack = chrono::Duration::seconds(2);
                let read = crate::mongo::ftdc::read(
                    dir,
                    Some(recording.started_at - slack),
                    Some(recording.ended_at + slack),
                    crate::mongo::ftdc::MAX_KEEP,
                )
                .map_err(AppError::usage)?;
                for note in read.notes() {
                    crate::messages::note(note);
                }
                let joined = crate::mongo::ftdc::join(&mut recording, &read);
                if joined == 0 {
                    crate::messages::note(format_args!(
                        "{} has no samples within the recording's time ({} to {}); nothing joined",
                        dir.display(),
                        recording.started_at.format("%Y-%m-%d %H:%M:%S"),
                        recording.ended_at.format("%H:%M:%S UTC")
                    ));
                }
            }
            (recording, path.display().to_string())
        }
    };
    let rules = match &args.rules {
        Some(dir) => crate::rules::RuleSet::load_dir(dir).map_err(AppError::usage)?,
        None => crate::rules::RuleSet::builtin().map_err(AppError::failure)?,
    };
    let report = crate::explain::explain(&recording, &rules, args.arch.as_deref(), Some(source))
        .map_err(AppError::usage)?;
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    let text = match args.format {
        Format::Terminal => crate::report::terminal::render(&report, color),
        Format::Markdown => crate::report::markdown::render(&report),
        Format::Json => crate::report::json::render(&report).map_err(AppError::failure)?,
        Format::Html => crate::report::html::render(&report),
    };
    out(&text)
}

fn export_cmd(args: &ExportArgs) -> Result<(), AppError> {
    use crate::ftdc::FtdcError;
    if args.off_cpu && args.pprof.is_none() && args.folded.is_none() {
        return Err(AppError::usage(anyhow::anyhow!(
            "--off-cpu selects which stacks --pprof FILE or --folded FILE write: give one of them"
        )));
    }
    if args.pprof.is_some() || args.folded.is_some() {
        let recording = read_noting(&args.path)?;
        let which = if args.off_cpu {
            crate::export_stacks::Which::OffCpu
        } else {
            crate::export_stacks::Which::OnCpu
        };
        return match crate::export_stacks::export(
            &recording,
            which,
            &args.path,
            args.pprof.as_deref(),
            args.folded.as_deref(),
        ) {
            Ok(()) => Ok(()),
            Err(e) if e.is_broken_pipe() => Ok(()),
            Err(e) if e.is_usage() => Err(AppError::usage(e)),
            Err(e) => Err(AppError::failure(e)),
        };
    }
    let opts = crate::export::ExportOptions {
        metrics: args.metrics.clone(),
        from: args.from,
        to: args.to,
        skip_metadata: args.no_metadata,
        dates_as_ms: args.dates_as_ms,
        keep_going: args.keep_going,
    };
    let mut out: Box<dyn std::io::Write> = match &args.output {
        Some(path) => Box::new(std::fs::File::create(path).map_err(|e| {
            AppError::usage(anyhow::anyhow!("cannot create {}: {e}", path.display()))
        })?),
        None => Box::new(std::io::stdout().lock()),
    };
    match crate::export::export_ftdc(&args.path, &mut out, &opts) {
        Ok(stats) => {
            for error in &stats.errors {
                crate::messages::note(error);
            }
            crate::messages::note(format_args!(
                "exported {} samples and {} metadata documents from {} files ({} bytes)",
                stats.samples, stats.metadata, stats.files, stats.bytes_in
            ));
            if stats.duplicates > 0 {
                crate::messages::note(format_args!(
                    "{} samples left out for going back in time: {}",
                    stats.duplicates,
                    crate::export::BACK_IN_TIME
                ));
            }
            Ok(())
        }
        // `mdiag export … | head` closes the pipe early: that is success.
        Err(FtdcError::Output { source }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(())
        }
        Err(e @ FtdcError::Output { .. }) => Err(AppError::failure(e)),
        Err(e @ FtdcError::Corrupt { .. }) => Err(AppError::usage(anyhow::anyhow!(
            "{e} (export stops at the first damaged document; --keep-going skips {} and goes on)",
            if e.ends_file() {
                "the rest of such a file"
            } else {
                "such a document"
            }
        ))),
        Err(e) => Err(AppError::usage(e)),
    }
}
