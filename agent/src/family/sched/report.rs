//! The scheduler family in the report: context switches, the involuntary
//! share, run-queue delay percentiles and the thread classes preempted most,
//! taken from the typed figures the `sched` facts are written from
//! ([`SchedFigures`]: the numbers the rules see), and the view
//! of them (a title line, the figures, a table of classes) that the
//! terminal and Markdown reports lay out.

use serde::{Deserialize, Serialize};

use super::figures::SchedFigures;
use crate::findings::format_number;
use crate::kit::view::{Block, Cell, Column, Line, Section, Span, Table, md_cell, percent};

/// Thread classes listed, by involuntary switches.
pub const TOP_CLASSES: usize = 5;

/// Scheduler measurements (`sched` facts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedMeasurements {
    /// "target" (the target's threads) or "host" (every non-idle task).
    pub scope: String,
    pub duration_s: f64,
    /// Every context switch on every CPU.
    pub switches_per_s: f64,
    /// Switches of observed threads (voluntary + involuntary).
    pub observed_switches_per_s: f64,
    pub involuntary_per_s: f64,
    /// Involuntary / observed switches (0..1).
    pub involuntary_share: f64,
    pub runq_p50_us: f64,
    pub runq_p90_us: f64,
    pub runq_p99_us: f64,
    pub threads: i64,
    /// Up to [`TOP_CLASSES`] thread classes with the most involuntary
    /// switches, most first (classes with none are left out).
    pub top_classes: Vec<ThreadClassMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadClassMeasurement {
    /// mongod's class ("conn", "checkpointer", "eviction"), else the thread
    /// name without trailing digits ("kworker"); see `rules::facts::thread_class`.
    pub class: String,
    pub threads: i64,
    pub involuntary_per_s: f64,
    /// Involuntary / (voluntary + involuntary) switches of the class.
    pub involuntary_share: f64,
    /// Mean run-queue delay of the class's threads, µs.
    pub runq_mean_us: f64,
}

/// The measurements of a recording's [`SchedFigures`], the very figures
/// its `sched` facts are written from.
pub fn build(f: &SchedFigures) -> SchedMeasurements {
    let mut top_classes: Vec<ThreadClassMeasurement> = f
        .classes
        .iter()
        .filter(|(_, c)| c.involuntary > 0)
        .map(|(name, c)| ThreadClassMeasurement {
            class: name.clone(),
            threads: i64::try_from(c.threads).unwrap_or(i64::MAX),
            involuntary_per_s: if f.duration_s > 0.0 {
                c.involuntary as f64 / f.duration_s
            } else {
                0.0
            },
            involuntary_share: c.involuntary_share,
            runq_mean_us: c.runq_mean_us,
        })
        .collect();
    top_classes.sort_by(|a, b| {
        b.involuntary_per_s
            .total_cmp(&a.involuntary_per_s)
            .then_with(|| a.class.cmp(&b.class))
    });
    top_classes.truncate(TOP_CLASSES);
    SchedMeasurements {
        scope: f.scope.to_owned(),
        duration_s: f.duration_s,
        switches_per_s: f.switches_per_s,
        observed_switches_per_s: f.observed_switches_per_s,
        involuntary_per_s: f.involuntary_per_s,
        involuntary_share: f.involuntary_share,
        runq_p50_us: f.runq_p50_us,
        runq_p90_us: f.runq_p90_us,
        runq_p99_us: f.runq_p99_us,
        threads: i64::try_from(f.threads).unwrap_or(i64::MAX),
        top_classes,
    }
}

/// "the target's threads" / "every non-idle task (host-wide)".
fn sched_scope(s: &SchedMeasurements) -> &'static str {
    if s.scope == "target" {
        "the target's threads"
    } else {
        "every non-idle task (host-wide)"
    }
}

/// "p50 3146 µs, p90 6711 µs, p99 8329 µs".
fn runq_percentiles(s: &SchedMeasurements) -> String {
    format!(
        "p50 {} µs, p90 {} µs, p99 {} µs",
        format_number(s.runq_p50_us),
        format_number(s.runq_p90_us),
        format_number(s.runq_p99_us)
    )
}

