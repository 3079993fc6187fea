//! Terminal rendering of a [`Report`] for an SRE at a shell.
//!
//! Plain text wrapped to 100 columns: a header (host, kernel, arch, target,
//! duration), the ranked findings with their evidence, fix commands, risk,
//! verification and references, then the rules that were not assessed or do
//! not apply, the rules that passed, the measurements of each probe family
//! (whether or not a rule used them), and the probes. Colour is used only when
//! the caller asks for it (it decides from the TTY and `NO_COLOR`); without it
//! the output has no escape sequences at all, so it can be piped or pasted.

use std::fmt::Write;

use anstyle::{AnsiColor, Style};

use super::measurements::{
    Measurements, NetMeasurements, PerfMeasurements, RseqMeasurement, SchedMeasurements,
    SoftirqMeasurements, SyscallsMeasurements, WiredTigerMeasurements, file_name,
};
use super::{EvidenceItem, Finding, Report, Severity, format_number};

const WIDTH: usize = 100;

struct Painter {
    color: bool,
}

impl Painter {
    fn paint(&self, style: Style, text: &str) -> String {
        if self.color {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    fn heading(&self, text: &str) -> String {
        self.paint(Style::new().bold().underline(), text)
    }

    fn bold(&self, text: &str) -> String {
        self.paint(Style::new().bold(), text)
    }

    fn dim(&self, text: &str) -> String {
        self.paint(Style::new().dimmed(), text)
    }

    fn command(&self, text: &str) -> String {
        self.paint(Style::new().fg_color(Some(AnsiColor::Green.into())), text)
    }

    fn severity(&self, s: Severity) -> String {
        let label = s.as_str().to_ascii_uppercase();
        let style = match s {
            Severity::Critical => Style::new().bold().fg_color(Some(AnsiColor::Red.into())),
            Severity::High => Style::new().fg_color(Some(AnsiColor::Red.into())),
            Severity::Medium => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
            Severity::Low => Style::new().fg_color(Some(AnsiColor::Cyan.into())),
            Severity::Info => Style::new().dimmed(),
        };
        self.paint(style, &label)
    }
}

/// The report as terminal text; `color` adds ANSI styles.
pub fn render(report: &Report, color: bool) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_report(&mut out, report, &Painter { color });
    out
}

/// Wraps `text` to `width` columns, every line starting with `indent`.
/// Blank lines separate paragraphs and are kept.
pub(crate) fn wrap(text: &str, indent: &str, width: usize) -> String {
    let room = width.saturating_sub(indent.chars().count()).max(20);
    let mut lines = Vec::new();
    for paragraph in text.trim().split("\n\n") {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
                lines.push(format!("{indent}{line}"));
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            lines.push(format!("{indent}{line}"));
        }
    }
    lines.join("\n")
}

pub(crate) fn target_line(report: &Report) -> String {
    match &report.recording.target {
        None => "host-wide: no target process".to_string(),
        Some(t) => {
            let mut s = format!("{} (pid {}", t.comm, t.pid);
            if let Some(exe) = &t.exe {
                let _ = write!(s, ", {exe}");
            }
            if let Some(code) = t.exit_code {
                let _ = write!(s, ", exited with status {code}");
            }
            s.push(')');
            s
        }
    }
}

pub(crate) fn recorded_line(report: &Report) -> String {
    let r = &report.recording;
    format!(
        "{} for {:.1} s (stopped: {}), {} slices",
        r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        r.duration_s,
        r.stop_reason,
        r.slices
    )
}

pub(crate) fn ranking_line(report: &Report) -> String {
    if report.architecture_overridden {
        format!(
            "for {} (--arch; recorded on {})",
            report.architecture, report.recording.host.arch
        )
    } else {
        format!("for {}", report.architecture)
    }
}

pub(crate) fn rules_line(report: &Report) -> String {
    let n = report.rules.count;
    format!(
        "{}, {n} rule{}: {} finding{}, {} not assessed, {} not applicable, {} passed",
        report.rules.source,
        if n == 1 { "" } else { "s" },
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" },
        report.not_assessed.len(),
        report.not_applicable.len(),
        report.passed.len()
    )
}

