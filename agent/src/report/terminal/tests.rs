//! Tests of the terminal report: the header, findings with evidence and
//! fix, failed probes, passed rules, and the measurements section as laid
//! out from the view model (columns, wrapping, width, colour).

#![allow(
    clippy::too_many_lines,
    reason = "a test builds its case and checks every figure in one place"
)]

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
    let rec = crate::family::softirq::testdata::net_rx_on_cpu0();
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
        section.contains("\n    context switches  1500/s on all CPUs; observed threads 720/s\n"),
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
        flat.contains("busiest CPU in softirqs: CPU 0, 30.5% of its time (mean over 4 CPUs 9.2%)"),
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