/// The scheduler section.
pub fn section(s: &SchedMeasurements) -> Section {
    let mut out = Section::new(Some("Scheduler"));
    let lead = format!("{}, {:.1} s", sched_scope(s), s.duration_s);
    out.push(Line::title("Scheduler", Some(lead.clone()), false))
        .push(Block::Para(format!("Observed: {lead}.")));
    let field = |label: &str, spans: Vec<Span>| {
        let mut all = vec![Span::Plain(format!("{label:<18}"))];
        all.extend(spans);
        Block::Line(Line {
            indent: "    ",
            spans: all,
            wrap: false,
        })
    };
    let plain = |t: String| Span::Plain(t);
    out.push(field(
        "context switches",
        vec![
            Span::Bold(format_number(s.switches_per_s)),
            plain(format!(
                "/s on all CPUs; observed threads {}/s",
                format_number(s.observed_switches_per_s)
            )),
        ],
    ))
    .push(field(
        "involuntary",
        vec![
            Span::Bold(format_number(s.involuntary_per_s)),
            plain("/s, ".into()),
            Span::Bold(percent(s.involuntary_share)),
            plain(" of observed switches".into()),
        ],
    ))
    .push(field("run-queue delay", vec![plain(runq_percentiles(s))]));
    let mut figures = Table::new(
        "",
        vec![
            Column::text("", "Measurement", "", 0),
            Column::num("", "Value", "", 0),
        ],
    );
    for (label, value) in [
        (
            "Context switches per second (all CPUs)",
            format_number(s.switches_per_s),
        ),
        (
            "Switches of observed threads per second",
            format_number(s.observed_switches_per_s),
        ),
        (
            "Involuntary switches per second",
            format_number(s.involuntary_per_s),
        ),
        (
            "Involuntary share of observed switches",
            percent(s.involuntary_share),
        ),
        ("Run-queue delay", runq_percentiles(s)),
    ] {
        figures
            .rows
            .push(vec![Cell::new(label), Cell::new(value)].into());
    }
    out.push(Block::MdTable(figures));
    if !s.top_classes.is_empty() {
        out.push(Line::plain(
            "    ",
            "top thread classes by involuntary switches:",
        ));
        let mut t = Table::new(
            "      ",
            vec![
                Column::text("class", "Thread class", "", 20),
                Column::num("threads", "Threads", " ", 7),
                Column::num("invol/s", "Involuntary/s", " ", 9),
                Column::num("invol %", "Involuntary %", " ", 8),
                Column::text("mean run-queue delay", "Mean run-queue delay (µs)", "  ", 0),
            ],
        );
        t.columns[4].md_right = true;
        for c in &s.top_classes {
            let runq = format_number(c.runq_mean_us);
            t.rows.push(
                vec![
                    Cell::two(&c.class, md_cell(&c.class)),
                    Cell::new(c.threads.to_string()),
                    Cell::new(format!("{:.1}", c.involuntary_per_s)),
                    Cell::new(format!("{:.1}", c.involuntary_share * 100.0)),
                    Cell::two(format!("{runq} µs"), runq),
                ]
                .into(),
            );
        }
        out.push(Block::Table(t));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::family::softirq::testdata::net_rx_on_cpu0;
    use crate::report::measurements::tests::{build, close};

    #[test]
    fn sched_measurements_come_from_the_facts() {
        let m = build(&net_rx_on_cpu0());
        let s = m.sched.expect("sched measured");
        assert_eq!(s.scope, "target");
        close(s.duration_s, 10.0);
        close(s.switches_per_s, 1500.0);
        close(s.observed_switches_per_s, 720.0);
        close(s.involuntary_per_s, 650.0);
        close(s.involuntary_share, 650.0 / 720.0);
        // 720 delays per second: 60 in [4, 8) µs, 100 in [1, 2) ms, 400 in
        // [2, 4) ms, 155 in [4, 8) ms, 5 in [8, 16) ms. p50 = rank 360: 200
        // into the 400 of [2^21, 2^22) ns = 2^21 × 1.5 ns.
        close(s.runq_p50_us, 2_097_152.0 * 1.5 / 1000.0);
        // p99 = rank 712.8: 152.8 into the 155 of [2^22, 2^23) ns.
        close(
            s.runq_p99_us,
            (4_194_304.0 + 4_194_304.0 * 152.8 / 155.0) / 1000.0,
        );
        assert_eq!(s.threads, 4);
        assert_eq!(s.top_classes.len(), 1);
        let conn = &s.top_classes[0];
        assert_eq!(conn.class, "conn");
        assert_eq!(conn.threads, 4);
        close(conn.involuntary_per_s, 650.0);
        close(conn.involuntary_share, 650.0 / 720.0);
        close(conn.runq_mean_us, 3000.0);
    }

    #[test]
    fn top_classes_are_ordered_and_limited() {
        let mut rec = net_rx_on_cpu0();
        for s in &mut rec.slices {
            let sched = s.sched.as_mut().unwrap();
            let template = sched.threads[0].clone();
            for (i, name) in ["WTEvict-1", "ftdc", "repl1", "kworker/0:1", "idle0", "a1"]
                .iter()
                .enumerate()
            {
                let mut t = template.clone();
                t.tid = 2000 + i as u32;
                t.comm = (*name).into();
                t.involuntary = 10 * (i as u64 + 1);
                sched.threads.push(t);
            }
        }
        let s = build(&rec).sched.unwrap();
        let names: Vec<&str> = s.top_classes.iter().map(|c| c.class.as_str()).collect();
        // conn (650/s), then a (60), idle (50), kworker (40), replication (30).
        assert_eq!(names, ["conn", "a", "idle", "kworker", "replication"]);
        close(s.top_classes[1].involuntary_per_s, 60.0);
    }
}