fn write_report(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
    let r = &report.recording;
    let h = &r.host;
    writeln!(out, "{}", p.bold(&format!("mdiag report: {}", h.hostname)))?;
    let field = |name: &str| p.dim(&format!("{name:<9}"));
    writeln!(
        out,
        "  {} {}, {}, {} CPUs ({})",
        field("host"),
        h.hostname,
        h.arch,
        h.cpu_count,
        h.cpu_model
    )?;
    writeln!(out, "  {} {}", field("kernel"), h.kernel_release)?;
    writeln!(out, "  {} {}", field("target"), target_line(report))?;
    writeln!(out, "  {} {}", field("recorded"), recorded_line(report))?;
    if let Some(source) = &r.source {
        writeln!(out, "  {} {source}", field("file"))?;
    }
    writeln!(out, "  {} {}", field("ranking"), ranking_line(report))?;
    writeln!(out, "  {} {}", field("rules"), rules_line(report))?;

    writeln!(out)?;
    writeln!(out, "{}", p.heading("Findings"))?;
    if report.findings.is_empty() {
        writeln!(out, "  No rule fired.")?;
    }
    for f in &report.findings {
        writeln!(out)?;
        write_finding(out, f, p)?;
    }

    if !report.not_assessed.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", p.heading("Not assessed (data missing)"))?;
        for n in &report.not_assessed {
            writeln!(out, "  {}  {}", p.bold(&n.rule_id), n.title)?;
            writeln!(out, "{}", wrap(&n.reason, "      ", WIDTH))?;
        }
    }
    if !report.not_applicable.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", p.heading("Not applicable to this host"))?;
        for n in &report.not_applicable {
            writeln!(out, "  {}  {}", p.bold(&n.rule_id), n.title)?;
            writeln!(out, "{}", wrap(&n.reason, "      ", WIDTH))?;
        }
    }
    if !report.passed.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", p.heading("Passed (checked, did not fire)"))?;
        for n in &report.passed {
            writeln!(out, "  {}  {}", p.bold(&n.rule_id), n.title)?;
            let numbers: Vec<String> = n
                .evidence
                .iter()
                .map(|e| format!("{}: {}", e.label, e.value))
                .collect();
            if !numbers.is_empty() {
                writeln!(out, "{}", wrap(&numbers.join("; "), "      ", WIDTH))?;
            }
        }
    }

    writeln!(out)?;
    write_measurements(out, &report.measurements, p)?;

    writeln!(out)?;
    writeln!(out, "{}", p.heading("Probes"))?;
    if report.probes.is_empty() {
        writeln!(out, "  No probe was tried.")?;
    }
    for probe in &report.probes {
        let status_style = if probe.attached {
            Style::new().fg_color(Some(AnsiColor::Green.into()))
        } else {
            Style::new().bold().fg_color(Some(AnsiColor::Red.into()))
        };
        let status = p.paint(status_style, &probe.status());
        let mut line = format!("  {:<10} {status}", probe.family);
        if let Some(d) = &probe.drops {
            let _ = write!(line, ", {} events dropped", d.total);
            if d.total > 0 {
                let _ = write!(
                    line,
                    " (thread map full {}, wakeup map full {}, read failed {})",
                    d.thread_map_full, d.wakeup_map_full, d.read_failed
                );
            }
        }
        writeln!(out, "{line}")?;
        for prog in &probe.programs {
            if let Some(err) = &prog.error {
                writeln!(
                    out,
                    "{}",
                    wrap(
                        &format!("{} at {}: {err}", prog.name, prog.attach_point),
                        "      ",
                        WIDTH
                    )
                )?;
            }
        }
    }
    Ok(())
}

/// A share (0..1) as a percentage with one decimal: 0.857 → "85.7%".
pub(crate) fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// "the target's threads" / "every non-idle task (host-wide)".
pub(crate) fn sched_scope(s: &SchedMeasurements) -> &'static str {
    if s.scope == "target" {
        "the target's threads"
    } else {
        "every non-idle task (host-wide)"
    }
}

/// "p50 3146 µs, p90 6711 µs, p99 8329 µs".
pub(crate) fn runq_percentiles(s: &SchedMeasurements) -> String {
    format!(
        "p50 {} µs, p90 {} µs, p99 {} µs",
        format_number(s.runq_p50_us),
        format_number(s.runq_p90_us),
        format_number(s.runq_p99_us)
    )
}

/// "NET_RX imbalance 3.43 (busiest CPU / mean; 1.00 = even): CPU 0 has 85.7%
/// of NET_RX time, and NET_RX takes 30.0% of that CPU".
pub(crate) fn net_rx_line(s: &SoftirqMeasurements) -> String {
    if s.net_rx_imbalance == 0.0 {
        return "NET_RX: no time recorded".into();
    }
    format!(
        "NET_RX imbalance {:.2} (busiest CPU / mean; 1.00 = even, {} = all on one CPU): \
         CPU {} has {} of NET_RX time, and NET_RX takes {} of that CPU",
        s.net_rx_imbalance,
        s.cpu_count,
        s.net_rx_busiest_cpu,
        percent(s.net_rx_busiest_share),
        percent(s.net_rx_time_share_of_cpu)
    )
}

/// "busiest CPU in softirqs: CPU 0, 30.5% of its time (mean over 4 CPUs 9.2%)".
pub(crate) fn softirq_cpu_line(s: &SoftirqMeasurements) -> String {
    format!(
        "busiest CPU in softirqs: CPU {}, {} of its time (mean over {} CPUs {})",
        s.cpu_max_share_cpu,
        percent(s.cpu_max_share),
        s.cpu_count,
        percent(s.cpu_mean_share)
    )
}

/// "3 events lost (3 exits without entry, 0 IRQ map full, 0 bad vector)", or
/// `None` when nothing was lost.
pub(crate) fn softirq_drops_line(s: &SoftirqMeasurements) -> Option<String> {
    let d = &s.drops;
    (d.total > 0).then(|| {
        format!(
            "{} events lost ({} exits without entry, normal right after attach; \
             {} IRQ map full; {} bad vector)",
            d.total, d.unmatched_exit, d.irq_map_full, d.bad_vector
        )
    })
}

/// Interfaces listed in the RPS/RFS line; the rest are counted.
const NET_INTERFACES_SHOWN: usize = 6;

