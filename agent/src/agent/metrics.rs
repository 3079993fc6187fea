//! What the agent exports: its [`View`] (filled by the main loop after each
//! slice and window) rendered as Prometheus metrics.
//!
//! Naming follows Prometheus' conventions: the `mdiag_` prefix, base units
//! (seconds, bytes, ratios), `_total` on counters, classic histograms. No
//! pid, tid or CPU-number labels: a target is its stable id (`target`), and
//! joins with mongodb_exporter through `rs_nm` / `cl_id` / `cl_role` on
//! `mdiag_target_info` (which also says the member's `rs_state`: a new
//! state replaces the row, the registry being built afresh each time). Per-CPU data arrives as max / imbalance figures.

use crate::findings::RuleClass;
use prometheus_client::registry::Unit;

use super::exposition::Namespace;
use super::exposition::{Buckets, Exposition, Labels, labels, ratio};
use super::probe_reason::ProbeReason;
use super::process::ProcessView;

/// Everything one exposition shows.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub host: String,
    pub arch: String,
    pub kernel: String,
    pub targets: Vec<TargetView>,
    /// Every tracked finding.
    pub findings: Vec<FindingView>,
    pub agent: SelfView,
}

/// One tracked finding, as `mdiag_finding_state` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingView {
    pub rule: String,
    pub target: String,
    /// The rule's severity (`info` ... `critical`), for Alertmanager's routing.
    pub severity: &'static str,
    /// The lifecycle state's name.
    pub state: &'static str,
    /// Finding or checklist item: the two are exported apart, so alerts
    /// route findings, not configuration hygiene.
    pub class: crate::findings::RuleClass,
}

/// One watched target.
#[derive(Debug, Clone, Default)]
pub struct TargetView {
    pub id: String,
    /// Replica set name (mongodb_exporter's `rs_nm`), when mongod said.
    pub rs_nm: String,
    /// This member's state's name (`PRIMARY`, `SECONDARY`, ...), from the
    /// last replSetGetStatus; "" for a standalone or before it answered.
    pub rs_state: String,
    /// The cluster's id (mongodb_exporter's `cl_id`): `config.version`'s
    /// `clusterId` where there is one, else the replica set's
    /// `settings.replicaSetId` (hex); "" when unknown.
    pub cl_id: String,
    /// Cluster role (mongodb_exporter's `cl_role`): shardsvr, configsvr or "".
    pub cl_role: String,
    pub mongod_version: String,
    /// The program's GNU build-id (hex), "" when unknown.
    pub build_id: String,
    /// Whether the target runs now (false: its figures are stale).
    pub up: bool,
    /// (family, attached or why not, as a code; the text is in the log).
    pub probes: Vec<(String, ProbeReason)>,
    /// Events the kernel side dropped, per family, since attach.
    pub drops: Vec<(String, u64)>,
    /// Figures of the target's windows (gauges of the last window,
    /// counters since the agent first saw it).
    pub figures: Vec<Figure>,
}

/// One exported figure of a target.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: &'static str,
    pub help: &'static str,
    pub unit: Option<Unit>,
    pub kind: FigureKind,
    /// Labels beside `target` (e.g. `kind`, `vector`).
    pub labels: Labels,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FigureKind {
    Gauge(f64),
    Counter(f64),
    Histogram(Buckets),
}

