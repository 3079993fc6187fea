//! Command-line interface (clap derive). Parsing only: no I/O happens here.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cli_parse::{
    parse_alloc_duration, parse_docs_url, parse_duration, parse_sample_hz, parse_since, parse_time,
};

#[derive(Debug, Parser)]
#[command(
    name = "mdiag",
    version,
    about = "eBPF profiling and diagnosis for MongoDB hosts: records what no metric shows and says what to tune",
    propagate_version = true
)]
pub struct Cli {
    /// More log output on stderr (-v: info, -vv: debug). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Record probes (and the target, if any) for a while and write one recording file.
    Record(RecordArgs),
    /// Read a recording, evaluate the rules and print a ranked report.
    Explain(ExplainArgs),
    /// Compare two recordings (e.g. before and after a fix): findings resolved or new, evidence and per-second figures side by side.
    Compare(CompareArgs),
    /// Decode a mongod FTDC directory (diagnostic.data) or file to JSON lines, one per sample.
    Export(ExportArgs),
    /// Run continuously: watch every local mongod (or the host), evaluate the rules on rolling
    /// windows, log findings as they fire and resolve, serve Prometheus metrics, keep a flight
    /// recorder. Settings: the [agent] table of the config file.
    Agent(AgentArgs),
    /// Read the fleet store the agents write ([fleet] uri): what fires now, grouped by rule,
    /// architecture, mongod version and kernel; a host's history (--host); silent agents.
    Fleet(FleetArgs),
    /// Check a config file: parse it, validate every key of every table, print the effective
    /// settings. Exit 2 naming the offending key when it is wrong.
    CheckConfig(CheckConfigArgs),
    /// Print the shell completion script for bash, zsh or fish on stdout.
    Completions(CompletionsArgs),
    /// Write the man pages (mdiag.1 and mdiag-<command>.1) into a directory.
    Man(ManArgs),
    /// Write one runbook page per rule (what, evidence, fix, verify, revert, risk, sources) and
    /// an index into a directory: the pages the Prometheus alerts link to (docs/rules).
    Runbooks(RunbooksArgs),
    /// Print the Prometheus alerting rules (a rule_files file, or a PrometheusRule for the
    /// Prometheus Operator), their runbook links under --docs-url.
    Alerts(AlertsArgs),
}