/// "RPS off, RFS on (rps_sock_flow_entries 32768); rx queues: eth0 4 (RPS 0,
/// RFS 4), eth1 2 (RPS 0, RFS 0)".
pub(crate) fn net_line(net: Option<&NetMeasurements>) -> String {
    let Some(n) = net else {
        return "RPS/RFS: not readable when recording".into();
    };
    let on = |b: bool| if b { "on" } else { "off" };
    let mut line = format!(
        "RPS {}, RFS {} (rps_sock_flow_entries {})",
        on(n.rps_enabled),
        on(n.rfs_enabled),
        n.rps_sock_flow_entries
    );
    if n.interfaces.is_empty() {
        line.push_str("; no interface with rx queues");
        return line;
    }
    let shown: Vec<String> = n
        .interfaces
        .iter()
        .take(NET_INTERFACES_SHOWN)
        .map(|i| {
            format!(
                "{} {} (RPS {}, RFS {})",
                i.name, i.rx_queues, i.rps_queues, i.rfs_queues
            )
        })
        .collect();
    let _ = write!(line, "; rx queues: {}", shown.join(", "));
    let more = n.interfaces.len().saturating_sub(NET_INTERFACES_SHOWN);
    if more > 0 {
        let _ = write!(line, " and {more} more interfaces");
    }
    line
}

