//! The HTML report (`mdiag explain --format html`): one self-contained file
//! (inline CSS and SVG, nothing fetched) that opens anywhere. The only
//! scripts are the flame graphs' own (inferno's search and zoom), each in a
//! sandboxed `srcdoc` iframe of its own (`report::stacks`).
//!
//! The text is the Markdown report rendered to HTML (pulldown-cmark), so the
//! two always say the same. It reads top-down: the overview (every finding
//! on one line, linked to its details), then the charts, where people would
//! rather look than read (softirq time per CPU and vector, preemptions per
//! thread class, a timeline of checkpoint windows against lock waits,
//! preemptions and network work), then each finding's details, collapsible.
//! A chart without data says why instead of drawing an empty frame.

use pulldown_cmark::{Event, Options, Parser, html::push_html};

use super::svg::{Panel, esc, figure, no_data, time_panels};
use super::{Measurements, Report};

pub(crate) const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #0072B2;padding-bottom:.2em}
h2{font-size:1.3em;margin-top:1.6em;border-bottom:1px solid #ccc}
h3{font-size:1.1em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.25em .55em;vertical-align:top}
th{background:#f2f5f8}
thead:has(th:empty:first-child + th:empty:last-child){display:none}
pre{background:#f6f8fa;border:1px solid #ddd;padding:.6em;overflow-x:auto;font-size:.88em}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.charts figure{margin:1em 0}
.charts figcaption{font-size:.9em;color:#555;max-width:760px}
.no-data{color:#777;font-style:italic}
svg.chart{max-width:100%;height:auto;background:#fff;border:1px solid #eee}
svg .chart-title{font-weight:600;font-size:13px}
svg .tick,svg .legend,svg .unit{font-size:11px;fill:#444}
svg .panel-title{font-size:12px;fill:#222}
footer{margin-top:3em;font-size:.85em;color:#777}
details.finding{border-left:3px solid #0072B2;padding-left:.8em;margin:1em 0}
details.finding>summary{cursor:pointer}
details.finding>summary>h3{display:inline}
"#;

/// The whole report as an HTML document.
pub fn render(report: &Report) -> String {
    let markdown = super::markdown::render(report);
    let mut body = String::new();
    // Raw HTML in the Markdown (a host or thread name with '<' in it) is
    // shown as text, never passed through.
    let events = Parser::new_ext(&markdown, Options::ENABLE_TABLES).map(|e| match e {
        Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
        e => e,
    });
    push_html(&mut body, events);
    let mut body = collapsible_findings(&body, &report.findings);
    let mut charts = charts(&report.measurements);
    if report.cpu_profile.is_some() || report.offcpu_profile.is_some() {
        charts.push_str(&super::stacks::flame_graphs(
            report.cpu_profile.as_ref(),
            report.offcpu_profile.as_ref(),
        ));
    }
    // Charts go after the overview, before the findings' details.
    match body.find("<h2>Findings</h2>") {
        Some(at) => body.insert_str(at, &charts),
        None => body.push_str(&charts),
    }
    let title = format!("mdiag report: {}", report.recording.host.hostname);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"mdiag {}\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n<footer>Written by mdiag {} from a recording of {} to {}; self-contained, no network access needed.</footer>\n</body>\n</html>\n",
        esc(&report.mdiag_version),
        esc(&title),
        esc(&report.mdiag_version),
        esc(&report.recording.started_at.to_rfc3339()),
        esc(&report.recording.ended_at.to_rfc3339()),
    )
}

/// The findings' details (each `<h3>` of the Findings section and what
/// follows it) as `<details>` blocks, open, their headings given the
/// overview's anchors.
fn collapsible_findings(body: &str, findings: &[crate::findings::Finding]) -> String {
    const SECTION: &str = "<h2>Findings</h2>";
    let Some(start) = body.find(SECTION).map(|i| i + SECTION.len()) else {
        return body.to_owned();
    };
    let end = body[start..].find("<h2>").map_or(body.len(), |i| start + i);
    let section = &body[start..end];
    let mut out = String::with_capacity(body.len() + findings.len() * 80);
    out.push_str(&body[..start]);
    let mut parts = section.split("<h3>");
    out.push_str(parts.next().unwrap_or_default());
    for (part, f) in parts.zip(findings) {
        let Some((heading, rest)) = part.split_once("</h3>") else {
            out.push_str("<h3>");
            out.push_str(part);
            continue;
        };
        let id = super::overview::anchor(&super::overview::heading(f));
        out.push_str(&format!(
            "<details class=\"finding\" open>\n<summary><h3 id=\"{}\">{heading}</h3></summary>{rest}</details>\n",
            esc(&id)
        ));
    }
    out.push_str(&body[end..]);
    out
}

/// Why a family has no measurements, from `not_recorded`.
fn why_missing(m: &Measurements, family: &str) -> String {
    m.not_recorded
        .iter()
        .find(|n| n.family == family)
        .map_or_else(
            || format!("the {family} probe was not part of this recording"),
            |n| n.reason.clone(),
        )
}

/// Generates [`family_charts`] from the registry.
macro_rules! family_charts {
    ($($variant:ident $module:ident,)*) => {
        /// Every family's charts, in the registry's order.
        fn family_charts(out: &mut String, m: &Measurements) {
            $(<crate::family::$module::Unit as crate::kit::unit::FamilyUnit>::chart(
                out,
                m.$module.as_ref(),
                &why_missing(m, stringify!($module)),
            );)*
        }
    };
}
crate::kit::family::for_each_family!(family_charts);

/// The "Charts" section.
pub fn charts(m: &Measurements) -> String {
    let mut out = String::from("<section class=\"charts\">\n<h2>Charts</h2>\n");
    family_charts(&mut out, m);
    timeline_chart(&mut out, m);
    out.push_str("</section>\n");
    out
}

/// Per-second series over the recording against the checkpoint windows.
fn timeline_chart(out: &mut String, m: &Measurements) {
    match &m.timeline {
        Some(t) => {
            let point = |values: &[Option<f64>]| -> Vec<(f64, Option<f64>)> {
                t.start_s
                    .iter()
                    .zip(&t.duration_s)
                    .zip(values)
                    .map(|((s, d), v)| (s + d / 2.0, *v))
                    .collect()
            };
            let mut series: Vec<Panel> = Vec::new();
            if t.mongod_ops_per_s.iter().any(Option::is_some) {
                series.push((
                    "mongod operations (opcounters)",
                    "per s",
                    point(&t.mongod_ops_per_s),
                ));
            }
            if t.futex_wait_ms_per_s.iter().any(Option::is_some) {
                series.push((
                    "Futex (lock) wait of observed threads",
                    "ms/s",
                    point(&t.futex_wait_ms_per_s),
                ));
            }
            if t.involuntary_per_s.iter().any(Option::is_some) {
                series.push(("Involuntary switches", "per s", point(&t.involuntary_per_s)));
            }
            if t.net_rx_ms_per_s.iter().any(Option::is_some) {
                series.push(("NET_RX softirq time", "ms/s", point(&t.net_rx_ms_per_s)));
            }
            let windows: Vec<(f64, f64)> =
                t.checkpoints.iter().map(|w| (w.start_s, w.end_s)).collect();
            if series.is_empty() {
                no_data(
                    out,
                    "chart-timeline",
                    "timeline",
                    "no per-second series was recorded",
                );
            } else {
                let caption = if windows.is_empty() {
                    format!(
                        "Per-second figures over the recording. No checkpoint window: {}.",
                        if m.wiredtiger.is_some() {
                            "none ran".to_string()
                        } else {
                            why_missing(m, "wiredtiger")
                        }
                    )
                } else {
                    format!(
                        "Per-second figures over the recording; shaded: the {} WiredTiger checkpoint windows (placed to about a second).",
                        windows.len()
                    )
                };
                figure(
                    out,
                    &time_panels(
                        "chart-timeline",
                        "Timeline: checkpoint windows against operations, waits and preemptions",
                        t.end_s(),
                        &windows,
                        "checkpoint running",
                        &series,
                    ),
                    &caption,
                );
            }
        }
        None => no_data(
            out,
            "chart-timeline",
            "timeline",
            "the recording has no slices",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::explain;
    use crate::recording::model::{Checkpoint, WiredTigerSlice};
    use crate::rules::testdata;

    fn report(rec: &crate::recording::model::Recording) -> Report {
        explain(
            rec,
            &testdata::sched_rule_only(),
            None,
            Some("r.mdiag".into()),
        )
        .unwrap()
    }

    #[test]
    fn html_is_one_document_with_findings_and_charts() {
        let mut rec = testdata::oversubscribed();
        rec.slices[4].wiredtiger = Some(WiredTigerSlice {
            checkpoints: vec![Checkpoint {
                tid: 9,
                start_ns: 5,
                duration_ns: 800_000_000,
                ret: 0,
                in_progress: false,
            }],
            drops: Default::default(),
        });
        let html = render(&report(&rec));
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.trim_end().ends_with("</html>"));
        // Self-contained: nothing fetched.
        for needle in ["<script", "src=", "<link", "@import", "url("] {
            assert!(!html.contains(needle), "{needle}");
        }
        assert!(html.contains("<h2>Findings</h2>"));
        assert!(html.contains("Wakeup preemption keeps interrupting busy threads"));
        // The fix commands are code blocks.
        assert!(html.contains("<pre><code"));
        assert!(html.contains("echo NO_WAKEUP_PREEMPTION &gt; /sys/kernel/debug/sched/features"));
        // Charts before the measurements.
        let charts = html.find("<h2>Charts</h2>").unwrap();
        assert!(charts < html.find("<h2>Measurements</h2>").unwrap());
        assert!(html.contains(r#"<svg id="chart-preemptions""#));
        assert!(html.contains(r#"<svg id="chart-timeline""#));
        assert_eq!(html.matches(r#"class="window""#).count(), 1);
        // No softirq data in this recording: said, not drawn.
        assert!(html.contains(r#"<p class="no-data" id="chart-softirq">"#));
        // Tables rendered.
        assert!(html.contains("<table>"));
    }

    #[test]
    fn text_from_the_recording_is_escaped() {
        let mut rec = testdata::oversubscribed();
        rec.host.hostname = "<img src=x onerror=alert(1)>".into();
        let html = render(&report(&rec));
        assert!(!html.contains("<img"), "unescaped host name");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    }
}