#[derive(Debug, Args)]
pub struct AlertsArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = AlertsFormat::Rules)]
    pub format: AlertsFormat,
    /// Where the docs directory is served (runbooks at <URL>/rules/<id>.md): the default is
    /// the project's docs on the web; give your own copy's address if you host one.
    #[arg(
        long,
        value_name = "URL",
        value_parser = parse_docs_url,
        default_value = crate::alerts::DEFAULT_DOCS_URL
    )]
    pub docs_url: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlertsFormat {
    /// A Prometheus rule_files file.
    Rules,
    /// A PrometheusRule manifest (monitoring.coreos.com/v1).
    PrometheusRule,
}

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The config file (default: /etc/mdiag/mdiag.toml).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunbooksArgs {
    /// Directory to write the pages into (created if missing), e.g. docs/rules.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Pages for the rules of this directory (*.toml) instead of the built-in set.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Config file with `[fleet] uri = "..."` (and `database`; default: /etc/mdiag/mdiag.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The fleet store (e.g. mongodb://store:27017); else the config file's [fleet] uri.
    #[arg(long, value_name = "URI")]
    pub uri: Option<String>,
    /// Only episodes open now or resolved since then: a duration back from now (2h, 7d) or a
    /// time (RFC 3339, "2024-04-16 11:40:00" UTC, a date). Without it: what is open now (and,
    /// with --host, the whole history).
    #[arg(long, value_name = "DUR|TIME", value_parser = parse_since)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Only this rule (e.g. sched.wakeup_preemption); also lists its latest episodes.
    #[arg(long, value_name = "ID")]
    pub rule: Option<String>,
    /// This host's history: every episode, newest first, with its transitions.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FleetFormat::Terminal)]
    pub format: FleetFormat,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// A host is listed as silent when its agent has not reported for this long (3 windows of 60s).
    #[arg(long, default_value = "3m", value_parser = parse_alloc_duration)]
    pub silent_after: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FleetFormat {
    Terminal,
    Json,
    /// One self-contained HTML page.
    Html,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Config file ([agent] and [mongodb] tables; default: /etc/mdiag/mdiag.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Load rules from this directory (*.toml) instead of the built-in set.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// Do not poll mongod even when a URI is configured.
    #[arg(long)]
    pub no_mongo: bool,
    /// Web configuration file of /metrics (TLS, basic auth; the Prometheus exporters' format).
    /// Overrides [agent] web_config_file.
    #[arg(
        long = "web.config.file",
        visible_alias = "web-config-file",
        value_name = "FILE"
    )]
    pub web_config_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The recording taken first (e.g. before the fix).
    pub before: PathBuf,
    /// The recording taken after.
    pub after: PathBuf,
    /// Output format: text, JSON for other tools, or HTML (the text and differential flame graphs).
    #[arg(short, long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
    /// Load rules from this directory (*.toml) instead of the built-in set.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// Rank both for this architecture (default: the BEFORE recording's).
    #[arg(long)]
    pub arch: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    Text,
    Json,
    /// The text comparison and the differential flame graphs of the two recordings' stacks.
    Html,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A diagnostic.data directory or one metrics.* file; with --pprof or --folded, a
    /// recording (`mdiag record --out`).
    pub path: PathBuf,
    /// Write the recording's on-CPU stacks as a gzipped pprof profile (go tool pprof,
    /// speedscope, Pyroscope) to this file ('-': stdout).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["metrics", "from", "to", "no_metadata", "dates_as_ms", "keep_going", "output"])]
    pub pprof: Option<PathBuf>,
    /// Write the recording's on-CPU stacks as folded stacks (flamegraph.pl, inferno,
    /// speedscope) to this file ('-': stdout).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["metrics", "from", "to", "no_metadata", "dates_as_ms", "keep_going", "output"])]
    pub folded: Option<PathBuf>,
    /// With --pprof / --folded: the off-CPU stacks (where threads waited, in
    /// nanoseconds: sleeping, in D state, or for a CPU) instead of the on-CPU ones.
    #[arg(long)]
    pub off_cpu: bool,
    /// Keep only these metrics: comma-separated paths (a path keeps everything under it) or globs with `*`.
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Only samples at or after this time (RFC 3339, "2024-04-16 11:40:00" UTC, or a date).
    #[arg(long, value_parser = parse_time)]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// Only samples before this time.
    #[arg(long, value_parser = parse_time)]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
    /// Leave out the metadata documents (hostInfo, buildInfo, getCmdLineOpts).
    #[arg(long)]
    pub no_metadata: bool,
    /// Write dates as milliseconds since the epoch instead of RFC 3339.
    #[arg(long)]
    pub dates_as_ms: bool,
    /// Skip what cannot be read instead of stopping: a damaged document, or
    /// the rest of a file whose framing is broken (each reported on stderr).
    #[arg(long)]
    pub keep_going: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// How long to record, e.g. 60s, 5m, 1h30m. Ctrl-C stops early and keeps what was recorded.
    #[arg(short, long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Observe this process.
    #[arg(long, conflicts_with_all = ["process", "command"])]
    pub pid: Option<u32>,
    /// Observe the one process with this name (several: an error, choose one with --pid).
    /// Without a target option: with a mongod URI, the process listening on its port here (none,
    /// or a remote server: the whole host); else the one running mongod (several: an error asking
    /// for --pid), or the whole host when none runs.
    #[arg(long, conflicts_with = "command")]
    pub process: Option<String>,
    /// Observe the whole host even if a mongod runs.
    #[arg(long, conflicts_with_all = ["pid", "process", "command"])]
    pub host_wide: bool,
    /// Where to write the recording (default: ./mdiag-<host>-<UTC time>.mdiag).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Never draw the progress bar (it is hidden anyway when stdout is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Start this command under observation (from its first instruction) and stop it at the end.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Allocator latency: length of each sampled window in which malloc/free
    /// (and operator new/delete, tc_*, je_*) are probed (default 100ms: tens of thousands of timed
    /// calls on a busy allocator).
    #[arg(long, default_value = "100ms", value_parser = parse_alloc_duration)]
    pub alloc_window: Duration,
    /// Allocator latency: one window every this long (default 10s: 1 % of the time; an
    /// allocation-bound target loses about that share of its throughput); 0 turns the windows off.
    #[arg(long, default_value = "10s", value_parser = parse_alloc_duration)]
    pub alloc_every: Duration,
    /// The probe families to run, comma-separated (sched, softirq, syscalls, perf, wiredtiger,
    /// alloc, contention; default: all). The others are left out by choice: the recording and
    /// the report say so, and rules that need them are not assessed.
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = parse_probes)]
    pub probes: crate::kit::family::Selection,
    /// CPU samples per second and CPU of the perf family (1 to 1000; default 99): the on-CPU
    /// stacks' resolution. Each sample of the target walks its stacks, so the cost grows with it.
    #[arg(long, value_name = "HZ", default_value = "99", value_parser = parse_sample_hz)]
    pub sample_hz: u64,
    /// Poll this mongod every second (e.g. mongodb://127.0.0.1:27017); without a target option,
    /// also observe the local process listening on its port. Else MDIAG_MONGODB_URI, else the
    /// config file. Keep credentials out of the command line: use the variable or the file.
    #[arg(long, value_name = "URI")]
    pub uri: Option<String>,
    /// Config file with `[mongodb] uri = "..."` (default: /etc/mdiag/mdiag.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Recording to explain (default: the newest *.mdiag in the current directory).
    pub file: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Terminal)]
    pub format: Format,
    /// Load rules from this directory (*.toml) instead of the built-in set.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// Rank for another architecture (x86_64, aarch64, s390x), e.g. to plan a migration.
    #[arg(long)]
    pub arch: Option<String>,
    /// When to colour the terminal report (NO_COLOR is honoured by `auto`).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// mongod's diagnostic.data directory (or one metrics.* file): alone, explain FTDC without a
    /// recording; with FILE, join its samples to the recording's seconds.
    #[arg(long, value_name = "DIR")]
    pub ftdc: Option<PathBuf>,
    /// With --ftdc alone: only samples at or after this time (default: the newest hour).
    #[arg(long, value_parser = parse_time, requires = "ftdc")]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// With --ftdc alone: only samples before this time.
    #[arg(long, value_parser = parse_time, requires = "ftdc")]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Terminal,
    Markdown,
    Json,
    /// One self-contained HTML file with charts (on stdout: redirect it, `> report.html`).
    Html,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// Parses `--probes`: family names, comma-separated, or `all`.