/// The agent's own health.
#[derive(Debug, Clone, Default)]
pub struct SelfView {
    /// The standard process figures (`process_*`).
    pub process: ProcessView,
    pub windows: u64,
    pub scrapes: u64,
    /// BPF programs' run time (the kernel counts it while stats are on).
    pub bpf_run_seconds: Option<f64>,
    /// Share of the targets' CPU spent in the allocator probes (last window).
    pub alloc_budget_spent_ratio: f64,
    pub alloc_budget_ratio: f64,
    pub flight_recordings: u64,
    pub flight_removed: u64,
    pub max_series: usize,
    /// The fleet store's delivery, when `[fleet]` is configured.
    pub fleet: Option<crate::fleet::sender::FleetStats>,
    /// Matching processes not watched at the last scan, by reason (every
    /// reason, zeros included; see [`super::skips`]).
    pub skipped: Vec<(&'static str, usize)>,
    /// Reloads of `/metrics`' TLS files (empty without TLS from files).
    pub web_tls: Vec<super::web_reload::ReloadCounts>,
}

/// The exposition of `view`.
pub fn render(view: &View) -> String {
    let mut e = Exposition::new(view.agent.max_series);
    e.info(
        "build",
        "The agent's version and where it runs",
        labels(&[
            ("version", env!("CARGO_PKG_VERSION")),
            ("arch", &view.arch),
            ("kernel", &view.kernel),
        ]),
    );
    self_metrics(&mut e, &view.agent);
    findings(&mut e, view);
    targets(&mut e, &view.targets);
    e.finish()
}

fn one(v: f64) -> Vec<(Labels, f64)> {
    vec![(Labels::new(), v)]
}

/// The standard `process_*` families, named as every client names them.
fn process_metrics(e: &mut Exposition, p: &ProcessView) {
    let s = Namespace::Standard;
    e.counter_in(
        s,
        "process_cpu",
        "Total user and system CPU time spent in seconds",
        Some(Unit::Seconds),
        one(p.cpu_seconds),
    );
    let mut gauges = vec![
        (
            "process_resident_memory",
            "Resident memory size in bytes",
            Some(Unit::Bytes),
            p.resident_bytes as f64,
        ),
        (
            "process_virtual_memory",
            "Virtual memory size in bytes",
            Some(Unit::Bytes),
            p.virtual_bytes as f64,
        ),
        (
            "process_open_fds",
            "Number of open file descriptors",
            None,
            p.open_fds as f64,
        ),
        (
            "process_start_time",
            "Start time of the process since unix epoch in seconds",
            Some(Unit::Seconds),
            p.start_time_seconds,
        ),
    ];
    if let Some(max) = p.max_fds {
        gauges.push((
            "process_max_fds",
            "Maximum number of open file descriptors",
            None,
            max as f64,
        ));
    }
    for (name, help, unit, v) in gauges {
        e.gauge_in(s, name, help, unit, one(v));
    }
}

fn self_metrics(e: &mut Exposition, a: &SelfView) {
    process_metrics(e, &a.process);
    e.counter(
        "windows",
        "Windows evaluated by the rules",
        None,
        one(a.windows as f64),
    );
    e.counter(
        "scrapes",
        "Scrapes of /metrics served",
        None,
        one(a.scrapes as f64),
    );
    if let Some(s) = a.bpf_run_seconds {
        e.counter(
            "bpf_run",
            "Time the kernel spent in the agent's BPF programs",
            Some(Unit::Seconds),
            one(s),
        );
    }
    e.gauge(
        "alloc_budget_spent",
        "Share of the targets' CPU the allocator probes cost in the last window",
        Some(ratio()),
        one(a.alloc_budget_spent_ratio),
    );
    e.gauge(
        "alloc_budget",
        "The allocator probes' budget, as a share of the target's CPU",
        Some(ratio()),
        one(a.alloc_budget_ratio),
    );
    e.counter(
        "flight_recordings",
        "Flight recordings saved",
        None,
        one(a.flight_recordings as f64),
    );
    e.counter(
        "flight_recordings_removed",
        "Flight recordings removed to keep the directory within its bounds",
        None,
        one(a.flight_removed as f64),
    );
    let skipped = a
        .skipped
        .iter()
        .map(|(reason, n)| (labels(&[("reason", reason)]), *n as f64))
        .collect();
    e.gauge(
        "targets_skipped",
        "Processes matching `processes` not watched at the last scan, by why: unreadable, duplicate_id, attach_failed",
        None,
        skipped,
    );
    if let Some(f) = &a.fleet {
        fleet_metrics(e, f);
    }
    if !a.web_tls.is_empty() {
        web_tls_metrics(e, &a.web_tls);
    }
}

fn web_tls_metrics(e: &mut Exposition, reloads: &[super::web_reload::ReloadCounts]) {
    let rows = reloads
        .iter()
        .flat_map(|r| {
            [("ok", r.ok), ("failed", r.failed)]
                .map(|(result, n)| (labels(&[("files", r.files), ("result", result)]), n as f64))
        })
        .collect();
    e.counter(
        "web_tls_reloads",
        "Changes of /metrics' TLS files (files: certificate, client_ca) read again: ok, or failed (the previous ones kept serving)",
        None,
        rows,
    );
    let failing = reloads
        .iter()
        .map(|r| {
            (
                labels(&[("files", r.files)]),
                f64::from(u8::from(r.failing)),
            )
        })
        .collect();
    e.gauge(
        "web_tls_reload_failed",
        "1 while /metrics' TLS files on disk could not be used at their last change (the previous ones are served), else 0",
        None,
        failing,
    );
}

fn fleet_metrics(e: &mut Exposition, f: &crate::fleet::sender::FleetStats) {
    let gauges = [
        (
            "fleet_up",
            "1 while the fleet store takes the agent's writes, else 0",
            None,
            if f.up { 1.0 } else { 0.0 },
        ),
        (
            "fleet_spool",
            "Bytes in the local fleet spool (delivered segments are removed)",
            Some(Unit::Bytes),
            f.spool_bytes as f64,
        ),
        (
            "fleet_spool_records",
            "Documents in the local fleet spool not delivered yet",
            None,
            f.spool_records as f64,
        ),
    ];
    for (name, help, unit, v) in gauges {
        e.gauge(name, help, unit, one(v));
    }
    let counters = [
        (
            "fleet_delivered",
            "Documents the fleet store acknowledged",
            f.delivered,
        ),
        (
            "fleet_dropped",
            "Documents dropped: by the spool's bounds (oldest first), unreadable, or refused by the store",
            f.dropped,
        ),
        (
            "fleet_retries",
            "Failed attempts to reach or write to the fleet store (each followed by a backoff)",
            f.retries,
        ),
    ];
    for (name, help, v) in counters {
        e.counter(name, help, None, one(v as f64));
    }
}

/// `mdiag_finding_state{rule,target,severity,state}` = 1 for each tracked
/// finding's current state (checklist items: [`checklist`]): one series per finding (a change replaces it;
/// a rule has one severity), so the series stay within the limit however
/// many rules a host trips, and an alert routes on `severity` without a join.
fn findings(e: &mut Exposition, view: &View) {
    let rows = view
        .findings
        .iter()
        .filter(|f| f.class == RuleClass::Finding)
        .map(|f| {
            (
                labels(&[
                    ("rule", &f.rule),
                    ("target", &f.target),
                    ("severity", f.severity),
                    ("state", f.state),
                ]),
                1.0,
            )
        })
        .collect();
    e.gauge(
        "finding_state",
        "Each tracked finding's current state (pending, firing, resolved, stale, flapping)",
        None,
        rows,
    );
    checklist(e, view);
}

/// `mdiag_checklist_item{rule,target,state}` = 1 for each tracked checklist
/// item (a setting that differs from MongoDB's production notes, with no
/// measured cost): apart from `mdiag_finding_state`, so that the alerts,
/// which read that one, page on findings and never on hygiene, while a
/// dashboard can still list what differs on each host.
fn checklist(e: &mut Exposition, view: &View) {
    let rows = view
        .findings
        .iter()
        .filter(|f| f.class == RuleClass::Checklist)
        .map(|f| {
            (
                labels(&[("rule", &f.rule), ("target", &f.target), ("state", f.state)]),
                1.0,
            )
        })
        .collect();
    e.gauge(
        "checklist_item",
        "Each tracked checklist item's current state: a setting that differs from MongoDB's production notes (pending, firing, resolved, stale, flapping)",
        None,
        rows,
    );
}

/// Every target's rows, one family per name (a name registered twice
/// would be two families of the same name, which Prometheus rejects).
fn targets(e: &mut Exposition, targets: &[TargetView]) {
    let infos: Vec<Labels> = targets
        .iter()
        .map(|t| {
            labels(&[
                ("target", &t.id),
                ("rs_nm", &t.rs_nm),
                ("rs_state", &t.rs_state),
                ("cl_id", &t.cl_id),
                ("cl_role", &t.cl_role),
                ("mongod_version", &t.mongod_version),
                ("build_id", &t.build_id),
            ])
        })
        .collect();
    e.info_rows(
        "target",
        "A watched target and the labels that join it with mongodb_exporter",
        infos,
    );
    let up = targets
        .iter()
        .map(|t| (labels(&[("target", &t.id)]), f64::from(u8::from(t.up))))
        .collect();
    e.gauge(
        "target_up",
        "Whether the target runs (0: its findings are stale)",
        None,
        up,
    );
    let probes = targets
        .iter()
        .flat_map(|t| {
            t.probes.iter().map(|(family, reason)| {
                (
                    labels(&[
                        ("target", &t.id),
                        ("family", family),
                        ("reason", reason.as_str()),
                    ]),
                    f64::from(u8::from(*reason == ProbeReason::Attached)),
                )
            })
        })
        .collect();
    e.gauge(
        "probe_up",
        "Whether a probe family is attached (1), with why as a code: attached, not_applicable, left_out, kernel_unsupported, permission, resources, load_failed, attach_failed, other",
        None,
        probes,
    );
    let drops = targets
        .iter()
        .flat_map(|t| {
            t.drops
                .iter()
                .map(|(family, n)| (labels(&[("target", &t.id), ("family", family)]), *n as f64))
        })
        .collect();
    e.counter(
        "probe_drops",
        "Events a probe family's kernel side could not count (map full, read failed)",
        None,
        drops,
    );
    figures(e, targets);
}

/// Figures grouped by name, in first-seen order.
fn figures(e: &mut Exposition, targets: &[TargetView]) {
    let mut names: Vec<&'static str> = Vec::new();
    for f in targets.iter().flat_map(|t| &t.figures) {
        if !names.contains(&f.name) {
            names.push(f.name);
        }
    }
    for name in names {
        let rows: Vec<(Labels, &Figure)> = targets
            .iter()
            .flat_map(|t| {
                t.figures.iter().filter(|f| f.name == name).map(|f| {
                    let mut l = labels(&[("target", &t.id)]);
                    l.extend(f.labels.iter().cloned());
                    (l, f)
                })
            })
            .collect();
        let Some((_, first)) = rows.first() else {
            continue;
        };
        let (help, unit) = (first.help, first.unit.clone());
        match &first.kind {
            FigureKind::Gauge(_) | FigureKind::Counter(_) => {
                let counter = matches!(first.kind, FigureKind::Counter(_));
                let values = rows
                    .iter()
                    .filter_map(|(l, f)| match &f.kind {
                        FigureKind::Gauge(v) | FigureKind::Counter(v) => Some((l.clone(), *v)),
                        FigureKind::Histogram(_) => None,
                    })
                    .collect();
                if counter {
                    e.counter(name, help, unit, values);
                } else {
                    e.gauge(name, help, unit, values);
                }
            }
            FigureKind::Histogram(_) => {
                let values = rows
                    .iter()
                    .filter_map(|(l, f)| match &f.kind {
                        FigureKind::Histogram(b) => Some((l.clone(), b.clone())),
                        _ => None,
                    })
                    .collect();
                e.histogram(name, help, unit, values);
            }
        }
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