/// `name` cut to `max` characters, with "…" when cut.
pub(crate) fn truncate(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// Said instead of an empty table when no watched syscall was made.
pub(crate) const NO_WATCHED_CALLS: &str =
    "no watched syscall (mmap, munmap, madvise, brk, mremap, futex, rseq) was made";

/// "futex wait: 450 ms/s blocked in total; most: tid 1001 30.0% of wall time
/// blocked, ...".
pub(crate) fn futex_line(s: &SyscallsMeasurements) -> String {
    let mut line = format!(
        "futex wait: {} ms/s blocked in total",
        format_number(s.futex_wait_ms_per_s)
    );
    if !s.top_futex_threads.is_empty() {
        let top: Vec<String> = s
            .top_futex_threads
            .iter()
            .map(|t| format!("tid {} {}", t.tid, percent(t.blocked_share)))
            .collect();
        let _ = write!(
            line,
            "; most blocked (share of wall time): {}",
            top.join(", ")
        );
    }
    line
}

/// "rseq: 4 registrations seen, 2 failed (2 EINVAL)".
pub(crate) fn rseq_calls_line(s: &SyscallsMeasurements) -> String {
    let mut line = format!(
        "rseq: {} registrations seen, {} failed",
        s.rseq_registrations, s.rseq_failed
    );
    if !s.rseq_failed_by_errno.is_empty() {
        let by: Vec<String> = s
            .rseq_failed_by_errno
            .iter()
            .map(|e| format!("{} {}", e.count, e.name))
            .collect();
        let _ = write!(line, " ({})", by.join(", "));
    }
    line
}

/// "blocked: …; allocator google_tcmalloc, glibc __rseq_size 32, confidence high".
pub(crate) fn rseq_ownership_line(r: &RseqMeasurement) -> String {
    format!(
        "{}; allocator {}, glibc __rseq_size {}, confidence {}",
        r.verdict_text,
        r.allocator,
        r.glibc_rseq_size
            .map_or("unknown".to_string(), |n| n.to_string()),
        r.confidence
    )
}

/// "3960 samples; target 25.0% of the sampled CPU time; allocator
/// (google_tcmalloc) 12.0% of the target's samples, slow paths 4.0%".
pub(crate) fn perf_line(f: &PerfMeasurements) -> String {
    format!(
        "{} samples; target {} of the sampled CPU time ({} samples); allocator{} {} of the \
         target's samples, slow paths {}",
        f.samples,
        percent(f.target_cpu_share),
        f.target_samples,
        f.allocator
            .as_ref()
            .map_or(String::new(), |a| format!(" ({a})")),
        percent(f.allocator_share),
        percent(f.slow_path_share)
    )
}

/// "3 checkpoints, total 4500 ms, mean 1500 ms, max 3000 ms; one still
/// running at the end; in libwiredtiger.so".
pub(crate) fn wiredtiger_line(w: &WiredTigerMeasurements) -> String {
    let mut line = format!("{} checkpoints", w.checkpoints);
    if w.checkpoints > 0 {
        let _ = write!(
            line,
            ", total {} ms, mean {} ms, max {} ms",
            format_number(w.total_ms),
            format_number(w.mean_ms),
            format_number(w.max_ms)
        );
    }
    line.push_str(if w.in_progress {
        "; one still running at the end"
    } else {
        "; none running at the end"
    });
    if let Some(o) = &w.object {
        let _ = write!(line, "; WiredTiger in {o}");
    }
    line
}

/// The contention block: windows, the inside/outside split, lock kinds,
/// D-state stacks and thread classes.
fn write_contention(
    out: &mut String,
    c: &crate::report::contention::ContentionMeasurements,
    p: &Painter,
) -> std::fmt::Result {
    use crate::report::contention::{split_line, windows_line};
    let line = format!("{}  {}", p.bold("Contention"), windows_line(c));
    writeln!(out, "{}", wrap(&line, "  ", WIDTH))?;
    for (name, s) in [
        ("futex waits", &c.futex),
        ("kernel lock waits", &c.kernel_locks),
        ("D-state sleeps", &c.dstate),
    ] {
        if let Some(s) = s {
            writeln!(out, "{}", wrap(&split_line(name, s), "    ", WIDTH))?;
        }
    }
    if !c.lock_kinds.is_empty() {
        let kinds: Vec<String> = c
            .lock_kinds
            .iter()
            .map(|k| format!("{} {} waits {:.1} ms", k.kind, k.waits, k.wait_ms))
            .collect();
        let line = format!("kernel locks by kind: {}", kinds.join(", "));
        writeln!(out, "{}", wrap(&line, "    ", WIDTH))?;
    }
    for st in &c.top_stacks {
        let line = format!(
            "D state in {}: {} sleeps, {:.1} ms ({:.1} ms inside checkpoints); {}",
            st.signature.as_deref().unwrap_or("(unknown)"),
            st.sleeps,
            st.total_ms,
            st.inside_ms,
            st.frames.join(" < ")
        );
        writeln!(out, "{}", wrap(&line, "    ", WIDTH))?;
    }
    if !c.classes.is_empty() {
        writeln!(
            out,
            "    {:<15} {:>7} {:>10} {:>13} {:>9} {:>8} {:>8} {:>8} {:>8}",
            "class",
            "threads",
            "futex ms/s",
            "(in/out ckpt)",
            "lock ms/s",
            "D ms/s",
            "invol/s",
            "wkpre/s",
            "runq µs"
        )?;
        let rate = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
        for k in &c.classes {
            writeln!(
                out,
                "    {:<15} {:>7} {:>10.1} {:>13} {:>9.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
                truncate(&k.class, 15),
                k.threads,
                k.futex_wait_ms_per_s,
                format!(
                    "{}/{}",
                    rate(k.futex_inside_ms_per_s),
                    rate(k.futex_outside_ms_per_s)
                ),
                k.lock_wait_ms_per_s,
                k.dstate_ms_per_s,
                k.involuntary_per_s,
                k.wakeup_preempted_per_s,
                k.runq_mean_us
            )?;
        }
    }
    if c.drops > 0 {
        writeln!(
            out,
            "    {} waits not timed (maps full or no stack)",
            c.drops
        )?;
    }
    Ok(())
}

fn write_measurements(out: &mut String, m: &Measurements, p: &Painter) -> std::fmt::Result {
    writeln!(out, "{}", p.heading("Measurements"))?;
    if let Some(s) = &m.sched {
        writeln!(out)?;
        writeln!(
            out,
            "  {}  {}, {:.1} s",
            p.bold("Scheduler"),
            sched_scope(s),
            s.duration_s
        )?;
        let label = |l: &str| format!("    {l:<18}");
        writeln!(
            out,
            "{}{}/s on all CPUs; observed threads {}/s",
            label("context switches"),
            p.bold(&format_number(s.switches_per_s)),
            format_number(s.observed_switches_per_s)
        )?;
        writeln!(
            out,
            "{}{}/s, {} of observed switches",
            label("involuntary"),
            p.bold(&format_number(s.involuntary_per_s)),
            p.bold(&percent(s.involuntary_share))
        )?;
        writeln!(out, "{}{}", label("run-queue delay"), runq_percentiles(s))?;
        if !s.top_classes.is_empty() {
            writeln!(out, "    top thread classes by involuntary switches:")?;
            writeln!(
                out,
                "{}",
                p.dim(&format!(
                    "      {:<20} {:>7} {:>9} {:>8}  {}",
                    "class", "threads", "invol/s", "invol %", "mean run-queue delay"
                ))
            )?;
            for c in &s.top_classes {
                writeln!(
                    out,
                    "      {:<20} {:>7} {:>9.1} {:>8.1}  {} µs",
                    truncate(&c.class, 20),
                    c.threads,
                    c.involuntary_per_s,
                    c.involuntary_share * 100.0,
                    format_number(c.runq_mean_us)
                )?;
            }
        }
    }
    if let Some(s) = &m.softirq {
        writeln!(out)?;
        writeln!(
            out,
            "  {}  host-wide, {} CPUs, {:.1} s; CPU time in ms per second (1000 = one whole CPU)",
            p.bold("Softirq"),
            s.cpu_count,
            s.duration_s
        )?;
        let mut header = format!("      {:<10}", "CPU");
        for v in &s.vectors {
            let _ = write!(header, "{:>8}", v.name);
        }
        let _ = write!(header, "{:>8}{:>7}", "all", "% CPU");
        writeln!(out, "{}", p.dim(&header))?;
        let row = |label: &str, times: &[f64], all: f64, share: f64| -> String {
            let mut line = format!("      {label:<10}");
            for t in times {
                let _ = write!(line, "{t:>8.1}");
            }
            let _ = write!(line, "{all:>8.1}{:>7.1}", share * 100.0);
            line
        };
        for c in &s.cpus {
            writeln!(
                out,
                "{}",
                row(
                    &c.cpu.to_string(),
                    &c.time_ms_per_s,
                    c.all_ms_per_s,
                    c.share
                )
            )?;
        }
        if let Some(o) = &s.other_cpus {
            let label = format!("mean of {}", o.cpus);
            writeln!(
                out,
                "{}",
                row(&label, &o.time_ms_per_s, o.all_ms_per_s, o.share)
            )?;
        }
        let totals: Vec<f64> = s.vectors.iter().map(|v| v.time_ms_per_s).collect();
        writeln!(
            out,
            "{}",
            p.bold(&row("all CPUs", &totals, s.time_ms_per_s, s.cpu_mean_share))
        )?;
        let mut counts = format!("      {:<10}", "entries/s");
        for v in &s.vectors {
            let _ = write!(counts, "{:>8.0}", v.count_per_s);
        }
        let _ = write!(counts, "{:>8.0}", s.count_per_s);
        writeln!(out, "{counts}")?;
        writeln!(out, "{}", wrap(&net_rx_line(s), "    ", WIDTH))?;
        writeln!(out, "{}", wrap(&softirq_cpu_line(s), "    ", WIDTH))?;
        writeln!(
            out,
            "    hard IRQs {}/s, {} ms/s{}",
            format_number(s.hardirq_count_per_s),
            format_number(s.hardirq_time_ms_per_s),
            if s.top_hardirqs.is_empty() {
                ""
            } else {
                "; most time:"
            }
        )?;
        if !s.top_hardirqs.is_empty() {
            writeln!(
                out,
                "{}",
                p.dim(&format!(
                    "      {:>5}  {:<30} {:>9} {:>8} {:>12}",
                    "IRQ", "name", "per s", "ms/s", "busiest CPU"
                ))
            )?;
            for h in &s.top_hardirqs {
                writeln!(
                    out,
                    "      {:>5}  {:<30} {:>9.0} {:>8.1} {:>12}",
                    h.irq,
                    truncate(&h.name, 30),
                    h.count_per_s,
                    h.time_ms_per_s,
                    h.busiest_cpu
                )?;
            }
        }
        if let Some(drops) = softirq_drops_line(s) {
            writeln!(out, "{}", wrap(&drops, "    ", WIDTH))?;
        }
    }
    if let Some(s) = &m.syscalls {
        writeln!(out)?;
        writeln!(
            out,
            "  {}  observed threads, {:.1} s",
            p.bold("Syscalls"),
            s.duration_s
        )?;
        if s.calls.is_empty() {
            writeln!(out, "    {NO_WATCHED_CALLS}")?;
        } else {
            writeln!(
                out,
                "{}",
                p.dim(&format!(
                    "      {:<12} {:>10} {:>8} {:>10} {:>10} {:>12}",
                    "call", "calls/s", "errors", "mean µs", "p99 µs", "MiB/s"
                ))
            )?;
        }
        for c in &s.calls {
            writeln!(
                out,
                "      {:<12} {:>10} {:>8} {:>10} {:>10} {:>12}",
                truncate(&c.name, 12),
                format_number(c.count_per_s),
                c.errors,
                format_number(c.mean_us),
                c.p99_us.map_or("-".into(), format_number),
                c.bytes_per_s
                    .map_or("-".into(), |b| format_number(b / 1_048_576.0))
            )?;
        }
        writeln!(out, "{}", wrap(&futex_line(s), "    ", WIDTH))?;
        writeln!(out, "{}", wrap(&rseq_calls_line(s), "    ", WIDTH))?;
    }
    if let Some(r) = &m.rseq {
        writeln!(out)?;
        let line = format!("{}  {}", p.bold("rseq ownership"), rseq_ownership_line(r));
        writeln!(out, "{}", wrap(&line, "  ", WIDTH))?;
    }
    if let Some(f) = &m.perf {
        writeln!(out)?;
        writeln!(
            out,
            "  {}  CPU-time sampling, {:.1} s",
            p.bold("Perf"),
            f.duration_s
        )?;
        writeln!(out, "{}", wrap(&perf_line(f), "    ", WIDTH))?;
        if !f.top_symbols.is_empty() {
            writeln!(
                out,
                "{}",
                p.dim(&format!(
                    "      {:<44} {:<28} {:>8} {:>7}",
                    "symbol", "object", "samples", "%"
                ))
            )?;
            for t in &f.top_symbols {
                writeln!(
                    out,
                    "      {:<44} {:<28} {:>8} {:>7.1}",
                    truncate(&t.symbol, 44),
                    truncate(t.object.as_deref().map_or("?", file_name), 28),
                    t.samples,
                    t.share * 100.0
                )?;
            }
        }
    }
    if let Some(w) = &m.wiredtiger {
        writeln!(out)?;
        let line = format!("{}  {}", p.bold("WiredTiger"), wiredtiger_line(w));
        writeln!(out, "{}", wrap(&line, "  ", WIDTH))?;
    }
    if let Some(a) = &m.alloc {
        writeln!(out)?;
        let line = format!(
            "{}  {}",
            p.bold("Allocator latency"),
            super::alloc::summary_line(a)
        );
        writeln!(out, "{}", wrap(&line, "  ", WIDTH))?;
        for (i, row) in super::alloc::terminal_rows(a).iter().enumerate() {
            let row = if i == 0 { p.dim(row) } else { row.clone() };
            writeln!(out, "{row}")?;
        }
    }
    if let Some(c) = &m.contention {
        writeln!(out)?;
        write_contention(out, c, p)?;
    }
    writeln!(out)?;
    match &m.mongod {
        Some(mongod) => {
            writeln!(out, "  {}", p.bold("mongod"))?;
            for line in mongod.lines() {
                writeln!(out, "{}", wrap(&line, "    ", WIDTH))?;
            }
        }
        None => {
            let line = format!(
                "{}  {}",
                p.bold("mongod"),
                crate::rules::facts::mongod::NOT_POLLED
            );
            writeln!(out, "{}", wrap(&line, "  ", WIDTH))?;
        }
    }
    if let Some(h) = &m.host_settings {
        writeln!(out)?;
        writeln!(out, "  {}", p.bold("host settings"))?;
        for line in h.lines() {
            writeln!(out, "{}", wrap(&line, "    ", WIDTH))?;
        }
    }
    writeln!(out)?;
    writeln!(out, "{}", wrap(&net_line(m.net.as_ref()), "  ", WIDTH))?;
    if !m.not_recorded.is_empty() {
        writeln!(out)?;
        for n in &m.not_recorded {
            // "  softirq    not measured: reason...", the reason wrapped under
            // itself; "measured in part:" for a family whose numbers are shown
            // above but are incomplete.
            let label = format!("{}:", m.note_label(&n.family));
            let plain = format!("  {:<10} {label} ", n.family);
            let hang = " ".repeat(plain.chars().count());
            let reason = wrap(&n.reason, &hang, WIDTH);
            let status = p.paint(
                Style::new().fg_color(Some(AnsiColor::Yellow.into())),
                &label,
            );
            writeln!(
                out,
                "  {:<10} {status} {}",
                n.family,
                reason.trim_start_matches(' ')
            )?;
        }
    }
    Ok(())
}

fn write_evidence(out: &mut String, items: &[EvidenceItem], p: &Painter) -> std::fmt::Result {
    let width = items
        .iter()
        .map(|e| e.label.chars().count())
        .max()
        .unwrap_or(0);
    for e in items {
        let pad = width - e.label.chars().count();
        writeln!(
            out,
            "      {}{}  {}",
            e.label,
            " ".repeat(pad),
            p.bold(&e.value.to_string())
        )?;
    }
    Ok(())
}

/// One command per `$ ` line. The lines after the first of a multi-line
/// command (a heredoc) are printed flush left and verbatim, so that copying
/// them gives the exact file content and a terminator (`EOF`) that the shell
/// recognises.
fn write_commands(out: &mut String, commands: &[String], p: &Painter) -> std::fmt::Result {
    for c in commands {
        for (i, line) in c.trim_end().lines().enumerate() {
            if i == 0 {
                writeln!(out, "      {}", p.command(&format!("$ {line}")))?;
            } else if line.is_empty() {
                writeln!(out)?;
            } else {
                writeln!(out, "{}", p.command(line))?;
            }
        }
    }
    Ok(())
}

/// "Confidence: 0.80 (how directly the evidence shows the cause)".
pub(crate) fn confidence_line(f: &Finding) -> String {
    format!(
        "Confidence: {:.2} (0 to 1: how directly the evidence shows the cause)",
        f.confidence
    )
}

/// One line per optional evidence group the finding was made without:
/// "Made without mongod data: mongod was not polled: ...". Nothing when the
/// rule saw everything it can use.
pub(crate) fn missing_lines(f: &Finding) -> Vec<String> {
    f.missing
        .iter()
        .map(|m| format!("Made without {} data: {}", m.group, m.reason))
        .collect()
}

fn write_finding(out: &mut String, f: &Finding, p: &Painter) -> std::fmt::Result {
    writeln!(
        out,
        "{}  {}  [{}]",
        p.bold(&format!("#{}", f.rank)),
        p.bold(&f.title),
        p.severity(f.severity)
    )?;
    writeln!(out, "    rule   {}", f.rule_id)?;
    writeln!(
        out,
        "    score  {}  ({})",
        p.bold(&format!("{:.2}", f.score)),
        f.rank_reason
    )?;
    writeln!(out)?;
    writeln!(out, "{}", wrap(&f.summary, "    ", WIDTH))?;
    writeln!(out)?;
    writeln!(out, "    {}", p.bold("Evidence"))?;
    write_evidence(out, &f.evidence, p)?;
    writeln!(out)?;
    writeln!(out, "{}", wrap(&confidence_line(f), "    ", WIDTH))?;
    for line in missing_lines(f) {
        writeln!(out, "{}", wrap(&line, "    ", WIDTH))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(
            &format!(
                "Expected impact: {} (source: {})",
                f.impact.expected, f.impact.source
            ),
            "    ",
            WIDTH
        )
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(&format!("Fix: {}", f.fix.summary), "    ", WIDTH)
    )?;
    write_commands(out, &f.fix.commands, p)?;
    for file in &f.fix.files {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            wrap(&format!("In {} ({}):", file.path, file.how), "    ", WIDTH)
        )?;
        // Verbatim and flush left: copied, it is the file's content.
        for line in file.content.trim_end().lines() {
            writeln!(out, "{}", p.command(line))?;
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(&format!("Risk: {}", f.fix.risk), "    ", WIDTH)
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(&format!("Verify: {}", f.fix.verify), "    ", WIDTH)
    )?;
    if !f.fix.revert.is_empty() {
        writeln!(out)?;
        writeln!(out, "    Revert:")?;
        write_commands(out, &f.fix.revert, p)?;
    }
    if !f.references.is_empty() {
        writeln!(out)?;
        writeln!(out, "    References:")?;
        for r in &f.references {
            match &r.url {
                Some(url) => writeln!(out, "      - {}: {url}", r.title)?,
                None => writeln!(out, "      - {}", r.title)?,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::explain;
    use crate::rules::{RuleSet, testdata};

    fn report() -> Report {
        explain(
            &testdata::oversubscribed(),
            &RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap()
    }

    #[test]
    fn plain_output_has_the_finding_evidence_and_fix() {
        let text = render(&report(), false);
        assert!(!text.contains('\x1b'), "escape sequence without color");
        assert!(text.contains("mdiag report: db1.example"));
        assert!(text.contains("kernel    6.18.44-fc-v769"), "{text}");
        assert!(
            text.contains("target    mongod (pid 1000, /usr/bin/mongod)"),
            "{text}"
        );
        assert!(text.contains("for 10.0 s (stopped: duration)"), "{text}");
        assert!(
            text.contains("#1  Wakeup preemption keeps interrupting busy threads  [HIGH]"),
            "{text}"
        );
        assert!(
            text.contains("impact 0.60 × confidence 0.60 × x86_64 prior 1.00 (default) = 0.36"),
            "{text}"
        );
        // Evidence numbers, aligned after the longest label.
        assert!(
            text.contains("involuntary switches (% of observed switches)  90.3\n"),
            "{text}"
        );
        assert!(text.contains("threads observed"), "{text}");
        assert!(
            text.contains("$ echo NO_WAKEUP_PREEMPTION > /sys/kernel/debug/sched/features"),
            "{text}"
        );
        // A heredoc's lines are verbatim and flush left, so a copy works.
        assert!(text.contains("<<'EOF'\n[Unit]\n"), "{text}");
        assert!(text.contains("\n\n[Service]\n"), "{text}");
        assert!(
            text.contains("\nEOF\n      $ systemctl daemon-reload"),
            "{text}"
        );
        assert!(
            !text.lines().any(|l| l.ends_with(' ')),
            "trailing spaces: {text}"
        );
        assert!(text.contains("Risk: With wakeup preemption off"), "{text}");
        assert!(text.contains("Verify: "), "{text}");
        assert!(
            text.contains("https://docs.kernel.org/scheduler/sched-eevdf.html"),
            "{text}"
        );
        assert!(
            text.contains("sched      attached (2 programs), 0 events dropped"),
            "{text}"
        );
        for line in text.lines() {
            // Wrapped prose stays within the width (commands and URLs may not).
            if !line.contains("$ ") && !line.contains("http") && !line.starts_with("Exec") {
                assert!(line.chars().count() <= WIDTH, "too long: {line}");
            }
        }
    }

    #[test]
    fn color_adds_styles_only_when_asked() {
        let text = render(&report(), true);
        assert!(text.contains("\x1b["), "no escape sequence with color");
        assert!(text.contains("Wakeup preemption keeps interrupting busy threads"));
    }

    #[test]
    fn host_wide_and_failed_probes_are_explained() {
        let mut rec = testdata::oversubscribed();
        rec.target = None;
        rec.probes[0].programs[1].error = Some("tracepoint sched_wakeup not found".into());
        let report = explain(&rec, &RuleSet::builtin().unwrap(), Some("s390x"), None).unwrap();
        let text = render(&report, false);
        assert!(text.contains("host-wide: no target process"), "{text}");
        assert!(
            text.contains("for s390x (--arch; recorded on x86_64)"),
            "{text}"
        );
        assert!(text.contains("No rule fired."), "{text}");
        assert!(text.contains("Not assessed (data missing)"), "{text}");
        assert!(text.contains("attached only partly"), "{text}");
        assert!(
            text.contains("sched      partly attached (1 of 2 programs)"),
            "{text}"
        );
        assert!(
            text.contains("sched_wakeup at tp_btf/sched_wakeup: tracepoint sched_wakeup not found"),
            "{text}"
        );
    }

    #[test]
    fn passed_rules_show_their_numbers() {
        let report = explain(
            &testdata::near_miss(),
            &RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap();
        let text = render(&report, false);
        assert!(text.contains("Passed (checked, did not fire)"), "{text}");
        assert!(
            text.contains("involuntary switches (% of observed switches): 10.0;"),
            "{text}"
        );
    }

    /// The text with every run of whitespace made one space (wrapping undone).
    fn flat(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn measurements_show_the_numbers_of_each_family() {
        let rec = crate::rules::facts::softirq::testdata::net_rx_on_cpu0();
        let report = explain(&rec, &RuleSet::builtin().unwrap(), None, None).unwrap();
        let text = render(&report, false);
        assert!(!text.contains('\x1b'), "escape sequence without color");
        let measurements = text.find("\nMeasurements\n").expect("section present");
        let probes = text.find("\nProbes\n").unwrap();
        assert!(measurements < probes, "{text}");
        let section = &text[measurements..probes];

        // Scheduler: 1500 switches/s, 650 involuntary of 720 observed, the
        // run-queue percentiles of the histogram, one thread class.
        assert!(
            section.contains("\n  Scheduler  the target's threads, 10.0 s\n"),
            "{section}"
        );
        assert!(
            section
                .contains("\n    context switches  1500/s on all CPUs; observed threads 720/s\n"),
            "{section}"
        );
        assert!(
            section.contains("\n    involuntary       650/s, 90.3% of observed switches\n"),
            "{section}"
        );
        assert!(
            section.contains("\n    run-queue delay   p50 3146 µs, p90 6576 µs, p99 8329 µs\n"),
            "{section}"
        );
        assert!(
            section.contains(
                "\n      class                threads   invol/s  invol %  mean run-queue delay\n\
                 \x20     conn                       4     650.0     90.3  3000 µs\n"
            ),
            "{section}"
        );

        // Softirq: the per-CPU table (ms/s), totals and entries per second.
        assert!(
            section.contains(
                "\n  Softirq  host-wide, 4 CPUs, 10.0 s; CPU time in ms per second (1000 = one whole CPU)\n"
            ),
            "{section}"
        );
        assert!(
            section.contains(
                "\n      CPU         NET_RX  NET_TX   TIMER     RCU   SCHED   BLOCK     all  % CPU\n"
            ),
            "{section}"
        );
        assert!(
            section.contains(
                "\n      1             20.0     2.0     1.0     0.4     1.2     0.0    24.6    2.5\n"
            ),
            "{section}"
        );
        assert!(
            section.contains(
                "\n      3             10.0     2.0     1.0     0.6     0.8     0.0    14.4    1.4\n"
            ),
            "{section}"
        );
        assert!(
            section.contains(
                "\n      all CPUs     350.0     8.0     4.0     2.0     4.8     0.0   368.9    9.2\n"
            ),
            "{section}"
        );
        assert!(
            section.contains(
                "\n      entries/s    48000    2000    4000    1000    2400       0   57410\n"
            ),
            "{section}"
        );
        let flat = flat(section);
        assert!(
            flat.contains(
                "NET_RX imbalance 3.43 (busiest CPU / mean; 1.00 = even, 4 = all on one CPU): \
                 CPU 0 has 85.7% of NET_RX time, and NET_RX takes 30.0% of that CPU"
            ),
            "{flat}"
        );
        assert!(
            flat.contains(
                "busiest CPU in softirqs: CPU 0, 30.5% of its time (mean over 4 CPUs 9.2%)"
            ),
            "{flat}"
        );
        assert!(
            section.contains("\n    hard IRQs 22505/s, 45.0 ms/s; most time:\n"),
            "{section}"
        );
        assert!(
            section.contains(
                "\n         45  eth0-TxRx-0                        20000     40.0            0\n\
                 \x20        46  eth0-TxRx-1                         2000      4.0            1\n\
                 \x20        24  nvme0q1                              500      1.0            2\n"
            ),
            "{section}"
        );
        assert!(!section.contains("virtio0-config"), "only the top 3 IRQs");
        assert!(
            flat.contains("3 events lost (3 exits without entry, normal right after attach;"),
            "{flat}"
        );
        assert!(
            flat.contains(
                "RPS off, RFS on (rps_sock_flow_entries 32768); \
                 rx queues: eth0 4 (RPS 0, RFS 4), eth1 2 (RPS 0, RFS 0)"
            ),
            "{flat}"
        );
        assert!(!section.contains("not measured"), "{section}");
        for line in section.lines() {
            assert!(line.chars().count() <= WIDTH, "too long: {line}");
            assert!(!line.ends_with(' '), "trailing space: {line:?}");
        }
    }

    #[test]
    fn families_not_measured_say_why() {
        // A recording from before the softirq family, sched failed, RPS unreadable.
        let mut rec = testdata::oversubscribed();
        rec.probes[0].programs[0].error = Some("permission denied".into());
        rec.probes[0].programs[1].error = Some("tracepoint missing".into());
        let report = explain(&rec, &RuleSet::builtin().unwrap(), None, None).unwrap();
        let text = render(&report, false);
        assert!(!text.contains("  Scheduler  "), "{text}");
        assert!(!text.contains("  Softirq  "), "{text}");
        // The reason is wrapped under itself, within the width.
        assert!(
            text.contains(
                "\n  sched      not measured: the sched probe did not attach: sched_switch \
                 (tp_btf/sched_switch):\n\
                 \x20                          permission denied; sched_wakeup \
                 (tp_btf/sched_wakeup): tracepoint missing\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\n  softirq    not measured: the softirq probe was not part of this recording\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("\n  RPS/RFS: not readable when recording\n"),
            "{text}"
        );
        let colored = render(&report, true);
        assert!(
            colored.contains("\x1b[33mnot measured:\x1b[0m"),
            "{colored}"
        );
    }

    #[test]
    fn wrap_keeps_words_and_indent() {
        let w = wrap("aaa bbb ccc ddd\n\nsecond para", "  ", 29);
        assert_eq!(w, "  aaa bbb ccc ddd\n\n  second para");
        let w = wrap(&"word ".repeat(10), "> ", 22);
        assert!(
            w.lines().all(|l| l.starts_with("> ") && l.len() <= 22),
            "{w}"
        );
    }
}