fn parse_probes(s: &str) -> Result<crate::kit::family::Selection, String> {
    crate::kit::family::Selection::parse(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("mdiag").chain(args.iter().copied()))
    }

    #[test]
    fn record_defaults_and_options() {
        let Command::Record(r) = parse(&["record"]).unwrap().command else {
            panic!()
        };
        assert_eq!(r.duration, Duration::from_secs(60));
        assert!(r.pid.is_none() && r.process.is_none() && r.command.is_empty() && !r.host_wide);
        let Command::Record(r) = parse(&[
            "record",
            "--duration",
            "1m30s",
            "--pid",
            "42",
            "-o",
            "x.mdiag",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!((r.duration, r.pid), (Duration::from_secs(90), Some(42)));
        assert_eq!(r.output.unwrap(), PathBuf::from("x.mdiag"));
        let Command::Record(r) = parse(&["record", "-d", "5s", "--", "stress", "--cpu", "4"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(r.command, vec!["stress", "--cpu", "4"]);
    }

    #[test]
    fn alloc_window_options() {
        let Command::Record(r) = parse(&["record"]).unwrap().command else {
            panic!("record expected");
        };
        // The CLI's defaults are the schedule's.
        use crate::probes::alloc::schedule::{DEFAULT_EVERY, DEFAULT_WINDOW};
        assert_eq!(r.alloc_window, DEFAULT_WINDOW);
        assert_eq!(r.alloc_every, DEFAULT_EVERY);
        assert_eq!(
            (DEFAULT_WINDOW, DEFAULT_EVERY),
            (Duration::from_millis(100), Duration::from_secs(10))
        );
        let Command::Record(r) = parse(&["record", "--alloc-window", "50ms", "--alloc-every", "0"])
            .unwrap()
            .command
        else {
            panic!("record expected");
        };
        assert_eq!(
            (r.alloc_window, r.alloc_every),
            (Duration::from_millis(50), Duration::ZERO)
        );
        let e = parse(&["record", "--alloc-every", "often"]).unwrap_err();
        assert!(e.to_string().contains("0 for off"), "{e}");
    }

    #[test]
    fn record_rejects_bad_input() {
        assert!(parse(&["record", "--duration", "soon"]).is_err());
        assert!(parse(&["record", "--duration", "0s"]).is_err());
        assert!(parse(&["record", "--pid", "1", "--process", "mongod"]).is_err());
        assert!(parse(&["record", "--pid", "1", "--", "true"]).is_err());
        assert!(parse(&["record", "--pid", "-3"]).is_err());
        let e = parse(&["record", "--duration", "9999h"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn export_options() {
        let Command::Export(e) = parse(&[
            "export",
            "diagnostic.data",
            "--metrics",
            "serverStatus.opcounters,start",
            "--from",
            "2024-04-16T11:35:00Z",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(e.path, PathBuf::from("diagnostic.data"));
        assert_eq!(e.metrics, vec!["serverStatus.opcounters", "start"]);
        assert!(e.from.is_some() && e.to.is_none());
        assert!(parse(&["export", "x", "--from", "yesterday-ish"]).is_err());
    }

    #[test]
    fn explain_options() {
        let Command::Explain(e) = parse(&["explain"]).unwrap().command else {
            panic!()
        };
        assert!(e.file.is_none());
        assert_eq!((e.format, e.color), (Format::Terminal, ColorChoice::Auto));
        let Command::Explain(e) = parse(&[
            "explain", "r.mdiag", "--format", "json", "--rules", "rules", "--arch", "s390x",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(e.format, Format::Json);
        assert_eq!(e.arch.as_deref(), Some("s390x"));
        assert!(parse(&["explain", "--format", "pdf"]).is_err());
        let Command::Explain(e) = parse(&["explain", "--ftdc", "diagnostic.data"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(e.ftdc, Some(PathBuf::from("diagnostic.data")));
        assert!(e.file.is_none());
        assert!(parse(&["explain", "--from", "2024-04-16T11:35:00Z"]).is_err());
    }

    #[test]
    fn fleet_options() {
        let Command::Fleet(f) = parse(&["fleet"]).unwrap().command else {
            panic!("fleet expected")
        };
        assert_eq!(f.format, FleetFormat::Terminal);
        assert_eq!(f.silent_after, Duration::from_secs(180));
        assert!(f.uri.is_none() && f.since.is_none() && f.output.is_none());
        let Command::Fleet(f) = parse(&[
            "fleet",
            "--uri",
            "mongodb://s",
            "--since",
            "2h",
            "--rule",
            "r",
            "--host",
            "h",
            "-f",
            "html",
            "-o",
            "f.html",
        ])
        .unwrap()
        .command
        else {
            panic!("fleet expected")
        };
        let ago = chrono::Utc::now() - f.since.unwrap();
        assert!((ago.num_seconds() - 7200).abs() < 60, "{ago}");
        assert_eq!(
            (f.rule.as_deref(), f.host.as_deref()),
            (Some("r"), Some("h"))
        );
        assert_eq!(f.format, FleetFormat::Html);
        let Command::Fleet(f) = parse(&["fleet", "--since", "2024-04-16T11:35:00Z"])
            .unwrap()
            .command
        else {
            panic!("fleet expected")
        };
        assert_eq!(f.since.unwrap().timestamp(), 1_713_267_300);
        let e = parse(&["fleet", "--since", "last tuesday"]).unwrap_err();
        assert!(e.to_string().contains("30m, 2h, 7d"), "{e}");
        assert!(parse(&["fleet", "--format", "markdown"]).is_err());
    }

    #[test]
    fn record_uri_and_config() {
        let Command::Record(r) = parse(&[
            "record",
            "--uri",
            "mongodb://127.0.0.1:27017",
            "--config",
            "/tmp/m.toml",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(r.uri.as_deref(), Some("mongodb://127.0.0.1:27017"));
        assert_eq!(r.config, Some(PathBuf::from("/tmp/m.toml")));
    }
}
