//! The agent's state as the metrics show it ([`View`]): each watched target
//! with its probes and the figures of its last window (read from the same
//! facts the rules read, so a metric and a finding never disagree), the
//! tracked findings, and the agent's own health.

use std::collections::BTreeMap;

use prometheus_client::registry::Unit;

use super::{
    config::AgentConfig,
    exposition::{Buckets, ratio},
    findings::{Findings, state_name},
    flight::Flight,
    metrics::{Figure, FigureKind, FindingView, SelfView, TargetView, View},
    probe_reason::ProbeReason,
    watch::Watch,
};
use crate::report::Report;
use crate::rules::RuleSet;

/// A last-window gauge read from a fact: (fact path, metric name, help,
/// unit, factor to the unit).
type FactGauge = (&'static str, &'static str, &'static str, FigureUnit, f64);

/// A figure's unit, as a constant.
#[derive(Clone, Copy)]
enum FigureUnit {
    Ratio,
    Seconds,
}

/// The facts exported as gauges of the last window.
const FACT_GAUGES: &[FactGauge] = &[
    (
        "sched.involuntary_share",
        "sched_involuntary_share",
        "Share of the target's context switches that were involuntary (last window)",
        FigureUnit::Ratio,
        1.0,
    ),
    (
        "sched.wakeup_preemption_share",
        "sched_wakeup_preemption_share",
        "Share of involuntary switches that were wakeup preemptions (last window)",
        FigureUnit::Ratio,
        1.0,
    ),
    (
        "sched.runq_p99_us",
        "sched_runqueue_delay_p99",
        "99th percentile of the time a runnable thread waited for a CPU (last window)",
        FigureUnit::Seconds,
        1e-6,
    ),
    (
        "sched.cpu_busy_share",
        "sched_cpu_busy_share",
        "Share of the host's CPU time the observed threads ran (last window)",
        FigureUnit::Ratio,
        1.0,
    ),
    (
        "softirq.time_ms_per_s",
        "softirq_time",
        "Softirq time per second of wall time, all CPUs (last window)",
        FigureUnit::Ratio,
        1e-3,
    ),
    (
        "softirq.cpu_max_share",
        "softirq_cpu_max_share",
        "The busiest CPU's share of all softirq time (last window; 1/CPUs when balanced)",
        FigureUnit::Ratio,
        1.0,
    ),
    (
        "softirq.net_rx_busiest_share",
        "softirq_net_rx_busiest_share",
        "The busiest CPU's share of NET_RX softirq time (last window)",
        FigureUnit::Ratio,
        1.0,
    ),
    (
        "contention.conn_futex_ratio",
        "contention_conn_futex_checkpoint",
        "Connection threads' futex wait rate inside checkpoints over outside (last window)",
        FigureUnit::Ratio,
        1.0,
    ),
];

/// Everything the next exposition shows.
pub fn build(
    watches: &[Watch],
    reports: &BTreeMap<String, Report>,
    flight: &Flight,
    windows: u64,
    config: &AgentConfig,
    published: &super::serve::Published,
) -> View {
    let (arch, kernel) = crate::host::machine_and_release();
    View {
        host: crate::host::hostname(),
        arch,
        kernel,
        targets: watches
            .iter()
            .map(|w| target(w, reports.get(&w.id)))
            .collect(),
        findings: Vec::new(),
        agent: SelfView {
            process: super::process::sample(),
            windows,
            scrapes: published.scrapes(),
            bpf_run_seconds: None,
            alloc_budget_spent_ratio: watches
                .iter()
                .filter_map(|w| w.alloc_share)
                .fold(0.0, f64::max),
            alloc_budget_ratio: config.alloc_budget,
            flight_recordings: flight.saved,
            flight_removed: flight.removed,
            max_series: config.max_series,
            fleet: None,
            skipped: Vec::new(),
            web_tls: published.tls_reloads(),
        },
    }
}

/// The per-event families' duty cycle in the last window: the share of
/// its seconds they were attached, and what they cost.
fn coverage_figures(w: &Watch) -> Vec<Figure> {
    let Some(c) = w.coverage else {
        return Vec::new();
    };
    let mut figures = Vec::new();
    if let Some(r) = c.ratio() {
        figures.push(Figure {
            name: "probe_coverage",
            help: "Share of the last window's seconds the per-event probes (sched, softirq, syscalls, contention) were attached, as probe_budget allows",
            unit: Some(ratio()),
            kind: FigureKind::Gauge(r),
            labels: Vec::new(),
        });
    }
    if let Some(spent) = c.spent()
        && w.duty_measured() == Some(true)
    {
        figures.push(Figure {
            name: "probe_cost",
            help: "Share of the target's CPU the per-event probes' kernel programs cost in the last window",
            unit: Some(ratio()),
            kind: FigureKind::Gauge(spent),
            labels: Vec::new(),
        });
    }
    figures
}

fn target(w: &Watch, report: Option<&Report>) -> TargetView {
    let probes = w
        .probes()
        .status()
        .iter()
        .map(|s| (s.family.clone(), ProbeReason::of_family(s)))
        .collect();
    let figures = report.map_or_else(Vec::new, |r| {
        FACT_GAUGES
            .iter()
            .filter_map(|(path, name, help, unit, factor)| {
                let v = fact(&r.facts, path)?;
                Some(Figure {
                    name,
                    help,
                    unit: Some(match unit {
                        FigureUnit::Ratio => ratio(),
                        FigureUnit::Seconds => Unit::Seconds,
                    }),
                    kind: FigureKind::Gauge(v * factor),
                    labels: Vec::new(),
                })
            })
            .collect()
    });
    let mut figures = figures;
    figures.extend(total_figures(&w.totals));
    if let Some(share) = w.alloc_share {
        figures.push(Figure {
            name: "alloc_probe_cost",
            help: "Share of the target's CPU the allocator probes cost in the last window that ran one",
            unit: Some(ratio()),
            kind: FigureKind::Gauge(share),
            labels: Vec::new(),
        });
    }
    if let Some(every) = w.alloc_every() {
        figures.push(Figure {
            name: "alloc_window_period",
            help: "Time between full allocator probe windows the budget allows now",
            unit: Some(Unit::Seconds),
            kind: FigureKind::Gauge(every.as_secs_f64()),
            labels: Vec::new(),
        });
    }
    figures.extend(coverage_figures(w));
    let info = w.mongod_info();
    let text = |f: fn(&crate::recording::mongod::MongodInfo) -> &Option<String>| {
        info.and_then(|i| f(i).clone()).unwrap_or_default()
    };
    TargetView {
        id: w.id.clone(),
        rs_nm: text(|i| &i.replica_set),
        rs_state: w.rs_state().map(|s| s.to_string()).unwrap_or_default(),
        cl_id: w.cl_id().unwrap_or_default().to_owned(),
        cl_role: text(|i| &i.cluster_role),
        mongod_version: text(|i| &i.version),
        build_id: w.build_id.clone().unwrap_or_default(),
        up: w.alive(),
        probes,
        drops: w
            .totals
            .drops
            .iter()
            .map(|(f, n)| ((*f).to_owned(), *n))
            .collect(),
        figures,
    }
}

/// Counters and histograms since the target was first watched.
fn total_figures(t: &super::totals::Totals) -> Vec<Figure> {
    let kind = |k: &str| vec![("kind".to_owned(), k.to_owned())];
    let switches = "Context switches of the target's threads, by kind";
    let mut out = vec![
        Figure {
            name: "sched_context_switches",
            help: switches,
            unit: None,
            kind: FigureKind::Counter(t.voluntary as f64),
            labels: kind("voluntary"),
        },
        Figure {
            name: "sched_context_switches",
            help: switches,
            unit: None,
            kind: FigureKind::Counter(t.involuntary as f64),
            labels: kind("involuntary"),
        },
        Figure {
            name: "sched_wakeup_preemptions",
            help: "Involuntary switches in which the thread lost its CPU to a task just woken",
            unit: None,
            kind: FigureKind::Counter(t.wakeup_preemptions as f64),
            labels: Vec::new(),
        },
        Figure {
            name: "sched_migrations",
            help: "Moves of the target's threads to another CPU",
            unit: None,
            kind: FigureKind::Counter(t.migrations as f64),
            labels: Vec::new(),
        },
    ];
    if !t.runq_hist_log2_ns.is_empty() {
        out.push(Figure {
            name: "sched_runqueue_delay",
            help: "Time a runnable thread of the target waited for a CPU",
            unit: Some(Unit::Seconds),
            kind: FigureKind::Histogram(Buckets::from_log2_ns(&t.runq_hist_log2_ns, None)),
            labels: Vec::new(),
        });
    }
    if t.checkpoints > 0 {
        out.push(Figure {
            name: "wiredtiger_checkpoint_duration",
            help: "WiredTiger checkpoints of the target, by duration",
            unit: Some(Unit::Seconds),
            kind: FigureKind::Histogram(Buckets::from_log2_ns(
                &t.checkpoint_hist_log2_ns,
                Some(t.checkpoint_ns as f64),
            )),
            labels: Vec::new(),
        });
    }
    out
}

/// Every tracked finding with its rule's severity and class (a rule no longer in
/// `rules` cannot be tracked: the set is fixed for the agent's life).
pub fn findings(findings: &Findings, rules: &RuleSet) -> Vec<FindingView> {
    findings
        .iter()
        .map(|((rule, target), t)| {
            let def = rules
                .rules()
                .iter()
                .find(|r| r.id() == rule)
                .map(|r| &r.def);
            FindingView {
                rule: rule.clone(),
                target: target.clone(),
                severity: def.map_or("unknown", |d| d.severity.as_str()),
                state: state_name(t.lifecycle.state()),
                class: def.map(|d| d.class).unwrap_or_default(),
            }
        })
        .collect()
}

/// A number at a dotted path of the report's facts.
fn fact(facts: &BTreeMap<String, serde_json::Value>, path: &str) -> Option<f64> {
    let (group, rest) = path.split_once('.')?;
    let mut v = facts.get(group)?;
    for key in rest.split('.') {
        v = v.get(key)?;
    }
    v.as_f64().filter(|x| x.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::metrics::render;

    /// Every metric the agent can export is in docs/agent.md's table.
    #[test]
    fn docs_agent_md_lists_every_metric() {
        let doc = include_str!("../../../docs/agent.md");
        let totals = super::super::totals::Totals {
            runq_hist_log2_ns: vec![1],
            checkpoints: 1,
            checkpoint_hist_log2_ns: vec![1],
            ..Default::default()
        };
        let mut figures = total_figures(&totals);
        figures.extend(FACT_GAUGES.iter().map(|(_, name, help, unit, _)| Figure {
            name,
            help,
            unit: Some(match unit {
                FigureUnit::Ratio => ratio(),
                FigureUnit::Seconds => Unit::Seconds,
            }),
            kind: FigureKind::Gauge(0.5),
            labels: Vec::new(),
        }));
        for (name, unit) in [
            ("alloc_probe_cost", ratio()),
            ("alloc_window_period", Unit::Seconds),
        ] {
            figures.push(Figure {
                name,
                help: "x",
                unit: Some(unit),
                kind: FigureKind::Gauge(1.0),
                labels: Vec::new(),
            });
        }
        let view = View {
            targets: vec![TargetView {
                id: "t".into(),
                probes: vec![("sched".into(), ProbeReason::Attached)],
                drops: vec![("sched".into(), 0)],
                figures,
                ..TargetView::default()
            }],
            findings: vec![
                FindingView {
                    rule: "r".into(),
                    target: "t".into(),
                    severity: "high",
                    state: "firing",
                    class: crate::findings::RuleClass::Finding,
                },
                FindingView {
                    rule: "c".into(),
                    target: "t".into(),
                    severity: "low",
                    state: "firing",
                    class: crate::findings::RuleClass::Checklist,
                },
            ],
            agent: SelfView {
                bpf_run_seconds: Some(1.0),
                max_series: 10_000,
                fleet: Some(Default::default()),
                web_tls: vec![crate::agent::web_reload::ReloadCounts {
                    files: "certificate",
                    ..Default::default()
                }],
                ..SelfView::default()
            },
            ..View::default()
        };
        let text = render(&view);
        let mut names = 0;
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let mut parts = line.split(' ').skip(2);
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            let exported = match kind {
                "counter" => format!("{name}_total"),
                "info" => format!("{name}_info"),
                _ => name.to_owned(),
            };
            assert!(
                doc.contains(&format!("`{exported}`")),
                "docs/agent.md does not list {exported}"
            );
            names += 1;
        }
        assert!(names >= 25, "{names} metrics:\n{text}");
    }
}
